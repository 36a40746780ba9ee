//! The blob upload protocol: one `push_blob` that picks the flow (one PUT, chunks, or docker's
//! POST, PATCH, empty PUT) and the PATCH size from the registry's learned capabilities, and resumes.

// The retry structure is the engine's as it was: the session is opened under its own
// `UploadStart` call, then the write is one `UploadFinish` (one request) or `UploadChunk` call
// whose later attempts ask the session what it holds and send only the rest. A refusal that is
// about the flow (`capabilities::upload_refusal`, judged by `judge`) takes docker's flow inside the
// same attempt, and one about the size shrinks the PATCHes in the same session, so neither spends
// a retry nor the breaker; docs/registries.md lists what each answer teaches.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::sync::Mutex;

use crate::capabilities::{self, Feature, Support, UploadFlow, UploadRefusal};
use crate::client::RegistryClient;
use crate::digest::Digest;
use crate::error::{Error, ErrorKind};
use crate::operation::Operation;
use crate::retry::{Call, Failure, Sent};

use super::resume::{UploadJournal, UploadKey};
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
    /// Whether a blob of `size` bytes goes in one request (the closing PUT, or docker's one
    /// PATCH) rather than in chunks: at most the monolithic limit, and at most the largest
    /// request body the registry was learned to take (`max_patch`), if any.
    pub fn fits_one_request(&self, size: u64, max_patch: Option<u64>) -> bool {
        size <= self.monolithic_limit && max_patch.is_none_or(|m| size <= m)
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

    /// The upload goes on from `offset` bytes a session an earlier process recorded already
    /// holds (told once, before the rest is read): the caller reports the resume.
    fn resumed(&self, offset: u64) {
        let _ = offset;
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
    /// A later chunked PATCH: says nothing about the flow (only about its size, if too large).
    LaterChunk,
    /// The closing PUT carrying the blob broke without an answer, and had in an earlier
    /// attempt of this blob too.
    PutBodyAgain,
}

/// A stream as a request body.
fn body(stream: ByteStream) -> reqwest::Body {
    reqwest::Body::wrap_stream(stream)
}

impl RegistryClient {
    /// Pushes one blob, retried and resumed: opens a session (unless `push.session` is one a
    /// refused mount opened, or the journal holds one an earlier process left), then sends the
    /// bytes in the flow the registry takes. The first attempt streams `first` (a tee's stream,
    /// already primed by the caller; its failure fails that attempt); later ones read `bytes`
    /// again from the offset the session holds.
    pub async fn push_blob<B: BlobBytes>(
        &self,
        push: BlobPush<'_>,
        first: Option<Result<ByteStream, Failure>>,
        bytes: &B,
    ) -> Result<PushFlow, Error> {
        let recalled = match &push.session {
            Some(_) => None,
            None => {
                self.recorded_upload(push.repository, push.digest, push.size)
                    .await
            }
        };
        self.push_blob_recalled(push, recalled, first, bytes).await
    }

    /// [`RegistryClient::push_blob`] for a caller that read the journal already
    /// ([`RegistryClient::recorded_upload`], once per blob and repository): `recalled` is its
    /// answer, used as it is (the journal is not read again, so the caller's decision to feed
    /// this upload from its tee or not and the upload's own agree).
    pub async fn push_blob_recalled<B: BlobBytes>(
        &self,
        push: BlobPush<'_>,
        recalled: Option<UploadSession>,
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
        let key = UploadKey {
            host: self.host(),
            repository,
            digest,
            size,
        };
        let journal = self.journal();
        // A session an earlier process left for this blob (the state directory): its status is
        // asked before anything is sent, and the blob goes on from what it holds.
        let recalled = match &session {
            Some(_) => None,
            None => recalled,
        };
        let resumed = AtomicBool::new(recalled.is_some());
        // The session is opened, retried on its own: an upload attempt is one write (a PUT, or
        // docker's PATCH and PUT), and a lost POST reply costs a retry of the POST rather than
        // an attempt of the upload. A POST that needs a retry lets the first stream go (the
        // caller's tee goes on without this upload, which reads the bytes again later), so one
        // lost reply does not stall the blob's other targets through the backoff.
        let session = match session.or(recalled) {
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
        let operation = if shape.fits_one_request(size, self.capabilities().max_patch()) {
            Operation::UploadFinish
        } else {
            Operation::UploadChunk
        };
        let blob = Blob {
            repository,
            digest,
            size,
            shape,
            journal,
        };
        let call = Call::new(operation, Some(repository));
        // Set when an attempt's PUT carrying the blob broke (a reset, no answer): a second
        // break of that PUT, in a later attempt, is a refusal that repeats (see `judge`).
        let broke = AtomicBool::new(false);
        let resumed = &resumed;
        let pushed = self
            .run(call, |attempt| {
                let tee = take_first();
                let blob = &blob;
                let session = &session;
                let broke = &broke;
                // A later attempt, or the first on a recalled session, asks what it holds.
                let ask = if resumed.swap(false, Ordering::AcqRel) {
                    Ask::Recalled
                } else if attempt.number > 1 {
                    Ask::Retry
                } else {
                    Ask::No
                };
                async move {
                    let result = self
                        .upload_attempt(blob, bytes, tee, session, ask, broke)
                        .await;
                    result.map_err(|f| match bytes.poisoned() {
                        Some(kind) => Failure::Final(kind),
                        None => f,
                    })
                }
            })
            .await;
        if let Some(j) = journal {
            match &pushed {
                Ok(_) => j.forget(key).await,
                // Stopped at a chunk boundary: the record of the last acknowledged chunk stays.
                Err(e) if e.kind == ErrorKind::Cancelled => {}
                // A failed upload leaves its record only if the session may still be resumed.
                Err(e)
                    if !matches!(
                        e.kind,
                        ErrorKind::Transport(_)
                            | ErrorKind::DeadlineExceeded
                            | ErrorKind::Throttled { .. }
                            | ErrorKind::BreakerOpen
                    ) =>
                {
                    j.forget(key).await
                }
                Err(_) => {}
            }
        }
        pushed
    }

    /// The session a journal holds for this blob that an upload resumes (one read of the
    /// journal): the caller need not start a read of the source from byte 0 for it, and hands
    /// it to [`RegistryClient::push_blob_recalled`].
    pub async fn recorded_upload(
        &self,
        repository: &str,
        digest: &Digest,
        size: u64,
    ) -> Option<UploadSession> {
        let key = UploadKey {
            host: self.host(),
            repository,
            digest,
            size,
        };
        let journal = self.journal()?;
        self.recalled_session(journal, key).await
    }

    /// The journal's session for `key`, if its Location is on this registry's own origin; a
    /// record pointing anywhere else is dropped with a warning (never followed).
    async fn recalled_session(
        &self,
        journal: &dyn UploadJournal,
        key: UploadKey<'_>,
    ) -> Option<UploadSession> {
        let recorded = journal.recall(key, self.base_url()).await?;
        match self.same_origin(recorded.location.as_str()) {
            Ok(location) => Some(UploadSession {
                repository: key.repository.to_owned(),
                location,
                min_chunk: None,
            }),
            Err(_) => {
                tracing::warn!(
                    registry = self.host(),
                    repository = key.repository,
                    blob = %key.digest,
                    "a recorded upload session points outside the registry's origin: ignored and removed"
                );
                journal.forget(key).await;
                None
            }
        }
    }

    /// One attempt at getting the blob into the repository. The first attempt streams `tee`; a
    /// later one asks the session how much it holds and sends only the rest, read again.
    async fn upload_attempt<B: BlobBytes>(
        &self,
        blob: &Blob<'_>,
        bytes: &B,
        tee: Option<Result<ByteStream, Failure>>,
        session: &Mutex<Option<UploadSession>>,
        ask: Ask,
        broke: &AtomicBool,
    ) -> Result<PushFlow, Failure> {
        let journal = blob.journal;
        // The tee's read failed before its first byte: the source's failure, not this
        // registry's (a digest mismatch or an inner error stays what it is).
        let tee = tee.transpose().map_err(|f| match f {
            f @ Failure::Transport { .. } => Failure::on_ferrys_side(&f),
            other => other,
        })?;
        let mut current = session.lock().await.clone();
        let mut offset = 0;
        if ask != Ask::No
            && let Some(s) = &current
        {
            match self.upload_status_once(s).await {
                // A session holding more than the blob is not this blob's: start over.
                Ok(held) if held > blob.size => {
                    tracing::debug!(registry = self.host(), repository = blob.repository, blob = %blob.digest, held, "upload session holds more than the blob: starting over");
                    current = None;
                }
                Ok(held) => {
                    offset = held;
                    if ask == Ask::Recalled && held > 0 {
                        tracing::debug!(registry = self.host(), repository = blob.repository, blob = %blob.digest, held, "recorded upload session: going on from its offset");
                        bytes.resumed(held);
                    }
                }
                // A recalled session the registry refuses in any way (404 or 400
                // BLOB_UPLOAD_INVALID/UNKNOWN: distribution 2.8 after a PATCH cut mid-body, or
                // purged; 401/403 for another credential) starts over, with nothing reported.
                Err(Failure::Status { status, .. })
                    if ask == Ask::Recalled && (400..500).contains(&status) =>
                {
                    tracing::debug!(registry = self.host(), repository = blob.repository, blob = %blob.digest, status, "recorded upload session is gone: starting over");
                    current = None;
                }
                // The session is gone (404), or the registry cannot say what it holds (405,
                // 501: no status endpoint, as the container-registry binary): a lost reply may
                // hide a finished upload; otherwise the blob starts over in a fresh session.
                Err(Failure::Status {
                    status: 404 | 405 | 501,
                    ..
                }) => {
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
        let caps = self.capabilities();
        let before = Learned::now(self);
        let small = blob.shape.fits_one_request(blob.size, caps.max_patch());
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
        let mut stream = match tee {
            Some(stream) if offset == 0 => stream,
            other => {
                // The tee is let go at once, so the blob's other destinations do not wait on it.
                drop(other);
                bytes.open(offset).await?
            }
        };
        if (small && before.docker) || before.chunks_refused {
            // Docker's flow: the rest of the blob in one PATCH (appended to what the session
            // holds, so a resumed attempt sends only what is missing), then an empty PUT.
            s = self
                .patch_stream_once(&s, blob.size.saturating_sub(offset), body(stream))
                .await?;
            *session.lock().await = Some(s.clone());
            self.finish_upload_once(&s, blob.digest, None).await?;
            return Ok(PushFlow::Docker);
        }
        // Set once an ambiguous refusal was sent again on a fresh session (see `Next::Probe`).
        let mut probed = false;
        if small && offset == 0 {
            loop {
                let failure = match self
                    .finish_upload_once(&s, blob.digest, Some((body(stream), blob.size)))
                    .await
                {
                    Ok(()) => return Ok(PushFlow::Monolithic),
                    Err(f) => f,
                };
                // Only the registry's breaks count: bytes that broke off on ferry's side (a
                // source's cut body) say nothing about how this registry takes a PUT.
                let broke_before = matches!(failure, Failure::Transport { local: false, .. })
                    && broke.swap(true, Ordering::AcqRel);
                let what = if broke_before {
                    Refused::PutBodyAgain
                } else {
                    Refused::PutBody
                };
                match self.judge(&failure, before, blob.size, what, probed) {
                    Next::Docker { teach } => {
                        return self
                            .docker_flow(blob, bytes, session, &s, Refused::PutBody, teach)
                            .await;
                    }
                    Next::Probe => {
                        probed = true;
                        s = self.fresh_session(blob, session, &s).await?;
                        stream = bytes.open(0).await?;
                    }
                    // Too large for one request: the same session goes on in PATCHes of the
                    // learned size (the refused PUT stored nothing).
                    Next::Smaller => {
                        stream = bytes.open(0).await?;
                        break;
                    }
                    Next::Fail => return Err(failure),
                }
            }
        }
        let fresh = offset == 0;
        let mut shared = Arc::new(Mutex::new((stream, None::<Bytes>)));
        while offset < blob.size {
            let chunk = caps
                .max_patch()
                .map_or(blob.shape.chunk_for(blob.size), |m| {
                    m.min(blob.shape.chunk_for(blob.size))
                });
            let n = chunk.max(1).min(blob.size - offset);
            // Stopping (SIGTERM): no further PATCH; the last acknowledged one is recorded, and
            // the next process resumes from it.
            if journal.is_some_and(|j| j.stopping()) {
                return Err(Failure::Final(ErrorKind::Cancelled));
            }
            let part: ByteStream = Box::pin(take_bytes(Arc::clone(&shared), n));
            let failure = match self.patch_chunk_once(&s, offset, n, body(part)).await {
                Ok(next) => {
                    s = next;
                    *session.lock().await = Some(s.clone());
                    offset += n;
                    if let Some(j) = journal {
                        j.record(blob.key(self), &s.location, offset).await;
                    }
                    continue;
                }
                Err(f) => f,
            };
            // A 416 (naming no size limit) from a session that holds more than was thought (a
            // lost reply whose bytes landed after the status was asked): a resume point.
            if let Some(held) = self.resume_point(&s, &failure, offset, blob.size).await {
                offset = held;
                if let Some(j) = journal {
                    j.record(blob.key(self), &s.location, offset).await;
                }
                if offset < blob.size {
                    shared = Arc::new(Mutex::new((bytes.open(offset).await?, None)));
                }
                continue;
            }
            // Only the first chunk of a session just accepted says something about chunks; a
            // later one refused is the retry loop's (it resumes from what the session holds).
            let what = if fresh && offset == 0 {
                Refused::Chunks
            } else {
                Refused::LaterChunk
            };
            match self.judge(&failure, before, n, what, probed) {
                Next::Docker { teach } => {
                    return self
                        .docker_flow(blob, bytes, session, &s, Refused::Chunks, teach)
                        .await;
                }
                Next::Probe => {
                    probed = true;
                    s = self.fresh_session(blob, session, &s).await?;
                    shared = Arc::new(Mutex::new((bytes.open(0).await?, None)));
                }
                // The refused chunk stored nothing: the same session goes on from the same
                // offset in smaller chunks, read again from there.
                Next::Smaller => {
                    shared = Arc::new(Mutex::new((bytes.open(offset).await?, None)));
                }
                Next::Fail => return Err(failure),
            }
        }
        self.finish_upload_once(&s, blob.digest, None).await?;
        Ok(PushFlow::Chunked)
    }

    /// The offset to go on from after `failure` refused a PATCH at `offset`: a 416 that names
    /// no size limit, when the session's status says it holds more than `offset` (and no more
    /// than the blob). `None`: the failure is judged as before.
    async fn resume_point(
        &self,
        s: &UploadSession,
        failure: &Failure,
        offset: u64,
        size: u64,
    ) -> Option<u64> {
        let Failure::Status {
            status: 416,
            code,
            message,
            ..
        } = failure
        else {
            return None;
        };
        if let Some(UploadRefusal::TooLarge(_)) =
            capabilities::upload_refusal(416, code.as_deref(), message.as_deref())
        {
            return None;
        }
        let held = self.upload_status_once(s).await.ok()?;
        (held > offset && held <= size).then(|| {
            tracing::debug!(registry = self.host(), repository = %s.repository, offset, held, "the session holds more than was sent: going on from its offset");
            held
        })
    }

    /// What to do after the registry refused (or failed) a request carrying bytes of `len`:
    /// the learn-from-repeat rule (docs/registries.md, "Capabilities"). A flow learned while the
    /// request was in flight takes this blob through it without a new lesson; a refusal about
    /// the flow alone (`UploadRefusal::Flow`) teaches docker's flow at once; an ambiguous one
    /// (`MaybeFlow`: a 500 or 400 a retry might clear) is sent again once on a fresh session and
    /// teaches only when refused again; a body too large shrinks the PATCH size. Anything else
    /// is the retry loop's.
    fn judge(
        &self,
        failure: &Failure,
        before: Learned,
        len: u64,
        what: Refused,
        probed: bool,
    ) -> Next {
        let now = Learned::now(self);
        let overtaken = match what {
            Refused::PutBody | Refused::PutBodyAgain => now.docker && !before.docker,
            Refused::Chunks | Refused::LaterChunk => now.chunks_refused && !before.chunks_refused,
        };
        if overtaken {
            return Next::Docker { teach: false };
        }
        let Failure::Status {
            status,
            code,
            message,
            ..
        } = failure
        else {
            // A broken PUT carrying the blob is the retry loop's, unless it broke in an
            // earlier attempt too: a registry that answers such a PUT before reading it (the
            // container-registry binary) resets every large one, and docker's flow is learned.
            return match what {
                Refused::PutBodyAgain => Next::Docker { teach: true },
                _ => Next::Fail,
            };
        };
        let about_flow = !matches!(what, Refused::LaterChunk);
        match capabilities::upload_refusal(*status, code.as_deref(), message.as_deref()) {
            Some(UploadRefusal::TooLarge(named)) => {
                match self.capabilities().learn_max_patch(len, named) {
                    Some(limit) => {
                        tracing::info!(
                            registry = self.host(),
                            refused = len,
                            limit,
                            "the registry refused a request body as too large: PATCHes of at most {limit} bytes to it from now on"
                        );
                        Next::Smaller
                    }
                    None => Next::Fail,
                }
            }
            Some(UploadRefusal::Flow) if about_flow => Next::Docker { teach: true },
            Some(UploadRefusal::MaybeFlow) if about_flow && probed => Next::Docker { teach: true },
            Some(UploadRefusal::MaybeFlow) if about_flow => Next::Probe,
            _ => Next::Fail,
        }
    }

    /// Abandons `refused` (best effort) and opens a fresh session for the blob.
    async fn fresh_session(
        &self,
        blob: &Blob<'_>,
        session: &Mutex<Option<UploadSession>>,
        refused: &UploadSession,
    ) -> Result<UploadSession, Failure> {
        let _ = self.cancel_upload_once(refused).await;
        *session.lock().await = None;
        let s = self.start_upload_once(blob.repository).await?;
        *session.lock().await = Some(s.clone());
        Ok(s)
    }

    /// The registry refused the cheapest flow for this blob in a way that is about the flow
    /// (see `judge`), or learned docker's flow while this blob's request was in flight: the
    /// blob goes up again through docker's flow (POST, one PATCH with the whole blob read
    /// afresh, empty PUT) inside the same attempt, so the refusal spends neither a retry nor
    /// the breaker. With `teach`, once that works the registry keeps docker's flow for the rest
    /// of the run; if it fails too, that failure is the retry loop's to judge.
    async fn docker_flow<B: BlobBytes>(
        &self,
        blob: &Blob<'_>,
        bytes: &B,
        session: &Mutex<Option<UploadSession>>,
        refused: &UploadSession,
        what: Refused,
        teach: bool,
    ) -> Result<PushFlow, Failure> {
        tracing::debug!(
            registry = self.host(),
            repository = blob.repository,
            blob = %blob.digest,
            teach,
            "upload refused for its flow: trying docker's flow"
        );
        let s = self.fresh_session(blob, session, refused).await?;
        let stream = bytes.open(0).await?;
        let s = self.patch_stream_once(&s, blob.size, body(stream)).await?;
        *session.lock().await = Some(s.clone());
        self.finish_upload_once(&s, blob.digest, None).await?;
        if !teach {
            return Ok(PushFlow::Docker);
        }
        let caps = self.capabilities();
        let news = match what {
            Refused::PutBody | Refused::PutBodyAgain => caps.learn_docker_flow(),
            Refused::Chunks | Refused::LaterChunk => {
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

/// What the registry had shown about upload flows when a request was sent.
#[derive(Debug, Clone, Copy)]
struct Learned {
    docker: bool,
    chunks_refused: bool,
}

impl Learned {
    fn now(client: &RegistryClient) -> Learned {
        let caps = client.capabilities();
        Learned {
            docker: caps.upload_flow() == UploadFlow::Docker,
            chunks_refused: caps.support(Feature::ChunkedPatch) == Support::Refused,
        }
    }
}

/// What an upload attempt does after a refused request (`RegistryClient::judge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Docker's flow for this blob, in this attempt; `teach`: learned for the registry.
    Docker { teach: bool },
    /// The same request once more, on a fresh session (an ambiguous refusal, not yet repeated).
    Probe,
    /// The same session goes on in smaller requests (the learned `max_patch`).
    Smaller,
    /// The failure is the retry loop's.
    Fail,
}

/// The blob an upload attempt works on.
struct Blob<'a> {
    repository: &'a str,
    digest: &'a Digest,
    size: u64,
    shape: UploadShape,
    /// Where its session is recorded for the next process, if anywhere.
    journal: Option<&'a dyn UploadJournal>,
}

impl<'a> Blob<'a> {
    fn key(&self, client: &'a RegistryClient) -> UploadKey<'a> {
        UploadKey {
            host: client.host(),
            repository: self.repository,
            digest: self.digest,
            size: self.size,
        }
    }
}

/// Whether an upload attempt asks the session what it holds before sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// The first attempt on a session it opened: it holds nothing.
    No,
    /// A later attempt: the session holds what earlier ones sent.
    Retry,
    /// The first attempt on a session an earlier process recorded.
    Recalled,
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
