//! One destination's feed of a blob: the tee's stream for its first attempt, fresh reads of the
//! source after that (each cut off at the declared size), and the source's own failure.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{BlobBytes, UploadSession};
use ferry_distribution::retry::Failure;

use super::graph::BlobRef;
use crate::source::{ByteStream, Source};

fn receiver_stream(rx: mpsc::Receiver<Result<Bytes, Failure>>) -> ByteStream {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
}

/// Where a registry upload starts: the session a refused mount opened, or the one the journal
/// holds from an earlier process (read once, by `transfer`).
#[derive(Debug, Default)]
pub(crate) struct Upload {
    /// The session a refused mount handed over.
    pub session: Option<UploadSession>,
    /// The session an earlier process recorded for this blob and repository.
    pub recalled: Option<UploadSession>,
}

/// One destination's feed of a blob: the tee's stream for its first attempt, fresh reads of the
/// source after that, and the source's own failure (a digest mismatch) that stands for
/// whatever the destination answered.
pub(crate) struct Feed<'a> {
    pub(crate) source: &'a Source,
    pub(crate) blob: &'a BlobRef,
    pub(crate) first: std::sync::Mutex<Option<mpsc::Receiver<Result<Bytes, Failure>>>>,
    pub(crate) poisoned: &'a OnceLock<Error>,
    /// Where the blob goes, as reports name it (for the resume's log line).
    pub(crate) place: String,
    /// Set when this destination resumes an upload an earlier process recorded and nothing
    /// else reads the source for the blob: its own reads are the blob's source bytes read
    /// (`blob_bytes_read`), and the bytes the session already held are not to be read.
    pub(crate) reads: Option<std::sync::Arc<crate::progress::SyncProgress>>,
    /// The offset a recorded session was resumed at (0: none was).
    pub(crate) resumed: AtomicU64,
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

    /// The bytes of the blob an upload session an earlier process recorded held when this
    /// destination went on from it (0: it did not).
    pub(crate) fn resumed_at(&self) -> u64 {
        self.resumed.load(Ordering::Relaxed)
    }

    /// A read of the source from `offset`, counted as the blob's source bytes read when this
    /// destination is the only reader (see `reads`).
    async fn open_counted(&self, offset: u64) -> Result<ByteStream, Failure> {
        let stream = reopen(self.source, self.blob, offset).await?;
        let Some(progress) = self.reads.clone() else {
            return Ok(stream);
        };
        let name = self.blob.digest.to_string();
        let layout = self.source.is_store();
        Ok(Box::pin(stream.inspect(move |item| {
            if let Ok(chunk) = item {
                progress.blob_read(&name, chunk.len() as u64);
                if layout {
                    progress.layout_read(chunk.len() as u64);
                }
            }
        })))
    }
}

impl BlobBytes for Feed<'_> {
    fn open(&self, offset: u64) -> impl Future<Output = Result<ByteStream, Failure>> + Send {
        self.open_counted(offset)
    }

    fn resumed(&self, offset: u64) {
        self.resumed.store(offset, Ordering::Relaxed);
        if let Some(progress) = &self.reads {
            // Bytes the session held are not read from the source: the expected total shrinks.
            progress.bytes_not_needed(offset);
        }
        tracing::info!(
            destination = %self.place,
            blob = %self.blob.digest,
            offset,
            size = self.blob.size,
            "resumed at {} of {}: the upload an earlier run recorded goes on",
            crate::report::human_bytes(offset),
            crate::report::human_bytes(self.blob.size)
        );
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

pub(crate) fn bound(
    stream: ByteStream,
    source: &Source,
    blob: &BlobRef,
    offset: u64,
) -> ByteStream {
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
