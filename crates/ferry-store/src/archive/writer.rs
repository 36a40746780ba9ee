//! Writing an OCI image layout as one tar, head first: `oci-layout`, `index.json`, (a bundle)
//! `ferry-bundle.json` and its signature, the manifests (roots first), then the blobs.
//!
//! Blobs stream, as the engine hands them in, into the tar's body (a file beside it, see
//! `writer_tar`), one entry at a time: a blob's writer holds the stream from its header to its
//! last byte (other blobs for the archive wait); manifests are kept for the head; a digest
//! already in the tar, or in a base bundle's `content` (`--since`), is never written again.
//! A blob whose bytes fail after its header is out (a digest mismatch, a source that gives up
//! part way) cannot be taken back out of a stream: the archive is then cut, every later write
//! and the finish fail with that error, and `PATH.partial` is removed. A failure before the
//! header (the source never produced a byte) fails that blob only.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::future::BoxFuture;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Digest, Operation};

pub use super::writer_tar::Output;
use super::writer_tar::Sink;
use crate::StoreError;
use crate::bundle::{
    BUNDLE_ENTRY, BUNDLE_FORMAT, BundleBase, BundleImage, BundleMapping, BundleRecord,
    RecordSigner, SIGNATURE_ENTRY, bundle_digest, sha256_of,
};
use crate::store::{BlobSink, ImageIn, SinkError, StoreKey, StoreWrite};

/// How the archive names its images in `index.json` (`org.opencontainers.image.ref.name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// As skopeo's `oci-archive:PATH[:REF]` does: the `REF` given with the target, else the tag.
    Tag,
    /// A bundle (`ferry export`): the full target reference (`registry.internal/mirror/alpine:3.20`).
    FullReference,
}

/// What a bundle records besides its images: set by `ferry export` before the run.
#[derive(Debug, Clone, Default)]
pub struct BundleSpec {
    /// The config's mappings, without credentials.
    pub mappings: Vec<BundleMapping>,
    /// The bundles `--since` named.
    pub bases: Vec<BundleBase>,
    /// Every digest their `content` lists: left out of this tar.
    pub base_content: HashSet<String>,
    /// When the export ran (RFC 3339, UTC).
    pub created: String,
    /// Signs the record (`--sign-key`): the signature goes in the tar after the record and
    /// beside a file bundle as `BUNDLE.json.sig`.
    pub signer: Option<RecordSigner>,
}

/// A streaming tar writer of an OCI image layout, shared by every task of a run that writes
/// into the same archive (cheap to clone; clones share).
#[derive(Clone)]
pub struct ArchiveWriter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ArchiveWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ArchiveWriter({})", self.name())
    }
}

