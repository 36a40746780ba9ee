//! What `ferry doctor` asks a registry beyond the sync's own operations: one tag-list page as
//! sent, the access a cached token grants, each upload flow tried alone, and scratch cleanup.

// Everything here is a probe: the capabilities ferry uses are learned by the sync's own
// operations (`list_tags`, `push_blob`, `mount_blob`, `delete_manifest`), which `ferry doctor`
// calls too. These only describe what those cannot show (a page size, a PATCH limit, a lag).

use base64::Engine;
use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, LINK};

use crate::auth::Scopes;
use crate::client::RegistryClient;
use crate::digest::{Algorithm, Digest};
use crate::error::Error;
use crate::operation::Operation;
use crate::retry::{Call, Failure};

use super::manifest::Manifest;
use super::{Segment, expect_status, repository_url};

/// The most bytes of one probed tag-list page that are read.
const PAGE_PROBE_BYTES: u64 = 4 * 1024 * 1024;

/// The `n` the page probe asks for: small, so a registry that imposes its own size shows it.
pub const PAGE_PROBE_N: usize = 2;

/// One tag-list page as the registry sent it for `?n=PAGE_PROBE_N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagPage {
    /// Entries in the page (strings or not).
    pub entries: usize,
    /// Whether the answer carried a `Link` header naming a next page.
    pub link: bool,
}

/// The access a token grants, read from its claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Granted {
    /// No token was minted for the scopes (no bearer auth, or no request needed one).
    NoToken,
    /// A token that is not a JWT: what it grants cannot be read.
    Opaque,
    /// A JWT's `access` claims, as `type:name:action,action` (escaped for a terminal).
    Access(Vec<String>),
}

/// The upload flows `ferry doctor --write` tries one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeFlow {
    /// POST, then one PUT carrying the bytes.
    Monolithic,
    /// Docker's: POST, one PATCH without `Content-Range`, an empty PUT.
    Docker,
    /// POST, PATCHes of at most `chunk` bytes with `Content-Range`, an empty PUT.
    Chunked {
        /// Bytes per PATCH.
        chunk: u64,
    },
}

/// A tag no one else uses, for a scratch push: `ferry-doctor-<16 hex digits>`.
pub fn scratch_tag() -> String {
    format!("ferry-doctor-{:016x}", rand::random::<u64>())
}

/// `len` random bytes (a scratch blob no registry holds yet) and their digest.
pub fn scratch_blob(len: usize) -> (Bytes, Digest) {
    let mut bytes = vec![0u8; len];
    rand::fill(&mut bytes[..]);
    let digest = Digest::of_bytes(Algorithm::Sha256, &bytes);
    (Bytes::from(bytes), digest)
}

/// The `access` claims of `token` if it is a JWT (three base64url parts, a JSON payload);
/// malformed entries are skipped, and every name is escaped, as it comes from outside.
pub fn jwt_access(token: &str) -> Option<Vec<String>> {
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || payload.len() > 64 * 1024 {
        return None;
    }
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&raw).ok()?;
    let access = match claims.get("access") {
        Some(serde_json::Value::Array(a)) => a,
        _ => return Some(Vec::new()),
    };
    let text = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).map(str::to_owned);
    Some(
        access
            .iter()
            .filter_map(|entry| {
                let kind = text(entry.get("type"))?;
                let name = text(entry.get("name"))?;
                let actions: Vec<&str> = entry
                    .get("actions")?
                    .as_array()?
                    .iter()
                    .filter_map(|a| a.as_str())
                    .collect();
                let line = format!("{kind}:{name}:{}", actions.join(","));
                Some(crate::text::for_error(&line))
            })
            .collect(),
    )
}

/// An upload refusal (`capabilities::upload_refusal`) answered to a second attempt is the registry's
/// word, not load: final, so a flow a registry refuses costs two attempts, not the whole budget.
fn refused_twice(failure: Failure, attempt: u32) -> Failure {
    match failure {
        Failure::Status {
            status,
            code,
            message,
            ..
        } if attempt >= 2
            && crate::capabilities::upload_refusal(status, code.as_deref(), message.as_deref())
                .is_some() =>
        {
            Failure::Final(crate::error::ErrorKind::Status {
                status,
                code,
                message,
            })
        }
        other => other,
    }
}

