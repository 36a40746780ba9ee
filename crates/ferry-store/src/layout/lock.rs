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
//! The wait for another process polls a non-blocking `flock` on tokio's clock, so a wait that
//! times out leaves no thread (and no open lock file) behind.
//!
//! A lock is only as good as the directory it lives in: a co-user who can write the layout
//! directory can replace or hold its lock files. So the layout directory must be owned by the
//! user running ferry and not group- or world-writable (a sticky `/tmp`-style directory
//! included); one that is not is refused before a lock is taken. Lock files are created `0600`
//! (a file anyone can open, anyone can `flock`), and an existing one is narrowed to `0600`.

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
/// The first gap between two tries of another process's lock; it doubles up to [`LAST_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(10);
/// The longest gap between two tries of another process's lock.
const LAST_POLL: Duration = Duration::from_millis(500);

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
    /// The layout directory (or a lock file in it) is one another local user can write or hold.
    #[error(
        "layout directory {}: {why}; another local user could hold or replace its lock files, \
         so ferry does not write there (make it owned by the user running ferry and not group- \
         or world-writable: chown, then chmod go-w)",
        dir.display()
    )]
    Unsafe {
        /// The layout directory.
        dir: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The layout directory lies inside another layout (an ancestor holds an `oci-layout`).
    #[error(
        "layout directory {}: it lies inside the layout {} (which holds an oci-layout file); \
         a layout never holds another layout, so ferry does not write there",
        dir.display(), layout.display()
    )]
    Nested {
        /// The layout directory.
        dir: PathBuf,
        /// The layout it lies inside.
        layout: PathBuf,
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
    check_not_nested(dir)?;
    // Created `0755` whatever the umask (a group umask, 002, would make it group-writable and
    // then refused below).
    let mut create = tokio::fs::DirBuilder::new();
    create.recursive(true);
    #[cfg(unix)]
    create.mode(0o755);
    create.create(dir).await.map_err(io)?;
    check_layout_dir(dir)?;
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
    check_lock_file(dir, &file, kind.file())?;
    // Another process holds it: try again on tokio's clock, at growing gaps, until the bound.
    // (A blocking `flock` on a thread of its own cannot be cancelled: a timed-out wait left that
    // thread, and the open file, blocked until the other process let go.)
    let mut gap = FIRST_POLL;
    loop {
        let tried = if kind.shared() {
            file.try_lock_shared()
        } else {
            file.try_lock()
        };
        match tried {
            Ok(()) => break,
            Err(TryLockError::Error(e)) => return Err(io(e)),
            Err(TryLockError::WouldBlock) => {}
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(timeout());
        }
        tokio::time::sleep_until((now + gap).min(deadline)).await;
        gap = (gap * 2).min(LAST_POLL);
    }
    Ok(LayoutLock {
        _file: file,
        _local: local,
    })
}

/// Opens (creating, `0600`) a lock file, never through a symlink planted at its name; the run
/// lock (`ferry sync`, `ferry watch`) is opened so too.
pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o600);
    }
    options.open(path)
}

/// The effective user id of this process: who a layout directory must belong to.
#[cfg(unix)]
fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// Refuses a layout directory another local user can write: not owned by this process's user,
/// or group- or world-writable (sticky or not).
fn check_layout_dir(dir: &Path) -> Result<(), LockError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir).map_err(|source| LockError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let why = unsafe_mode(meta.uid(), meta.mode(), effective_uid());
        if let Some(why) = why {
            return Err(LockError::Unsafe {
                dir: dir.to_path_buf(),
                why,
            });
        }
    }
    Ok(())
}

/// Refuses a layout directory inside another layout, before anything is created there:
/// another layout's `blobs/…` or `index.json` made a directory (by an older run, or another
/// config's catalog) would break that layout.
fn check_not_nested(dir: &Path) -> Result<(), LockError> {
    if let Some(layout) = ferry_config::overlap::canonical(dir)
        .ancestors()
        .skip(1)
        .find(|a| std::fs::symlink_metadata(a.join("oci-layout")).is_ok())
    {
        return Err(LockError::Nested {
            dir: dir.to_path_buf(),
            layout: layout.to_path_buf(),
        });
    }
    Ok(())
}

/// Why a directory (or lock file) owned by `owner` with `mode` is unsafe for `uid`, if it is.
fn unsafe_mode(owner: u32, mode: u32, uid: u32) -> Option<String> {
    if owner != uid {
        return Some(format!(
            "it is owned by uid {owner}, not by the user running ferry (uid {uid})"
        ));
    }
    if mode & 0o022 != 0 {
        let sticky = if mode & 0o1000 != 0 { ", sticky" } else { "" };
        return Some(format!(
            "it is group- or world-writable (mode {:04o}{sticky})",
            mode & 0o7777
        ));
    }
    None
}

