//! The registry operations, each as a method on [`crate::RegistryClient`]: single attempts
//! (`*_once`, for callers that compose several requests inside one retry) and retried wrappers.

pub mod blob;
pub mod manifest;
pub mod referrers;
pub mod tags;
pub mod upload;

pub use blob::BlobStream;
pub use manifest::{Manifest, ManifestInfo};
pub use referrers::Referrer;
pub use upload::{MountOutcome, UploadSession};

use reqwest::Response;

use crate::digest::Digest;
use crate::error::ErrorKind;
use crate::retry::Failure;

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
    let next = response
        .headers()
        .get(reqwest::header::LINK)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::link::next_link)
        .map(|l| client.same_origin(&l))
        .transpose()?;
    let body = crate::auth::token::read_limited(response, limit).await?;
    Ok((body, next))
}

pub(crate) fn invalid(what: impl Into<String>) -> Failure {
    Failure::Final(ErrorKind::InvalidResponse(what.into()))
}
