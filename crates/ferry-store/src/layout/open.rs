//! Opening files inside a layout that came from outside: below the layout's root no symbolic
//! link is followed and only regular files are read (no FIFO, socket or device), race-free.

use std::io::Read as _;
use std::path::{Component, Path};

/// Why a file inside a layout was not opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// Nothing is there.
    Missing,
    /// Something is there that ferry does not read (a link, a FIFO, a device, a directory).
    Refused(String),
    /// A file read whole (an index, a manifest) is longer than its limit: named, with the limit.
    TooLarge(String),
    /// The file system failed.
    Io(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Missing => f.write_str("not found"),
            OpenError::Refused(why) | OpenError::TooLarge(why) | OpenError::Io(why) => {
                f.write_str(why)
            }
        }
    }
}

/// An opened regular file and its length when it was opened.
#[derive(Debug)]
pub struct Opened {
    /// The file, opened without following a link.
    pub file: std::fs::File,
    /// Its length when it was opened: a reader stops there even if it grows.
    pub len: u64,
}

/// Opens `relative` (plain names only: no `..`, no root) below the layout directory `root` for
/// reading. `root` itself may be a link (the config names it, and the config is trusted);
/// nothing below it may be. Each directory is opened relative to the one before and the file
/// with `O_NOFOLLOW | O_NONBLOCK`, then its type is read from the opened handle: there is no
/// moment between a check and the open for a link or a FIFO to be swapped in, and a FIFO
/// cannot block the open.
pub fn open_regular(root: &Path, relative: &Path) -> Result<Opened, OpenError> {
    let shown = root.join(relative);
    let shown = shown.display();
    let mut names = Vec::new();
    for part in relative.components() {
        match part {
            Component::Normal(name) => names.push(name),
            _ => {
                return Err(OpenError::Refused(format!(
                    "{shown}: not a plain path inside the layout"
                )));
            }
        }
    }
    let file = platform::open_beneath(root, &names).map_err(|e| match e {
        platform::Failure::Missing => OpenError::Missing,
        platform::Failure::Link => OpenError::Refused(format!(
            "{shown}: a symbolic link (ferry reads only regular files inside a layout)"
        )),
        platform::Failure::NotDirectory => {
            OpenError::Refused(format!("{shown}: a path part is not a directory"))
        }
        platform::Failure::Io(e) => OpenError::Io(format!("{shown}: {e}")),
    })?;
    let meta = file
        .metadata()
        .map_err(|e| OpenError::Io(format!("{shown}: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(OpenError::Refused(format!(
            "{shown}: {} (ferry reads only regular files inside a layout)",
            describe(&meta.file_type())
        )));
    }
    Ok(Opened {
        file,
        len: meta.len(),
    })
}

/// The whole of a small file (an index, a manifest), refused before reading when it is longer
/// than `limit`, and read no further than `limit + 1` bytes in case it grows while being read.
pub fn read_small(root: &Path, relative: &Path, limit: u64) -> Result<Vec<u8>, OpenError> {
    let opened = open_regular(root, relative)?;
    let shown = root.join(relative);
    let too_large = || {
        OpenError::TooLarge(format!(
            "{}: larger than the {limit}-byte limit for this file",
            shown.display()
        ))
    };
    if opened.len > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(opened.len).unwrap_or(0));
    opened
        .file
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| OpenError::Io(format!("{}: {e}", shown.display())))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

