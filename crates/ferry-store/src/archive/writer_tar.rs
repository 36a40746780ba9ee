//! The tar stream under an archive writer: ustar headers (mode 0644, mtime 0, owner 0), padding
//! and the end blocks, into `PATH.partial` (locked, renamed on success) or standard output.
//!
//! The tar is written head first: blob entries go, as they stream in, to an unnamed body file
//! (beside the output, or in the system's temporary directory for standard output); at the
//! close the head (`oci-layout`, `index.json`, the record, the manifests) is written, then the
//! body copied after it, so a reader of one pass knows every image before its first blob.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

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

/// One sequential tar stream: every byte written counted, directory entries written once.
struct Tar {
    out: Box<dyn AsyncWrite + Send + Unpin>,
    bytes: u64,
    dirs: std::collections::HashSet<String>,
    /// Directory entries are left out (the body's: the head writes them), only noted in `dirs`.
    with_dirs: bool,
}

impl Tar {
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes).await?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    async fn dir(&mut self, dir: &str) -> std::io::Result<()> {
        if self.dirs.insert(dir.to_owned()) && self.with_dirs {
            let h = header(dir, 0, tar::EntryType::Directory, 0o755)?;
            self.write(&h).await?;
        }
        Ok(())
    }

    async fn file_header(&mut self, name: &str, size: u64) -> std::io::Result<()> {
        let mut at = 0;
        while let Some(slash) = name[at..].find('/') {
            self.dir(&name[..at + slash + 1]).await?;
            at += slash + 1;
        }
        let h = header(name, size, tar::EntryType::Regular, 0o644)?;
        self.write(&h).await
    }

    async fn pad(&mut self, size: u64) -> std::io::Result<()> {
        let rest = (BLOCK - size % BLOCK) % BLOCK;
        self.write(&vec![0; rest as usize]).await
    }
}

/// The open tar: the head's stream (`PATH.partial` or standard output), and the body file the
/// blob entries go to until the close.
pub struct Sink {
    head: Tar,
    /// The blob entries, in an unnamed file (nothing of it outlives the process).
    body: Tar,
    /// The body file, read back at the close.
    body_file: std::fs::File,
    /// The file behind the head, to sync before the rename (`None` for standard output).
    file: Option<std::fs::File>,
    /// `PATH.partial` while it is being written.
    partial: Option<PathBuf>,
}

/// The unnamed body file: in `path`'s directory, or the temporary directory for standard
/// output.
fn body_file(output: &Output) -> std::io::Result<std::fs::File> {
    let dir = match output {
        Output::File(path) => match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => parent.to_path_buf(),
            None => PathBuf::from("."),
        },
        Output::Stdout => std::env::temp_dir(),
    };
    tempfile::tempfile_in(&dir).map_err(|e| {
        std::io::Error::new(e.kind(), format!("a body file in {}: {e}", dir.display()))
    })
}

fn tar(out: Box<dyn AsyncWrite + Send + Unpin>, with_dirs: bool) -> Tar {
    Tar {
        out,
        bytes: 0,
        dirs: Default::default(),
        with_dirs,
    }
}

impl Sink {
    /// Opens the stream: `PATH.partial` created or taken over (never through a symlink) under an
    /// exclusive lock, so a second export to the same file fails at once and a crashed one's
    /// leftover is reused; or standard output. The body file with it.
    pub fn open(output: &Output) -> std::io::Result<Sink> {
        let body_file = body_file(output)?;
        let body_writer = tokio::fs::File::from_std(body_file.try_clone()?);
        let body = tar(
            Box::new(tokio::io::BufWriter::with_capacity(BUFFER, body_writer)),
            false,
        );
        match output {
            Output::Stdout => Ok(Sink {
                head: tar(
                    Box::new(tokio::io::BufWriter::with_capacity(
                        BUFFER,
                        tokio::io::stdout(),
                    )),
                    true,
                ),
                body,
                body_file,
                file: None,
                partial: None,
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
                    head: tar(
                        Box::new(tokio::io::BufWriter::with_capacity(BUFFER, writer)),
                        true,
                    ),
                    body,
                    body_file,
                    file: Some(file),
                    partial: Some(partial),
                })
            }
        }
    }

    /// Writes raw bytes of a blob entry (the body).
    pub async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.body.write(bytes).await
    }

    /// A blob entry's header (the body): a regular file `name` of `size` bytes.
    pub async fn file_header(&mut self, name: &str, size: u64) -> std::io::Result<()> {
        self.body.file_header(name, size).await
    }

    /// Zeros up to the next block boundary after a blob entry of `size` bytes (the body).
    pub async fn pad(&mut self, size: u64) -> std::io::Result<()> {
        self.body.pad(size).await
    }

    /// A whole small entry of the head, with its parent directories' entries before it the
    /// first time they are needed.
    pub async fn entry(&mut self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        self.head.file_header(name, bytes.len() as u64).await?;
        self.head.write(bytes).await?;
        self.head.pad(bytes.len() as u64).await
    }

    /// The body after the head (its directories' entries first), the two zero blocks that
    /// end a tar, then everything flushed and (for a file) synced and renamed over `path`; the
    /// tar's size.
    pub async fn close(mut self, output: &Output) -> std::io::Result<u64> {
        let mut dirs: Vec<String> = self.body.dirs.iter().cloned().collect();
        dirs.sort();
        for dir in dirs {
            self.head.dir(&dir).await?;
        }
        self.body.out.flush().await?;
        let mut body = tokio::fs::File::from_std(self.body_file.try_clone()?);
        tokio::io::AsyncSeekExt::seek(&mut body, std::io::SeekFrom::Start(0)).await?;
        let copied =
            tokio::io::copy(&mut (&mut body).take(self.body.bytes), &mut self.head.out).await?;
        if copied != self.body.bytes {
            return Err(std::io::Error::other(format!(
                "the body file gave back {copied} of its {} bytes",
                self.body.bytes
            )));
        }
        self.head.bytes += copied;
        self.head.write(&[0; 2 * BLOCK as usize]).await?;
        self.head.out.flush().await?;
        self.head.out.shutdown().await.or_else(|e| match output {
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
        Ok(self.head.bytes)
    }

    /// Drops the stream and removes `PATH.partial` (a failed export leaves no file; the body
    /// file has no name).
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
