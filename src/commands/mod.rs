//! The subcommands: each loads what it needs, runs ferry-sync or ferry-distribution, prints for
//! people on stderr (machine output on stdout) and returns an exit code.

pub mod auth;
pub mod copy;
pub mod doctor;
pub mod export;
pub mod import;
pub mod inspect;
pub mod scope;
pub mod sync;
pub mod tags;
pub mod validate;
pub mod verify;
pub mod watch;

use std::path::Path;

use ferry_config::{self as config, Config, ConfigError};

use crate::exit::Exit;
use crate::progress::Progress;

/// Where a command takes credentials, for the hint after a registry asked for some and none
/// were sent: the flags `flags` (only those the command accepts), `docker login`, and the
/// config's `auth:`. `None` when `error` is no such failure.
pub fn credentials_hint(error: &str, flags: &[&str]) -> Option<String> {
    if !error.contains(ferry_distribution::client::NO_CREDENTIALS) {
        return None;
    }
    let mut ways: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
    ways.push("`docker login HOST`".to_owned());
    ways.push("`auth:` under the registry in the config's `registries:`".to_owned());
    Some(format!(
        "hint: the registry asked for credentials and ferry had none to send: give them with {}",
        match ways.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{}, or {last}", rest.join(", ")),
            None => String::new(),
        }
    ))
}

/// Loads the config at `path`; on failure prints every problem and returns exit code 3.
pub fn load_config(path: &Path, progress: &Progress) -> Result<Config, Exit> {
    config::load(path).map_err(|e| {
        print_config_error(&e, progress);
        Exit::Config
    })
}

/// Loads a config that may hold only `registries:` (a site config: import, copy, tags, inspect,
/// doctor, auth check, `validate --registries-only`); on failure
/// prints every problem and returns exit code 3.
/// The keys a bundle must be signed under: the config's `bundles.keys` and each `--verify-key`
/// file (one reader for `ferry import` and `ferry verify --bundle`); a bad file is a usage error.
pub fn bundle_keys(
    config: &Config,
    files: &[std::path::PathBuf],
    progress: &Progress,
) -> Result<Vec<ferry_sync::bundle_trust::PublicKey>, Exit> {
    let mut keys = config.bundle_keys.clone();
    for file in files {
        match ferry_sync::bundle_trust::PublicKey::from_file(file) {
            Ok(key) => keys.push(key),
            Err(e) => {
                progress.eprint(&format!("error: --verify-key {}: {e}", file.display()));
                return Err(Exit::Usage);
            }
        }
    }
    Ok(keys)
}

pub fn load_registries(path: &Path, progress: &Progress) -> Result<Config, Exit> {
    config::load_registries(path).map_err(|e| {
        print_config_error(&e, progress);
        Exit::Config
    })
}

pub fn print_config_error(e: &ConfigError, progress: &Progress) {
    match e {
        ConfigError::Read { .. } => progress.eprint(&format!("error: {e}")),
        ConfigError::Invalid { problems } => {
            for p in problems {
                progress.eprint(&format!("error: {p}"));
            }
            progress.eprint(&format!(
                "{} problem{} in {}",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" },
                path_of(e).unwrap_or_default()
            ));
        }
    }
}

fn path_of(e: &ConfigError) -> Option<String> {
    e.problems().first().map(|p| p.file.display().to_string())
}

/// A config with nothing in it, for commands that take registries from the command line.
pub fn empty_config() -> Config {
    Config {
        concurrency: config::DEFAULT_CONCURRENCY,
        engine: config::EngineSettings::default(),
        registries: Vec::new(),
        mappings: Vec::new(),
        events: None,
        listener_tls: None,
        state_dir: None,
        bundle_keys: Vec::new(),
    }
}

/// What the command line says about one side's registry (`copy`'s source or target, `tags`'
/// repository), applied over what a `-c` config says of it.
pub struct SideAccess<'a> {
    /// Plain HTTP or unverified TLS allowed (`--insecure`, `--x-tls-verify=false`).
    pub insecure: bool,
    /// `--creds`, `--src-creds`, `--dest-creds`: basic credentials for this registry.
    pub creds: Option<&'a crate::cli::Creds>,
    /// `--authfile`: a login file, used where no credentials were given.
    pub authfile: Option<&'a Path>,
}

/// Applies `access` to `host`'s entry, adding one if the config does not list the host.
pub fn apply_access(config: &mut Config, host: &str, access: &SideAccess<'_>) {
    if access.insecure {
        allow_insecure(config, host);
    }
    if access.creds.is_none() && access.authfile.is_none() {
        return;
    }
    let index = match config.registries.iter().position(|r| r.host == host) {
        Some(i) => i,
        None => {
            config
                .registries
                .push(config::RegistrySettings::unlisted(host));
            config.registries.len() - 1
        }
    };
    let entry = &mut config.registries[index];
    entry.auth = match (access.creds, access.authfile) {
        (Some(c), _) => config::AuthSettings::Basic {
            username: c.username.clone(),
            password: c.password.clone(),
        },
        (None, Some(file)) => config::AuthSettings::DockerConfig {
            path: Some(file.to_path_buf()),
        },
        (None, None) => return,
    };
}

/// Whether `--x-tls-verify` (when given) or `--insecure` allows plain HTTP for a side.
pub fn insecure_side(tls_verify: Option<bool>, insecure: bool) -> bool {
    tls_verify.map_or(insecure, |verify| !verify)
}

/// Marks `host` insecure (plain HTTP allowed), adding it to the config if it is not listed.
pub fn allow_insecure(config: &mut Config, host: &str) {
    match config.registries.iter_mut().find(|r| r.host == host) {
        Some(r) => r.insecure = true,
        None => {
            let mut settings = config::RegistrySettings::unlisted(host);
            settings.insecure = true;
            config.registries.push(settings);
        }
    }
}

/// A reference as skopeo writes a registry's: `docker://host/repo:tag`. The transport prefix
/// is dropped; everything else (a bare reference, `oci:<dir>`) is returned as it is.
pub fn without_docker_transport(reference: &str) -> &str {
    reference.strip_prefix("docker://").unwrap_or(reference)
}
