//! Moves one blob: reads it from the source once and streams it to every sink at the same time
//! (a tee whose slowest sink sets the pace), verifying the digest before the last byte goes out.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{BlobBytes, BlobPush, UploadSession};
use ferry_distribution::retry::Failure;
use ferry_distribution::{Operation, RegistryClient};

use super::graph::BlobRef;
use crate::source::{ByteStream, Source};

/// Chunks buffered between the source and each sink: the backpressure window.
const TEE_DEPTH: usize = 4;

/// Where a blob goes.
#[derive(Debug)]
pub enum Sink {
    /// A registry repository, possibly with the upload session a refused mount opened.
    Registry {
        /// A client for the target's registry.
        client: RegistryClient,
        /// The target repository.
        repository: String,
        /// The session a refused mount opened, to upload into instead of starting another.
        session: Option<UploadSession>,
    },
    /// An OCI image-layout directory.
    Layout {
        /// The layout's directory.
        dir: PathBuf,
    },
}

pub use ferry_distribution::ops::UploadShape;

/// Reads `blob` from `source` once and writes it to every sink, each retried and resumed on
/// its own. The result for sink `i` is at position `i`.
pub async fn transfer(
    source: &Source,
    blob: &BlobRef,
    sinks: Vec<Sink>,
    shape: UploadShape,
    progress: &crate::progress::SyncProgress,
) -> Vec<Result<(), Error>> {
    // Set when the source's bytes do not match their digest: every sink fails with the
    // source's error (it names the source, not the target that refused to finish).
    let poisoned: Arc<OnceLock<Error>> = Arc::new(OnceLock::new());
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in &sinks {
        let (tx, rx) = mpsc::channel::<Result<Bytes, Failure>>(TEE_DEPTH);
        senders.push(tx);
        receivers.push(rx);
    }
    let reader = read_once(source, blob, senders, Arc::clone(&poisoned), progress);
    let writers = futures::future::join_all(
        sinks
            .into_iter()
            .zip(receivers)
            .map(|(sink, rx)| write_sink(source, blob, sink, rx, shape, Arc::clone(&poisoned))),
    );
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
    let name = blob.digest.to_string();
    progress.blob_started(&name, blob.size);
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
    let mut stream = match open_bounded(source, blob, 0).await {
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
        let _ = poisoned.set(source.error(Operation::BlobGet, kind.clone()));
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

async fn write_sink(
    source: &Source,
    blob: &BlobRef,
    sink: Sink,
    rx: mpsc::Receiver<Result<Bytes, Failure>>,
    shape: UploadShape,
    poisoned: Arc<OnceLock<Error>>,
) -> Result<(), Error> {
    let first = std::sync::Mutex::new(Some(rx));
    let take_first = || first.lock().unwrap_or_else(|p| p.into_inner()).take();
    let result = match sink {
        Sink::Registry {
            client,
            repository,
            session,
        } => {
            // Nothing goes to the target until the source has produced its first bytes: a
            // source that is paused or slow must not hold a target request open until it times
            // out (and is blamed on the target). A source that fails first fails the first
            // attempt, which later attempts recover from with a fresh read.
            let tee = match take_first() {
                Some(rx) => Some(primed(receiver_stream(rx)).await),
                None => None,
            };
            let push = BlobPush {
                repository: &repository,
                digest: &blob.digest,
                size: blob.size,
                shape,
                session,
            };
            let bytes = SourceBytes {
                source,
                blob,
                poisoned: &poisoned,
            };
            client.push_blob(push, tee, &bytes).await.map(|flow| {
                tracing::trace!(registry = client.host(), repository, blob = %blob.digest, ?flow, "blob pushed");
            })
        }
        Sink::Layout { dir } => {
            source
                .read_with_retry(|| {
                    let rx = take_first();
                    let dir = &dir;
                    async move {
                        let stream = match rx {
                            Some(rx) => receiver_stream(rx),
                            None => reopen(source, blob, 0).await?,
                        };
                        write_layout_blob(dir, blob, stream).await
                    }
                })
                .await
        }
    };
    result.map_err(|e| poisoned.get().cloned().unwrap_or(e))
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
    let what = format!("blob {} from {}", blob.digest, source.name());
    let left = blob.size.saturating_sub(offset);
    Ok(Box::pin(ferry_distribution::limit::bounded(
        stream, left, what,
    )))
}

/// The source's bytes of one blob as an upload reads them again, and the source's own failure
/// (a digest mismatch) that stands for whatever the registry answered.
struct SourceBytes<'a> {
    source: &'a Source,
    blob: &'a BlobRef,
    poisoned: &'a OnceLock<Error>,
}

impl BlobBytes for SourceBytes<'_> {
    fn open(&self, offset: u64) -> impl Future<Output = Result<ByteStream, Failure>> + Send {
        reopen(self.source, self.blob, offset)
    }

    fn poisoned(&self) -> Option<ErrorKind> {
        self.poisoned.get().map(|e| e.kind.clone())
    }
}

/// Waits for the stream's first item; a failure before any byte is returned as is.
async fn primed(mut stream: ByteStream) -> Result<ByteStream, Failure> {
    match stream.next().await {
        None => Ok(Box::pin(futures::stream::empty())),
        Some(Err(f)) => Err(f),
        Some(Ok(first)) => Ok(Box::pin(
            futures::stream::once(async move { Ok(first) }).chain(stream),
        )),
    }
}

/// Writes a blob into a layout: to a temporary created exclusively (never through a symlink)
/// inside a real `blobs/<alg>` directory, verified, synced, then renamed, so an interrupted run
/// never leaves a partial file under a digest.
pub async fn write_layout_blob(
    dir: &Path,
    blob: &BlobRef,
    mut stream: ByteStream,
) -> Result<(), Failure> {
    use tokio::io::AsyncWriteExt;
    let local =
        |e: std::io::Error| Failure::Final(ErrorKind::Local(format!("{}: {e}", dir.display())));
    if crate::layout::writer::holds_blob(dir, &blob.digest) {
        return Ok(());
    }
    // `blobs/<alg>` must be a real directory of the layout, and the temporary a new file.
    let parent = crate::layout::writer::blob_dir(dir, &blob.digest)
        .await
        .map_err(local)?;
    let path = parent.join(blob.digest.hex());
    let tmp = parent.join(crate::layout::temp_name(blob.digest.hex()));
    let mut file = crate::layout::writer::create_temp(&tmp)
        .await
        .map_err(local)?;
    let mut digester = blob.digest.digester();
    let result = async {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            digester.update(&chunk);
            file.write_all(&chunk).await.map_err(local)?;
        }
        let seen = digester.bytes_seen();
        let actual = digester.finish();
        if actual != blob.digest || seen != blob.size {
            return Err(Failure::Final(ErrorKind::DigestMismatch {
                expected: blob.digest.to_string(),
                actual: actual.to_string(),
            }));
        }
        file.sync_all().await.map_err(local)?;
        tokio::fs::rename(&tmp, &path).await.map_err(local)?;
        crate::layout::sync_dir(&parent).await.map_err(local)
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    result
}
