//! The blob upload protocol: one `push_blob` that picks the flow (one PUT, chunks, or docker's
//! POST, PATCH, empty PUT) from the registry's quirks and learned capabilities, and resumes.

// The retry structure is the engine's as it was: the session is opened under its own
// `UploadStart` call, then the write is one `UploadFinish` (one request) or `UploadChunk` call
// whose later attempts ask the session what it holds and send only the rest. A refusal that is
// about the flow (`capabilities::refuses_flow`) takes docker's flow inside the same attempt, so it
// spends neither a retry nor the breaker; docs/registries.md lists what each answer teaches.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::sync::Mutex;

use crate::capabilities::{self, Feature, Support, UploadFlow};
use crate::client::RegistryClient;
use crate::digest::Digest;
use crate::error::{Error, ErrorKind};
use crate::operation::Operation;
use crate::quirks;
use crate::retry::{Call, Failure, Sent};

use super::upload::UploadSession;

/// A blob's bytes as they go up: chunks, or the failure that ended the read.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, Failure>> + Send>>;

/// How uploads are shaped.
#[derive(Debug, Clone, Copy)]
pub struct UploadShape {
    /// Bytes per PATCH in a chunked upload.
    pub chunk_size: u64,
    /// Blobs up to this size go in one request.
    pub monolithic_limit: u64,
}

impl UploadShape {
    /// Whether a blob of `size` bytes goes to `host` in one request (the closing PUT, or
    /// docker's one PATCH) rather than in chunks: at most the monolithic limit, unless the
    /// registry's quirks say otherwise.
    pub fn fits_one_request(&self, host: &str, size: u64) -> bool {
        !quirks::needs_chunked_uploads(host)
            && (size <= self.monolithic_limit || quirks::single_request_uploads(host))
    }
}

/// Where `push_blob` reads a blob's bytes again: for a resumed attempt, or a flow that starts
/// over.
pub trait BlobBytes: Sync {
    /// A fresh read of the blob from `offset`; its failure ends the attempt.
    fn open(&self, offset: u64) -> impl Future<Output = Result<ByteStream, Failure>> + Send;

    /// A failure of the bytes themselves (they do not match their digest) that stands for
    /// whatever the registry answered: the upload ends with it, retried nowhere.
    fn poisoned(&self) -> Option<ErrorKind> {
        None
    }
}

/// One blob to push.
#[derive(Debug)]
pub struct BlobPush<'a> {
    /// The repository it goes to.
    pub repository: &'a str,
    /// Its digest, checked by the registry at the closing PUT.
    pub digest: &'a Digest,
    /// Its size in bytes.
    pub size: u64,
    /// How uploads are shaped.
    pub shape: UploadShape,
    /// The session a refused mount opened, to upload into instead of starting another.
    pub session: Option<UploadSession>,
}

/// The flow a blob went up with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushFlow {
    /// POST, then one PUT carrying the bytes.
    Monolithic,
    /// POST, PATCHes with `Content-Range`, then an empty PUT.
    Chunked,
    /// Docker's: POST, one PATCH without `Content-Range`, then an empty PUT.
    Docker,
    /// The session was gone after a lost reply, and the registry already held the blob.
    AlreadyThere,
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

/// A stream as a request body.
fn body(stream: ByteStream) -> reqwest::Body {
    reqwest::Body::wrap_stream(stream)
}

