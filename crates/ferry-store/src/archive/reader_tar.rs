//! One pass over a tar file's headers (each entry's name, offset and size; hostile entries
//! refused naming the entry), then reads that seek to an entry and stream its bytes, hashed.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::Stream;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use ferry_distribution::error::ErrorKind;
use ferry_distribution::retry::Failure;
use ferry_distribution::{Digest, digest::Digester};

/// A GNU long name or a PAX extended header larger than this is refused.
const META_LIMIT: u64 = 1024 * 1024;
/// At most this many links are followed from one name (`a -> b -> c` is two).
pub const MAX_LINKS: usize = 4;

/// Where an entry's bytes are in the tar file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TarEntry {
    /// The offset of its first byte.
    pub offset: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// Whether links are entries to refuse (an OCI archive) or to follow inside the archive
/// (skopeo's docker-archive links `<id>/layer.tar -> ../<hex>.tar`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    Refuse,
    WithinArchive,
}

/// Every regular file of a tar, by its cleaned name; a followed link is listed under its own
/// name with its target's bytes.
#[derive(Debug)]
pub struct TarIndex {
    pub path: PathBuf,
    entries: HashMap<String, TarEntry>,
}

impl TarIndex {
    /// An index of no entries (a bundle streamed from a pipe, known from its head).
    pub(crate) fn empty(path: PathBuf) -> Self {
        TarIndex {
            path,
            entries: HashMap::new(),
        }
    }

    /// The entry named `name`, if the tar holds one.
    pub fn get(&self, name: &str) -> Option<TarEntry> {
        self.entries.get(name).copied()
    }

    /// Every entry's name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }
}

