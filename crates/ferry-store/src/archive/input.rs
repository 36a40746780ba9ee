//! What an archive's first bytes say it is (a tar, gzip, zstd, or something refused by name),
//! and a compressed file or a pipe made a plain tar in a bounded spool file the reader seeks in.
//!
//! A compressed stream cannot be read from an offset, and a pipe cannot be read twice, while
//! the reader serves every blob by seeking to it (once per target, again after a broken read):
//! so such an input is decompressed (or copied) once, in one pass, into a spool file under the
//! run's spool directory, never past its bound, and the file is removed with the last reader.
//! A plain tar file is read in place. A spool file is `flock`ed by its process for its whole
//! life, so one a killed process left (SIGKILL runs no destructor) is told from a live one's
//! and removed by the next spool into the same directory (`sweep`).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// The spool's bound when none is given: 64 GiB.
pub const DEFAULT_SPOOL_LIMIT: u64 = 64 << 30;

/// The path that names standard input (`ferry import -`).
pub const STDIN: &str = "-";

/// How the archive's bytes are packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    Tar,
    Gzip,
    Zstd,
}

impl Packing {
    /// `gzip`, `zstd`, or `tar` (not compressed).
    pub fn name(self) -> &'static str {
        match self {
            Packing::Tar => "tar",
            Packing::Gzip => "gzip",
            Packing::Zstd => "zstd",
        }
    }
}

/// Where a run spools archives it cannot read in place, and how large a spool may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolPlace {
    /// The directory the spool files are created in (made if missing, 0700).
    pub dir: PathBuf,
    /// The most bytes one spool file may hold (the tar, decompressed).
    pub limit: u64,
}

impl Default for SpoolPlace {
    /// The system's temporary directory, with [`DEFAULT_SPOOL_LIMIT`].
    fn default() -> Self {
        SpoolPlace {
            dir: std::env::temp_dir(),
            limit: DEFAULT_SPOOL_LIMIT,
        }
    }
}

/// What was spooled for an archive: how it was packed, how many tar bytes the spool holds and
/// where, and whether it came from standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spooled {
    pub packing: Packing,
    pub bytes: u64,
    pub dir: PathBuf,
    pub stdin: bool,
}

/// The names of ferry's spool files start so; nothing else in a spool directory is swept.
pub const SPOOL_PREFIX: &str = "ferry-spool-";

/// A spool file: removed when dropped, and `flock`ed (exclusive) by this process until then,
/// so a sweep never takes it for a killed process's.
#[derive(Debug)]
pub struct SpoolFile {
    // Dropped in this order: the name removed first, then the lock let go, so no sweep ever
    // sees this file unlocked under its name.
    path: tempfile::TempPath,
    _held: std::fs::File,
}

impl std::ops::Deref for SpoolFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for SpoolFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// A tar to index: the file itself, or a spool file (removed when this is dropped).
#[derive(Debug)]
pub struct Prepared {
    /// The plain tar to seek in.
    pub path: PathBuf,
    /// The spool file, kept as long as the archive is read; `None` for a tar read in place.
    pub spool: Option<(SpoolFile, Spooled)>,
}

/// Signatures of formats ferry does not read, to name them when refusing one.
const OTHER_FORMATS: &[(&[u8], &str)] = &[
    (&[0xfd, b'7', b'z', b'X', b'Z', 0x00], "xz"),
    (b"BZh", "bzip2"),
    (&[0x04, 0x22, 0x4d, 0x18], "lz4"),
    (b"PK\x03\x04", "zip"),
    (&[0x28, 0xb5, 0x2f, 0xfd], "zstd"),
];

