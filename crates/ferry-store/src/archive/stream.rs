//! A ferry bundle read in one pass (a pipe, a decompressing reader): its head (`index.json`, the
//! record and its signature, the manifests) before any blob, then each blob in turn, hashed.
//!
//! `ferry export` writes its tar head first, so one pass over it knows every image, and which
//! blobs each needs, before the first blob's byte. [`open`] reads the head; anything else (a
//! record written last by an older ferry, skopeo's archives, a docker-archive) comes back as
//! every byte read so far with the rest of the input, to spool as before. Each blob of the body
//! is a `Read` that hashes its bytes: its last read fails when they are not its digest, so no
//! reader ever takes the whole of a wrong blob for its name; a blob left part read is skipped.

use std::collections::HashSet;
use std::io::Read;

use ferry_distribution::{Digest, digest::Digester};

use crate::bundle::{BUNDLE_ENTRY, BUNDLE_ENTRY_LIMIT, SIGNATURE_ENTRY, SIGNATURE_LIMIT};
use crate::layout::INDEX_LIMIT;

/// A manifest in the head larger than this is not ferry's: the stream is read as foreign.
const MANIFEST_LIMIT: u64 = 4 * 1024 * 1024;
/// A GNU long name or PAX header larger than this is refused.
const META_LIMIT: u64 = 1024 * 1024;
/// The most head bytes kept to hand back when the stream is not a head-first bundle.
pub const HEAD_LIMIT: u64 = 256 * 1024 * 1024;

/// What a head-first bundle says before its first blob.
#[derive(Debug, Default)]
pub struct Head {
    /// `index.json`'s bytes.
    pub index: Vec<u8>,
    /// `ferry-bundle.json`'s bytes (what a signature is over).
    pub record: Vec<u8>,
    /// `ferry-bundle.json.sig`'s text, when signed.
    pub signature: Option<Vec<u8>>,
    /// Every manifest of the head, checked against its digest, in tar order.
    pub manifests: Vec<(Digest, Vec<u8>)>,
}

/// What the first entries of a stream turned out to be.
pub enum Opened<R: Read> {
    /// A head-first ferry bundle: its head, and its body at the first blob.
    Bundle(Head, Body<R>),
    /// Anything else: every byte read so far, then the rest of the input, to spool.
    Foreign(Vec<u8>, R),
}

/// The input, counting its bytes and (while the head is read) keeping them.
struct Input<R> {
    inner: R,
    at: u64,
    kept: Option<Vec<u8>>,
}

impl<R: Read> Input<R> {
    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), String> {
        self.inner
            .read_exact(buf)
            .map_err(|e| format!("reading the tar at byte {}: {e}", self.at))?;
        self.at += buf.len() as u64;
        if let Some(kept) = self.kept.as_mut() {
            kept.extend_from_slice(buf);
        }
        Ok(())
    }

    fn read_body(&mut self, size: u64) -> Result<Vec<u8>, String> {
        let mut bytes = vec![0u8; size as usize];
        self.read_exact(&mut bytes)?;
        self.skip(pad(size))?;
        Ok(bytes)
    }

    fn skip(&mut self, mut n: u64) -> Result<(), String> {
        let mut buf = [0u8; 8192];
        while n > 0 {
            let take = n.min(buf.len() as u64) as usize;
            self.read_exact(&mut buf[..take])?;
            n -= take as u64;
        }
        Ok(())
    }
}

fn pad(size: u64) -> u64 {
    (512 - size % 512) % 512
}

/// One entry's header, after any GNU long name or PAX header before it.
enum Header {
    File {
        name: String,
        size: u64,
    },
    Dir,
    /// A link or device: never in a ferry bundle.
    Other(String),
    End,
}

