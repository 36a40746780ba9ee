//! The registry operations, each as a method on [`crate::RegistryClient`]: single attempts
//! (`*_once`, for callers that compose several requests inside one retry) and retried wrappers.

pub(crate) mod blob;
pub(crate) mod catalog;
pub mod chunks;
pub mod doctor;
pub mod manifest;
mod memory;
pub(crate) mod pages;
mod probe;
pub mod push;
pub(crate) mod referrers;
pub mod resume;
pub mod tags;
pub mod upload;

pub use blob::BlobStream;
pub use manifest::{Manifest, ManifestInfo};
pub use pages::{ListingSnapshot, ListingStyle, MAX_LISTING_BYTES, Paging};
pub use push::{BlobBytes, BlobPush, PushFlow, UploadShape};
pub use referrers::{MAX_REFERRERS_BYTES, Referrer};
pub use resume::{RecordedSession, UploadJournal, UploadKey};
pub use upload::{MountOutcome, UploadSession};

use reqwest::Response;

use crate::digest::Digest;
use crate::error::{Error, ErrorKind};
use crate::operation::Operation;
use crate::reference::{ManifestReference, ReferenceError, RepositoryName};
use crate::retry::Failure;

/// One path segment after the repository: a constant of the API, or a validated name.
pub(crate) enum Segment<'a> {
    Fixed(&'static str),
    Digest(&'a Digest),
    Reference(&'a ManifestReference),
}

/// `<base>/v2/<repository>/<tail…>`, built from a validated repository name and typed segments
/// only. Each becomes one percent-encoded path segment, so nothing a source or target sends can
/// add a `/`, a `..` or an encoded separator to a request path.
pub(crate) fn repository_url(
    client: &crate::RegistryClient,
    repository: &RepositoryName,
    tail: &[Segment<'_>],
) -> url::Url {
    let mut url = client.api_url("");
    let tail: Vec<String> = tail
        .iter()
        .map(|s| match s {
            Segment::Fixed(text) => (*text).to_owned(),
            Segment::Digest(d) => d.to_string(),
            Segment::Reference(r) => r.to_string(),
        })
        .collect();
    if let Ok(mut segments) = url.path_segments_mut() {
        segments
            .pop_if_empty()
            .extend(repository.components())
            .extend(&tail);
    }
    url
}

/// Why a name from outside cannot go into a request path: the request is refused unsent.
pub(crate) fn unsendable(e: ReferenceError) -> ErrorKind {
    ErrorKind::Refused(format!("{e}; no request was sent"))
}

/// The repository a single attempt names, or its final failure.
pub(crate) fn repository_name(repository: &str) -> Result<RepositoryName, Failure> {
    RepositoryName::parse(repository).map_err(|e| Failure::Final(unsendable(e)))
}

impl crate::RegistryClient {
    /// The validated repository of a retried operation, or that operation's error: nothing is
    /// sent for a name that fails validation.
    pub(crate) fn repository_for(
        &self,
        operation: Operation,
        repository: &str,
    ) -> Result<RepositoryName, Error> {
        RepositoryName::parse(repository)
            .map_err(|e| Error::new(self.host(), Some(repository), operation, unsendable(e)))
    }

    /// The validated repository and manifest URL of a manifest operation; `operation` picks
    /// the operation from whether the reference is a tag or a digest.
    pub(crate) fn manifest_for(
        &self,
        operation: impl Fn(&ManifestReference) -> Operation,
        repository: &str,
        reference: &str,
    ) -> Result<(ManifestReference, Operation, url::Url), Error> {
        let parsed = ManifestReference::parse(reference);
        let op = parsed.as_ref().map_or(Operation::ManifestGet, &operation);
        let fail = |e| Error::new(self.host(), Some(repository), op, unsendable(e));
        let reference = parsed.map_err(fail)?;
        let name = RepositoryName::parse(repository).map_err(fail)?;
        let url = repository_url(
            self,
            &name,
            &[Segment::Fixed("manifests"), Segment::Reference(&reference)],
        );
        Ok((reference, op, url))
    }
}

/// The `Docker-Content-Digest` header, when present and well formed.
pub(crate) fn content_digest(response: &Response) -> Option<Digest> {
    response
        .headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Digest::parse(v.trim()).ok())
}

/// Fails unless the response status is one of `ok`; the failure carries the OCI error body.
pub(crate) async fn expect_status(response: Response, ok: &[u16]) -> Result<Response, Failure> {
    if ok.contains(&response.status().as_u16()) {
        Ok(response)
    } else {
        Err(Failure::from_response(response).await)
    }
}

/// One page of a paged listing: its body (at most `limit` bytes) and the next page's URL,
/// which must stay on the registry's origin.
pub(crate) async fn read_page(
    client: &crate::RegistryClient,
    response: Response,
    limit: u64,
) -> Result<(Vec<u8>, Option<url::Url>), Failure> {
    // A `Link` that is there but not text cannot be read: taking it for no `Link` would end
    // the listing early, silently; it is an error instead.
    let next = match response.headers().get(reqwest::header::LINK) {
        None => None,
        Some(value) => match value.to_str() {
            Ok(text) => crate::link::next_link(text)
                .map(|l| client.same_origin(&l))
                .transpose()?,
            Err(_) => {
                return Err(invalid(
                    "the Link header is not text (bytes outside visible ASCII): the next page \
                     cannot be read and the listing would be incomplete",
                ));
            }
        },
    };
    let body = crate::auth::token::read_limited(response, limit).await?;
    Ok((body, next))
}

/// A response that breaks the protocol. The text usually quotes the body (a parser's complaint
/// names the value it choked on), so it is cut and escaped here, where it enters the error.
pub(crate) fn invalid(what: impl Into<String>) -> Failure {
    Failure::Final(ErrorKind::InvalidResponse(crate::text::for_error(
        &what.into(),
    )))
}
