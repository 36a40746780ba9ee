//! Blob reads: HEAD for presence and size, and GET as a stream from any offset, following
//! redirects to storage without ever sending `Authorization` beyond the registry's origin.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_LENGTH, LOCATION, RANGE};

use crate::auth::Scopes;
use crate::client::RegistryClient;
use crate::digest::Digest;
use crate::error::{Error, ErrorKind};
use crate::gate::Slot;
use crate::operation::Operation;
use crate::retry::{Call, Failure};

use super::{Segment, expect_status, invalid, repository_name, repository_url};

const MAX_REDIRECTS: usize = 5;

/// A blob's bytes from `offset` on, as they arrive. It holds its registry window slot until it
/// is dropped, so a slow stream counts against the registry's concurrency.
pub struct BlobStream {
    /// Where in the blob this stream starts.
    pub offset: u64,
    /// Bytes from `offset` to the end, when the registry said.
    pub remaining: Option<u64>,
    inner: Pin<Box<dyn Stream<Item = Result<Bytes, Failure>> + Send>>,
    _slot: Option<Slot>,
}

impl std::fmt::Debug for BlobStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobStream")
            .field("offset", &self.offset)
            .field("remaining", &self.remaining)
            .finish()
    }
}

impl Stream for BlobStream {
    type Item = Result<Bytes, Failure>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl RegistryClient {
    /// The blob's size if `repository` has it, `None` if not.
    pub async fn head_blob(&self, repository: &str, digest: &Digest) -> Result<Option<u64>, Error> {
        let scopes = Scopes::pull(repository);
        let name = self.repository_for(Operation::BlobHead, repository)?;
        let url = repository_url(
            self,
            &name,
            &[Segment::Fixed("blobs"), Segment::Digest(digest)],
        );
        self.run(
            Call::new(Operation::BlobHead, Some(repository)),
            |_| async {
                let response = self.send(&scopes, |http| http.head(url.clone())).await?;
                if response.status() == StatusCode::NOT_FOUND {
                    return Ok(None);
                }
                // HEAD may be redirected to storage too; a redirect means the blob exists.
                if response.status().is_redirection() {
                    return Ok(Some(0));
                }
                let response = expect_status(response, &[200]).await?;
                Ok(Some(
                    response
                        .headers()
                        .get(CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0),
                ))
            },
        )
        .await
    }

    /// Opens the blob for reading from `offset`, retried until the body starts arriving. What
    /// happens to the stream afterwards is the caller's to retry (it knows where to resume).
    /// The window slot is released once the answer has started: a stream being read by a slow
    /// consumer must not hold the slot a consumer on the same registry waits for.
    pub async fn get_blob(
        &self,
        repository: &str,
        digest: &Digest,
        offset: u64,
    ) -> Result<BlobStream, Error> {
        self.run(Call::new(Operation::BlobGet, Some(repository)), |_| {
            self.open_blob_once(repository, digest, offset, None)
        })
        .await
    }

    /// One attempt at opening a blob stream (for callers composing their own retried attempt).
    pub(crate) async fn open_blob_once(
        &self,
        repository: &str,
        digest: &Digest,
        offset: u64,
        slot: Option<Slot>,
    ) -> Result<BlobStream, Failure> {
        let scopes = Scopes::pull(repository);
        let name = repository_name(repository)?;
        let mut url = repository_url(
            self,
            &name,
            &[Segment::Fixed("blobs"), Segment::Digest(digest)],
        );
        let range = (offset > 0).then(|| format!("bytes={offset}-"));
        let with_range = |r: reqwest::RequestBuilder| match &range {
            Some(v) => r.header(RANGE, v.as_str()),
            None => r,
        };
        let mut response = self
            .send(&scopes, |http| with_range(http.get(url.clone())))
            .await?;
        let mut hops = 0;
        while response.status().is_redirection() {
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(invalid("too many redirects for a blob"));
            }
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| invalid("redirect without Location"))?;
            let next = url
                .join(location)
                .map_err(|e| invalid(format!("redirect to an unusable URL: {e}")))?;
            // Plain http only to the host of a registry configured insecure: `insecure` covers
            // that host alone, and any other host is https.
            let insecure_here = self.options().insecure && self.is_configured_host(&next);
            if next.scheme() != "https" && !insecure_here {
                return Err(Failure::Final(ErrorKind::Refused(format!(
                    "blob redirect to {} over {}: another host is reached over https only",
                    next.host_str().unwrap_or("?"),
                    next.scheme()
                ))));
            }
            url = next;
            response = if url.origin() == self.base_url().origin() {
                self.send(&scopes, |http| with_range(http.get(url.clone())))
                    .await?
            } else {
                // Another host (object storage): the registry's credentials stay behind.
                with_range(self.http_for(&url).get(url.clone()))
                    .send()
                    .await
                    .map_err(|e| Failure::from_transport(&e))?
            };
        }
        let response = expect_status(response, &[200, 206]).await?;
        let partial = response.status() == StatusCode::PARTIAL_CONTENT;
        let length = response.content_length();
        let stats_client = self.clone();
        let body = response.bytes_stream().map(move |chunk| {
            chunk
                .inspect(|b| stats_client.count(|s| s.read(b.len() as u64)))
                .map_err(|e| Failure::from_transport(&e))
        });
        let (inner, remaining): (Pin<Box<dyn Stream<Item = _> + Send>>, _) =
            if offset > 0 && !partial {
                // The registry ignored the range: skip what the caller already has.
                (
                    Box::pin(skip_bytes(body, offset)),
                    length.map(|l| l.saturating_sub(offset)),
                )
            } else {
                (Box::pin(body), length)
            };
        Ok(BlobStream {
            offset,
            remaining,
            inner,
            _slot: slot,
        })
    }
}

fn skip_bytes(
    stream: impl Stream<Item = Result<Bytes, Failure>> + Send + 'static,
    mut skip: u64,
) -> impl Stream<Item = Result<Bytes, Failure>> + Send {
    stream.filter_map(move |chunk| {
        let out = match chunk {
            Err(e) => Some(Err(e)),
            Ok(b) if skip >= b.len() as u64 => {
                skip -= b.len() as u64;
                None
            }
            Ok(b) => {
                let rest = b.slice(skip as usize..);
                skip = 0;
                Some(Ok(rest))
            }
        };
        futures::future::ready(out)
    })
}