impl RegistryClient {
    /// Pushes one blob, retried and resumed: opens a session (unless `push.session` is one a
    /// refused mount opened), then sends the bytes in the flow the registry takes. The first
    /// attempt streams `first` (a tee's stream, already primed by the caller; its failure fails
    /// that attempt); later ones read `bytes` again from the offset the session holds.
    pub async fn push_blob<B: BlobBytes>(
        &self,
        push: BlobPush<'_>,
        first: Option<Result<ByteStream, Failure>>,
        bytes: &B,
    ) -> Result<PushFlow, Error> {
        let BlobPush {
            repository,
            digest,
            size,
            shape,
            session,
        } = push;
        let source_failed = matches!(first, Some(Err(_)));
        let first = std::sync::Mutex::new(first);
        let take_first = || first.lock().unwrap_or_else(|p| p.into_inner()).take();
        // The session is opened, retried on its own: an upload attempt is one write (a PUT, or
        // docker's PATCH and PUT), and a lost POST reply costs a retry of the POST rather than
        // an attempt of the upload. A POST that needs a retry lets the first stream go (the
        // caller's tee goes on without this upload, which reads the bytes again later), so one
        // lost reply does not stall the blob's other targets through the backoff.
        let session = match session {
            Some(s) => Some(s),
            None if source_failed => None,
            None => {
                let call = Call::new(Operation::UploadStart, Some(repository));
                let opened = self
                    .run(call, |attempt| {
                        if attempt.number > 1 {
                            drop(take_first());
                        }
                        self.start_upload_once(repository)
                    })
                    .await?;
                Some(opened)
            }
        };
        let session = Mutex::new(session);
        // Named for what an attempt sends: the closing PUT with the bytes, or chunks.
        let operation = if shape.fits_one_request(self.host(), size) {
            Operation::UploadFinish
        } else {
            Operation::UploadChunk
        };
        let blob = Blob {
            repository,
            digest,
            size,
            shape,
        };
        let call = Call::new(operation, Some(repository));
        self.run(call, |attempt| {
            let tee = take_first();
            let blob = &blob;
            let session = &session;
            async move {
                let result = self
                    .upload_attempt(blob, bytes, tee, session, attempt.number)
                    .await;
                result.map_err(|f| match bytes.poisoned() {
                    Some(kind) => Failure::Final(kind),
                    None => f,
                })
            }
        })
        .await
    }

    /// One attempt at getting the blob into the repository. The first attempt streams `tee`; a
    /// later one asks the session how much it holds and sends only the rest, read again.
    async fn upload_attempt<B: BlobBytes>(
        &self,
        blob: &Blob<'_>,
        bytes: &B,
        tee: Option<Result<ByteStream, Failure>>,
        session: &Mutex<Option<UploadSession>>,
        attempt: u32,
    ) -> Result<PushFlow, Failure> {
        let tee = tee.transpose()?;
        let mut current = session.lock().await.clone();
        let mut offset = 0;
        if attempt > 1
            && let Some(s) = &current
        {
            match self.upload_status_once(s).await {
                Ok(held) => offset = held,
                Err(Failure::Status { status: 404, .. }) => {
                    // The session is gone: a lost reply may hide a finished upload.
                    if self
                        .head_blob(blob.repository, blob.digest)
                        .await
                        .map_err(|e| Failure::Inner(Box::new(e)))?
                        .is_some()
                    {
                        return Ok(PushFlow::AlreadyThere);
                    }
                    current = None;
                }
                Err(f) => return Err(f),
            }
        }
        let mut s = match current {
            Some(s) => s,
            None => {
                let s = self.start_upload_once(blob.repository).await?;
                *session.lock().await = Some(s.clone());
                s
            }
        };
        let small = blob.shape.fits_one_request(self.host(), blob.size);
        if offset > 0 && offset >= blob.size {
            // Every byte landed before a reply was lost (the last chunk's): only the close is
            // missing, and there is nothing past the end to read again.
            self.finish_upload_once(&s, blob.digest, None).await?;
            return Ok(if small {
                PushFlow::Docker
            } else {
                PushFlow::Chunked
            });
        }
        let stream = match tee {
            Some(stream) if offset == 0 => stream,
            _ => bytes.open(offset).await?,
        };
        let caps = self.capabilities();
        let chunks_refused = caps.support(Feature::ChunkedPatch) == Support::Refused;
        if (small && caps.upload_flow() == UploadFlow::Docker) || chunks_refused {
            // Docker's flow: the rest of the blob in one PATCH (appended to what the session
            // holds, so a resumed attempt sends only what is missing), then an empty PUT.
            s = self
                .patch_stream_once(&s, blob.size.saturating_sub(offset), body(stream))
                .await?;
            *session.lock().await = Some(s.clone());
            self.finish_upload_once(&s, blob.digest, None).await?;
            return Ok(PushFlow::Docker);
        }
        if small && offset == 0 {
            return match self
                .finish_upload_once(&s, blob.digest, Some((body(stream), blob.size)))
                .await
            {
                Err(Failure::Status { status, .. }) if capabilities::refuses_flow(status) => {
                    self.docker_flow(blob, bytes, session, &s, Refused::PutBody)
                        .await
                }
                other => other.map(|()| PushFlow::Monolithic),
            };
        }
        let fresh = offset == 0;
        let shared = Arc::new(Mutex::new((stream, None::<Bytes>)));
        let host = self.host();
        while offset < blob.size {
            let chunk = quirks::max_chunk(host)
                .map_or(blob.shape.chunk_size, |m| m.min(blob.shape.chunk_size));
            let n = chunk.max(1).min(blob.size - offset);
            let part: ByteStream = Box::pin(take_bytes(Arc::clone(&shared), n));
            s = match self.patch_chunk_once(&s, offset, n, body(part)).await {
                // The first chunk of a session just accepted, refused: chunks are not taken here.
                Err(Failure::Status { status, .. })
                    if fresh && offset == 0 && capabilities::refuses_flow(status) =>
                {
                    return self
                        .docker_flow(blob, bytes, session, &s, Refused::Chunks)
                        .await;
                }
                other => other?,
            };
            *session.lock().await = Some(s.clone());
            offset += n;
        }
        self.finish_upload_once(&s, blob.digest, None).await?;
        Ok(PushFlow::Chunked)
    }