struct Inner {
    output: Output,
    naming: Naming,
    bundle: Option<BundleSpec>,
    /// The tar stream, opened on the first write; `None` before it and after the finish.
    sink: Arc<tokio::sync::Mutex<Option<Sink>>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Digests whose entry is complete in the tar, with their sizes.
    written: BTreeMap<String, u64>,
    /// `index.json`'s entries by `ref.name` (untagged ones by digest), in the order put.
    index: Vec<(Option<String>, serde_json::Value)>,
    images: Vec<BundleImage>,
    /// Every digest an image put here needs.
    content: BTreeSet<String>,
    /// The manifests written, in order, with their entry names: the head's, at the finish.
    manifests: Vec<(String, Bytes)>,
    /// The failure that cut the tar, once there is one.
    cut: Option<String>,
    finished: bool,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The tar entry name of a blob: `blobs/<alg>/<hex>`.
fn blob_entry(digest: &Digest) -> String {
    format!("blobs/{}/{}", digest.algorithm().name(), digest.hex())
}

impl ArchiveWriter {
    /// A writer of the archive at `output`; nothing is opened until the first write.
    pub fn new(output: Output, naming: Naming, bundle: Option<BundleSpec>) -> Self {
        ArchiveWriter {
            inner: Arc::new(Inner {
                output,
                naming,
                bundle,
                sink: Arc::new(tokio::sync::Mutex::new(None)),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Where it writes.
    pub fn output(&self) -> &Output {
        &self.inner.output
    }

    /// `oci-archive:<path>`, as reports name it.
    pub fn name(&self) -> String {
        format!("oci-archive:{}", self.inner.output.display())
    }

    /// How it names images.
    pub fn naming(&self) -> Naming {
        self.inner.naming
    }

    /// An error about this archive.
    pub fn error(&self, operation: Operation, kind: ErrorKind) -> Error {
        Error::new(self.name(), None, operation, kind)
    }

    /// Why nothing more goes into the tar: cut by an earlier failure, or finished.
    fn closed(&self) -> Option<String> {
        let state = locked(&self.inner.state);
        if let Some(why) = &state.cut {
            return Some(format!("the archive was cut by an earlier failure: {why}"));
        }
        state
            .finished
            .then(|| "the archive is already finished".to_owned())
    }

    /// A write into the archive that failed, as the archive's error.
    fn store_error(&self, what: &'static str, io: std::io::Error) -> StoreError {
        StoreError::archive(self.inner.output.display(), what, io)
    }

    fn mark_cut(&self, why: String) {
        let mut state = locked(&self.inner.state);
        if state.cut.is_none() {
            tracing::warn!(archive = %self.name(), error = %why, "the archive is cut: the export fails");
            state.cut = Some(why);
        }
    }

    /// Whether the archive has `digest` in it, or a base bundle carries it (left out here).
    pub fn holds(&self, digest: &Digest) -> bool {
        let d = digest.to_string();
        locked(&self.inner.state).written.contains_key(&d) || self.in_base(&d)
    }

    fn in_base(&self, digest: &str) -> bool {
        self.inner
            .bundle
            .as_ref()
            .is_some_and(|b| b.base_content.contains(digest))
    }

    /// Takes the stream for one blob of `size` bytes and writes its header; `None` when the
    /// archive holds it already (another task wrote it first).
    pub async fn begin_blob(
        &self,
        digest: &Digest,
        size: u64,
    ) -> Result<Option<BlobEntry>, StoreError> {
        let mut sink = Arc::clone(&self.inner.sink).lock_owned().await;
        if let Some(why) = self.closed() {
            return Err(self.store_error("blob", std::io::Error::other(why)));
        }
        if self.holds(digest) {
            return Ok(None);
        }
        let name = blob_entry(digest);
        let io = |e: std::io::Error| {
            self.store_error(
                "blob",
                std::io::Error::new(e.kind(), format!("{name}: {e}")),
            )
        };
        if sink.is_none() {
            *sink = Some(Sink::open(&self.inner.output).map_err(io)?);
        }
        let Some(s) = sink.as_mut() else {
            return Err(io(std::io::Error::other("not open")));
        };
        if let Err(e) = s.file_header(&name, size).await {
            self.mark_cut(format!("{name}: {e}"));
            return Err(io(e));
        }
        Ok(Some(BlobEntry {
            writer: self.clone(),
            sink,
            digest: digest.clone(),
            size,
            written: 0,
            digester: digest.digester(),
            from_tee: true,
            done: false,
        }))
    }

    /// Takes one manifest for the tar's head (written at the finish, after the record); the
    /// bytes it adds (0 when held already).
    pub async fn write_manifest(&self, m: &Manifest) -> Result<u64, StoreError> {
        let size = m.bytes.len() as u64;
        let mut sink = self.inner.sink.lock().await;
        if let Some(why) = self.closed() {
            return Err(self.store_error("manifest", std::io::Error::other(why)));
        }
        if self.holds(&m.digest) {
            return Ok(0);
        }
        let actual = Digest::of_bytes(m.digest.algorithm(), &m.bytes);
        if actual != m.digest {
            let kind = ErrorKind::DigestMismatch {
                expected: m.digest.to_string(),
                actual: actual.to_string(),
            };
            return Err(self.store_error("manifest", std::io::Error::other(kind.to_string())));
        }
        if sink.is_none() {
            let io = |e: std::io::Error| self.store_error("manifest", e);
            *sink = Some(Sink::open(&self.inner.output).map_err(io)?);
        }
        let mut state = locked(&self.inner.state);
        state.written.insert(m.digest.to_string(), size);
        state
            .manifests
            .push((blob_entry(&m.digest), m.bytes.clone()));
        Ok(size)
    }

    /// Puts an image's entry in `index.json` (replacing the one with the same `ref.name`) when
    /// its root (the last manifest, written before) is in this tar, and its record; `ref_name`
    /// names it there.
    pub fn point_index(&self, image: &ImageIn<'_>, ref_name: Option<String>) {
        let Some(root) = image.manifests.last() else {
            return;
        };
        let root_digest = root.digest.to_string();
        let mut state = locked(&self.inner.state);
        state
            .content
            .extend(image.manifests.iter().map(|m| m.digest.to_string()));
        state
            .content
            .extend(image.blobs.iter().map(|d| d.to_string()));
        // An image whose root a base carries is in the record (`ferry import` tags it from
        // there) but not in `index.json`: every entry of it names a manifest in this tar.
        if state.written.contains_key(&root_digest) {
            let mut entry = serde_json::json!({
                "mediaType": root.media_type,
                "digest": root_digest,
                "size": root.bytes.len(),
            });
            if let Some(r) = &ref_name {
                entry["annotations"] = serde_json::json!({ crate::layout::REF_NAME: r });
            }
            let key = ref_name.clone();
            state.index.retain(|(k, e)| match (&key, k) {
                (Some(a), Some(b)) => a != b,
                (None, None) => e.get("digest") != entry.get("digest"),
                _ => true,
            });
            state.index.push((key, entry));
        }
        if let Some(reference) = ref_name {
            state.images.retain(|i| i.reference != reference);
            state.images.push(BundleImage {
                reference,
                source: image.source.clone(),
                digest: root_digest,
                mapping: image.mapping,
            });
        }
    }

    /// Ends the archive: `oci-layout`, `index.json`, a bundle's `ferry-bundle.json` (and, for a
    /// file, the same record beside it as `PATH.json`), the end blocks; then `PATH.partial` is
    /// renamed over `PATH`. A cut archive (or a failure here) removes `PATH.partial` instead; a
    /// record beside that cannot be written takes `PATH` back out (the export failed).
    pub async fn finish(&self) -> Result<ArchiveReport, StoreError> {
        let mut guard = self.inner.sink.lock().await;
        if let Some(why) = self.closed() {
            if let Some(sink) = guard.take() {
                sink.discard();
            }
            locked(&self.inner.state).finished = true;
            return Err(self.store_error("archive", std::io::Error::other(why)));
        }
        let sink = match guard.take() {
            Some(s) => Ok(s),
            None => Sink::open(&self.inner.output),
        };
        let (index, record, report) = self.summary();
        let manifests = std::mem::take(&mut locked(&self.inner.state).manifests);
        let signature = match (
            &record,
            self.inner.bundle.as_ref().and_then(|b| b.signer.as_ref()),
        ) {
            (Some(record), Some(signer)) => Some((signer.0)(record)),
            _ => None,
        };
        let io = |e: std::io::Error| {
            let at = self.inner.output.display();
            self.store_error(
                "archive",
                std::io::Error::new(e.kind(), format!("{at}: {e}")),
            )
        };
        let mut sink = sink.map_err(io)?;
        let result = async {
            sink.entry("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)
                .await?;
            sink.entry("index.json", &index).await?;
            if let Some(record) = &record {
                sink.entry(BUNDLE_ENTRY, record).await?;
            }
            if let Some(signature) = &signature {
                sink.entry(SIGNATURE_ENTRY, signature).await?;
            }
            // Each image's root was put after the manifests it names: reversed, roots first.
            for (name, bytes) in manifests.iter().rev() {
                sink.entry(name, bytes).await?;
            }
            Ok::<(), std::io::Error>(())
        }
        .await;
        locked(&self.inner.state).finished = true;
        if let Err(e) = result {
            sink.discard();
            return Err(io(e));
        }
        let bytes = sink.close(&self.inner.output).await.map_err(io)?;
        if let (Some(record), Output::File(path)) = (&record, &self.inner.output) {
            let mut beside = path.as_os_str().to_owned();
            beside.push(".json");
            // The record beside is part of the bundle: without it the export failed, and a
            // failed export leaves nothing at PATH.
            if let Err(e) = crate::fsio::write_atomic(std::path::Path::new(&beside), record).await {
                let _ = tokio::fs::remove_file(path).await;
                return Err(io(e));
            }
            if let Some(signature) = &signature {
                beside.push(".sig");
                if let Err(e) =
                    crate::fsio::write_atomic(std::path::Path::new(&beside), signature).await
                {
                    let mut record_beside = path.as_os_str().to_owned();
                    record_beside.push(".json");
                    let _ = tokio::fs::remove_file(&record_beside).await;
                    let _ = tokio::fs::remove_file(path).await;
                    return Err(io(e));
                }
            }
        }
        Ok(ArchiveReport { bytes, ..report })
    }

    /// Ends the archive without finishing it (an export in which every image failed): the
    /// stream is dropped and `PATH.partial` removed, so nothing is left at `PATH`.
    pub async fn discard(&self) {
        let mut guard = self.inner.sink.lock().await;
        if let Some(sink) = guard.take() {
            sink.discard();
        }
        locked(&self.inner.state).finished = true;
    }

    /// `index.json`'s bytes, the bundle record's (for a bundle) and the report, from what was
    /// put in.
    fn summary(&self) -> (Vec<u8>, Option<Vec<u8>>, ArchiveReport) {
        let state = locked(&self.inner.state);
        let mut entries: Vec<&(Option<String>, serde_json::Value)> = state.index.iter().collect();
        entries.sort_by(|a, b| {
            (&a.0, a.1.get("digest").and_then(|d| d.as_str()))
                .cmp(&(&b.0, b.1.get("digest").and_then(|d| d.as_str())))
        });
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": ferry_distribution::media::OCI_INDEX,
            "manifests": entries.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>(),
        });
        let index = serde_json::to_vec_pretty(&index).unwrap_or_default();
        let carried: Vec<String> = state.written.keys().cloned().collect();
        let left_out = state
            .content
            .iter()
            .filter(|d| !state.written.contains_key(*d))
            .count() as u64;
        let roots_in_base: Vec<String> = state
            .images
            .iter()
            .filter(|i| !state.written.contains_key(&i.digest))
            .map(|i| i.digest.clone())
            .collect();
        let in_base = roots_in_base.len() as u64;
        let mut report = ArchiveReport {
            archive: self.inner.output.display(),
            bytes: 0,
            entries_carried: carried.len() as u64,
            images_indexed: state.index.len() as u64,
            images_in_base: in_base,
            roots_in_base,
            digests_left_out: left_out,
            bundle_digest: None,
            bases: Vec::new(),
        };
        let record = self.inner.bundle.as_ref().map(|spec| {
            let mut images = state.images.clone();
            images.sort_by(|a, b| a.reference.cmp(&b.reference));
            let digest = bundle_digest(&carried, &index);
            report.bundle_digest = Some(digest.clone());
            report.bases = spec.bases.iter().map(|b| b.name.clone()).collect();
            let record = BundleRecord {
                format: BUNDLE_FORMAT.to_owned(),
                created: spec.created.clone(),
                mappings: spec.mappings.clone(),
                images,
                bases: spec.bases.clone(),
                content: state.content.iter().cloned().collect(),
                carried,
                digest,
                index: Some(sha256_of(&index)),
                sizes: state.written.clone(),
            };
            serde_json::to_vec_pretty(&record).unwrap_or_default()
        });
        (index, record, report)
    }
}

/// One blob's entry while its bytes stream in: holds the tar until it is finished. Dropped
/// unfinished (a failure part way), it cuts the archive.
pub struct BlobEntry {
    writer: ArchiveWriter,
    sink: tokio::sync::OwnedMutexGuard<Option<Sink>>,
    digest: Digest,
    size: u64,
    /// Bytes of it in the tar.
    written: u64,
    /// Hashes the bytes read after a resume, from byte 0: the prefix the tee sent (already in
    /// the tar) again, then everything written after it.
    digester: ferry_distribution::digest::Digester,
    /// Whether every byte came from the engine's tee, whose read checks the digest and holds
    /// the last chunk back until it matches (so a stream of it that ends cleanly is verified).
    from_tee: bool,
    done: bool,
}

impl BlobEntry {
    /// How many of its bytes are in the tar.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Where a resumed read starts: the first byte not hashed yet (0 after a tee's bytes,
    /// whose prefix is read again to be hashed, never written twice).
    pub fn resume_at(&self) -> u64 {
        match self.from_tee {
            true => 0,
            false => self.digester.bytes_seen(),
        }
    }

    /// Appends `chunk` from the tee (`verified`: the tee checks the digest) or from a resumed
    /// read (hashed, its bytes already in the tar skipped); bytes past the declared size are
    /// refused.
    pub async fn write(&mut self, chunk: &[u8], verified: bool) -> Result<(), ErrorKind> {
        let chunk = match verified && self.from_tee {
            true => chunk,
            false => {
                if self.from_tee {
                    // The first resumed byte: everything from here on is hashed from byte 0.
                    self.from_tee = false;
                }
                let seen = self.digester.bytes_seen();
                let again = (self.written.saturating_sub(seen)).min(chunk.len() as u64) as usize;
                self.digester.update(chunk);
                &chunk[again..]
            }
        };
        if self.written + chunk.len() as u64 > self.size || self.digester.bytes_seen() > self.size {
            return Err(ErrorKind::DigestMismatch {
                expected: format!("{} ({} bytes)", self.digest, self.size),
                actual: format!("more than {} bytes", self.size),
            });
        }
        let Some(sink) = self.sink.as_mut() else {
            return Err(ErrorKind::Local("the archive is not open".to_owned()));
        };
        sink.write(chunk).await.map_err(|e| {
            ErrorKind::Local(format!("{}: {e}", self.writer.inner.output.display()))
        })?;
        self.written += chunk.len() as u64;
        Ok(())
    }

    /// Checks the size and (for bytes not all from the tee) the digest, pads the entry and
    /// counts the blob as in the tar. A mismatch cuts the archive.
    pub async fn finish(mut self) -> Result<(), SinkError> {
        let digester = std::mem::replace(&mut self.digester, self.digest.digester());
        let seen = digester.bytes_seen();
        let matches = match self.from_tee {
            true => None,
            false => Some(digester.finish()),
        };
        let wrong = self.written != self.size
            || matches
                .as_ref()
                .is_some_and(|actual| *actual != self.digest || seen != self.size);
        if wrong {
            let actual = match &matches {
                Some(a) => format!("{a} ({seen} bytes)"),
                None => format!("{} bytes", self.written),
            };
            return Err(SinkError::Bytes(ErrorKind::DigestMismatch {
                expected: format!("{} ({} bytes)", self.digest, self.size),
                actual,
            }));
        }
        let padded = match self.sink.as_mut() {
            Some(sink) => sink.pad(self.size).await,
            None => Err(std::io::Error::other("the archive is not open")),
        };
        if let Err(e) = padded {
            let name = blob_entry(&self.digest);
            return Err(SinkError::Store(self.writer.store_error(
                "blob",
                std::io::Error::new(e.kind(), format!("{name}: {e}")),
            )));
        }
        self.done = true;
        locked(&self.writer.inner.state)
            .written
            .insert(self.digest.to_string(), self.size);
        Ok(())
    }
}

impl BlobSink for BlobEntry {
    fn written(&self) -> u64 {
        self.written
    }

    fn resume_at(&self) -> u64 {
        BlobEntry::resume_at(self)
    }

    fn write(&mut self, chunk: Bytes, verified: bool) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            BlobEntry::write(self, &chunk, verified)
                .await
                .map_err(|kind| match kind {
                    ErrorKind::DigestMismatch { .. } => SinkError::Bytes(kind),
                    kind => SinkError::Store(
                        self.writer
                            .store_error("blob", std::io::Error::other(kind.to_string())),
                    ),
                })
        })
    }

