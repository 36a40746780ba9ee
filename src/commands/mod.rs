//! The subcommands: each loads what it needs, runs ferry-sync or ferry-distribution, prints for
//! people on stderr (machine output on stdout) and returns an exit code.

pub mod access;
pub mod auth;
pub mod convert;
pub mod copy;
pub mod doctor;
pub mod export;
pub mod import;
pub mod inspect;
pub mod inspect_format;
pub mod pull_config;
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

/// A reference as skopeo writes a registry's: `docker://host/repo:tag`. The transport prefix
/// is dropped; everything else (a bare reference, `oci:<dir>`) is returned as it is.
pub fn without_docker_transport(reference: &str) -> &str {
    reference.strip_prefix("docker://").unwrap_or(reference)
}
