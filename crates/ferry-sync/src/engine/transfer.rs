//! Moves one blob: reads it from the source once and streams it to every sink at the same time
//! (a tee whose slowest sink sets the pace), verifying the digest before the last byte goes out.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::sync::{Mutex, mpsc};

use ferry_distribution::capabilities::{self, Feature, Support, UploadFlow};
use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::UploadSession;
use ferry_distribution::retry::{Call, Failure};
use ferry_distribution::{Operation, RegistryClient, quirks};

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

/// How uploads are shaped.
#[derive(Debug, Clone, Copy)]
pub struct UploadShape {
    /// Bytes per PATCH in a chunked upload.
    pub chunk_size: u64,
    /// Blobs up to this size go in one request.
    pub monolithic_limit: u64,
}

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
                if matches!(source, Source::Layout(_)) {
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
            // Then the session is opened, retried on its own: an upload attempt is one write
            // (a PUT, or docker's PATCH and PUT), and a lost POST reply costs a retry of the
            // POST rather than an attempt of the upload. A POST that needs a retry lets the tee
            // go on without this sink (which reads the source again later), so one lost reply
            // does not stall the blob's other targets through the backoff.
            let source_failed = matches!(tee, Some(Err(_)));
            let first = std::sync::Mutex::new(tee);
            let take_first = || first.lock().unwrap_or_else(|p| p.into_inner()).take();
            let session = match session {
                Some(s) => Some(s),
                None if source_failed => None,
                None => {
                    let call = Call::new(Operation::UploadStart, Some(&repository));
                    let opened = client
                        .run(call, |attempt| {
                            if attempt.number > 1 {
                                drop(take_first());
                            }
                            client.start_upload_once(&repository)
                        })
                        .await;
                    match opened {
                        Ok(s) => Some(s),
                        Err(e) => return Err(poisoned.get().cloned().unwrap_or(e)),
                    }
                }
            };
            let session = Mutex::new(session);
            // Named for what an attempt sends: the closing PUT with the bytes, or chunks.
            let operation = if fits_one_request(client.host(), blob, shape) {
                Operation::UploadFinish
            } else {
                Operation::UploadChunk
            };
            let call = Call::new(operation, Some(&repository));
            client
                .run(call, |attempt| {
                    let rx = take_first();
                    let client = &client;
                    let repository = &repository;
                    let session = &session;
                    let poisoned = &poisoned;
                    async move {
                        let result = upload_attempt(
                            client,
                            repository,
                            source,
                            blob,
                            rx,
                            session,
                            shape,
                            attempt.number,
                        )
                        .await;
                        result.map_err(|f| match poisoned.get() {
                            Some(e) => Failure::Final(e.kind.clone()),
                            None => f,
                        })
                    }
                })
                .await
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

/// One attempt at getting the blob into a registry repository. The first attempt streams from
/// the tee; a later one asks the session how much it holds and sends only the rest, read from
/// the source with a ranged GET.
#[allow(clippy::too_many_arguments)]
async fn upload_attempt(
    client: &RegistryClient,
    repository: &str,
    source: &Source,
    blob: &BlobRef,
    tee: Option<Result<ByteStream, Failure>>,
    session: &Mutex<Option<UploadSession>>,
    shape: UploadShape,
    attempt: u32,
) -> Result<(), Failure> {
    let tee = tee.transpose()?;
    let mut current = session.lock().await.clone();
    let mut offset = 0;
    if attempt > 1
        && let Some(s) = &current
    {
        match client.upload_status_once(s).await {
            Ok(held) => offset = held,
            Err(Failure::Status { status: 404, .. }) => {
                // The session is gone: a lost reply may hide a finished upload.
                if client
                    .head_blob(repository, &blob.digest)
                    .await
                    .map_err(|e| Failure::Inner(Box::new(e)))?
                    .is_some()
                {
                    return Ok(());
                }
                current = None;
            }
            Err(f) => return Err(f),
        }
    }
    let mut s = match current {
        Some(s) => s,
        None => {
            let s = client.start_upload_once(repository).await?;
            *session.lock().await = Some(s.clone());
            s
        }
    };
    if offset > 0 && offset >= blob.size {
        // Every byte landed before a reply was lost (the last chunk's): only the close is
        // missing, and the source has nothing past the end to read again.
        return client.finish_upload_once(&s, &blob.digest, None).await;
    }
    let stream = match tee {
        Some(stream) if offset == 0 => stream,
        _ => reopen(source, blob, offset).await?,
    };
    let host = client.host();
    let caps = client.capabilities();
    let chunks_refused = caps.support(Feature::ChunkedPatch) == Support::Refused;
    let small = fits_one_request(host, blob, shape);
    if (small && caps.upload_flow() == UploadFlow::Docker) || chunks_refused {
        // Docker's flow: the rest of the blob in one PATCH (appended to what the session
        // holds, so a resumed attempt sends only what is missing), then an empty PUT.
        let body = reqwest::Body::wrap_stream(stream);
        s = client
            .patch_stream_once(&s, blob.size.saturating_sub(offset), body)
            .await?;
        *session.lock().await = Some(s.clone());
        return client.finish_upload_once(&s, &blob.digest, None).await;
    }
    if small && offset == 0 {
        let body = reqwest::Body::wrap_stream(stream);
        return match client
            .finish_upload_once(&s, &blob.digest, Some((body, blob.size)))
            .await
        {
            Err(Failure::Status { status, .. }) if capabilities::refuses_flow(status) => {
                docker_flow(
                    client,
                    repository,
                    source,
                    blob,
                    session,
                    &s,
                    Refused::PutBody,
                )
                .await
            }
            other => other,
        };
    }
    let fresh = offset == 0;
    let shared = Arc::new(Mutex::new((stream, None::<Bytes>)));
    while offset < blob.size {
        let chunk = quirks::max_chunk(host).map_or(shape.chunk_size, |m| m.min(shape.chunk_size));
        let n = chunk.max(1).min(blob.size - offset);
        let body = reqwest::Body::wrap_stream(take_bytes(Arc::clone(&shared), n));
        s = match client.patch_chunk_once(&s, offset, n, body).await {
            // The first chunk of a session just accepted, refused: chunks are not taken here.
            Err(Failure::Status { status, .. })
                if fresh && offset == 0 && capabilities::refuses_flow(status) =>
            {
                return docker_flow(
                    client,
                    repository,
                    source,
                    blob,
                    session,
                    &s,
                    Refused::Chunks,
                )
                .await;
            }
            other => other?,
        };
        *session.lock().await = Some(s.clone());
        offset += n;
    }
    client.finish_upload_once(&s, &blob.digest, None).await
}

/// Whether `blob` goes to `host` in one request (the closing PUT, or docker's one PATCH) rather
/// than in chunks: at most the monolithic limit, unless the registry's quirks say otherwise.
fn fits_one_request(host: &str, blob: &BlobRef, shape: UploadShape) -> bool {
    !quirks::needs_chunked_uploads(host)
        && (blob.size <= shape.monolithic_limit || quirks::single_request_uploads(host))
}

/// What the registry refused of the cheapest flow.
#[derive(Debug, Clone, Copy)]
enum Refused {
    /// The closing PUT carrying the blob: small blobs take docker's flow from now on, large
    /// ones stay chunked (and resumable).
    PutBody,
    /// The first chunked PATCH: large blobs go up in one PATCH from now on.
    Chunks,
}

/// The registry refused the cheapest flow for this blob in a way that is about the flow (see
/// `capabilities::refuses_flow`): the blob goes up again through docker's flow (POST, one PATCH
/// with the whole blob read afresh from the source, empty PUT) inside the same attempt, so the
/// refusal spends neither a retry nor the breaker. Once that works, the registry keeps docker's
/// flow for the rest of the run; if it fails too, that failure is the retry loop's to judge.
async fn docker_flow(
    client: &RegistryClient,
    repository: &str,
    source: &Source,
    blob: &BlobRef,
    session: &Mutex<Option<UploadSession>>,
    refused: &UploadSession,
    what: Refused,
) -> Result<(), Failure> {
    tracing::debug!(
        registry = client.host(),
        repository,
        blob = %blob.digest,
        "upload refused for its flow: trying docker's flow"
    );
    let _ = client.cancel_upload_once(refused).await;
    *session.lock().await = None;
    let s = client.start_upload_once(repository).await?;
    *session.lock().await = Some(s.clone());
    let stream = reopen(source, blob, 0).await?;
    let s = client
        .patch_stream_once(&s, blob.size, reqwest::Body::wrap_stream(stream))
        .await?;
    *session.lock().await = Some(s.clone());
    client.finish_upload_once(&s, &blob.digest, None).await?;
    let caps = client.capabilities();
    let news = match what {
        Refused::PutBody => caps.learn_docker_flow(),
        Refused::Chunks => {
            let news = caps.support(Feature::ChunkedPatch) != Support::Refused;
            caps.learn(Feature::ChunkedPatch, Support::Refused);
            caps.learn_docker_flow() || news
        }
    };
    if news {
        tracing::info!(
            registry = client.host(),
            refused = ?what,
            "the registry refused the cheapest upload flow: docker's flow (POST, PATCH, empty PUT) for it from now on"
        );
    }
    Ok(())
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

/// The next `n` bytes of a shared stream, splitting a chunk at the boundary and keeping the
/// rest for the next taker.
fn take_bytes(
    shared: Arc<Mutex<(ByteStream, Option<Bytes>)>>,
    n: u64,
) -> impl Stream<Item = Result<Bytes, Failure>> + Send {
    futures::stream::unfold((shared, n), |(shared, left)| async move {
        if left == 0 {
            return None;
        }
        let mut guard = shared.lock().await;
        let (stream, leftover) = &mut *guard;
        let chunk = match leftover.take() {
            Some(b) => b,
            None => match stream.next().await {
                Some(Ok(b)) => b,
                Some(Err(f)) => {
                    drop(guard);
                    return Some((Err(f), (shared, 0)));
                }
                None => {
                    drop(guard);
                    return Some((
                        Err(Failure::Transport {
                            message: "source ended early".into(),
                            sent: ferry_distribution::retry::Sent::Unknown,
                            local: false,
                        }),
                        (shared, 0),
                    ));
                }
            },
        };
        let take = (chunk.len() as u64).min(left) as usize;
        if take < chunk.len() {
            *leftover = Some(chunk.slice(take..));
        }
        drop(guard);
        Some((Ok(chunk.slice(..take)), (shared, left - take as u64)))
    })
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