    fn finish(self: Box<Self>) -> BoxFuture<'static, Result<(), SinkError>> {
        Box::pin(BlobEntry::finish(*self))
    }
}

/// An archive as one target's destination: the shared writer, and what names the target's
/// images in it (the target's `REF` of `oci-archive:PATH:REF` or, in a bundle, the registry
/// target's `host/repository`).
#[derive(Debug, Clone)]
pub struct ArchiveTarget {
    /// The archive's writer, one per file for the run.
    pub writer: ArchiveWriter,
    /// What names the target's images.
    pub reference: Option<String>,
}

impl ArchiveTarget {
    /// The `ref.name` of an image whose root is `root`, under `tag`.
    fn ref_name(&self, root: &Manifest, tag: Option<&str>) -> Option<String> {
        match (self.writer.naming(), &self.reference, tag) {
            (Naming::FullReference, Some(r), Some(t)) => Some(format!("{r}:{t}")),
            (Naming::FullReference, Some(r), None) => Some(format!("{r}@{}", root.digest)),
            (Naming::Tag, Some(r), _) => Some(r.clone()),
            (_, _, t) => t.map(str::to_owned),
        }
    }
}

impl StoreWrite for ArchiveTarget {
    fn name(&self) -> String {
        self.writer.name()
    }

