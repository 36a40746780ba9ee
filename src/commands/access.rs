//! What the command line says about registries (`--tls-verify`/`--insecure`, `--authfile`,
//! `--retry-times`, each side's `--src-*`/`--dest-*`, `--creds`, `--cert-dir`), applied over a config.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_config::{AuthSettings, ClientIdentity, Config, Origin, RegistrySettings, Target};
use ferry_sync::registries::EveryHost;

use crate::cli::{AccessArgs, Creds, DestArgs, OneRegistryArgs, SrcArgs};

/// Which registries a side's flags reach.
#[derive(Clone, Debug)]
pub enum Hosts {
    /// Every registry the command talks to (`import`'s targets: wherever an image goes).
    Every,
    /// These hosts (a config's sources, or its targets; `copy`'s source or target).
    Some(BTreeSet<String>),
}

impl Hosts {
    fn contains(&self, host: &str) -> bool {
        match self {
            Hosts::Every => true,
            Hosts::Some(set) => set.contains(host),
        }
    }
}

/// One side's flags, with its `--x-cert-dir` read.
#[derive(Clone, Debug, Default)]
struct Side {
    tls_verify: Option<bool>,
    creds: Option<Creds>,
    authfile: Option<PathBuf>,
    certs: Option<CertDir>,
}

/// A skopeo-style certificate directory: `*.crt` trusted CAs, `NAME.cert` + `NAME.key` a client.
#[derive(Clone, Debug)]
struct CertDir {
    ca: Option<PathBuf>,
    client: Option<ClientIdentity>,
}

/// Everything the command line says about registries, ready to apply to any host's settings.
#[derive(Clone, Debug, Default)]
pub struct Access {
    tls_verify: Option<bool>,
    authfile: Option<PathBuf>,
    attempts: Option<u32>,
    sides: Vec<(Hosts, Side)>,
}

impl Access {
    /// The flags every registry command takes; a side is added with [`Access::side`].
    pub fn new(all: &AccessArgs) -> Access {
        Access {
            tls_verify: all.tls_verify.or(all.insecure.then_some(false)),
            authfile: all.authfile.clone(),
            attempts: all.retry_times.map(|n| n.saturating_add(1)),
            sides: Vec::new(),
        }
    }

    /// Adds the `--src-*` flags for `hosts`; a bad `--src-cert-dir` is a usage error.
    pub fn src(self, args: &SrcArgs, hosts: Hosts) -> Result<Access, String> {
        let certs = cert_dir(args.src_cert_dir.as_deref(), "--src-cert-dir")?;
        Ok(self.side(
            hosts,
            Side {
                tls_verify: args.src_tls_verify,
                creds: args.src_creds.clone(),
                authfile: args.src_authfile.clone(),
                certs,
            },
        ))
    }

    /// Adds the `--dest-*` flags for `hosts`; a bad `--dest-cert-dir` is a usage error.
    pub fn dest(self, args: &DestArgs, hosts: Hosts) -> Result<Access, String> {
        let certs = cert_dir(args.dest_cert_dir.as_deref(), "--dest-cert-dir")?;
        Ok(self.side(
            hosts,
            Side {
                tls_verify: args.dest_tls_verify,
                creds: args.dest_creds.clone(),
                authfile: args.dest_authfile.clone(),
                certs,
            },
        ))
    }

    /// Adds `--creds` and `--cert-dir` for the one registry a command names.
    pub fn one(self, args: &OneRegistryArgs) -> Result<Access, String> {
        let certs = cert_dir(args.cert_dir.as_deref(), "--cert-dir")?;
        Ok(self.side(
            Hosts::Every,
            Side {
                tls_verify: None,
                creds: args.creds.clone(),
                authfile: None,
                certs,
            },
        ))
    }

    fn side(mut self, hosts: Hosts, side: Side) -> Access {
        self.sides.push((hosts, side));
        self
    }

    /// Applies the flags to one host's settings: the command line over the config.
    pub fn apply(&self, settings: &mut RegistrySettings) {
        if let Some(verify) = self.tls_verify {
            settings.insecure = !verify;
        }
        if let Some(file) = &self.authfile {
            settings.auth = AuthSettings::DockerConfig {
                path: Some(file.clone()),
            };
        }
        if let Some(n) = self.attempts {
            settings.retry.attempts = Some(n);
        }
        for (hosts, side) in &self.sides {
            if !hosts.contains(&settings.host) {
                continue;
            }
            if let Some(verify) = side.tls_verify {
                settings.insecure = !verify;
            }
            match (&side.creds, &side.authfile) {
                (Some(c), _) => {
                    settings.auth = AuthSettings::Basic {
                        username: c.username.clone(),
                        password: c.password.clone(),
                    }
                }
                (None, Some(file)) => {
                    settings.auth = AuthSettings::DockerConfig {
                        path: Some(file.clone()),
                    }
                }
                (None, None) => {}
            }
            if let Some(certs) = &side.certs {
                if certs.ca.is_some() {
                    settings.ca_bundle = certs.ca.clone();
                }
                if certs.client.is_some() {
                    settings.client_identity = certs.client.clone();
                }
            }
        }
    }

