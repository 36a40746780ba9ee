//! Moves one blob: reads it from the source once and streams it to every destination at the same
//! time (a tee whose slowest one sets the pace), verifying the digest before the last byte goes out.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;

use ferry_distribution::Operation;
use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::UploadSession;
use ferry_distribution::retry::Failure;

use super::destination::Destination;
use super::feed::{Feed, Upload, bound};
use super::graph::BlobRef;
use crate::error::SyncError;
use crate::source::Source;

/// Chunks buffered between the source and each sink: the backpressure window.
const TEE_DEPTH: usize = 4;

pub use ferry_distribution::ops::UploadShape;

/// Reads `blob` from `source` once and writes it to every destination (into the upload session
/// given with it, if any), each retried and resumed on its own. The result for destination `i`
/// is at position `i`: the bytes a recorded upload session held when it was resumed (0: none).
pub(crate) async fn transfer(
    source: &Source,
    blob: &BlobRef,
    to: Vec<(Destination, Option<UploadSession>)>,
    shape: UploadShape,
    progress: &Arc<crate::progress::SyncProgress>,
) -> Vec<Result<u64, SyncError>> {
    // Set when the source's bytes do not match their digest: every sink fails with the
    // source's error (it names the source, not the target that refused to finish).
    let poisoned: Arc<OnceLock<Error>> = Arc::new(OnceLock::new());
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    let mut recalled = Vec::new();
    for (destination, session) in &to {
        let (tx, rx) = mpsc::channel::<Result<Bytes, Failure>>(TEE_DEPTH);
        // The journal is read once per blob and destination, here: an upload an earlier
        // process left reads the source from the session's offset, not from the tee.
        let left = match session {
            Some(_) => None,
            None => destination.recorded_upload(blob).await,
        };
        if left.is_none() {
            senders.push(tx);
        }
        receivers.push(rx);
        recalled.push(left);
    }
    // Nothing reads the source for the tee when every destination resumes a recorded
    // upload: the first of them counts its own reads as the blob's (`blob_bytes_read`).
    let mut counter = senders.is_empty().then(|| Arc::clone(progress));
    let reader = read_once(source, blob, senders, Arc::clone(&poisoned), progress);
    let writers = futures::future::join_all(to.into_iter().zip(receivers).zip(recalled).map(
        |(((destination, session), rx), recalled)| {
            let reads = match recalled {
                Some(_) => counter.take(),
                None => None,
            };
            let upload = Upload { session, recalled };
            let feed = Feed {
                source,
                blob,
                first: std::sync::Mutex::new(Some(rx)),
                poisoned: &poisoned,
                place: destination.name(),
                reads,
                resumed: Default::default(),
            };
            write_one(destination, upload, feed, shape)
        },
    ));
    let ((), results) = futures::join!(reader, writers);
    results
}

/// The tee: one source read, each chunk handed to every live sink. The last chunk is held back
/// until the digest is checked, so a sink never completes bytes that do not match.
async fn read_once(
    source: &Source,
    blob: &BlobRef,
    senders: Vec<mpsc::Sender<Result<Bytes, Failure>>>,
    poisoned: Arc<OnceLock<Error>>,
    progress: &crate::progress::SyncProgress,
) {
    if senders.is_empty() {
        return;
    }
    let name = blob.digest.to_string();
    progress.blob_started(&source.name(), &name, blob.size);
    // Ends the blob's progress whichever way the read ends.
    struct Finished<'a>(&'a crate::progress::SyncProgress, &'a str);
    impl Drop for Finished<'_> {
        fn drop(&mut self) {
            self.0.blob_finished(self.1);
        }
    }
    let _finished = Finished(progress, &name);
    let mut live: Vec<_> = senders.into_iter().map(Some).collect();
    let broadcast = |live: &mut Vec<Option<mpsc::Sender<_>>>, item: Result<Bytes, Failure>| {
        let live = std::mem::take(live);
        async move {
            let mut kept = Vec::with_capacity(live.len());
            for tx in live {
                match tx {
                    Some(tx) if tx.send(item.clone()).await.is_ok() => kept.push(Some(tx)),
                    _ => kept.push(None),
                }
            }
            kept
        }
    };
    let opened = source
        .open_blob_hashed_by_caller(&blob.digest, blob.size)
        .await
        .map(|s| bound(s, source, blob, 0));
    let mut stream = match opened {
        Ok(s) => s,
        Err(e) => {
            live = broadcast(&mut live, Err(Failure::Inner(Box::new(e)))).await;
            drop(live);
            return;
        }
    };
    let mut digester = blob.digest.digester();
    let mut held: Option<Bytes> = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => {
                digester.update(&chunk);
                progress.blob_read(&name, chunk.len() as u64);
                if source.is_store() {
                    progress.layout_read(chunk.len() as u64);
                }
                if let Some(prev) = held.replace(chunk) {
                    live = broadcast(&mut live, Ok(prev)).await;
                    if live.iter().all(Option::is_none) {
                        return;
                    }
                }
            }
            Err(f) => {
                // A final failure of the source (a stream past its declared size) ends the blob
                // for every sink: none retries it from the source again.
                if let Failure::Final(kind) = &f {
                    let _ = poisoned.set(source.error(Operation::BlobGet, kind.clone()));
                }
                let _ = broadcast(&mut live, Err(f)).await;
                return;
            }
        }
    }
    let seen = digester.bytes_seen();
    let actual = digester.finish();
    if actual != blob.digest || seen != blob.size {
        let kind = ErrorKind::DigestMismatch {
            expected: format!("{} ({} bytes)", blob.digest, blob.size),
            actual: format!("{actual} ({seen} bytes)"),
        };
        // The bytes hashed came from one read that was sent (a layout's read sends nothing).
        let sent = u32::from(matches!(source, Source::Registry { .. }));
        let _ = poisoned.set(
            source
                .error(Operation::BlobGet, kind.clone())
                .with_attempts(sent),
        );
        let _ = broadcast(&mut live, Err(Failure::Final(kind))).await;
        return;
    }
    if let Some(last) = held {
        live = broadcast(&mut live, Ok(last)).await;
    }
    drop(live);
}

/// Writes one destination's copy; `Ok` holds the bytes a recorded upload session already had
/// when this destination went on from it (0 when none was resumed).
async fn write_one(
    destination: Destination,
    upload: Upload,
    feed: Feed<'_>,
    shape: UploadShape,
) -> Result<u64, SyncError> {
    match destination.write_blob(&feed, shape, upload).await {
        Ok(()) => Ok(feed.resumed_at()),
        // The destination could not be written: its own failure, whatever the source did.
        Err(e @ SyncError::Store(_)) => Err(e),
        // The source's bytes were wrong: that stands for whatever the destination answered.
        Err(e) => Err(feed.poisoned.get().cloned().map_or(e, SyncError::Registry)),
    }
}
