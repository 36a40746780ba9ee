//! The store's one set of file primitives: files created exclusively and never through a
//! symlink (`O_NOFOLLOW`), made durable and visible by fsync, rename and an fsync of the directory.

// Every file ferry writes into a layout, an archive's `PATH.json` or the state directory appears
// only through here: a temporary created new in the same directory (a file or symlink planted
// at its name makes the create fail instead of being written through), synced, renamed over
// the final name, then the directory synced, so a crash leaves the old file or the new one.

use std::io::Write as _;
use std::path::Path;

/// A temporary name for a file on its way to `name`, unique to this write: two writes of the
/// same file (two images sharing a manifest) never share one, so neither renames the other's
/// away.
pub fn temp_name(name: &str) -> String {
    temp_name_ending(name, "partial")
}

/// [`temp_name`] ending in `.{ending}` (the state directory's sweep looks for `.tmp`).
pub fn temp_name_ending(name: &str, ending: &str) -> String {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(".{name}.{}.{n}.{ending}", std::process::id())
}

/// Open options for a file that did not exist before, created with `mode` (before the umask),
/// never through a symlink.
fn create_new_options(mode: u32) -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    #[cfg(not(unix))]
    let _ = mode;
    options
}

/// Creates a temporary file that did not exist before: `create_new` (so a file or symlink
/// planted at the name makes it fail rather than be written through) and, on Unix,
/// `O_NOFOLLOW`.
pub async fn create_temp(path: &Path) -> std::io::Result<tokio::fs::File> {
    let options = tokio::fs::OpenOptions::from(create_new_options(0o666));
    options.open(path).await
}

/// An error unless `d` is a directory itself (not a symlink to one).
pub async fn real_dir(d: &Path) -> std::io::Result<()> {
    let meta = tokio::fs::symlink_metadata(d).await?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory of the layout (a symlink or a file): not writing through it",
            d.display()
        )));
    }
    Ok(())
}

/// The directory `path` is in: `.` for a bare file name (whose `parent()` is the empty path,
/// which no open accepts: `-o bundle.tar` failed on it, issue 37).
pub fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Makes a rename in `dir` durable: the directory entry reaches the disk, not only the file.
pub async fn sync_dir(dir: &Path) -> std::io::Result<()> {
    tokio::fs::File::open(dir).await?.sync_all().await
}

/// Makes the temporary `tmp` (written, not yet synced) the file at `path`: fsync, rename, fsync
/// of `path`'s directory. The temporary is removed when any step fails.
pub async fn commit(file: tokio::fs::File, tmp: &Path, path: &Path) -> std::io::Result<()> {
    let done = async {
        file.sync_all().await?;
        drop(file);
        tokio::fs::rename(tmp, path).await
    }
    .await;
    if done.is_err() {
        let _ = tokio::fs::remove_file(tmp).await;
    }
    done?;
    sync_dir(dir_of(path)).await
}

/// Writes `bytes` to `path` through a temporary name in the same directory (created
/// exclusively, never through a symlink), synced, then renamed (and the directory synced): a
/// reader never sees a half-written file under the final name, and a crash after the call
/// returns does not lose it. The directory is created when missing.
pub async fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = dir_of(path).to_path_buf();
    tokio::fs::create_dir_all(&parent).await?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = parent.join(temp_name(name));
    let (path, bytes) = (path.to_path_buf(), bytes.to_vec());
    tokio::task::spawn_blocking(move || replace_blocking(&path, &tmp, &bytes, 0o666))
        .await
        .map_err(std::io::Error::other)?
}

/// The blocking form of [`write_atomic`] through the temporary `tmp` (created new with `mode`
/// before the umask, in `path`'s directory, which must exist); for a caller already on a
/// blocking thread. Only a temporary this call created is ever removed.
pub fn replace_blocking(path: &Path, tmp: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut file = create_new_options(mode).open(tmp)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| std::fs::rename(tmp, path)) {
        let _ = std::fs::remove_file(tmp);
        return Err(e);
    }
    std::fs::File::open(dir_of(path))?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_temporary_name_taken_by_a_symlink_is_not_written_through() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let tmp = root.path().join(".x.partial");
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        assert!(create_temp(&tmp).await.is_err());
        assert!(replace_blocking(&root.path().join("x"), &tmp, b"new", 0o600).is_err());
        // A dangling symlink (a name the attacker wants created) is refused as well.
        let dangling = root.path().join(".y.partial");
        std::os::unix::fs::symlink(root.path().join("new-file"), &dangling).unwrap();
        assert!(create_temp(&dangling).await.is_err());
        assert!(!root.path().join("new-file").exists());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!root.path().join("x").exists());
    }

    #[test]
    fn a_bare_file_name_is_in_the_working_directory() {
        assert_eq!(dir_of(Path::new("bundle.tar")), Path::new("."));
        assert_eq!(dir_of(Path::new("/x/b.tar")), Path::new("/x"));
        assert_eq!(dir_of(Path::new("sub/b.tar")), Path::new("sub"));
    }

    #[tokio::test]
    async fn an_atomic_write_replaces_the_file_and_leaves_no_temporary() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("sub/index.json");
        write_atomic(&path, b"one").await.unwrap();
        write_atomic(&path, b"two").await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(root.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["index.json"]);
    }
}