/// Reads the headers of the tar at `path` (a blocking call: run it on a blocking thread),
/// seeking past every body. Any entry that is not a plain file, a directory or (with
/// [`Links::WithinArchive`]) a link inside the archive is refused, as are unsafe or duplicate
/// names, a size past the end of the file and a tar without its end blocks.
pub fn index(path: &Path, links: Links) -> Result<TarIndex, String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("opening the file: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("reading the file's size: {e}"))?
        .len();
    let mut entries: HashMap<String, TarEntry> = HashMap::new();
    let mut dirs: std::collections::HashSet<String> = Default::default();
    // name -> target, so a duplicate check and each step of a chain is one lookup.
    let mut found_links: HashMap<String, String> = HashMap::new();
    // The links in archive order, so an error names the first broken one.
    let mut link_order: Vec<String> = Vec::new();
    let mut pos = 0u64;
    // What GNU long-name entries and PAX headers say of the next entry.
    let mut long_name: Option<String> = None;
    let mut long_link: Option<String> = None;
    let mut pax_size: Option<u64> = None;
    let mut block = [0u8; 512];
    loop {
        if pos + 512 > len {
            return Err(format!(
                "the archive ends at byte {len} without its end-of-archive blocks: it is \
                 truncated (a copy cut off?)"
            ));
        }
        file.seek(SeekFrom::Start(pos))
            .and_then(|_| file.read_exact(&mut block))
            .map_err(|e| format!("reading the header at byte {pos}: {e}"))?;
        if block.iter().all(|b| *b == 0) {
            break;
        }
        let header = tar::Header::from_byte_slice(&block);
        check_sum(&block).map_err(|e| format!("the header at byte {pos}: {e}"))?;
        let raw_name = match long_name.take() {
            Some(n) => n,
            None => utf8(&header.path_bytes(), pos)?,
        };
        let size = match pax_size.take() {
            Some(s) => s,
            None => header.entry_size().map_err(|e| {
                format!(
                    "entry {raw_name_q}: its size does not parse: {e}",
                    raw_name_q = crate::quoted(&raw_name)
                )
            })?,
        };
        let body = pos + 512;
        let end = body.checked_add(size).filter(|end| *end <= len);
        let Some(end) = end else {
            return Err(format!(
                "entry {raw_name_q} declares {size} bytes at byte {body}, past the end of the \
                 file ({len} bytes): the archive is truncated",
                raw_name_q = crate::quoted(&raw_name)
            ));
        };
        let kind = header.entry_type();
        let next = body + size.div_ceil(512) * 512;
        match kind {
            tar::EntryType::GNULongName | tar::EntryType::GNULongLink => {
                let text = read_meta(&mut file, body, size, &raw_name)?;
                let text = text.trim_end_matches('\0').to_owned();
                if kind == tar::EntryType::GNULongName {
                    long_name = Some(text);
                } else {
                    long_link = Some(text);
                }
            }
            tar::EntryType::XHeader => {
                let text = read_meta(&mut file, body, size, &raw_name)?;
                for (key, value) in pax_records(&text).map_err(|e| {
                    format!(
                        "entry {raw_name_q}: a PAX header {e}",
                        raw_name_q = crate::quoted(&raw_name)
                    )
                })? {
                    match key {
                        "path" => long_name = Some(value.to_owned()),
                        "linkpath" => long_link = Some(value.to_owned()),
                        "size" => {
                            pax_size = Some(value.parse().map_err(|_| {
                                format!(
                                    "entry {raw_name_q}: a PAX size {value_q} does not parse",
                                    raw_name_q = crate::quoted(&raw_name),
                                    value_q = crate::quoted(value)
                                )
                            })?)
                        }
                        _ => {}
                    }
                }
            }
            tar::EntryType::XGlobalHeader => {}
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let name = clean_name(&raw_name)?;
                if dirs.contains(&name)
                    || entries
                        .insert(name.clone(), TarEntry { offset: body, size })
                        .is_some()
                    || found_links.contains_key(&name)
                {
                    return Err(format!(
                        "entry {name_q} appears twice in the archive",
                        name_q = crate::quoted(&name)
                    ));
                }
            }
            tar::EntryType::Directory => {
                let name = clean_name(&raw_name)?;
                if entries.contains_key(&name) || found_links.contains_key(&name) {
                    return Err(format!(
                        "entry {name_q} appears twice in the archive",
                        name_q = crate::quoted(&name)
                    ));
                }
                dirs.insert(name);
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let name = clean_name(&raw_name)?;
                let what = if kind == tar::EntryType::Symlink {
                    "a symbolic link"
                } else {
                    "a hard link"
                };
                if links == Links::Refuse {
                    return Err(format!(
                        "entry {name_q} is {what}: an OCI archive holds only files",
                        name_q = crate::quoted(&name)
                    ));
                }
                let target = match long_link.take() {
                    Some(t) => t,
                    None => utf8(&header.link_name_bytes().unwrap_or_default(), pos)?,
                };
                let target =
                    link_target(&name, &target, kind == tar::EntryType::Symlink).map_err(|e| {
                        format!(
                            "entry {name_q} is {what} {e}",
                            name_q = crate::quoted(&name)
                        )
                    })?;
                if entries.contains_key(&name)
                    || dirs.contains(&name)
                    || found_links.contains_key(&name)
                {
                    return Err(format!(
                        "entry {name_q} appears twice in the archive",
                        name_q = crate::quoted(&name)
                    ));
                }
                link_order.push(name.clone());
                found_links.insert(name, target);
            }
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                return Err(format!(
                    "entry {raw_name_q} is a device file or FIFO: an archive holds only files",
                    raw_name_q = crate::quoted(&raw_name)
                ));
            }
            other => {
                return Err(format!(
                    "entry {raw_name_q} has entry type {:?}, which ferry does not read",
                    other.as_byte() as char,
                    raw_name_q = crate::quoted(&raw_name)
                ));
            }
        }
        let _ = end;
        pos = next;
    }
    let mut resolved = Vec::with_capacity(found_links.len());
    for name in link_order {
        let entry = follow(&name, &found_links[&name], &entries, &found_links)?;
        resolved.push((name, entry));
    }
    entries.extend(resolved);
    Ok(TarIndex {
        path: path.to_path_buf(),
        entries,
    })
}

/// The entry `target` (a link's) names, through at most [`MAX_LINKS`] links.
fn follow(
    name: &str,
    target: &str,
    files: &HashMap<String, TarEntry>,
    links: &HashMap<String, String>,
) -> Result<TarEntry, String> {
    let mut at = target.to_owned();
    for _ in 0..MAX_LINKS {
        if let Some(e) = files.get(&at) {
            return Ok(*e);
        }
        match links.get(&at) {
            Some(next) => at = next.clone(),
            None => {
                return Err(format!(
                    "entry {name_q} links to {at_q}, which the archive does not hold",
                    name_q = crate::quoted(name),
                    at_q = crate::quoted(&at)
                ));
            }
        }
    }
    Err(format!(
        "entry {name_q} is a chain of more than {MAX_LINKS} links",
        name_q = crate::quoted(name)
    ))
}

