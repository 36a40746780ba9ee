//! Blob writes: upload sessions (POST), cross-repository mounts, chunks at explicit offsets
//! (PATCH with `Content-Range`), the session's own `Range`, and the closing PUT `?digest=`.

use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use url::Url;

use crate::auth::Scopes;
use crate::capabilities::{self, Feature, Support};
use crate::client::RegistryClient;
use crate::digest::Digest;
use crate::error::{Error, ErrorKind};
use crate::operation::Operation;
use crate::retry::{Call, Failure};

use super::{Segment, expect_status, invalid, repository_name, repository_url};

/// An open upload session. Every answer may move it: keep the latest `location`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadSession {
    /// The repository the blob goes to.
    pub repository: String,
    /// Where the next request of the session goes (absolute; the registry may move it).
    pub location: Url,
    /// `OCI-Chunk-Min-Length`: chunks (but the last) must be at least this long.
    pub min_chunk: Option<u64>,
}

/// What a mount request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountOutcome {
    /// The blob is now in the target repository.
    Mounted,
    /// Not mounted; the registry opened an ordinary upload session instead (use it).
    Session(UploadSession),
}

impl RegistryClient {
    fn session_from(
        &self,
        repository: &str,
        response: &reqwest::Response,
        previous: Option<&UploadSession>,
    ) -> Result<UploadSession, Failure> {
        let location = match response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
        {
            Some(l) => self.same_origin(l)?,
            None => match previous {
                Some(p) => p.location.clone(),
                None => return Err(invalid("upload session without Location")),
            },
        };
        let min_chunk = response
            .headers()
            .get("oci-chunk-min-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .or(previous.and_then(|p| p.min_chunk));
        Ok(UploadSession {
            repository: repository.to_owned(),
            location,
            min_chunk,
        })
    }

    /// `POST /v2/<name>/blobs/uploads/`: one attempt.
    pub async fn start_upload_once(&self, repository: &str) -> Result<UploadSession, Failure> {
        self.name_accepted(repository)?;
        let name = repository_name(repository)?;
        let url = repository_url(
            self,
            &name,
            &[
                Segment::Fixed("blobs"),
                Segment::Fixed("uploads"),
                Segment::Fixed(""),
            ],
        );
        let response = self
            .send(&Scopes::push(repository), |http| {
                http.post(url.clone()).header(CONTENT_LENGTH, "0")
            })
            .await?;
        let response = expect_status(response, &[202])
            .await
            .map_err(|f| self.learn_name_refusal(repository, f))?;
        self.session_from(repository, &response, None)
    }

    /// Fails at once, without a request, a write to a one-component repository name on a
    /// registry that has refused one.
    pub fn name_accepted(&self, repository: &str) -> Result<(), Failure> {
        if capabilities::is_one_component(repository)
            && self.capabilities().support(Feature::OneComponentNames) == Support::Refused
        {
            return Err(one_component_refused(repository));
        }
        Ok(())
    }

    /// A write refused because the repository name has one component: learned for the
    /// registry, and reported as such (final: sending it again cannot help).
    pub fn learn_name_refusal(&self, repository: &str, failure: Failure) -> Failure {
        match &failure {
            Failure::Status { status, code, .. }
                if capabilities::is_one_component(repository)
                    && capabilities::refuses_name(*status, code.as_deref()) =>
            {
                self.capabilities()
                    .learn(Feature::OneComponentNames, Support::Refused);
                one_component_refused(repository)
            }
            _ => failure,
        }
    }

    /// `POST …/uploads/?mount=<digest>&from=<repo>`: one attempt.
    pub async fn mount_once(
        &self,
        repository: &str,
        digest: &Digest,
        from: &str,
    ) -> Result<MountOutcome, Failure> {
        let name = repository_name(repository)?;
        repository_name(from)?;
        let mut url = repository_url(
            self,
            &name,
            &[
                Segment::Fixed("blobs"),
                Segment::Fixed("uploads"),
                Segment::Fixed(""),
            ],
        );
        url.query_pairs_mut()
            .append_pair("mount", &digest.to_string())
            .append_pair("from", from);
        let response = self
            .send(&Scopes::mount(repository, from), |http| {
                http.post(url.clone()).header(CONTENT_LENGTH, "0")
            })
            .await?;
        match response.status() {
            StatusCode::CREATED => Ok(MountOutcome::Mounted),
            StatusCode::ACCEPTED => Ok(MountOutcome::Session(
                self.session_from(repository, &response, None)?,
            )),
            _ => Err(Failure::from_response(response).await),
        }
    }

    /// `GET <location>`: how many bytes the session holds (the next offset to send).
    pub async fn upload_status_once(&self, session: &UploadSession) -> Result<u64, Failure> {
        let url = session.location.clone();
        let response = self
            .send(&Scopes::push(&session.repository), |http| {
                http.get(url.clone())
            })
            .await?;
        let response = expect_status(response, &[204, 200]).await?;
        Ok(next_offset(&response))
    }

    /// `PATCH <location>` with `Content-Range: <offset>-<offset+len-1>`: one attempt. Returns
    /// the session as the registry now names it.
    pub async fn patch_chunk_once(
        &self,
        session: &UploadSession,
        offset: u64,
        len: u64,
        body: reqwest::Body,
    ) -> Result<UploadSession, Failure> {
        let end = offset.saturating_add(len.saturating_sub(1));
        self.patch_once(session, Some(format!("{offset}-{end}")), len, body)
            .await
    }

    /// `PATCH <location>` carrying `len` bytes without `Content-Range` (docker's flow: the
    /// registry appends them to what the session holds): one attempt.
    pub async fn patch_stream_once(
        &self,
        session: &UploadSession,
        len: u64,
        body: reqwest::Body,
    ) -> Result<UploadSession, Failure> {
        self.patch_once(session, None, len, body).await
    }

    /// One PATCH of `len` bytes on `session`, with `Content-Range` when given.
    async fn patch_once(
        &self,
        session: &UploadSession,
        content_range: Option<String>,
        len: u64,
        body: reqwest::Body,
    ) -> Result<UploadSession, Failure> {
        let mut request = self
            .http()
            .patch(session.location.clone())
            .header(CONTENT_TYPE, "application/octet-stream")
            .header(CONTENT_LENGTH, len.to_string());
        if let Some(range) = content_range {
            request = request.header("content-range", range);
        }
        let response = self
            .send_streaming(&Scopes::push(&session.repository), request.body(body))
            .await?;
        let response = expect_status(response, &[202, 204]).await?;
        self.count(|s| s.written(len));
        self.session_from(&session.repository, &response, Some(session))
    }

    /// `PUT <location>?digest=<digest>`, with the last bytes if any: one attempt.
    pub async fn finish_upload_once(
        &self,
        session: &UploadSession,
        digest: &Digest,
        last: Option<(reqwest::Body, u64)>,
    ) -> Result<(), Failure> {
        let mut url = session.location.clone();
        url.query_pairs_mut()
            .append_pair("digest", &digest.to_string());
        let len = last.as_ref().map_or(0, |(_, l)| *l);
        let body = last.map_or_else(|| reqwest::Body::from(Bytes::new()), |(b, _)| b);
        let request = self
            .http()
            .put(url)
            .header(CONTENT_TYPE, "application/octet-stream")
            .header(CONTENT_LENGTH, len.to_string())
            .body(body);
        let response = self
            .send_streaming(&Scopes::push(&session.repository), request)
            .await?;
        expect_status(response, &[201, 204]).await?;
        self.count(|s| s.written(len));
        // Auth task (issue 31): what ferry committed, for a manifest PUT's commit lag.
        self.capabilities()
            .auth
            .committed(&session.repository, &digest.to_string());
        Ok(())
    }

    /// `DELETE <location>`: abandons a session (best effort, one attempt).
    pub async fn cancel_upload_once(&self, session: &UploadSession) -> Result<(), Failure> {
        let url = session.location.clone();
        let response = self
            .send(&Scopes::push(&session.repository), |http| {
                http.delete(url.clone())
            })
            .await?;
        expect_status(response, &[200, 202, 204, 404]).await?;
        Ok(())
    }

    /// Mounts `digest` from `from` into `repository`, retried. A registry that refuses mounts
    /// (learned here, once) gets an ordinary upload session instead, in the same attempt.
    pub async fn mount_blob(
        &self,
        repository: &str,
        digest: &Digest,
        from: &str,
    ) -> Result<MountOutcome, Error> {
        self.run(
            Call::new(Operation::Mount, Some(repository)),
            |_| async move {
                self.name_accepted(repository)?;
                // Auth task (issue 31): a mount needs one token for two scopes.
                if self.capabilities().support(Feature::Mount).is_unavailable()
                    || self.capabilities().auth.multi_scope_refused()
                {
                    return Ok(MountOutcome::Session(
                        self.start_upload_once(repository).await?,
                    ));
                }
                match self.mount_once(repository, digest, from).await {
                    Ok(MountOutcome::Mounted) => {
                        self.capabilities().learn(Feature::Mount, Support::Works);
                        self.capabilities()
                            .auth
                            .committed(repository, &digest.to_string());
                        Ok(MountOutcome::Mounted)
                    }
                    // Auth task (issue 31): the token for the mount's two scopes was refused.
                    Err(_) if self.capabilities().auth.multi_scope_refused() => Ok(
                        MountOutcome::Session(self.start_upload_once(repository).await?),
                    ),
                    Ok(session) => Ok(session),
                    Err(Failure::Status { status, code, .. })
                        if capabilities::refuses_mount(status)
                            && !(capabilities::is_one_component(repository)
                                && capabilities::refuses_name(status, code.as_deref())) =>
                    {
                        self.capabilities().learn(Feature::Mount, Support::Refused);
                        Ok(MountOutcome::Session(
                            self.start_upload_once(repository).await?,
                        ))
                    }
                    Err(f) => Err(self.learn_name_refusal(repository, f)),
                }
            },
        )
        .await
    }
}

fn one_component_refused(repository: &str) -> Failure {
    Failure::Final(ErrorKind::Refused(format!(
        "the registry refuses one-component repository names ({repository:?}): name the \
         target with a namespace, e.g. <namespace>/{repository}"
    )))
}

/// The offset after the bytes a session holds, from its `Range: 0-<last>` header.
fn next_offset(response: &reqwest::Response) -> u64 {
    response
        .headers()
        .get("range")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().trim_start_matches("bytes=").split_once('-'))
        .and_then(|(_, end)| end.trim().parse::<u64>().ok())
        // `0-0` is what distribution answers for an empty session as well as for one byte:
        // read it as empty (a replay of one byte is refused with 416, never doubled).
        .map_or(0, |end| if end == 0 { 0 } else { end.saturating_add(1) })
}
