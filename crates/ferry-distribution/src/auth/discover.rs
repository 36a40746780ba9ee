//! Credentials found without configuration, in the order podman/skopeo and docker look: the
//! containers `auth.json` files, then the docker `config.json` (helpers included), then none.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::auth::Credentials;
use crate::auth::docker_config::{CredentialError, DockerConfig};

/// The files discovery reads, in order. Built from the environment by [`CredentialFiles::from_env`],
/// or by hand in tests so that no test reads the real user's files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialFiles {
    /// Containers `auth.json` files, first match wins.
    pub containers: Vec<PathBuf>,
    /// The docker `config.json`, read after every containers file.
    pub docker: Option<PathBuf>,
}

/// The variables discovery reads; `from_env` fills it from the process environment.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryEnv {
    /// `REGISTRY_AUTH_FILE`: replaces the runtime `auth.json`, as in containers/image.
    pub registry_auth_file: Option<OsString>,
    /// `XDG_RUNTIME_DIR`: holds `containers/auth.json`, what `podman login` writes.
    pub xdg_runtime_dir: Option<OsString>,
    /// `XDG_CONFIG_HOME`: holds the persistent `containers/auth.json` (else `~/.config`).
    pub xdg_config_home: Option<OsString>,
    /// `DOCKER_CONFIG`: the directory of docker's `config.json` (else `~/.docker`).
    pub docker_config: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
}

impl DiscoveryEnv {
    /// The variables as the process has them.
    pub fn from_env() -> DiscoveryEnv {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        DiscoveryEnv {
            registry_auth_file: var("REGISTRY_AUTH_FILE"),
            xdg_runtime_dir: var("XDG_RUNTIME_DIR"),
            xdg_config_home: var("XDG_CONFIG_HOME"),
            docker_config: var("DOCKER_CONFIG"),
            home: var("HOME").or_else(|| var("USERPROFILE")),
        }
    }
}

impl CredentialFiles {
    /// The files the process environment points at.
    pub fn from_env() -> CredentialFiles {
        CredentialFiles::from_vars(&DiscoveryEnv::from_env())
    }

    /// The files `env` points at: `REGISTRY_AUTH_FILE` (else `$XDG_RUNTIME_DIR/containers/
    /// auth.json`), then `$XDG_CONFIG_HOME/containers/auth.json` (else `~/.config/…`), then
    /// `$DOCKER_CONFIG/config.json` (else `~/.docker/config.json`). Unset places are skipped.
    pub fn from_vars(env: &DiscoveryEnv) -> CredentialFiles {
        let nonempty =
            |v: &Option<OsString>| v.clone().filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = nonempty(&env.home);
        let mut containers = Vec::new();
        match nonempty(&env.registry_auth_file) {
            Some(file) => containers.push(file),
            None => {
                if let Some(dir) = nonempty(&env.xdg_runtime_dir) {
                    containers.push(dir.join("containers").join("auth.json"));
                }
            }
        }
        if let Some(config) =
            nonempty(&env.xdg_config_home).or_else(|| home.as_ref().map(|h| h.join(".config")))
        {
            containers.push(config.join("containers").join("auth.json"));
        }
        let docker = match nonempty(&env.docker_config) {
            Some(dir) => Some(dir.join("config.json")),
            None => home.map(|h| h.join(".docker").join("config.json")),
        };
        CredentialFiles { containers, docker }
    }

    /// The credentials for `registry` (a normalised host): the first file with an entry for it
    /// decides; none at all is anonymous. An unreadable or malformed file, or a failing helper,
    /// is an error naming the file, so a broken login is not silently turned into anonymous.
    pub async fn discover(
        &self,
        registry: &str,
        helper_timeout: Duration,
    ) -> Result<Discovered, CredentialError> {
        for file in &self.containers {
            let config = DockerConfig::load(Some(file))?.as_containers_auth_file();
            if let Some(found) = config.lookup(registry, helper_timeout).await? {
                return Ok(Discovered::from_file(found.into(), file));
            }
        }
        if let Some(file) = &self.docker {
            let config = DockerConfig::load(Some(file))?;
            if let Some(found) = config.lookup(registry, helper_timeout).await? {
                return Ok(Discovered::from_file(found.into(), file));
            }
        }
        Ok(Discovered {
            credentials: Credentials::Anonymous,
            source: None,
        })
    }
}

/// What discovery found for one registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The credentials, anonymous when no file had an entry.
    pub credentials: Credentials,
    /// The file they came from.
    pub source: Option<PathBuf>,
}

impl Discovered {
    fn from_file(credentials: Credentials, file: &Path) -> Discovered {
        Discovered {
            credentials,
            source: Some(file.to_path_buf()),
        }
    }
}

/// Whether the token realm `realm` may receive credentials stored for `registry` (a host, maybe
/// with `:port`, as the login file's key names it). Discovered credentials are the user's login
/// for one host and port, keyed as docker keys them: they go to a realm on that port (a registry
/// written without a port: the realm scheme's default port) and on that host, a subdomain of it
/// (`auth.docker.io` for `docker.io`) or a parent domain that is not a public suffix
/// (`gitlab.com` for `registry.gitlab.com`, never `co.uk` or `github.io`: the Mozilla public
/// suffix list, through the `psl` crate). An IP address matches only itself.
pub fn realm_may_receive(registry: &str, realm: &url::Url) -> bool {
    let Some(realm_host) = realm.host_str() else {
        return false;
    };
    let (registry, port) = split_port(registry);
    let realm_host = host_without_port(realm_host);
    if registry.is_empty() || realm_host.is_empty() {
        return false;
    }
    // A registry named with a port is that port only; without one, the realm's default port.
    let same_port = match port {
        Some(port) => realm.port_or_known_default() == Some(port),
        None => realm.port().is_none(),
    };
    if !same_port {
        return false;
    }
    if registry == realm_host {
        return true;
    }
    // Docker Hub is named `docker.io` but served (and its realm found) under its own names.
    let registry = if registry == "registry-1.docker.io" || registry == "index.docker.io" {
        "docker.io".to_owned()
    } else {
        registry
    };
    let is_ip = |h: &str| h.parse::<std::net::IpAddr>().is_ok() || h.starts_with('[');
    if is_ip(&registry) || is_ip(&realm_host) {
        return false;
    }
    // `parent` is a domain of its own (not a public suffix) that `child` lies under.
    let under = |child: &str, parent: &str| {
        parent.contains('.')
            && psl::suffix_str(parent) != Some(parent)
            && child
                .strip_suffix(parent)
                .is_some_and(|rest| rest.ends_with('.'))
    };
    registry == realm_host || under(&realm_host, &registry) || under(&registry, &realm_host)
}

/// `host[:port]` as the host (lowercase, no trailing dot) and the port, if one is written.
fn split_port(registry: &str) -> (String, Option<u16>) {
    let host = host_without_port(registry);
    let written = registry.trim().trim_end_matches('.');
    let port = written
        .get(written.len().min(host.len())..)
        .and_then(|rest| rest.strip_prefix(':'))
        .and_then(|p| p.parse::<u16>().ok());
    (host, port)
}

fn host_without_port(host: &str) -> String {
    let host = host.trim().trim_end_matches('.').to_ascii_lowercase();
    if host.starts_with('[') {
        // [v6]:port
        return host
            .split_once(']')
            .map_or(host.clone(), |(h, _)| format!("{h}]"));
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h.to_owned(),
        _ => host,
    }
}

#[cfg(test)]
mod tests;
