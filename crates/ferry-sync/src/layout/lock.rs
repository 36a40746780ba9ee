//! Cross-process advisory locks on an image layout that ferry writes: `.ferry.lock` serialises
//! every read-modify-write of `index.json`; `.ferry-gc.lock` is shared by writers, exclusive for GC.
//!
//! The protocol (docs/config.md states it for users):
//! - A writer (sync, copy) takes [`LockKind::Writing`] (shared) before its first blob write into
//!   the layout and keeps it until its run's index entries are in. Several writers hold it at once.
//! - Every change to `index.json` (a writer adding its entry, prune removing a tag) happens under
//!   [`LockKind::Index`] (exclusive), re-reading the file inside the lock.
//! - Garbage collection takes [`LockKind::Collecting`] (exclusive on the writers' file), then
//!   [`LockKind::Index`]: while it runs no writer is between a blob write and its index entry, so
//!   every blob it finds unreferenced is one no writer may still index.
//!
//! Locks are `flock(2)` locks on files inside the layout (released by the kernel when a process
//! dies, so `kill -9` leaves nothing to clean up). Inside one process an async lock per layout
//! comes first, so tasks of one run wait on each other without a thread, and the file lock only
//! ever waits for another process. Waiting is bounded: past the bound the error names the file.

use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// The file whose exclusive lock guards `index.json`.
pub const INDEX_LOCK_FILE: &str = ".ferry.lock";
/// The file writers lock shared and garbage collection exclusively.
pub const WRITERS_LOCK_FILE: &str = ".ferry-gc.lock";
/// How long a writer or pruner waits for another process's lock before giving up.
pub const LOCK_WAIT: Duration = Duration::from_secs(120);

/// Which lock, held how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// Exclusive on `.ferry.lock`: one read-modify-write of `index.json`.
    Index,
    /// Shared on `.ferry-gc.lock`: a writer between its first blob and its index entry.
    Writing,
    /// Exclusive on `.ferry-gc.lock`: garbage collection.
    Collecting,
}

impl LockKind {
    fn file(self) -> &'static str {
        match self {
            LockKind::Index => INDEX_LOCK_FILE,
            LockKind::Writing | LockKind::Collecting => WRITERS_LOCK_FILE,
        }
    }

    fn shared(self) -> bool {
        self == LockKind::Writing
    }

    fn purpose(self) -> &'static str {
        match self {
            LockKind::Index => "to update index.json",
            LockKind::Writing => "to write into the layout (garbage collection is running)",
            LockKind::Collecting => "to collect garbage (another writer is writing)",
        }
    }
}

/// Why a layout lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock file could not be opened or locked.
    #[error("layout lock {}: {source}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Another run held the lock for the whole wait; nothing was changed.
    #[error(
        "layout lock {}: still held by another ferry run after {}s of waiting {}; \
         nothing was changed (the lock goes when that run ends)",
        path.display(), waited.as_secs(), kind.purpose()
    )]
    Timeout {
        /// The lock file.
        path: PathBuf,
        /// What the lock was wanted for.
        kind: LockKind,
        /// How long this run waited.
        waited: Duration,
    },
}

/// A held layout lock; dropping it releases the file lock, then the in-process one.
#[derive(Debug)]
pub struct LayoutLock {
    _file: File,
    _local: LocalGuard,
}