fn describe(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

#[cfg(unix)]
mod platform {
    use std::ffi::OsStr;
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::{Mode, OFlags};
    use rustix::io::Errno;

    pub enum Failure {
        Missing,
        Link,
        NotDirectory,
        Io(std::io::Error),
    }

    impl From<Errno> for Failure {
        fn from(e: Errno) -> Self {
            match e {
                Errno::NOENT => Failure::Missing,
                Errno::LOOP => Failure::Link,
                Errno::NOTDIR => Failure::NotDirectory,
                e => Failure::Io(e.into()),
            }
        }
    }

    pub fn open_beneath(root: &Path, names: &[&OsStr]) -> Result<std::fs::File, Failure> {
        let Some((last, dirs)) = names.split_last() else {
            return Err(Failure::NotDirectory);
        };
        let base = OFlags::RDONLY | OFlags::CLOEXEC;
        let mut dir: OwnedFd = rustix::fs::openat(
            rustix::fs::CWD,
            root,
            base | OFlags::DIRECTORY,
            Mode::empty(),
        )?;
        for name in dirs {
            dir = rustix::fs::openat(
                &dir,
                *name,
                base | OFlags::DIRECTORY | OFlags::NOFOLLOW,
                Mode::empty(),
            )?;
        }
        let file = rustix::fs::openat(
            &dir,
            *last,
            base | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?;
        Ok(std::fs::File::from(file))
    }
}

#[cfg(not(unix))]
mod platform {
    use std::ffi::OsStr;
    use std::path::Path;

    pub enum Failure {
        Missing,
        Link,
        NotDirectory,
        Io(std::io::Error),
    }

    /// Without `openat`: each part is checked not to be a link before the file is opened (a
    /// link swapped in between the check and the open is not caught here).
    pub fn open_beneath(root: &Path, names: &[&OsStr]) -> Result<std::fs::File, Failure> {
        let mut path = root.to_path_buf();
        for name in names {
            path.push(name);
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_symlink() => return Err(Failure::Link),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Failure::Missing),
                Err(e) => return Err(Failure::Io(e)),
            }
        }
        std::fs::File::open(&path).map_err(Failure::Io)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn layout() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("blobs/sha256")).unwrap();
        std::fs::write(dir.path().join("blobs/sha256/good"), b"good bytes").unwrap();
        dir
    }

    fn refused(result: Result<Opened, OpenError>) -> String {
        match result {
            Err(OpenError::Refused(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_regular_file_opens_with_its_length() {
        let dir = layout();
        let opened = open_regular(dir.path(), Path::new("blobs/sha256/good")).unwrap();
        assert_eq!(opened.len, 10);
        assert_eq!(
            open_regular(dir.path(), Path::new("blobs/sha256/none")).unwrap_err(),
            OpenError::Missing
        );
    }

    #[test]
    fn a_link_below_the_root_is_refused_wherever_it_is() {
        let dir = layout();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"outside").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret"),
            dir.path().join("blobs/sha256/file-link"),
        )
        .unwrap();
        std::os::unix::fs::symlink("good", dir.path().join("blobs/sha256/inside-link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("blobs/sha512")).unwrap();
        std::fs::write(outside.path().join("x"), b"outside").unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("blobs/sha256/zero")).unwrap();
        for path in [
            "blobs/sha256/file-link",
            "blobs/sha256/inside-link",
            "blobs/sha256/zero",
        ] {
            let why = refused(open_regular(dir.path(), Path::new(path)));
            assert!(why.contains("symbolic link") && why.contains(path), "{why}");
        }
        let why = refused(open_regular(dir.path(), Path::new("blobs/sha512/x")));
        assert!(why.contains("blobs/sha512/x"), "{why}");
        let why = refused(open_regular(
            dir.path(),
            Path::new("blobs/../blobs/sha256/good"),
        ));
        assert!(why.contains("not a plain path"), "{why}");
        // The root itself may be a link: the config named it.
        let alias = outside.path().join("alias");
        std::os::unix::fs::symlink(dir.path(), &alias).unwrap();
        assert!(open_regular(&alias, Path::new("blobs/sha256/good")).is_ok());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking_and_a_directory_too() {
        let dir = layout();
        let fifo = dir.path().join("blobs/sha256/fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let why = refused(open_regular(dir.path(), Path::new("blobs/sha256/fifo")));
        assert!(why.contains("a FIFO"), "{why}");
        let why = refused(open_regular(dir.path(), Path::new("blobs/sha256")));
        assert!(why.contains("a directory"), "{why}");
    }

    #[test]
    fn a_fifo_where_a_directory_should_be_is_refused_without_blocking() {
        let dir = layout();
        let fifo = |path: &Path| {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                path,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .unwrap();
        };
        // As a part of the path below the root: blobs/sha512 is a FIFO nobody writes to.
        fifo(&dir.path().join("blobs/sha512"));
        let why = refused(open_regular(dir.path(), Path::new("blobs/sha512/x")));
        assert!(why.contains("not a directory"), "{why}");
        // As the root itself (which the config names, and may be a link).
        let root = dir.path().join("root-fifo");
        fifo(&root);
        let why = refused(open_regular(&root, Path::new("index.json")));
        assert!(why.contains("not a directory"), "{why}");
    }

    #[test]
    fn a_device_is_refused_and_named_as_one() {
        // /dev/null is a character device in every Unix, directly below /dev (not a link).
        let why = refused(open_regular(Path::new("/dev"), Path::new("null")));
        assert!(why.contains("a device"), "{why}");
    }

    #[test]
    fn a_small_file_is_read_only_within_its_limit() {
        let dir = layout();
        assert_eq!(
            read_small(dir.path(), Path::new("blobs/sha256/good"), 10).unwrap(),
            b"good bytes"
        );
        let why = match read_small(dir.path(), Path::new("blobs/sha256/good"), 9) {
            Err(OpenError::TooLarge(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(why.contains("9-byte limit"), "{why}");
    }
}