    /// The registry refused the cheapest flow for this blob in a way that is about the flow
    /// (see `capabilities::refuses_flow`): the blob goes up again through docker's flow (POST,
    /// one PATCH with the whole blob read afresh, empty PUT) inside the same attempt, so the
    /// refusal spends neither a retry nor the breaker. Once that works, the registry keeps
    /// docker's flow for the rest of the run; if it fails too, that failure is the retry
    /// loop's to judge.
    async fn docker_flow<B: BlobBytes>(
        &self,
        blob: &Blob<'_>,
        bytes: &B,
        session: &Mutex<Option<UploadSession>>,
        refused: &UploadSession,
        what: Refused,
    ) -> Result<PushFlow, Failure> {
        tracing::debug!(
            registry = self.host(),
            repository = blob.repository,
            blob = %blob.digest,
            "upload refused for its flow: trying docker's flow"
        );
        let _ = self.cancel_upload_once(refused).await;
        *session.lock().await = None;
        let s = self.start_upload_once(blob.repository).await?;
        *session.lock().await = Some(s.clone());
        let stream = bytes.open(0).await?;
        let s = self.patch_stream_once(&s, blob.size, body(stream)).await?;
        *session.lock().await = Some(s.clone());
        self.finish_upload_once(&s, blob.digest, None).await?;
        let caps = self.capabilities();
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
                registry = self.host(),
                refused = ?what,
                "the registry refused the cheapest upload flow: docker's flow (POST, PATCH, empty PUT) for it from now on"
            );
        }
        Ok(PushFlow::Docker)
    }
}

/// The blob an upload attempt works on.
struct Blob<'a> {
    repository: &'a str,
    digest: &'a Digest,
    size: u64,
    shape: UploadShape,
}

/// A blob held in memory (a config, a test fixture), read again from any offset.
pub struct InMemory(pub Bytes);

impl BlobBytes for InMemory {
    fn open(&self, offset: u64) -> impl Future<Output = Result<ByteStream, Failure>> + Send {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let rest = self.0.slice(start..);
        async move {
            let stream: ByteStream = Box::pin(futures::stream::once(async move { Ok(rest) }));
            Ok(stream)
        }
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
                            sent: Sent::Unknown,
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