/// How `head` (the first bytes of the input, up to 512 or all of a shorter one) is packed, or
/// why it is not an archive ferry reads: the message names the bytes seen (as hex) and the
/// format they are when ferry knows it.
pub fn sniff(head: &[u8]) -> Result<Packing, String> {
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok(Packing::Gzip);
    }
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Ok(Packing::Zstd);
    }
    if head.len() >= 512 {
        let block: &[u8; 512] = head[..512].try_into().map_err(|_| "short block")?;
        if block.iter().all(|b| *b == 0)
            || &block[257..262] == b"ustar"
            || super::reader_tar::check_sum(block).is_ok()
        {
            return Ok(Packing::Tar);
        }
    }
    let shown: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let what = OTHER_FORMATS
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, name)| format!(" ({name}: decompress it first)"))
        .unwrap_or_default();
    let start = match head.len() {
        0 => "it is empty".to_owned(),
        n if n < 512 => format!("it is {n} bytes, {}", shown.join(" ")),
        _ => format!("it starts with bytes {}", shown.join(" ")),
    };
    Err(format!(
        "not a tar archive, nor one compressed with gzip or zstd: {start}{what}"
    ))
}

/// Up to 512 bytes from the start of `input` (fewer only at its end).
fn read_head(input: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    input.take(512).read_to_end(&mut head)?;
    Ok(head)
}

/// The tar `path` names (`-`: standard input), ready to index: a plain tar file as it is;
/// a compressed file, or anything from standard input, decompressed (or copied) into a spool
/// file under `place` in one pass. Blocking: call it on a blocking thread.
pub fn prepare(path: &Path, place: &SpoolPlace) -> Result<Prepared, String> {
    if path == Path::new(STDIN) {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let head = read_head(&mut input).map_err(|e| format!("reading standard input: {e}"))?;
        let packing = sniff(&head).map_err(|e| format!("standard input: {e}"))?;
        let (file, spooled) = spool(&head[..], input, packing, place, true)?;
        return Ok(Prepared {
            path: file.to_path_buf(),
            spool: Some((file, spooled)),
        });
    }
    let mut file = std::fs::File::open(path).map_err(|e| format!("opening the file: {e}"))?;
    let head = read_head(&mut file).map_err(|e| format!("reading the file: {e}"))?;
    let packing = sniff(&head)?;
    if packing == Packing::Tar {
        return Ok(Prepared {
            path: path.to_path_buf(),
            spool: None,
        });
    }
    let (spool_file, spooled) = spool(&head[..], file, packing, place, false)?;
    Ok(Prepared {
        path: spool_file.to_path_buf(),
        spool: Some((spool_file, spooled)),
    })
}

/// Writes `head` then the rest of `input`, decompressed as `packing` says, into a new spool
/// file under `place`: refused (the file removed) past `place.limit` bytes of tar, or when the
/// bytes are not what their packing says.
pub fn spool(
    head: &[u8],
    input: impl Read,
    packing: Packing,
    place: &SpoolPlace,
    stdin: bool,
) -> Result<(SpoolFile, Spooled), String> {
    let dir = &place.dir;
    let shown = dir.display();
    make_dir(dir).map_err(|e| format!("the spool directory {shown}: {e}"))?;
    let (file, held) =
        create_swept(dir).map_err(|e| format!("creating a spool file in {shown}: {e}"))?;
    let (file, path) = file.into_parts();
    // From here the spool file is removed when `path` is dropped, on every error below.
    let path = SpoolFile { path, _held: held };
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut input = BufReader::with_capacity(1 << 20, head.chain(input));
    let from = if stdin { "standard input" } else { "the file" };
    let bytes = match packing {
        Packing::Tar => copy_bounded(&mut input, &mut out, place.limit),
        Packing::Gzip => copy_bounded(
            &mut flate2::bufread::MultiGzDecoder::new(input),
            &mut out,
            place.limit,
        ),
        Packing::Zstd => copy_zstd(&mut input, &mut out, place.limit),
    }
    .map_err(|e| match e {
        Spill::Over => format!(
            "{from} holds more than the spool's bound of {} bytes of tar ({}): nothing was \
             kept (give a larger --spool-limit, or decompress it to a file and import that)",
            place.limit,
            packing.name()
        ),
        Spill::Read(e) if packing == Packing::Tar => format!("reading {from}: {e}"),
        Spill::Read(e) => format!("{from} is not valid {}: {e}", packing.name()),
        Spill::Write(e) => format!("writing the spool file in {shown}: {e}"),
    })?;
    let file = out
        .into_inner()
        .map_err(|e| format!("writing the spool file in {shown}: {}", e.error()))?;
    file.sync_all()
        .map_err(|e| format!("writing the spool file in {shown}: {e}"))?;
    Ok((
        path,
        Spooled {
            packing,
            bytes,
            dir: dir.clone(),
            stdin,
        },
    ))
}

