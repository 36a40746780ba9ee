//! The handle through which an upload outlives its process: a journal of upload sessions in
//! flight (kept by the caller, ferry-sync's state directory) that `push_blob` asks and updates.

// The client decides what a record may do: a recalled Location must be on the registry's own
// origin (`RegistryClient::same_origin`) and the session's own status answer decides the
// offset. The journal only keeps what the client told it, and its records are secrets: a
// Location can carry a signed token, so none is ever logged.

use std::fmt::Debug;

use futures::future::BoxFuture;
use url::Url;

use crate::digest::Digest;

/// What identifies one upload in a journal: the registry host as configured, the repository
/// and the blob.
#[derive(Debug, Clone, Copy)]
pub struct UploadKey<'a> {
    /// The registry host (`registry.example`, `localhost:5000`).
    pub host: &'a str,
    /// The repository the blob goes to.
    pub repository: &'a str,
    /// The blob's digest.
    pub digest: &'a Digest,
    /// The blob's size in bytes.
    pub size: u64,
}

/// Where an earlier process left an upload: the session's Location and the offset the
/// registry acknowledged then (a hint only: the session's status answer decides).
#[derive(Clone, PartialEq, Eq)]
pub struct RecordedSession {
    /// The session's Location (absolute).
    pub location: Url,
    /// Bytes the registry had acknowledged.
    pub offset: u64,
}

impl Debug for RecordedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The Location may carry a signed token: never printed.
        f.debug_struct("RecordedSession")
            .field("location", &"***")
            .field("offset", &self.offset)
            .finish()
    }
}

/// A journal of uploads in flight, kept across processes. Every method is best effort: a
/// journal that cannot write says so in its own warning and the upload goes on unrecorded.
/// The methods that touch storage are async: a journal on disk does its blocking file work off
/// the runtime's workers (ferry-sync's state directory uses tokio's blocking pool), so a PATCH's
/// record never stalls the uploads sharing the worker.
pub trait UploadJournal: Send + Sync + Debug {
    /// The session an earlier process recorded for `key`, if a trustworthy record is there;
    /// `origin` is the registry's API origin, which the record's Location must share.
    fn recall<'a>(
        &'a self,
        key: UploadKey<'a>,
        origin: &'a Url,
    ) -> BoxFuture<'a, Option<RecordedSession>>;
    /// The registry acknowledged `offset` bytes of `key` in the session at `location`.
    fn record<'a>(
        &'a self,
        key: UploadKey<'a>,
        location: &'a Url,
        offset: u64,
    ) -> BoxFuture<'a, ()>;
    /// The blob is committed (or found present, or its session gone): the record goes.
    fn forget<'a>(&'a self, key: UploadKey<'a>) -> BoxFuture<'a, ()>;
    /// Whether the process is stopping: a chunked upload sends no further PATCH once this is
    /// true (the one in flight finishes and is recorded).
    fn stopping(&self) -> bool;
}