fn next_header<R: Read>(input: &mut Input<R>) -> Result<Header, String> {
    let mut long_name: Option<String> = None;
    let mut pax_size: Option<u64> = None;
    loop {
        let pos = input.at;
        let mut block = [0u8; 512];
        input.read_exact(&mut block)?;
        if block.iter().all(|b| *b == 0) {
            return Ok(Header::End);
        }
        super::reader_tar::check_sum(&block)
            .map_err(|e| format!("the header at byte {pos}: {e}"))?;
        let header = tar::Header::from_byte_slice(&block);
        let raw = match long_name.take() {
            Some(n) => n,
            None => String::from_utf8(header.path_bytes().to_vec())
                .map_err(|_| format!("the entry at byte {pos} has a name that is not UTF-8"))?,
        };
        let size = match pax_size.take() {
            Some(s) => s,
            None => header
                .entry_size()
                .map_err(|e| format!("the entry at byte {pos}: its size does not parse: {e}"))?,
        };
        let meta = |input: &mut Input<R>| -> Result<String, String> {
            if size > META_LIMIT {
                return Err(format!(
                    "the entry at byte {pos}: a long name or PAX header of {size} bytes"
                ));
            }
            let bytes = input.read_body(size)?;
            String::from_utf8(bytes).map_err(|_| format!("the entry at byte {pos}: not UTF-8"))
        };
        match header.entry_type() {
            tar::EntryType::GNULongName => {
                long_name = Some(meta(input)?.trim_end_matches('\0').to_owned());
            }
            tar::EntryType::XHeader => {
                let text = meta(input)?;
                for (key, value) in super::reader_tar::pax_records(&text)
                    .map_err(|e| format!("the entry at byte {pos}: a PAX header {e}"))?
                {
                    match key {
                        "path" => long_name = Some(value.to_owned()),
                        "size" => {
                            pax_size = Some(value.parse().map_err(|_| {
                                format!("the entry at byte {pos}: a PAX size that does not parse")
                            })?)
                        }
                        _ => {}
                    }
                }
            }
            tar::EntryType::XGlobalHeader | tar::EntryType::GNULongLink => {
                meta(input)?;
            }
            tar::EntryType::Directory => {
                input.skip(size + pad(size))?;
                return Ok(Header::Dir);
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let name = super::reader_tar::clean_name(&raw)?;
                return Ok(Header::File { name, size });
            }
            _ => return Ok(Header::Other(raw)),
        }
    }
}

/// `blobs/<alg>/<hex>` as a digest.
fn blob_digest(name: &str) -> Option<Digest> {
    let rest = name.strip_prefix("blobs/")?;
    let (alg, hex) = rest.split_once('/')?;
    Digest::parse(&format!("{alg}:{hex}")).ok()
}

/// The manifests `bytes` (an index) names.
fn children(bytes: &[u8]) -> Vec<Digest> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return Vec::new();
    };
    let Some(list) = value.get("manifests").and_then(|m| m.as_array()) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|m| m.get("digest")?.as_str())
        .filter_map(|d| Digest::parse(d).ok())
        .collect()
}

/// Reads the head of `input`: a head-first ferry bundle (`index.json` and `ferry-bundle.json`
/// before any blob, then the manifests `index.json` reaches) comes back with its body at the
/// first other blob; anything else, or a head past [`HEAD_LIMIT`], as every byte read so far
/// with the rest of `input`. Errors are a tar that is broken where it was read.
pub fn open<R: Read>(input: R) -> Result<Opened<R>, String> {
    let mut input = Input {
        inner: input,
        at: 0,
        kept: Some(Vec::new()),
    };
    let mut head = Head::default();
    let mut have_index = false;
    let mut have_record = false;
    // Manifests the head is expected to hold: index.json's, then those an index names.
    let mut expected: HashSet<Digest> = HashSet::new();
    let foreign = |input: Input<R>| {
        let kept = input.kept.unwrap_or_default();
        Ok(Opened::Foreign(kept, input.inner))
    };
    loop {
        if input.at > HEAD_LIMIT {
            return foreign(input);
        }
        let (name, size) = match next_header(&mut input)? {
            Header::Dir => continue,
            Header::Other(_) => return foreign(input),
            Header::End => {
                if have_index && have_record {
                    input.kept = None;
                    return Ok(Opened::Bundle(head, Body::ended(input)));
                }
                return foreign(input);
            }
            Header::File { name, size } => (name, size),
        };
        let small = |limit: u64| size <= limit;
        match name.as_str() {
            "oci-layout" if small(1024) => {
                input.read_body(size)?;
            }
            "index.json" if small(INDEX_LIMIT) && !have_index => {
                head.index = input.read_body(size)?;
                have_index = true;
                expected.extend(children(&head.index));
            }
            BUNDLE_ENTRY if small(BUNDLE_ENTRY_LIMIT) && !have_record => {
                head.record = input.read_body(size)?;
                have_record = true;
            }
            SIGNATURE_ENTRY if small(SIGNATURE_LIMIT) && have_record => {
                head.signature = Some(input.read_body(size)?);
            }
            _ => {
                let Some(digest) = blob_digest(&name) else {
                    return foreign(input);
                };
                if !(have_index && have_record) {
                    return foreign(input);
                }
                if expected.remove(&digest) && small(MANIFEST_LIMIT) {
                    let bytes = input.read_body(size)?;
                    if Digest::of_bytes(digest.algorithm(), &bytes) != digest {
                        return Err(format!(
                            "manifest {digest} in the bundle's head: its bytes hash to something else"
                        ));
                    }
                    expected.extend(children(&bytes));
                    head.manifests.push((digest, bytes));
                    continue;
                }
                input.kept = None;
                let body = Body {
                    input,
                    pending: Some((digest, size)),
                    skip: 0,
                    ended: false,
                };
                return Ok(Opened::Bundle(head, body));
            }
        }
    }
}