#[derive(Debug)]
enum LocalGuard {
    Shared(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    Exclusive(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
}

/// Takes `kind` on the layout at `dir` (created if missing), waiting at most `wait`.
pub async fn acquire(dir: &Path, kind: LockKind, wait: Duration) -> Result<LayoutLock, LockError> {
    let path = dir.join(kind.file());
    let io = |source| LockError::Io {
        path: path.clone(),
        source,
    };
    tokio::fs::create_dir_all(dir).await.map_err(io)?;
    let timeout = || LockError::Timeout {
        path: path.clone(),
        kind,
        waited: wait,
    };
    let deadline = tokio::time::Instant::now() + wait;
    let local = local_lock(dir, kind.file());
    let local = if kind.shared() {
        tokio::time::timeout_at(deadline, local.read_owned())
            .await
            .map(LocalGuard::Shared)
    } else {
        tokio::time::timeout_at(deadline, local.write_owned())
            .await
            .map(LocalGuard::Exclusive)
    }
    .map_err(|_| timeout())?;

    let file = open_lock_file(&path).map_err(io)?;
    let tried = if kind.shared() {
        file.try_lock_shared()
    } else {
        file.try_lock()
    };
    let file = match tried {
        Ok(()) => file,
        Err(TryLockError::Error(e)) => return Err(io(e)),
        // Another process holds it: wait on a thread of our own (a blocking `flock` cannot be
        // cancelled), bounded here. On timeout the thread's send fails and drops the file, so a
        // lock it gets later is released at once.
        Err(TryLockError::WouldBlock) => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let shared = kind.shared();
            std::thread::spawn(move || {
                let locked = if shared {
                    file.lock_shared()
                } else {
                    file.lock()
                };
                let _ = tx.send(locked.map(|()| file));
            });
            match tokio::time::timeout_at(deadline, rx).await {
                Ok(Ok(Ok(file))) => file,
                Ok(Ok(Err(e))) => return Err(io(e)),
                Ok(Err(_)) => return Err(io(std::io::Error::other("the lock thread ended"))),
                Err(_) => return Err(timeout()),
            }
        }
    };
    Ok(LayoutLock {
        _file: file,
        _local: local,
    })
}

/// Opens (creating) a lock file, never through a symlink planted at its name.
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    options.open(path)
}

/// The in-process lock for one lock file of one layout (keyed by the canonical directory).
fn local_lock(dir: &Path, file: &str) -> Arc<RwLock<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<RwLock<()>>>>> = OnceLock::new();
    let key = std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .join(file);
    let mut locks = LOCKS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    Arc::clone(locks.entry(key).or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_lock_held_elsewhere_is_waited_for_with_a_bound_and_named() {
        let dir = tempfile::tempdir().unwrap();
        // Another process's lock, as the kernel sees it: a separate open of the same file.
        let other = open_lock_file(&dir.path().join(INDEX_LOCK_FILE)).unwrap();
        other.lock().unwrap();
        let err = acquire(dir.path(), LockKind::Index, Duration::from_secs(5))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(".ferry.lock"), "{err}");
        assert!(err.contains("after 5s"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn writers_share_and_collection_waits_for_every_writer() {
        let dir = tempfile::tempdir().unwrap();
        let a = acquire(dir.path(), LockKind::Writing, LOCK_WAIT)
            .await
            .unwrap();
        let b = acquire(dir.path(), LockKind::Writing, LOCK_WAIT)
            .await
            .unwrap();
        let gc = acquire(dir.path(), LockKind::Collecting, Duration::from_secs(1)).await;
        assert!(matches!(gc, Err(LockError::Timeout { .. })), "{gc:?}");
        let said = gc.unwrap_err().to_string();
        assert!(
            said.contains("waiting to collect garbage (another writer is writing)"),
            "the error says what waited: {said}"
        );
        drop(a);
        let gc = acquire(dir.path(), LockKind::Collecting, Duration::from_secs(1)).await;
        assert!(gc.is_err(), "one writer still holds it");
        drop(b);
        let gc = acquire(dir.path(), LockKind::Collecting, Duration::from_secs(1)).await;
        assert!(gc.is_ok(), "{gc:?}");
    }

    #[test]
    fn a_symlink_at_the_lock_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let layout = dir.path().join("layout");
        std::fs::create_dir(&layout).unwrap();
        std::os::unix::fs::symlink(&outside, layout.join(INDEX_LOCK_FILE)).unwrap();
        assert!(open_lock_file(&layout.join(INDEX_LOCK_FILE)).is_err());
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    }
}
