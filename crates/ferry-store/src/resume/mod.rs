//! The state directory: one small file per upload in flight (registry, repository, blob, session
//! Location, acknowledged offset), so the next process resumes it; the client's `UploadJournal`.

// A record is a secret (its Location can carry a signed token): files are 0600 in a 0700
// directory, written atomically (temp file, fsync, rename, fsync of the directory), and never
// printed; warnings name the file and what is wrong with it, never its content. A record is
// trusted only after every check in `record.rs` (a regular file of this user, not writable by
// others, small, well-formed, filed under the key it names, its Location on the registry's own
// origin, not expired); anything else is ignored with a warning and removed.

mod first_seen;
mod record;
mod tag_cache;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferry_distribution::ops::{RecordedSession, UploadJournal, UploadKey};
use ferry_distribution::{Algorithm, Digest};
use futures::future::BoxFuture;
use url::Url;

use ferry_distribution::StopSignal;

pub use first_seen::FirstSeen;
pub use record::{MAX_RECORD_BYTES, Record};
pub(crate) use record::{read_small, unsafe_dir};
pub use tag_cache::{Seen, TagCache};

/// Whether `name` is a record's file name as [`StateDir::path_for`] makes it: 64 lowercase hex
/// digits and `.json`.
fn is_record_name(name: &str) -> bool {
    name.strip_suffix(".json").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// How long a record is kept: distribution purges upload sessions after 168 h by default
/// (`storage.maintenance.uploadpurging.age`), so an older record names a session that is gone.
pub const RECORD_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Why the state directory cannot be used (the run then goes on without resuming).
#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    /// It could not be created or read.
    #[error("state directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Another local user could plant records in it.
    #[error("state directory {path} is not safe to use: {why}")]
    Unsafe {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

/// The state directory of a run, as the client's [`UploadJournal`].
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
    stop: StopSignal,
    lifetime: Duration,
    /// Set once a write failed, so a full disk warns once, not once per chunk.
    write_warned: AtomicBool,
    /// The uploads this process recorded and has not finished (by record file): the bytes
    /// each session holds, what an interrupted run says the next one resumes.
    held: std::sync::Mutex<std::collections::BTreeMap<PathBuf, u64>>,
}

impl StateDir {
    /// Opens `dir` (created `0700` if missing), refusing one that is a symbolic link, not a
    /// directory, not this user's, or group- or world-writable; `stop` is the run's stop
    /// (uploads end at a chunk boundary once it is set). Expired and damaged records are swept.
    pub fn open(dir: &Path, stop: StopSignal) -> Result<StateDir, StateDirError> {
        let io = |source| StateDirError::Io {
            path: dir.to_path_buf(),
            source,
        };
        match std::fs::symlink_metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut builder = std::fs::DirBuilder::new();
                builder.recursive(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::DirBuilderExt;
                    builder.mode(0o700);
                }
                builder.create(dir).map_err(io)?;
            }
            Err(e) => return Err(io(e)),
            Ok(_) => {}
        }
        let meta = std::fs::symlink_metadata(dir).map_err(io)?;
        if let Some(why) = record::unsafe_dir(&meta) {
            return Err(StateDirError::Unsafe {
                path: dir.to_path_buf(),
                why,
            });
        }
        let state = StateDir {
            dir: dir.to_path_buf(),
            stop,
            lifetime: RECORD_LIFETIME,
            write_warned: AtomicBool::new(false),
            held: Default::default(),
        };
        state.sweep();
        Ok(state)
    }

    /// The uploads this process recorded here that are not finished, and the bytes their
    /// sessions hold: what the next run resumes (an interrupted run says so).
    pub fn recorded(&self) -> (usize, u64) {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        (held.len(), held.values().sum())
    }

    /// The same directory with records kept `lifetime` (tests).
    pub fn with_lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = lifetime;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file a key's record lives in: `<sha256 of host, repository and digest>.json`, so no
    /// name a registry sends reaches the file system.
    pub fn path_for(&self, host: &str, repository: &str, digest: &Digest) -> PathBuf {
        let name = format!("{host}\n{repository}\n{digest}");
        let hash = Digest::of_bytes(Algorithm::Sha256, name.as_bytes());
        self.dir.join(format!("{}.json", hash.hex()))
    }

    /// Removes what no run will use, among ferry's own files only (a record's name, [`path_for`]'s
    /// `<64 hex>.json`, and its temporaries): records past their lifetime (by modification
    /// time) and anything at a record's name that is not a regular file of this user;
    /// temporary files a killed process left an hour ago or more.
    ///
    /// [`path_for`]: StateDir::path_for
    pub fn sweep(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let age = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default();
            // Only ferry's own files: a bundle's `.tar.json` kept here for `--since`, or
            // anything else an operator put in the directory, is never touched.
            let temporary = name
                .strip_prefix('.')
                .and_then(|n| n.strip_suffix(".tmp"))
                .and_then(|n| n.split_once('.'))
                .is_some_and(|(hex, rest)| {
                    is_record_name(&format!("{hex}.json")) && rest.starts_with("json.")
                });
            let record = is_record_name(&name);
            if temporary && age >= Duration::from_secs(3600) {
                let _ = std::fs::remove_file(&path);
            } else if record && record::unsafe_file(&meta).is_some() {
                tracing::warn!(file = %path.display(), "state record is not a regular file of this user: removed");
                let _ = std::fs::remove_file(&path);
            } else if record && age >= self.lifetime {
                tracing::debug!(file = %path.display(), "state record expired: removed");
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// The record for `key`, if one passes every check; anything else is removed.
    pub fn read(&self, key: UploadKey<'_>, origin: &Url) -> Option<Record> {
        let path = self.path_for(key.host, key.repository, key.digest);
        match record::load(&path, key, origin, self.lifetime, SystemTime::now()) {
            Ok(found) => found,
            Err(why) => {
                tracing::warn!(
                    file = %path.display(),
                    "state record ignored and removed: {why}"
                );
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Writes `key`'s record atomically: a `0600` temporary file, fsynced, renamed over the
    /// record, then the directory fsynced.
    pub fn write(&self, key: UploadKey<'_>, location: &Url, offset: u64) -> std::io::Result<()> {
        let path = self.path_for(key.host, key.repository, key.digest);
        let updated = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let text = Record::new(key, location, offset, updated).to_json()?;
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = self
            .dir
            .join(crate::fsio::temp_name_ending(&file_name, "tmp"));
        crate::fsio::replace_blocking(&path, &tmp, text.as_bytes(), 0o600)
    }

    /// Removes `key`'s record, if any.
    pub fn remove(&self, key: UploadKey<'_>) {
        let path = self.path_for(key.host, key.repository, key.digest);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(file = %path.display(), "cannot remove state record: {e}"),
        }
    }
}

impl StateDir {
    /// A copy of what a blocking task needs, to move onto tokio's blocking pool.
    fn detached(&self) -> StateDir {
        StateDir {
            dir: self.dir.clone(),
            stop: self.stop.clone(),
            lifetime: self.lifetime,
            write_warned: AtomicBool::new(true),
            held: Default::default(),
        }
    }
}

/// Owned copies of a key's parts, to move onto tokio's blocking pool.
struct OwnedKey {
    host: String,
    repository: String,
    digest: Digest,
    size: u64,
}

impl OwnedKey {
    fn of(key: UploadKey<'_>) -> Self {
        OwnedKey {
            host: key.host.to_owned(),
            repository: key.repository.to_owned(),
            digest: key.digest.clone(),
            size: key.size,
        }
    }

    fn key(&self) -> UploadKey<'_> {
        UploadKey {
            host: &self.host,
            repository: &self.repository,
            digest: &self.digest,
            size: self.size,
        }
    }
}

/// Runs `work` (the state directory's file reads, writes and fsyncs) on tokio's blocking pool,
/// so a record written after every PATCH never holds a runtime worker; `None` if the task
/// could not run.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(work).await.ok()
}

impl UploadJournal for StateDir {
    fn recall<'a>(
        &'a self,
        key: UploadKey<'a>,
        origin: &'a Url,
    ) -> BoxFuture<'a, Option<RecordedSession>> {
        let (state, key, origin) = (self.detached(), OwnedKey::of(key), origin.clone());
        Box::pin(async move {
            let record = blocking(move || state.read(key.key(), &origin)).await??;
            Some(RecordedSession {
                location: record.location()?,
                offset: record.offset,
            })
        })
    }

    fn record<'a>(
        &'a self,
        key: UploadKey<'a>,
        location: &'a Url,
        offset: u64,
    ) -> BoxFuture<'a, ()> {
        let (state, owned, location) = (self.detached(), OwnedKey::of(key), location.clone());
        Box::pin(async move {
            let written = blocking(move || state.write(owned.key(), &location, offset))
                .await
                .unwrap_or_else(|| Err(std::io::Error::other("the blocking task did not run")));
            let path = self.path_for(key.host, key.repository, key.digest);
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            match &written {
                Ok(()) => held.insert(path, offset),
                Err(_) => held.remove(&path),
            };
            drop(held);
            if let Err(e) = written
                && !self.write_warned.swap(true, Ordering::AcqRel)
            {
                tracing::warn!(
                    dir = %self.dir.display(),
                    "cannot write to the state directory ({e}): uploads in flight will not be resumed by the next run"
                );
            }
        })
    }

    fn forget<'a>(&'a self, key: UploadKey<'a>) -> BoxFuture<'a, ()> {
        let path = self.path_for(key.host, key.repository, key.digest);
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&path);
        let (state, key) = (self.detached(), OwnedKey::of(key));
        Box::pin(async move {
            blocking(move || state.remove(key.key())).await;
        })
    }

    fn stopping(&self) -> bool {
        self.stop.is_stopped()
    }
}