impl RegistryClient {
    /// What the token cached for `scopes` grants. Call after an operation that needed them.
    pub fn granted(&self, scopes: &Scopes) -> Granted {
        match self.authenticator().cached_token(scopes) {
            None => Granted::NoToken,
            Some(token) => match jwt_access(token.expose()) {
                Some(access) => Granted::Access(access),
                None => Granted::Opaque,
            },
        }
    }

    /// `GET /v2/<name>/tags/list?n=PAGE_PROBE_N`, retried as a tag listing: how many entries
    /// the first page holds and whether it links a next one.
    pub async fn probe_tag_page(&self, repository: &str) -> Result<TagPage, Error> {
        let name = self.repository_for(Operation::TagList, repository)?;
        let mut url = repository_url(
            self,
            &name,
            &[Segment::Fixed("tags"), Segment::Fixed("list")],
        );
        url.query_pairs_mut()
            .append_pair("n", &PAGE_PROBE_N.to_string());
        let scopes = Scopes::pull(repository);
        self.run(Call::new(Operation::TagList, Some(repository)), |_| async {
            let response = self.send(&scopes, |http| http.get(url.clone())).await?;
            let response = expect_status(response, &[200]).await?;
            let link = response
                .headers()
                .get(LINK)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains("rel=\"next\"") || v.contains("rel=next"));
            let body = crate::auth::token::read_limited(response, PAGE_PROBE_BYTES).await?;
            let value: serde_json::Value = serde_json::from_slice(&body)
                .map_err(|e| super::invalid(format!("tag list page is not JSON: {e}")))?;
            let entries = value
                .get("tags")
                .and_then(|t| t.as_array())
                .map_or(0, Vec::len);
            Ok(TagPage { entries, link })
        })
        .await
    }

    /// Uploads `bytes` (whose digest is `digest`) to `repository` in exactly `flow`, learning
    /// nothing: a refusal is the registry's error. The whole flow is one attempt of an upload
    /// (a transient failure starts it again in a new session); a failed session is abandoned.
    pub async fn probe_flow(
        &self,
        repository: &str,
        flow: ProbeFlow,
        digest: &Digest,
        bytes: &Bytes,
    ) -> Result<(), Error> {
        let operation = match flow {
            ProbeFlow::Monolithic => Operation::UploadFinish,
            ProbeFlow::Docker | ProbeFlow::Chunked { .. } => Operation::UploadChunk,
        };
        self.run(
            Call::new(operation, Some(repository)),
            |attempt| async move {
                let session = self.start_upload_once(repository).await?;
                let len = bytes.len() as u64;
                let result = match flow {
                    ProbeFlow::Monolithic => {
                        let body = reqwest::Body::from(bytes.clone());
                        self.finish_upload_once(&session, digest, Some((body, len)))
                            .await
                    }
                    ProbeFlow::Docker => {
                        let body = reqwest::Body::from(bytes.clone());
                        match self.patch_stream_once(&session, len, body).await {
                            Ok(s) => self.finish_upload_once(&s, digest, None).await,
                            Err(f) => Err(f),
                        }
                    }
                    ProbeFlow::Chunked { chunk } => {
                        self.chunks(session.clone(), digest, bytes, chunk).await
                    }
                };
                match result {
                    Ok(()) => Ok(()),
                    Err(failure) => {
                        let _ = self.cancel_upload_once(&session).await;
                        Err(refused_twice(failure, attempt.number))
                    }
                }
            },
        )
        .await
    }

    async fn chunks(
        &self,
        mut session: super::UploadSession,
        digest: &Digest,
        bytes: &Bytes,
        chunk: u64,
    ) -> Result<(), Failure> {
        let chunk = chunk.max(session.min_chunk.unwrap_or(1)).max(1) as usize;
        let mut offset = 0usize;
        while offset < bytes.len() {
            let end = (offset + chunk).min(bytes.len());
            let body = reqwest::Body::from(bytes.slice(offset..end));
            session = self
                .patch_chunk_once(&session, offset as u64, (end - offset) as u64, body)
                .await?;
            offset = end;
        }
        self.finish_upload_once(&session, digest, None).await
    }

    /// One `PUT` of `manifest` under `reference`, not retried: what the registry answers a
    /// manifest pushed right after its blobs (a lag shows as `MANIFEST_BLOB_UNKNOWN`).
    pub async fn put_manifest_once(
        &self,
        repository: &str,
        reference: &str,
        manifest: &Manifest,
    ) -> Result<(), Error> {
        let by = |_: &crate::reference::ManifestReference| Operation::ManifestPutByTag;
        let (_, operation, url) = self.manifest_for(by, repository, reference)?;
        let attempt = async {
            let response = self
                .send(&Scopes::push(repository), |http| {
                    http.put(url.clone())
                        .header(CONTENT_TYPE, manifest.media_type.as_str())
                        .body(manifest.bytes.clone())
                })
                .await?;
            expect_status(response, &[200, 201, 202]).await.map(|_| ())
        };
        attempt
            .await
            .map_err(|f| self.final_error(f, repository, operation))
    }

    /// A single attempt's failure as the error a retried call would have ended with.
    fn final_error(&self, failure: Failure, repository: &str, operation: Operation) -> Error {
        match failure.into_kind() {
            Ok(kind) => Error::new(self.host(), Some(repository), operation, kind),
            Err(inner) => *inner,
        }
    }

    /// `DELETE /v2/<name>/blobs/<digest>`, one best-effort attempt (scratch cleanup; a blob
    /// already gone counts as deleted).
    pub async fn delete_blob_once(&self, repository: &str, digest: &Digest) -> Result<(), Error> {
        let name = self.repository_for(Operation::BlobHead, repository)?;
        let url = repository_url(
            self,
            &name,
            &[Segment::Fixed("blobs"), Segment::Digest(digest)],
        );
        let attempt = async {
            let response = self
                .send(&Scopes::push(repository), |http| http.delete(url.clone()))
                .await?;
            expect_status(response, &[200, 202, 204, 404])
                .await
                .map(|_| ())
        };
        attempt
            .await
            .map_err(|f| self.final_error(f, repository, Operation::BlobHead))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(payload: &str) -> String {
        let enc = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", enc("{\"alg\":\"none\"}"), enc(payload))
    }

    #[test]
    fn a_jwt_names_its_granted_access_and_nothing_else_is_read() {
        let token = jwt(
            r#"{"access":[{"type":"repository","name":"team/app","actions":["pull","push"]}]}"#,
        );
        assert_eq!(
            jwt_access(&token),
            Some(vec!["repository:team/app:pull,push".to_owned()])
        );
        assert_eq!(jwt_access("opaque-token-value"), None);
        assert_eq!(jwt_access("a.b"), None);
        assert_eq!(jwt_access(&jwt("{}")), Some(Vec::new()));
    }

    #[test]
    fn hostile_claims_are_skipped_or_escaped() {
        // Not strings, missing fields, a name that would start a line of its own.
        let token = jwt(
            r#"{"access":[{"type":1,"name":"x","actions":["pull"]},{"type":"repository"},
                {"type":"repository","name":"a\nb\u001b[2J","actions":["pull",7]}]}"#,
        );
        let got = jwt_access(&token).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            !got[0].contains('\n') && !got[0].contains('\u{1b}'),
            "{got:?}"
        );
        assert!(got[0].ends_with(":pull"), "{got:?}");
        assert_eq!(jwt_access(&format!("a.{}.c", "!".repeat(10))), None);
        assert_eq!(jwt_access(&format!("a.{}.c", "A".repeat(70 * 1024))), None);
    }

    #[test]
    fn scratch_names_are_unique_and_valid_tags() {
        let (a, b) = (scratch_tag(), scratch_tag());
        assert_ne!(a, b);
        assert!(crate::reference::validate_tag(&a).is_ok(), "{a}");
        let (bytes, digest) = scratch_blob(32);
        assert_eq!(bytes.len(), 32);
        assert_eq!(digest, Digest::of_bytes(Algorithm::Sha256, &bytes));
    }
}