    fn key(&self) -> StoreKey {
        StoreKey::Archive(self.writer.output().clone())
    }

    fn holds_blob(&self, digest: &Digest) -> bool {
        self.writer.holds(digest)
    }

    fn begin_blob<'a>(
        &'a self,
        digest: &'a Digest,
        size: u64,
    ) -> BoxFuture<'a, Result<Option<Box<dyn BlobSink>>, StoreError>> {
        Box::pin(async move {
            let entry = self.writer.begin_blob(digest, size).await?;
            Ok(entry.map(|e| Box::new(e) as Box<dyn BlobSink>))
        })
    }

    fn write_manifest<'a>(
        &'a self,
        manifest: &'a Manifest,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(self.writer.write_manifest(manifest))
    }

    fn point_index<'a>(&'a self, image: &'a ImageIn<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(root) = image.manifests.last() {
                let ref_name = self.ref_name(root, image.tag);
                self.writer.point_index(image, ref_name);
            }
            Ok(())
        })
    }
}

impl Drop for BlobEntry {
    fn drop(&mut self) {
        if !self.done {
            self.writer.mark_cut(format!(
                "blob {} stopped at byte {} of {} inside the tar",
                self.digest, self.written, self.size
            ));
        }
    }
}

/// Every archive a run writes, one writer per file shared by all its mappings, and `ferry
/// export`'s bundle (which takes every target of the run). Cheap to clone; clones share.
#[derive(Debug, Clone, Default)]
pub struct Archives {
    bundle: Option<ArchiveWriter>,
    open: Arc<Mutex<HashMap<PathBuf, ArchiveWriter>>>,
}