/// A new spool file in `dir`, locked, and a second handle on its lock; first, every spool file
/// of `dir` no process holds (a killed import's) is removed. The directory itself is `flock`ed
/// while this runs, so a sweep never sees a file created but not yet locked.
fn create_swept(dir: &Path) -> std::io::Result<(tempfile::NamedTempFile, std::fs::File)> {
    let guard = std::fs::File::open(dir)?;
    guard.lock()?;
    sweep(dir);
    let file = tempfile::Builder::new()
        .prefix(SPOOL_PREFIX)
        .suffix(".tar")
        .tempfile_in(dir)?;
    let held = file.as_file().try_clone()?;
    // New and named under the directory's lock: no other handle can hold it.
    held.try_lock().map_err(std::io::Error::other)?;
    drop(guard);
    Ok((file, held))
}

/// Removes each spool file of `dir` (a regular file named `ferry-spool-…`) whose lock can be
/// taken: no live process holds it. Errors only skip a file: a sweep never fails a spool.
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_spool = name.to_str().is_some_and(|n| n.starts_with(SPOOL_PREFIX));
        if !is_spool || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(
            &mut options,
            libc::O_NOFOLLOW | libc::O_CLOEXEC,
        );
        let Ok(file) = options.open(&path) else {
            continue;
        };
        if file.try_lock().is_ok() {
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(file = %path.display(), "removed a spool file a killed import left")
                }
                Err(e) => {
                    tracing::debug!(file = %path.display(), error = %e, "a left spool file could not be removed")
                }
            }
        }
    }
}

/// The spool directory, made (0700, as the state directory) when missing.
fn make_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Why a spool stopped.
enum Spill {
    /// More than the bound.
    Over,
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copies `input` to `out`, refusing more than `limit` bytes; the bytes copied.
fn copy_bounded(input: &mut impl Read, out: &mut impl Write, limit: u64) -> Result<u64, Spill> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Spill::Read(e)),
        };
        total += n as u64;
        if total > limit {
            return Err(Spill::Over);
        }
        out.write_all(&buf[..n]).map_err(Spill::Write)?;
    }
}

/// Every zstd frame of `input` in turn (a `pzstd` file is several), decompressed to `out`.
fn copy_zstd(input: &mut impl BufRead, out: &mut impl Write, limit: u64) -> Result<u64, Spill> {
    copy_bounded(&mut ZstdFrames::new(input), out, limit)
}

/// A zstd stream as one `Read` of its decompressed bytes, frame after frame until the input
/// ends (a broken frame is an `InvalidData` error).
pub struct ZstdFrames<R: BufRead> {
    /// The input between frames; `None` while a frame holds it.
    input: Option<R>,
    frame: Option<ruzstd::decoding::StreamingDecoder<R, ruzstd::decoding::FrameDecoder>>,
}

