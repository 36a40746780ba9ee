//! The one read trait and the one write trait every store place implements (a layout directory
//! and a tar archive alike), so the run reads and writes images without asking which format.

// The archive's writer reuses the layout's shape the way containers/image's oci/archive
// destination reuses its oci/layout destination: blobs go in as a stream through a
// `BlobSink`, manifests as blobs, then the index is pointed at the root. A blob sink owns the
// destination's half of a blob write; the source's half (reading, retrying, resuming) is the
// caller's, so a write that fails is the destination's `StoreError` and a read that fails is
// the source's error.

use std::fmt::Debug;
use std::path::PathBuf;

use bytes::Bytes;
use futures::future::BoxFuture;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{Manifest, ManifestInfo, Referrer};
use ferry_distribution::{Digest, Operation};

use crate::StoreError;
use crate::archive::writer_tar::Output;
pub use crate::layout::reader::ByteStream;

/// A store place opened for reading: a layout directory or an archive.
pub trait StoreRead: Send + Sync + Debug {
    /// `oci:<dir>` or `oci-archive:PATH[:REF]`, as errors and reports name it.
    fn name(&self) -> &str;

    /// Every tag it serves, sorted, each once.
    fn list_tags(&self) -> Result<Vec<String>, Error>;

    /// The manifest `reference` (a tag or a digest) names, its bytes verified, or `None`.
    fn find_manifest<'a>(
        &'a self,
        reference: &'a str,
    ) -> BoxFuture<'a, Result<Option<Manifest>, Error>>;

    /// What `reference` names here, or `None`.
    fn head_manifest<'a>(
        &'a self,
        reference: &'a str,
    ) -> BoxFuture<'a, Result<Option<ManifestInfo>, Error>> {
        Box::pin(async move {
            Ok(self.find_manifest(reference).await?.map(|m| ManifestInfo {
                digest: m.digest,
                media_type: m.media_type,
                size: m.bytes.len() as u64,
            }))
        })
    }

    /// The blob's bytes from `offset` on, checked against `size` (and, where the store hashes,
    /// its digest).
    fn open_blob<'a>(
        &'a self,
        digest: &'a Digest,
        size: u64,
        offset: u64,
    ) -> BoxFuture<'a, Result<ByteStream, Error>>;

    /// [`StoreRead::open_blob`] from the start for a caller that hashes every byte itself and
    /// checks the digest before it passes the last chunk on: a store may then skip its own hash.
    fn open_blob_hashed_by_caller<'a>(
        &'a self,
        digest: &'a Digest,
        size: u64,
    ) -> BoxFuture<'a, Result<ByteStream, Error>> {
        self.open_blob(digest, size, 0)
    }

    /// Why a manifest asked for by `reference` is not here, as errors say it.
    fn no_manifest(&self, reference: &str) -> String {
        format!("{} does not carry manifest {reference}", self.name())
    }

    /// Manifests it holds whose `subject` is `digest`.
    fn list_referrers<'a>(
        &'a self,
        digest: &'a Digest,
    ) -> BoxFuture<'a, Result<Vec<Referrer>, Error>>;

    /// Whether it carries the bytes of `digest` (an incremental bundle leaves out what its base
    /// carries; a layout is asked for a blob only when its manifests name it).
    fn carries(&self, _digest: &Digest) -> bool {
        true
    }

    /// An error about this place.
    fn error(&self, operation: Operation, kind: ErrorKind) -> Error {
        Error::new(self.name(), None, operation, kind)
    }
}

/// What identifies a store place written to, for ordering and lookups.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StoreKey {
    /// A layout directory.
    Layout(PathBuf),
    /// An archive's output.
    Archive(Output),
}

/// One image put into a store, as the run hands it over once every blob is in.
pub struct ImageIn<'a> {
    /// Every manifest, children first, the root (the one the index names) last.
    pub manifests: Vec<&'a Manifest>,
    /// Every blob the manifests reference.
    pub blobs: Vec<&'a Digest>,
    /// Its tag, or `None` for an image named by digest.
    pub tag: Option<&'a str>,
    /// Where it came from (`docker.io/library/alpine:3.20`).
    pub source: String,
    /// Its mapping's index in the config.
    pub mapping: usize,
}

/// Why a blob write failed: the place could not be written (its fault), or the bytes handed
/// in are not the blob (the source's).
#[derive(Debug)]
pub enum SinkError {
    /// The destination could not be written.
    Store(StoreError),
    /// The bytes do not match the digest or size they were written under.
    Bytes(ErrorKind),
}

impl From<StoreError> for SinkError {
    fn from(e: StoreError) -> Self {
        SinkError::Store(e)
    }
}

/// One blob on its way into a store: bytes go in as they are read, possibly over several reads
/// of the source (a read that breaks is resumed from [`BlobSink::resume_at`]); nothing is under
/// the blob's name until [`BlobSink::finish`] checked it.
pub trait BlobSink: Send {
    /// How many of its bytes are written.
    fn written(&self) -> u64;
    /// Where a resumed read of the source starts.
    fn resume_at(&self) -> u64;
    /// Appends `chunk`: from the engine's tee when `verified` (the tee checks the digest and
    /// holds the last chunk back), else from a resumed read, whose prefix already written is
    /// skipped.
    fn write(&mut self, chunk: Bytes, verified: bool) -> BoxFuture<'_, Result<(), SinkError>>;
    /// Checks size and digest and makes the blob visible under its name.
    fn finish(self: Box<Self>) -> BoxFuture<'static, Result<(), SinkError>>;
}

/// A store place opened for writing: a layout directory or an archive.
pub trait StoreWrite: Send + Sync + Debug {
    /// `oci:<dir>` or `oci-archive:PATH`, as reports name it.
    fn name(&self) -> String;
    /// What it is, for ordering and lookups.
    fn key(&self) -> StoreKey;
    /// Whether it holds `digest` already (a layout: as a regular file, never through a symlink).
    fn holds_blob(&self, digest: &Digest) -> bool;
    /// Starts writing the blob `digest` of `size` bytes; `None` when it holds it already.
    fn begin_blob<'a>(
        &'a self,
        digest: &'a Digest,
        size: u64,
    ) -> BoxFuture<'a, Result<Option<Box<dyn BlobSink>>, StoreError>>;
    /// Writes one manifest as a blob; the bytes written, 0 when held already.
    fn write_manifest<'a>(
        &'a self,
        manifest: &'a Manifest,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;
    /// Points the index at the image's root (the last manifest), under its tag or untagged,
    /// once every manifest of it is written.
    fn point_index<'a>(&'a self, image: &'a ImageIn<'a>) -> BoxFuture<'a, Result<(), StoreError>>;
}