impl Archives {
    /// Archives whose every target is `bundle` (`ferry export`).
    pub fn bundle(bundle: ArchiveWriter) -> Self {
        Archives {
            bundle: Some(bundle),
            open: Arc::default(),
        }
    }

    /// The export's bundle, when this run writes one.
    pub fn export(&self) -> Option<&ArchiveWriter> {
        self.bundle.as_ref()
    }

    /// The writer of the `oci-archive:` target at `path`, the same for every mapping.
    pub fn at(&self, path: &std::path::Path) -> ArchiveWriter {
        locked(&self.open)
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                ArchiveWriter::new(Output::File(path.to_path_buf()), Naming::Tag, None)
            })
            .clone()
    }

    /// Every archive opened for writing, to finish as the run ends; each once (a later run of
    /// the same `Registries` opens them anew).
    pub fn take_all(&self) -> Vec<ArchiveWriter> {
        let mut all: Vec<ArchiveWriter> = std::mem::take(&mut *locked(&self.open))
            .into_values()
            .collect();
        if let Some(b) = &self.bundle
            && !locked(&b.inner.state).finished
        {
            all.push(b.clone());
        }
        all
    }
}

/// An `oci-archive:` target or `ferry export` bundle the run wrote (issue 25).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ArchiveReport {
    /// The file written (`-` for standard output).
    pub archive: String,
    /// The tar's size in bytes.
    pub bytes: u64,
    /// Blobs and manifests whose bytes are in the tar.
    pub entries_carried: u64,
    /// Images `index.json` names.
    pub images_indexed: u64,
    /// Images whose root manifest a base bundle carries (in the record, not in `index.json`).
    pub images_in_base: u64,
    /// Their root digests: the images this bundle names but does not carry.
    #[serde(skip)]
    pub roots_in_base: Vec<String>,
    /// Digests the images need that a base bundle carries: left out of the tar.
    pub digests_left_out: u64,
    /// A bundle's digest (`ferry-bundle.json`'s `digest`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_digest: Option<String>,
    /// The base bundles (`--since`), by the file name they were read from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bases: Vec<String>,
}