/// A link's target as an archive path: a symlink's relative to its own directory, a hard
/// link's from the archive's root; never absolute, never above the root.
fn link_target(name: &str, target: &str, symbolic: bool) -> Result<String, String> {
    if target.starts_with('/') {
        return Err(format!(
            "to the absolute path {target_q}, outside the archive",
            target_q = crate::quoted(target)
        ));
    }
    if target.chars().any(char::is_control) || target.to_ascii_lowercase().contains("%2f") {
        return Err(format!(
            "to {target_q}, a name with control characters or %2f",
            target_q = crate::quoted(target)
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    if symbolic {
        parts.extend(name.split('/'));
        parts.pop();
    }
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(format!(
                        "to {target_q}, outside the archive",
                        target_q = crate::quoted(target)
                    ));
                }
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(format!(
            "to {target_q}, the archive's root",
            target_q = crate::quoted(target)
        ));
    }
    Ok(parts.join("/"))
}

/// An entry's name as the archive's own path: `./` and empty components dropped; absolute
/// paths, `..` components, control characters and `%2f` refused.
pub fn clean_name(raw: &str) -> Result<String, String> {
    if raw.chars().any(char::is_control) {
        return Err(format!(
            "entry {raw_q} has a control character in its name",
            raw_q = crate::quoted(raw)
        ));
    }
    if raw.to_ascii_lowercase().contains("%2f") {
        return Err(format!(
            "entry {raw_q} has an encoded slash (%2f) in its name",
            raw_q = crate::quoted(raw)
        ));
    }
    if raw.starts_with('/') {
        return Err(format!(
            "entry {raw_q} is an absolute path",
            raw_q = crate::quoted(raw)
        ));
    }
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "entry {raw_q} has a .. component",
                    raw_q = crate::quoted(raw)
                ));
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(format!(
            "entry {raw_q} names nothing",
            raw_q = crate::quoted(raw)
        ));
    }
    Ok(parts.join("/"))
}

fn utf8(bytes: &[u8], pos: u64) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| {
        format!(
            "the entry at byte {pos} has a name that is not UTF-8 ({:?})",
            String::from_utf8_lossy(bytes)
        )
    })
}

/// A header's checksum: the sum of its bytes with the checksum field read as spaces.
pub(crate) fn check_sum(block: &[u8; 512]) -> Result<(), String> {
    let field = &block[148..156];
    let text = String::from_utf8_lossy(field);
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    let declared = u32::from_str_radix(text, 8).map_err(|_| {
        format!(
            "its checksum {text_q} does not parse",
            text_q = crate::quoted(text)
        )
    })?;
    let sum: u32 = block
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u32::from(*b)
            }
        })
        .sum();
    if sum != declared {
        return Err(format!(
            "its checksum is {declared}, its bytes sum to {sum}: not a tar header"
        ));
    }
    Ok(())
}

fn read_meta(file: &mut std::fs::File, at: u64, size: u64, name: &str) -> Result<String, String> {
    if size > META_LIMIT {
        return Err(format!(
            "entry {name_q}: a long name or PAX header of {size} bytes, over {META_LIMIT}",
            name_q = crate::quoted(name)
        ));
    }
    let mut bytes = vec![0u8; size as usize];
    file.seek(SeekFrom::Start(at))
        .and_then(|_| file.read_exact(&mut bytes))
        .map_err(|e| format!("entry {name_q}: {e}", name_q = crate::quoted(name)))?;
    String::from_utf8(bytes)
        .map_err(|_| format!("entry {name_q}: not UTF-8", name_q = crate::quoted(name)))
}

/// PAX records: `<len> <key>=<value>\n`, each `len` counting the whole record.
pub(crate) fn pax_records(text: &str) -> Result<Vec<(&str, &str)>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (len, _) = rest
            .split_once(' ')
            .ok_or_else(|| "record has no length".to_owned())?;
        let n: usize = len
            .parse()
            .map_err(|_| format!("length {len_q}", len_q = crate::quoted(len)))?;
        // A record holds at least its length, a space, `k=` and a newline: a shorter length
        // (`1 x`, `0 …`) would slice inside itself or never move on.
        if n < len.len() + 4 {
            return Err(format!("record length {n} is shorter than the record"));
        }
        let record = rest
            .get(..n)
            .ok_or_else(|| format!("record of {n} bytes runs past the header"))?;
        rest = &rest[n..];
        let body = record[len.len() + 1..].strip_suffix('\n').ok_or_else(|| {
            format!(
                "record {record_q} does not end in a newline",
                record_q = crate::quoted(record)
            )
        })?;
        let (k, v) = body
            .split_once('=')
            .ok_or_else(|| format!("record {body_q} has no =", body_q = crate::quoted(body)))?;
        out.push((k, v));
    }
    Ok(out)
}

