//! Standard input as an archive: a head-first ferry bundle known from its head alone (its body
//! kept for `ferry import` to stream once, blob by blob), anything else spooled as before.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ferry_distribution::Digest;
use ferry_distribution::ops::Manifest;

use super::input::{self, Prepared, SpoolPlace};
use super::stream::{self, Body, Head};
use tokio::sync::OnceCell;

use super::reader::{Content, Indexed, RawRecord};
use super::reader_tar::TarIndex;
use crate::bundle::check::{Carried, parse_record};
use crate::bundle::{BUNDLE_ENTRY, BundleRecord};
use crate::layout::reader::media_type_of;
use crate::layout::{IndexEntry, parse_index};

/// The body of a bundle read from a pipe: its blobs in tar order, each hashed while read.
pub type StreamBody = Body<Box<dyn Read + Send>>;

/// What a streamed bundle's reader keeps besides its head: the blobs its record says the body
/// carries (with their sizes), and the body itself until the import takes it.
#[derive(Default)]
pub struct Streamed {
    /// Every digest the record says the tar carries, with its size (`None`: not given).
    pub(super) carried: HashMap<Digest, Option<u64>>,
    pub(super) body: Mutex<Option<StreamBody>>,
    /// Set once the body was read: its blobs can no longer be read from the archive.
    pub(super) drained: AtomicBool,
}

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streamed")
            .field("carried", &self.carried.len())
            .field("drained", &self.drained.load(Ordering::Relaxed))
            .finish()
    }
}

impl Streamed {
    /// Whether the body still holds `digest` (not yet drained).
    pub(super) fn carries(&self, digest: &Digest) -> bool {
        !self.drained.load(Ordering::Relaxed) && self.carried.contains_key(digest)
    }
}

/// Standard input, read as far as its head: a head-first bundle, or a spool file of the rest.
pub(super) enum FromStdin {
    Bundle(Box<Head>, StreamBody),
    Spooled(Prepared),
}

/// Reads standard input's first bytes (gzip and zstd decoded) and a head-first bundle's head;
/// anything else is spooled under `place` with the bytes read so far. Blocking.
pub(super) fn open_stdin(place: &SpoolPlace) -> Result<FromStdin, String> {
    let mut stdin = std::io::stdin();
    let mut head = Vec::with_capacity(512);
    (&mut stdin)
        .take(512)
        .read_to_end(&mut head)
        .map_err(|e| format!("reading standard input: {e}"))?;
    let packing = input::sniff(&head).map_err(|e| format!("standard input: {e}"))?;
    let decoded = input::decoded(head, stdin, packing);
    let opened = stream::open(decoded).map_err(|e| match packing {
        // The bytes stopped decoding (or ended) under the head: said as a spool would say it.
        input::Packing::Gzip | input::Packing::Zstd if e.starts_with("reading the tar") => {
            format!("standard input is not valid {}: {e}", packing.name())
        }
        _ => format!("standard input: {e}"),
    })?;
    match opened {
        stream::Opened::Bundle(head, body) => Ok(FromStdin::Bundle(Box::new(head), body)),
        stream::Opened::Foreign(kept, rest) => {
            let (file, spooled) = input::spool(&kept[..], rest, input::Packing::Tar, place, true)?;
            Ok(FromStdin::Spooled(Prepared {
                path: file.to_path_buf(),
                spool: Some((file, spooled)),
            }))
        }
    }
}

/// What standard input or a file turned out to be before indexing.
pub(super) enum Opened {
    Tar(TarIndex, Option<(input::SpoolFile, input::Spooled)>),
    Stream(Box<Head>, StreamBody),
}

/// A head-first bundle read from standard input, indexed from its head: its manifests
/// supplied, its blobs carried by the body `body` until `ferry import` streams it.
pub(super) fn indexed(head: &Head, body: StreamBody) -> Result<Arc<Indexed>, String> {
    let (index, record, streamed, manifests) = content(head)?;
    *streamed.body.lock().unwrap_or_else(|p| p.into_inner()) = Some(body);
    let supplied = manifests
        .into_iter()
        .map(|m| (m.digest.clone(), m))
        .collect();
    let raw = RawRecord {
        bytes: head.record.clone(),
        signature: head.signature.clone(),
    };
    Ok(Arc::new(Indexed {
        tar: TarIndex::empty(PathBuf::from(input::STDIN)),
        content: Content::Oci {
            index,
            record: Some(Box::new(record)),
            raw: Some(raw),
        },
        referrers: OnceCell::new(),
        supplied: Mutex::new(supplied),
        admitted: Mutex::default(),
        spool: None,
        streamed: Some(streamed),
    }))
}

/// The head's `index.json` and record, held against each other as an indexed archive's are
/// (the record's digest, `index.json`'s digest, every image), with the blobs the record says
/// the body carries taken as carried: each is held against the record when it streams.
fn content(
    head: &Head,
) -> Result<(Vec<IndexEntry>, BundleRecord, Streamed, Vec<Manifest>), String> {
    let index = parse_index(&head.index, "entry \"index.json\"")?;
    let record = parse_record(&head.record_carried()?, &head.record, &head.index)?;
    let carried: Carried = record
        .carried
        .iter()
        .map(|d| (d.clone(), record.sizes.get(d).copied().unwrap_or(0)))
        .collect();
    let mut sized = record.clone();
    if sized.sizes.is_empty() {
        // No sizes to hold the body against: the streamed sizes are checked by hashing alone.
        sized.sizes = carried.clone();
    }
    crate::bundle::check::against_tar(&sized, &index, &head.index, &carried)?;
    let mut streamed = Streamed::default();
    for d in &record.carried {
        let digest = Digest::parse(d)
            .map_err(|e| format!("entry {BUNDLE_ENTRY:?} lists {}: {e}", crate::quoted(d)))?;
        streamed
            .carried
            .insert(digest, record.sizes.get(d).copied());
    }
    let mut manifests = Vec::new();
    for (digest, bytes) in &head.manifests {
        if !streamed.carried.contains_key(digest) {
            return Err(format!(
                "the tar carries {digest}, which the record does not list"
            ));
        }
        if let Some(Some(size)) = streamed.carried.get(digest)
            && *size != bytes.len() as u64
        {
            return Err(format!(
                "{digest} is {} bytes, the record says {size}",
                bytes.len()
            ));
        }
        let media_type = media_type_of(bytes)
            .unwrap_or_else(|| "application/vnd.oci.image.manifest.v1+json".into());
        manifests.push(Manifest {
            bytes: Bytes::from(bytes.clone()),
            media_type,
            digest: digest.clone(),
        });
    }
    Ok((index, record, streamed, manifests))
}

impl Head {
    /// The `carried` list of the head's record, as its digest is computed over.
    fn record_carried(&self) -> Result<Vec<String>, String> {
        #[derive(serde::Deserialize)]
        struct Carried {
            #[serde(default)]
            carried: Vec<String>,
        }
        serde_json::from_slice::<Carried>(&self.record)
            .map(|c| c.carried)
            .map_err(|e| {
                format!(
                    "entry {BUNDLE_ENTRY:?} does not parse: {}",
                    crate::complaint(e)
                )
            })
    }
}