    /// The flags as a hook applied to every registry a run talks to, listed or not.
    pub fn every_host(self) -> EveryHost {
        let access = Arc::new(self);
        Arc::new(move |settings: &mut RegistrySettings| access.apply(settings))
    }

    /// Applies the flags to `host`'s entry of `config`, adding one if the config does not list
    /// it (the one registry `tags`, `inspect` and `doctor` name).
    pub fn apply_to_host(&self, config: &mut Config, host: &str) {
        let mut settings = config.registry_for(host);
        self.apply(&mut settings);
        match config
            .registries
            .iter_mut()
            .find(|r| r.host == settings.host)
        {
            Some(entry) => *entry = settings,
            None => config.registries.push(settings),
        }
    }

    /// Applies the flags to every registry `config` lists or its mappings use.
    pub fn apply_to_config(&self, config: &mut Config) {
        let (Hosts::Some(sources), Hosts::Some(targets)) = config_sides(config) else {
            return;
        };
        let listed: Vec<String> = config.registries.iter().map(|r| r.host.clone()).collect();
        let hosts: BTreeSet<String> = sources.into_iter().chain(targets).chain(listed).collect();
        for host in hosts {
            self.apply_to_host(config, &host);
        }
    }
}

/// The command line's access flags for a config's run: `--src-*` on the registries its mappings
/// read from, `--dest-*` on those they write to, the rest on every registry.
pub fn for_config(
    config: &Config,
    all: &AccessArgs,
    src: &SrcArgs,
    dest: &DestArgs,
) -> Result<Access, String> {
    let (sources, targets) = config_sides(config);
    // One client per registry: a registry on both sides can carry one login only.
    if let (Some(a), Some(b), Hosts::Some(s), Hosts::Some(t)) =
        (&src.src_creds, &dest.dest_creds, &sources, &targets)
        && let Some(host) = s.intersection(t).next()
        && (a.username != b.username || a.password.expose() != b.password.expose())
    {
        return Err(format!(
            "{host} is both a source and a target here, and ferry holds one login per \
             registry: give it the same --src-creds and --dest-creds (or one of them)"
        ));
    }
    Access::new(all).src(src, sources)?.dest(dest, targets)
}

/// The registries a config's mappings read from (sources) and write to (targets).
pub fn config_sides(config: &Config) -> (Hosts, Hosts) {
    let mut sources = BTreeSet::new();
    let mut targets = BTreeSet::new();
    for m in &config.mappings {
        if let Origin::Registry { registry, .. } = &m.origin {
            sources.insert(registry.clone());
        }
        for t in &m.targets {
            if let Target::Registry { registry, .. } = t {
                targets.insert(registry.clone());
            }
        }
    }
    (Hosts::Some(sources), Hosts::Some(targets))
}

/// Reads a skopeo-style certificate directory: every `*.crt` is a trusted CA (ferry reads the
/// directory's `*.crt` files as one bundle), a `NAME.cert` with `NAME.key` beside it the client
/// certificate (the first by name, when there are several).
fn cert_dir(dir: Option<&Path>, flag: &str) -> Result<Option<CertDir>, String> {
    let Some(dir) = dir else {
        return Ok(None);
    };
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("{flag} {}: cannot read the directory: {e}", dir.display()))?;
    let mut names: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    names.sort();
    let has = |ext: &str| {
        names
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == ext))
    };
    let ca = has("crt").then(|| dir.to_path_buf());
    let mut client = None;
    for cert in names
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cert"))
    {
        let key = cert.with_extension("key");
        if !key.is_file() {
            return Err(format!(
                "{flag} {}: {} has no {} beside it (a client certificate needs its key)",
                dir.display(),
                cert.display(),
                key.display()
            ));
        }
        client.get_or_insert(ClientIdentity {
            certificate: cert.clone(),
            key,
        });
    }
    if ca.is_none() && client.is_none() {
        return Err(format!(
            "{flag} {}: holds no *.crt (a CA) and no *.cert with its *.key (a client certificate)",
            dir.display()
        ));
    }
    Ok(Some(CertDir { ca, client }))
}