/// The body of a head-first bundle: its blobs in tar order.
pub struct Body<R> {
    input: Input<R>,
    /// The header read last, not yet handed out.
    pending: Option<(Digest, u64)>,
    /// Bytes of the entry handed out last not yet read, with its padding.
    skip: u64,
    ended: bool,
}

impl<R: Read> Body<R> {
    fn ended(input: Input<R>) -> Self {
        Body {
            input,
            pending: None,
            skip: 0,
            ended: true,
        }
    }

    /// How many bytes of the tar were read so far.
    pub fn position(&self) -> u64 {
        self.input.at
    }

    /// The next blob (what was left of the one before skipped), or `None` at the tar's end.
    /// An entry that is not a blob is an error naming it.
    pub fn next_blob(&mut self) -> Result<Option<StreamBlob<'_, R>>, String> {
        self.input.skip(std::mem::take(&mut self.skip))?;
        let (digest, size) = match self.pending.take() {
            Some(p) => p,
            None => loop {
                if self.ended {
                    return Ok(None);
                }
                match next_header(&mut self.input)? {
                    Header::Dir => continue,
                    Header::End => {
                        self.ended = true;
                        return Ok(None);
                    }
                    Header::Other(name) => {
                        return Err(format!(
                            "entry {} is a link or device: not in a ferry bundle",
                            crate::quoted(&name)
                        ));
                    }
                    Header::File { name, size } => match blob_digest(&name) {
                        Some(d) => break (d, size),
                        None => {
                            return Err(format!(
                                "entry {} after the bundle's head is not a blob",
                                crate::quoted(&name)
                            ));
                        }
                    },
                }
            },
        };
        self.skip = size + pad(size);
        Ok(Some(StreamBlob {
            digester: digest.digester(),
            digest,
            size,
            left: size,
            body: self,
        }))
    }
}

/// One blob of the body as it streams: its bytes hashed; the read that ends it fails (an
/// `InvalidData` error naming both digests) when they are not its digest.
pub struct StreamBlob<'a, R> {
    body: &'a mut Body<R>,
    digest: Digest,
    size: u64,
    left: u64,
    digester: Digester,
}

impl<R> StreamBlob<'_, R> {
    /// The digest its entry name gives.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// Its size as the tar header says.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl<R: Read> Read for StreamBlob<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            let digester = std::mem::replace(&mut self.digester, self.digest.digester());
            if digester.bytes_seen() == self.size {
                let actual = digester.finish();
                if actual != self.digest {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("blob {}: its bytes hash to {actual}", self.digest),
                    ));
                }
            }
            return Ok(0);
        }
        let take = (buf.len() as u64).min(self.left) as usize;
        let n = self.body.input.inner.read(&mut buf[..take])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "blob {}: the tar ends {} bytes into its {} bytes",
                    self.digest,
                    self.size - self.left,
                    self.size
                ),
            ));
        }
        self.digester.update(&buf[..n]);
        self.body.input.at += n as u64;
        self.left -= n as u64;
        self.body.skip -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