impl<R: BufRead> ZstdFrames<R> {
    pub fn new(input: R) -> Self {
        ZstdFrames {
            input: Some(input),
            frame: None,
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        loop {
            if let Some(frame) = self.frame.as_mut() {
                let n = frame.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                // This frame is done: another may follow.
                self.input = self.frame.take().map(|f| f.into_inner());
            }
            let Some(mut input) = self.input.take() else {
                return Ok(0);
            };
            if input.fill_buf()?.is_empty() {
                self.input = Some(input);
                return Ok(0);
            }
            let frame = ruzstd::decoding::StreamingDecoder::new(input)
                .map_err(|e| invalid(e.to_string()))?;
            self.frame = Some(frame);
        }
    }
}

/// `head` then the rest of `input`, decompressed as `packing` says, as one sequential `Read`
/// (for a reader that needs no seeking: `--since`'s record).
pub fn decoded<'a>(
    head: Vec<u8>,
    input: impl Read + Send + 'a,
    packing: Packing,
) -> Box<dyn Read + Send + 'a> {
    let input = BufReader::with_capacity(1 << 16, std::io::Cursor::new(head).chain(input));
    match packing {
        Packing::Tar => Box::new(input),
        Packing::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        Packing::Zstd => Box::new(ZstdFrames::new(input)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(body: &[u8]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_ustar();
        header.set_size(body.len() as u64);
        header.set_path("index.json").unwrap();
        header.set_cksum();
        builder.append(&header, body).unwrap();
        builder.into_inner().unwrap()
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn zstd(bytes: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
    }

    #[test]
    fn the_first_bytes_say_how_an_archive_is_packed() {
        let tar = tar_of(b"{}");
        assert_eq!(sniff(&tar[..512]), Ok(Packing::Tar));
        assert_eq!(sniff(&gzip(&tar)[..]), Ok(Packing::Gzip));
        assert_eq!(sniff(&zstd(&tar)[..]), Ok(Packing::Zstd));
        // An old (v7) header has no `ustar` magic: its checksum says it is a tar.
        let mut v7 = tar[..512].to_vec();
        v7[257..265].fill(0);
        let mut header = tar::Header::from_byte_slice(&v7).clone();
        header.set_cksum();
        assert_eq!(sniff(header.as_bytes()), Ok(Packing::Tar));
    }

    #[test]
    fn anything_else_is_refused_naming_the_bytes_it_starts_with() {
        let xz = [0xfd, b'7', b'z', b'X', b'Z', 0, 0, 4, 0xe6];
        let e = sniff(&xz).unwrap_err();
        assert!(
            e.contains("fd 37 7a 58 5a 00 00 04") && e.contains("(xz"),
            "{e}"
        );
        let mut html = b"<html><body>not found</body></html>".to_vec();
        html.resize(600, b' ');
        let e = sniff(&html).unwrap_err();
        assert!(
            e.contains("starts with bytes 3c 68 74 6d 6c 3e 3c 62"),
            "{e}"
        );
        assert!(!e.contains('('), "no format named for unknown bytes: {e}");
        assert!(sniff(&[]).unwrap_err().contains("it is empty"));
    }

    fn place(dir: &Path, limit: u64) -> SpoolPlace {
        SpoolPlace {
            dir: dir.join("spool"),
            limit,
        }
    }

    #[test]
    fn a_compressed_file_is_spooled_as_its_tar_and_the_spool_goes_with_its_reader() {
        let dir = tempfile::tempdir().unwrap();
        let tar = tar_of(&ferry_testkit::noise(5, 300_000));
        for (packed, packing) in [(gzip(&tar), Packing::Gzip), (zstd(&tar), Packing::Zstd)] {
            let file = dir.path().join("bundle.tar.x");
            std::fs::write(&file, &packed).unwrap();
            let prepared = prepare(&file, &place(dir.path(), 1 << 30)).unwrap();
            assert_eq!(std::fs::read(&prepared.path).unwrap(), tar);
            let (spool, spooled) = prepared.spool.unwrap();
            assert_eq!(spooled.packing, packing);
            assert_eq!(spooled.bytes, tar.len() as u64);
            assert!(spool.starts_with(dir.path().join("spool")));
            drop(spool);
            let left = std::fs::read_dir(dir.path().join("spool")).unwrap().count();
            assert_eq!(left, 0, "the spool file is removed with its reader");
        }
        // A plain tar is read where it is.
        let file = dir.path().join("bundle.tar");
        std::fs::write(&file, &tar).unwrap();
        let prepared = prepare(&file, &place(dir.path(), 10)).unwrap();
        assert_eq!((prepared.path, prepared.spool.is_none()), (file, true));
    }

    #[test]
    fn several_zstd_frames_are_one_tar() {
        let dir = tempfile::tempdir().unwrap();
        let tar = tar_of(&ferry_testkit::noise(6, 100_000));
        let (a, b) = tar.split_at(7000);
        let packed = [zstd(a), zstd(b)].concat();
        let (spool, _) = spool(
            &[],
            &packed[..],
            Packing::Zstd,
            &place(dir.path(), 1 << 30),
            false,
        )
        .unwrap();
        assert_eq!(std::fs::read(&spool).unwrap(), tar);
    }

    #[test]
    fn a_spool_past_its_bound_or_of_broken_bytes_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let tar = tar_of(&ferry_testkit::noise(7, 100_000));
        let spool_dir = dir.path().join("spool");
        for packing in [Packing::Tar, Packing::Zstd, Packing::Gzip] {
            let packed = match packing {
                Packing::Tar => tar.clone(),
                Packing::Gzip => gzip(&tar),
                Packing::Zstd => zstd(&tar),
            };
            let limit = tar.len() as u64 - 1;
            let e = spool(&[], &packed[..], packing, &place(dir.path(), limit), true).unwrap_err();
            assert!(e.contains("more than the spool's bound"), "{e}");
            assert!(e.contains("standard input"), "{e}");
            assert_eq!(std::fs::read_dir(&spool_dir).unwrap().count(), 0);
            // Exactly the bound is enough.
            let limit = tar.len() as u64;
            spool(&[], &packed[..], packing, &place(dir.path(), limit), true).unwrap();
        }
        let mut broken = zstd(&tar);
        let n = broken.len();
        broken.truncate(n / 2);
        let e = spool(
            &[],
            &broken[..],
            Packing::Zstd,
            &place(dir.path(), 1 << 30),
            false,
        )
        .unwrap_err();
        assert!(e.contains("not valid zstd"), "{e}");
        let mut broken = gzip(&tar);
        broken.truncate(n / 2);
        let e = spool(
            &[],
            &broken[..],
            Packing::Gzip,
            &place(dir.path(), 1 << 30),
            false,
        )
        .unwrap_err();
        assert!(e.contains("not valid gzip"), "{e}");
        assert_eq!(std::fs::read_dir(&spool_dir).unwrap().count(), 0);
    }

    #[test]
    fn a_spool_removes_only_ferrys_spool_files_no_process_holds() {
        let dir = tempfile::tempdir().unwrap();
        let place = place(dir.path(), 1 << 30);
        std::fs::create_dir_all(&place.dir).unwrap();
        // A killed import's spool: named so, held by nobody.
        let left = place.dir.join("ferry-spool-left.tar");
        std::fs::write(&left, b"half a tar").unwrap();
        // A live one's: held (the lock is per open file, so this handle stands for another
        // process), and a file that is not ferry's.
        let live = place.dir.join("ferry-spool-live.tar");
        std::fs::write(&live, b"being written").unwrap();
        let holder = std::fs::File::open(&live).unwrap();
        holder.try_lock().unwrap();
        let other = place.dir.join("notes.tar");
        std::fs::write(&other, b"mine").unwrap();
        let tar = tar_of(b"{}");
        let (spool_file, _) = spool(&[], &tar[..], Packing::Tar, &place, true).unwrap();
        assert!(!left.exists(), "the killed import's spool is swept");
        assert!(
            live.exists() && other.exists(),
            "a held spool and another file stay"
        );
        // This spool is held while it lives: a second spool leaves it.
        let (second, _) = spool(&[], &tar[..], Packing::Tar, &place, true).unwrap();
        assert!(spool_file.exists() && second.exists());
        drop(holder);
        drop((spool_file, second));
        let (third, _) = spool(&[], &tar[..], Packing::Tar, &place, true).unwrap();
        assert!(!live.exists(), "let go, it is swept");
        drop(third);
        let names: Vec<_> = std::fs::read_dir(&place.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["notes.tar"]);
    }
}
