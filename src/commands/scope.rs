//! What one `ferry sync` or `ferry watch` process takes on: its shard of the mappings (from
//! `--shard` or `--shards` with `JOB_COMPLETION_INDEX`), `--prune`, and the run lock file.
//!
//! The lock is an exclusive `flock`-style lock (`File::try_lock`) on `<config>.lock` (or
//! `<config>.<I>-of-<N>.lock` for a shard, or `--lock FILE`), held until the process ends, so
//! two runs of one config never overlap; the second exits with code 5.

use std::ffi::OsString;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use ferry_config::Config;
use ferry_config::shard::{self, Shard};

use crate::cli::RunScope;
use crate::exit::Exit;
use crate::progress::Progress;

/// The environment variable a Kubernetes Indexed Job sets to the pod's index.
pub const COMPLETION_INDEX: &str = "JOB_COMPLETION_INDEX";

/// The shard this process runs, if any: `--shard I/N`, or `--shards N` with the index from
/// `JOB_COMPLETION_INDEX` (read through `env`).
pub fn resolve_shard(
    scope: &RunScope,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Shard>, String> {
    match (scope.shard, scope.shards) {
        (Some(shard), _) => Ok(Some(shard)),
        (None, None) => Ok(None),
        (None, Some(count)) => {
            let Some(text) = env(COMPLETION_INDEX) else {
                return Err(format!(
                    "--shards {count} takes the shard index from ${COMPLETION_INDEX}, which is not set; use --shard I/{count} outside an Indexed Job"
                ));
            };
            let index: u32 = text.trim().parse().map_err(|_| {
                format!("${COMPLETION_INDEX} is \"{text}\", not a shard index (0, 1, …)")
            })?;
            Shard::new(index, count)
                .map(Some)
                .map_err(|e| e.to_string())
        }
    }
}

/// `config` narrowed to `shard` and with `--prune` applied to every mapping.
pub fn apply(mut config: Config, shard: Option<Shard>, prune: bool, progress: &Progress) -> Config {
    if prune {
        for m in &mut config.mappings {
            m.prune = true;
        }
    }
    match shard {
        None => config,
        Some(shard) => {
            let total = config.mappings.len();
            let narrowed = shard::select(&config, shard);
            progress.eprint(&format!(
                "shard {shard}: {} of {total} mappings",
                narrowed.mappings.len()
            ));
            narrowed
        }
    }
}

/// The lock file for a run of `config_path`: `--lock`, else `<config>.lock` (`.I-of-N.lock`
/// for a shard) beside the config, or in `--lock-dir` when given.
pub fn lock_path(config_path: &Path, scope: &RunScope, shard: Option<Shard>) -> PathBuf {
    if let Some(path) = &scope.lock {
        return path.clone();
    }
    let mut name = match (&scope.lock_dir, config_path.file_name()) {
        (Some(dir), Some(file)) => dir.join(file).into_os_string(),
        _ => OsString::from(config_path.as_os_str()),
    };
    if let Some(s) = shard {
        name.push(format!(".{}-of-{}", s.index(), s.count()));
    }
    name.push(".lock");
    PathBuf::from(name)
}

/// The state directory of a run of `config_path` (uploads in flight, for the next run to
/// resume): `--state-dir`, else the config's `state_dir:`, else beside the lock file
/// (`<config>.state`, `<config>.I-of-N.state` for a shard; `<FILE>.state` for `--lock FILE`
/// not ending in `.lock`).
pub fn state_dir(
    config_path: &Path,
    scope: &RunScope,
    shard: Option<Shard>,
    configured: Option<&Path>,
) -> PathBuf {
    if let Some(dir) = scope.state_dir.as_deref().or(configured) {
        return dir.to_path_buf();
    }
    let lock = lock_path(config_path, scope, shard).into_os_string();
    let lock = lock.to_string_lossy();
    PathBuf::from(format!(
        "{}.state",
        lock.strip_suffix(".lock").unwrap_or(&lock)
    ))
}

/// Opens (creating, `0600`: a file anyone can open, anyone can `flock` for ever) the run lock,
/// never through a symbolic link planted at its name (which would have a run create or lock a
/// file of the link's choosing): the layout locks' opener.
fn open_run_lock(path: &Path) -> std::io::Result<File> {
    ferry_store::layout::lock::open_lock_file(path)
}

/// An exclusive lock held until dropped (or the process ends).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

/// Takes the run lock (unless `--no-lock`); on failure prints why and returns the exit code:
/// 5 when another run holds it, 2 when the lock file cannot be opened.
pub fn lock(
    config_path: &Path,
    scope: &RunScope,
    shard: Option<Shard>,
    progress: &Progress,
) -> Result<Option<RunLock>, Exit> {
    if scope.no_lock {
        return Ok(None);
    }
    let path = lock_path(config_path, scope, shard);
    let file = open_run_lock(&path).map_err(|e| {
            progress.eprint(&format!(
                "error: cannot open lock file {}: {e} (choose a writable one with --lock FILE, or --no-lock)",
                path.display()
            ));
            Exit::Failed
        })?;
    match file.try_lock() {
        Ok(()) => Ok(Some(RunLock { _file: file })),
        Err(TryLockError::WouldBlock) => {
            progress.eprint(&format!(
                "error: another ferry run of {} holds the lock {}; not starting a second one (exit code {})",
                config_path.display(),
                path.display(),
                Exit::Locked
            ));
            Err(Exit::Locked)
        }
        Err(TryLockError::Error(e)) => {
            progress.eprint(&format!(
                "error: cannot lock {}: {e} (choose another file with --lock FILE, or --no-lock)",
                path.display()
            ));
            Err(Exit::Failed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(shard: Option<&str>, shards: Option<u32>) -> RunScope {
        RunScope {
            shard: shard.map(|s| s.parse().unwrap()),
            shards,
            lock: None,
            no_lock: false,
            lock_dir: None,
            prune: false,
            state_dir: None,
            no_cache: false,
        }
    }

    #[test]
    fn the_state_directory_sits_beside_the_lock_file_unless_named() {
        let p = Path::new("/etc/ferry/mirror.yaml");
        let s: Shard = "1/3".parse().unwrap();
        assert_eq!(
            state_dir(p, &scope(None, None), None, None),
            Path::new("/etc/ferry/mirror.yaml.state")
        );
        assert_eq!(
            state_dir(p, &scope(None, None), Some(s), None),
            Path::new("/etc/ferry/mirror.yaml.1-of-3.state")
        );
        let configured = Path::new("/var/lib/ferry");
        assert_eq!(
            state_dir(p, &scope(None, None), None, Some(configured)),
            configured
        );
        let mut flagged = scope(None, None);
        flagged.state_dir = Some("/pvc/state".into());
        assert_eq!(
            state_dir(p, &flagged, None, Some(configured)),
            Path::new("/pvc/state")
        );
    }

    #[test]
    fn shards_takes_its_index_from_the_indexed_job_variable() {
        let env =
            |v: &'static str| move |name: &str| (name == COMPLETION_INDEX).then(|| v.to_string());
        assert_eq!(
            resolve_shard(&scope(None, Some(4)), &env("3")).unwrap(),
            Some(Shard::new(3, 4).unwrap())
        );
        assert!(resolve_shard(&scope(None, Some(4)), &env("4")).is_err());
        assert!(resolve_shard(&scope(None, Some(4)), &env("x")).is_err());
        let unset = resolve_shard(&scope(None, Some(4)), &|_| None).unwrap_err();
        assert!(unset.contains(COMPLETION_INDEX), "{unset}");
        assert_eq!(resolve_shard(&scope(None, None), &env("1")).unwrap(), None);
        assert_eq!(
            resolve_shard(&scope(Some("1/2"), None), &env("0")).unwrap(),
            Some(Shard::new(1, 2).unwrap())
        );
    }

    #[test]
    fn each_shard_has_its_own_default_lock_file() {
        let p = Path::new("/etc/ferry/mirror.yaml");
        assert_eq!(
            lock_path(p, &scope(None, None), None),
            PathBuf::from("/etc/ferry/mirror.yaml.lock")
        );
        let s = Shard::new(1, 3).unwrap();
        assert_eq!(
            lock_path(p, &scope(None, None), Some(s)),
            PathBuf::from("/etc/ferry/mirror.yaml.1-of-3.lock")
        );
        let mut chosen = scope(None, None);
        chosen.lock = Some(PathBuf::from("/run/ferry.lock"));
        assert_eq!(
            lock_path(p, &chosen, Some(s)),
            PathBuf::from("/run/ferry.lock")
        );
    }

    #[test]
    fn a_lock_directory_holds_the_default_lock_and_the_state_beside_it() {
        let p = Path::new("/etc/ferry/mirror.yaml");
        let mut moved = scope(None, None);
        moved.lock_dir = Some(PathBuf::from("/var/lib/ferry"));
        let s = Shard::new(0, 4).unwrap();
        assert_eq!(
            lock_path(p, &moved, Some(s)),
            PathBuf::from("/var/lib/ferry/mirror.yaml.0-of-4.lock")
        );
        assert_eq!(
            state_dir(p, &moved, None, None),
            PathBuf::from("/var/lib/ferry/mirror.yaml.state")
        );
        // A configured state_dir: and an explicit --lock still win over the directory.
        let configured = Path::new("/srv/state");
        assert_eq!(state_dir(p, &moved, None, Some(configured)), configured);
        moved.lock = Some(PathBuf::from("/run/ferry.lock"));
        assert_eq!(lock_path(p, &moved, None), PathBuf::from("/run/ferry.lock"));
    }
}