/// Reads a whole (small) entry.
pub async fn read_entry(path: &Path, entry: TarEntry) -> std::io::Result<Vec<u8>> {
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(SeekFrom::Start(entry.offset)).await?;
    let mut bytes = vec![0u8; entry.size as usize];
    file.read_exact(&mut bytes).await?;
    Ok(bytes)
}

/// The bytes of `entry` from `offset` on in chunks of `chunk`, hashed as they are read (the
/// first `offset` bytes too, read and not sent): when the hash of all of them is not `digest`,
/// the stream ends in a `DigestMismatch` in place of its last chunk, so no reader ever gets
/// the whole of a blob that does not match its name. `what` names the entry in errors.
pub async fn verified_stream(
    path: &Path,
    entry: TarEntry,
    digest: &Digest,
    offset: u64,
    chunk: usize,
    what: String,
    hash: bool,
) -> std::io::Result<impl Stream<Item = Result<Bytes, Failure>> + Send + use<>> {
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(SeekFrom::Start(entry.offset)).await?;
    let state = State {
        file: file.take(entry.size),
        digester: Some(digest.digester()),
        expected: digest.clone(),
        left: entry.size,
        skip: offset.min(entry.size),
        buf: vec![0u8; chunk.max(1)],
        what,
        hash,
    };
    Ok(futures::stream::unfold(state, |mut s| async move {
        loop {
            let digester = s.digester.as_mut()?;
            if s.left == 0 {
                return None;
            }
            let want = (s.buf.len() as u64).min(s.left) as usize;
            if let Err(e) = s.file.read_exact(&mut s.buf[..want]).await {
                s.digester = None;
                let message = format!("{}: reading it: {e}", s.what);
                return Some((Err(Failure::Final(ErrorKind::Local(message))), s));
            }
            if s.hash {
                digester.update(&s.buf[..want]);
            }
            s.left -= want as u64;
            let skipped = (s.skip.min(want as u64)) as usize;
            s.skip -= skipped as u64;
            if s.left == 0 {
                let actual = s.digester.take()?.finish();
                if s.hash && actual != s.expected {
                    let kind = ErrorKind::DigestMismatch {
                        expected: s.expected.to_string(),
                        actual: actual.to_string(),
                    };
                    return Some((Err(Failure::Final(kind)), s));
                }
                if skipped < want {
                    let bytes = Bytes::copy_from_slice(&s.buf[skipped..want]);
                    s.digester = Some(Digester::new(s.expected.algorithm()));
                    return Some((Ok(bytes), s));
                }
                return None;
            }
            if skipped < want {
                let bytes = Bytes::copy_from_slice(&s.buf[skipped..want]);
                return Some((Ok(bytes), s));
            }
        }
    }))
}

