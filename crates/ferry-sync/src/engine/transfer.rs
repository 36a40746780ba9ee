//! Moves one blob: reads it from the source once and streams it to every destination at the same
//! time (a tee whose slowest one sets the pace), verifying the digest before the last byte goes out.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;

use ferry_distribution::Operation;
use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{BlobBytes, UploadSession};
use ferry_distribution::retry::Failure;

use super::destination::Destination;
use super::graph::BlobRef;
use crate::source::{ByteStream, Source};

/// Chunks buffered between the source and each sink: the backpressure window.
const TEE_DEPTH: usize = 4;

pub use ferry_distribution::ops::UploadShape;

/// Reads `blob` from `source` once and writes it to every destination (into the upload session
/// given with it, if any), each retried and resumed on its own. The result for destination `i`
/// is at position `i`.
pub(crate) async fn transfer(
    source: &Source,
    blob: &BlobRef,
    to: Vec<(Destination, Option<UploadSession>)>,
    shape: UploadShape,
    progress: &crate::progress::SyncProgress,
) -> Vec<Result<(), Error>> {
    // Set when the source's bytes do not match their digest: every sink fails with the
    // source's error (it names the source, not the target that refused to finish).
    let poisoned: Arc<OnceLock<Error>> = Arc::new(OnceLock::new());
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for (destination, _) in &to {
        let (tx, rx) = mpsc::channel::<Result<Bytes, Failure>>(TEE_DEPTH);
        // Resuming an earlier process's upload: it reads from its offset, not from the tee.
        if !destination.resumes(blob) {
            senders.push(tx);
        }
        receivers.push(rx);
    }
    let reader = read_once(source, blob, senders, Arc::clone(&poisoned), progress);
    let writers = futures::future::join_all(to.into_iter().zip(receivers).map(
        |((destination, session), rx)| {
            write_one(
                source,
                blob,
                destination,
                session,
                rx,
                shape,
                Arc::clone(&poisoned),
            )
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
                if matches!(source, Source::Layout(_) | Source::Archive(_)) {
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

fn receiver_stream(rx: mpsc::Receiver<Result<Bytes, Failure>>) -> ByteStream {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
}

async fn write_one(
    source: &Source,
    blob: &BlobRef,
    destination: Destination,
    session: Option<UploadSession>,
    rx: mpsc::Receiver<Result<Bytes, Failure>>,
    shape: UploadShape,
    poisoned: Arc<OnceLock<Error>>,
) -> Result<(), Error> {
    let feed = Feed {
        source,
        blob,
        first: std::sync::Mutex::new(Some(rx)),
        poisoned: &poisoned,
    };
    let result = destination.write_blob(&feed, shape, session).await;
    result.map_err(|e| poisoned.get().cloned().unwrap_or(e))
}

/// One destination's feed of a blob: the tee's stream for its first attempt, fresh reads of the
/// source after that, and the source's own failure (a digest mismatch) that stands for
/// whatever the destination answered.
pub(crate) struct Feed<'a> {
    source: &'a Source,
    blob: &'a BlobRef,
    first: std::sync::Mutex<Option<mpsc::Receiver<Result<Bytes, Failure>>>>,
    poisoned: &'a OnceLock<Error>,
}

impl Feed<'_> {
    /// The source the blob is read from.
    pub(crate) fn source(&self) -> &Source {
        self.source
    }

    /// The blob.
    pub(crate) fn blob(&self) -> &BlobRef {
        self.blob
    }

    /// The tee's stream, the first time it is asked for.
    pub(crate) fn take_first(&self) -> Option<ByteStream> {
        let rx = self.first.lock().unwrap_or_else(|p| p.into_inner()).take();
        rx.map(receiver_stream)
    }

    /// A fresh read of the source from `offset`, its failure final for this destination.
    pub(crate) async fn reopen(&self, offset: u64) -> Result<ByteStream, Failure> {
        reopen(self.source, self.blob, offset).await
    }
}

impl BlobBytes for Feed<'_> {
    fn open(&self, offset: u64) -> impl Future<Output = Result<ByteStream, Failure>> + Send {
        reopen(self.source, self.blob, offset)
    }

    fn poisoned(&self) -> Option<ErrorKind> {
        self.poisoned.get().map(|e| e.kind.clone())
    }
}

/// A fresh read of the source from `offset` (a resumed sink), its failure final for the sink.
async fn reopen(source: &Source, blob: &BlobRef, offset: u64) -> Result<ByteStream, Failure> {
    open_bounded(source, blob, offset)
        .await
        .map_err(|e| Failure::Inner(Box::new(e)))
}

/// The source's stream of the blob from `offset`, cut off at the first byte beyond the size its
/// descriptor declares: a source streaming without end fails this blob at once instead of
/// filling a temporary file or an upload until the deadline.
async fn open_bounded(source: &Source, blob: &BlobRef, offset: u64) -> Result<ByteStream, Error> {
    let stream = source.open_blob(&blob.digest, blob.size, offset).await?;
    Ok(bound(stream, source, blob, offset))
}

fn bound(stream: ByteStream, source: &Source, blob: &BlobRef, offset: u64) -> ByteStream {
    let what = format!("blob {} from {}", blob.digest, source.name());
    let left = blob.size.saturating_sub(offset);
    Box::pin(ferry_distribution::limit::bounded(stream, left, what))
}

/// Waits for the stream's first item; a failure before any byte is returned as is.
pub(crate) async fn primed(mut stream: ByteStream) -> Result<ByteStream, Failure> {
    match stream.next().await {
        None => Ok(Box::pin(futures::stream::empty())),
        Some(Err(f)) => Err(f),
        Some(Ok(first)) => Ok(Box::pin(
            futures::stream::once(async move { Ok(first) }).chain(stream),
        )),
    }
}
