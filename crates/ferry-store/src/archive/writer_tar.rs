//! The tar stream under an archive writer: ustar headers (mode 0644, mtime 0, owner 0), padding
//! and the end blocks, into `PATH.partial` (locked, renamed on success) or standard output.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncWrite, AsyncWriteExt};

/// A tar block.
pub const BLOCK: u64 = 512;

/// Buffer in front of the file or pipe: big enough that a 512-byte header and a chunk go out
/// in one write.
const BUFFER: usize = 1024 * 1024;

/// Where the tar goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Output {
    /// A file, written as `PATH.partial` and renamed over `PATH` once complete.
    File(PathBuf),
    /// Standard output (`-o -`): a pipe into `split`, `zstd` or an upload.
    Stdout,
}

impl Output {
    /// The file it names, or `-`.
    pub fn display(&self) -> String {
        match self {
            Output::File(p) => p.display().to_string(),
            Output::Stdout => "-".to_owned(),
        }
    }
}

/// `PATH.partial`.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// The open tar stream: every byte written counted, directory entries written once.
pub struct Sink {
    out: Box<dyn AsyncWrite + Send + Unpin>,
    /// The file behind `out`, to sync before the rename (`None` for standard output).
    file: Option<std::fs::File>,
    /// `PATH.partial` while it is being written.
    partial: Option<PathBuf>,
    /// Bytes of tar written so far.
    pub bytes: u64,
    dirs: std::collections::HashSet<String>,
}

impl Sink {
    /// Opens the stream: `PATH.partial` created or taken over (never through a symlink) under an
    /// exclusive lock, so a second export to the same file fails at once and a crashed one's
    /// leftover is reused; or standard output.
    pub fn open(output: &Output) -> std::io::Result<Sink> {
        match output {
            Output::Stdout => Ok(Sink {
                out: Box::new(tokio::io::BufWriter::with_capacity(
                    BUFFER,
                    tokio::io::stdout(),
                )),
                file: None,
                partial: None,
                bytes: 0,
                dirs: Default::default(),
            }),
            Output::File(path) => {
                let partial = partial_path(path);
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create(true).truncate(false);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt as _;
                    options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
                }
                let file = options.open(&partial).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("{}: {e}", partial.display()))
                })?;
                match file.try_lock() {
                    Ok(()) => {}
                    Err(std::fs::TryLockError::WouldBlock) => {
                        return Err(std::io::Error::other(format!(
                            "{} is being written by another ferry process",
                            partial.display()
                        )));
                    }
                    Err(std::fs::TryLockError::Error(e)) => {
                        return Err(std::io::Error::new(
                            e.kind(),
                            format!("{}: cannot lock it: {e}", partial.display()),
                        ));
                    }
                }
                file.set_len(0)?;
                let writer = tokio::fs::File::from_std(file.try_clone()?);
                Ok(Sink {
                    out: Box::new(tokio::io::BufWriter::with_capacity(BUFFER, writer)),
                    file: Some(file),
                    partial: Some(partial),
                    bytes: 0,
                    dirs: Default::default(),
                })
            }
        }
    }

    /// Writes raw bytes.
    pub async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes).await?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// A header for a regular file `name` of `size` bytes, with its parent directories' entries
    /// before it the first time they are needed.
    pub async fn file_header(&mut self, name: &str, size: u64) -> std::io::Result<()> {
        let mut at = 0;
        while let Some(slash) = name[at..].find('/') {
            let dir = format!("{}/", &name[..at + slash]);
            at += slash + 1;
            if self.dirs.insert(dir.clone()) {
                let h = header(&dir, 0, tar::EntryType::Directory, 0o755)?;
                self.write(&h).await?;
            }
        }
        let h = header(name, size, tar::EntryType::Regular, 0o644)?;
        self.write(&h).await
    }

    /// Zeros up to the next block boundary after an entry of `size` bytes.
    pub async fn pad(&mut self, size: u64) -> std::io::Result<()> {
        let rest = (BLOCK - size % BLOCK) % BLOCK;
        self.write(&vec![0; rest as usize]).await
    }

    /// A whole small entry.
    pub async fn entry(&mut self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        self.file_header(name, bytes.len() as u64).await?;
        self.write(bytes).await?;
        self.pad(bytes.len() as u64).await
    }

    /// The two zero blocks that end a tar, then everything flushed and (for a file) synced and
    /// renamed over `path`.
    pub async fn close(mut self, output: &Output) -> std::io::Result<()> {
        self.write(&[0; 2 * BLOCK as usize]).await?;
        self.out.flush().await?;
        self.out.shutdown().await.or_else(|e| match output {
            // Standard output may be a pipe whose reader already has everything.
            Output::Stdout => Ok(()),
            Output::File(_) => Err(e),
        })?;
        if let (Some(file), Some(partial), Output::File(path)) =
            (self.file.take(), self.partial.take(), output)
        {
            file.sync_all()?;
            std::fs::rename(&partial, path)?;
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                let _ = std::fs::File::open(parent).and_then(|d| d.sync_all());
            }
        }
        Ok(())
    }

    /// Drops the stream and removes `PATH.partial` (a failed export leaves no file).
    pub fn discard(mut self) {
        if let Some(partial) = self.partial.take() {
            let _ = std::fs::remove_file(partial);
        }
    }
}

/// One ustar header: fixed mode, owner and time, so two exports of the same content agree.
fn header(
    name: &str,
    size: u64,
    kind: tar::EntryType,
    mode: u32,
) -> std::io::Result<[u8; BLOCK as usize]> {
    let mut h = tar::Header::new_ustar();
    h.set_path(name)?;
    h.set_size(size);
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h.set_cksum();
    Ok(*h.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_a_regular_file_the_tar_crate_reads_back() {
        let h = header("blobs/sha256/abc", 1234, tar::EntryType::Regular, 0o644).unwrap();
        let mut tar_bytes = h.to_vec();
        tar_bytes.extend(vec![7u8; 1234]);
        tar_bytes.extend(vec![0u8; (512 - 1234 % 512) + 1024]);
        let mut a = tar::Archive::new(&tar_bytes[..]);
        let e = a.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(e.path().unwrap().to_str(), Some("blobs/sha256/abc"));
        assert_eq!(e.header().size().unwrap(), 1234);
        assert_eq!(e.header().mode().unwrap(), 0o644);
    }

    #[test]
    fn partial_is_beside_the_file() {
        assert_eq!(
            partial_path(Path::new("/x/b.tar")),
            PathBuf::from("/x/b.tar.partial")
        );
    }
}