struct State {
    file: tokio::io::Take<tokio::fs::File>,
    /// `None` once the stream has ended (in an error, or after its check).
    digester: Option<Digester>,
    expected: Digest,
    left: u64,
    skip: u64,
    buf: Vec<u8>,
    what: String,
    /// Whether the bytes are hashed here: false only for a reader that hashes them itself
    /// (the engine's tee), so a blob is hashed once.
    hash: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_and_unsafe_ones_refused() {
        assert_eq!(clean_name("./blobs//sha256/ab").unwrap(), "blobs/sha256/ab");
        for bad in [
            "/etc/passwd",
            "a/../b",
            "..",
            "a\u{7}b",
            "blobs%2Fsha256",
            ".",
        ] {
            assert!(clean_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_symlink_resolves_against_its_directory_and_never_above_the_root() {
        assert_eq!(
            link_target("id/layer.tar", "../ab.tar", true).unwrap(),
            "ab.tar"
        );
        assert_eq!(
            link_target("id/layer.tar", "ab.tar", false).unwrap(),
            "ab.tar"
        );
        assert!(link_target("id/layer.tar", "../../ab.tar", true).is_err());
        assert!(link_target("layer.tar", "/etc/passwd", true).is_err());
    }

    #[test]
    fn pax_records_are_split_by_their_lengths() {
        let text = "30 path=blobs/sha256/abcdefgh\n12 size=100\n";
        assert_eq!(
            pax_records(text).unwrap(),
            [("path", "blobs/sha256/abcdefgh"), ("size", "100")]
        );
        assert!(pax_records("99 path=x\n").is_err());
    }

    /// Records an attacker writes: a length too short for its own digits (`1 x` sliced inside
    /// itself and panicked), a zero length (never moved on), no newline, no `=`.
    #[test]
    fn pax_records_that_lie_about_their_length_are_refused_not_a_panic() {
        for bad in [
            "1 x", "0 x=y\n", "2 x", "4 x=\n", "7 k=vvv", "6 kvv\n", "3 a\n",
        ] {
            assert!(pax_records(bad).is_err(), "{bad:?}");
        }
        assert_eq!(pax_records("6 k=v\n").unwrap(), [("k", "v")]);
    }

    /// A tar of `headers` (name, type, body) followed by the end blocks.
    fn tar_of(entries: &[(&str, tar::EntryType, Vec<u8>)]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        {
            let mut builder = tar::Builder::new(file.as_file_mut());
            for (name, kind, body) in entries {
                let mut header = tar::Header::new_ustar();
                header.set_entry_type(*kind);
                header.set_size(body.len() as u64);
                header.set_path(name).unwrap();
                header.set_cksum();
                builder.append(&header, body.as_slice()).unwrap();
            }
            builder.finish().unwrap();
        }
        file
    }

    #[test]
    fn a_pax_header_with_a_record_of_length_one_is_refused_naming_the_entry() {
        let file = tar_of(&[
            ("pax", tar::EntryType::XHeader, b"1 x".to_vec()),
            ("index.json", tar::EntryType::Regular, b"{}".to_vec()),
        ]);
        let e = index(file.path(), Links::Refuse).unwrap_err();
        assert!(e.contains("\"pax\"") && e.contains("PAX header"), "{e}");
    }

    proptest::proptest! {
        /// Any PAX body, however long or broken, is split or refused: never a panic.
        #[test]
        fn pax_records_never_panic(text in ".{0,64}") {
            let _ = pax_records(&text);
        }

        /// Any bytes as a PAX header's body in a well-formed tar: indexed or refused.
        #[test]
        fn the_indexer_never_panics_on_a_pax_body(body in proptest::collection::vec(proptest::num::u8::ANY, 0..96)) {
            let file = tar_of(&[
                ("pax", tar::EntryType::XHeader, body),
                ("index.json", tar::EntryType::Regular, b"{}".to_vec()),
            ]);
            let _ = index(file.path(), Links::WithinArchive);
        }

        /// Any bytes as the whole file: refused (they are no tar), never a panic.
        #[test]
        fn the_indexer_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2048)) {
            let mut file = tempfile::NamedTempFile::new().unwrap();
            std::io::Write::write_all(&mut file, &bytes).unwrap();
            let _ = index(file.path(), Links::WithinArchive);
        }
    }

    #[test]
    fn links_resolve_through_a_chain_and_a_duplicate_link_is_refused() {
        let link = |name: &str, target: &str| {
            let mut header = tar::Header::new_ustar();
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_size(0);
            header.set_path(name).unwrap();
            header.set_link_name(target).unwrap();
            header.set_cksum();
            header
        };
        let build = |links: &[(&str, &str)]| {
            let mut file = tempfile::NamedTempFile::new().unwrap();
            {
                let mut builder = tar::Builder::new(file.as_file_mut());
                let mut header = tar::Header::new_ustar();
                header.set_size(3);
                header.set_path("ab.tar").unwrap();
                header.set_cksum();
                builder.append(&header, &b"abc"[..]).unwrap();
                for (name, target) in links {
                    builder.append(&link(name, target), &b""[..]).unwrap();
                }
                builder.finish().unwrap();
            }
            file
        };
        let file = build(&[("c", "b"), ("b", "ab.tar"), ("x/layer.tar", "../c")]);
        let tar = index(file.path(), Links::WithinArchive).unwrap();
        let target = tar.get("ab.tar").unwrap();
        assert_eq!(tar.get("x/layer.tar"), Some(target));
        assert_eq!(tar.get("c"), Some(target));
        let file = build(&[("b", "ab.tar"), ("b", "ab.tar")]);
        let e = index(file.path(), Links::WithinArchive).unwrap_err();
        assert!(e.contains("\"b\" appears twice"), "{e}");
        let file = build(&[("b", "gone"), ("c", "also-gone")]);
        let e = index(file.path(), Links::WithinArchive).unwrap_err();
        assert!(
            e.contains("\"b\" links to \"gone\""),
            "the first broken link: {e}"
        );
    }
}