/// Refuses a lock file owned by another user, and narrows one anyone may open to `0600`.
fn check_lock_file(dir: &Path, file: &File, name: &str) -> Result<(), LockError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let io = |source| LockError::Io {
            path: dir.join(name),
            source,
        };
        let meta = file.metadata().map_err(io)?;
        let uid = effective_uid();
        if meta.uid() != uid {
            return Err(LockError::Unsafe {
                dir: dir.to_path_buf(),
                why: format!(
                    "its {name} is owned by uid {}, not by the user running ferry (uid {uid})",
                    meta.uid()
                ),
            });
        }
        if meta.mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(io)?;
        }
    }
    Ok(())
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
    /// The open descriptors of this process on `path`.
    fn open_on(path: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target == path)
            .count()
    }

    /// Issue 30 item 8: a wait that timed out left a thread blocked in `flock` holding the
    /// lock file open, one per try, for as long as the other process held the lock.
    #[tokio::test(start_paused = true)]
    async fn a_timed_out_wait_leaves_no_thread_and_no_open_lock_file_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path())
            .unwrap()
            .join(INDEX_LOCK_FILE);
        let other = open_lock_file(&path).unwrap();
        other.lock().unwrap();
        for _ in 0..3 {
            let err = acquire(dir.path(), LockKind::Index, Duration::from_secs(2)).await;
            assert!(matches!(err, Err(LockError::Timeout { .. })), "{err:?}");
        }
        assert_eq!(
            open_on(&path),
            1,
            "only the other holder's descriptor is open"
        );
        // Released, it is taken on a later try within the bound.
        let take = tokio::spawn(async move {
            let dir = dir;
            let lock = acquire(dir.path(), LockKind::Index, Duration::from_secs(10)).await;
            (dir, lock)
        });
        tokio::time::advance(Duration::from_secs(1)).await;
        drop(other);
        let (_dir, lock) = take.await.unwrap();
        assert!(lock.is_ok(), "{lock:?}");
    }

    /// Issue 30 item 8: a layout directory another user can write is refused, naming it.
    #[tokio::test]
    async fn a_layout_directory_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        for mode in [0o775, 0o757, 0o1777, 0o777] {
            let dir = tempfile::tempdir().unwrap();
            let layout = dir.path().join("layout");
            std::fs::create_dir(&layout).unwrap();
            std::fs::set_permissions(&layout, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = acquire(&layout, LockKind::Writing, LOCK_WAIT)
                .await
                .unwrap_err();
            assert!(matches!(err, LockError::Unsafe { .. }), "{mode:o}: {err:?}");
            let said = err.to_string();
            assert!(said.contains(&layout.display().to_string()), "{said}");
            assert!(said.contains("group- or world-writable"), "{said}");
            assert!(!layout.join(WRITERS_LOCK_FILE).exists(), "{mode:o}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(
            acquire(dir.path(), LockKind::Writing, LOCK_WAIT)
                .await
                .is_ok()
        );
    }

    /// Issue 30 item 1: a layout directory under another layout (`x/index.json`,
    /// `app/blobs/sha256/<hex>` from a catalog) is refused, whichever run made the outer one.
    #[tokio::test]
    async fn a_layout_inside_another_layout_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outer = dir.path().join("mirror/app");
        std::fs::create_dir_all(&outer).unwrap();
        std::fs::write(
            outer.join("oci-layout"),
            br#"{"imageLayoutVersion":"1.0.0"}"#,
        )
        .unwrap();
        for inner in ["index.json", "blobs/sha256/ab", "x/y"] {
            let err = acquire(&outer.join(inner), LockKind::Writing, LOCK_WAIT)
                .await
                .unwrap_err();
            let said = err.to_string();
            assert!(matches!(err, LockError::Nested { .. }), "{inner}: {said}");
            assert!(said.contains("mirror/app"), "{said}");
        }
        assert!(
            !outer.join("index.json").exists(),
            "nothing was created inside"
        );
        assert!(!outer.join("blobs").exists(), "nothing was created inside");
        assert!(acquire(&outer, LockKind::Writing, LOCK_WAIT).await.is_ok());
        let beside = dir.path().join("mirror/other");
        assert!(acquire(&beside, LockKind::Writing, LOCK_WAIT).await.is_ok());
    }

    #[test]
    fn a_directory_of_another_user_is_unsafe() {
        assert_eq!(unsafe_mode(1000, 0o40755, 1000), None);
        assert_eq!(unsafe_mode(0, 0o40700, 0), None);
        let said = unsafe_mode(1001, 0o40755, 1000).unwrap();
        assert!(said.contains("owned by uid 1001"), "{said}");
        let said = unsafe_mode(1000, 0o41777, 1000).unwrap();
        assert!(said.contains("mode 1777, sticky"), "{said}");
        assert!(unsafe_mode(1000, 0o40770, 1000).is_some());
        assert!(unsafe_mode(1000, 0o40702, 1000).is_some());
    }

    /// A lock file anyone can open, anyone can `flock` for ever: created `0600`, narrowed so.
    #[tokio::test]
    async fn lock_files_are_private_to_the_user() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let index = dir.path().join(INDEX_LOCK_FILE);
        std::fs::write(&index, b"").unwrap();
        std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(
            acquire(dir.path(), LockKind::Index, LOCK_WAIT)
                .await
                .unwrap(),
        );
        drop(
            acquire(dir.path(), LockKind::Writing, LOCK_WAIT)
                .await
                .unwrap(),
        );
        for name in [INDEX_LOCK_FILE, WRITERS_LOCK_FILE] {
            let mode = std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}: {mode:o}");
        }
    }
}
