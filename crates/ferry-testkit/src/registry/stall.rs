//! A body-stall fault of the test registry: blob GETs send their headers and the first bytes of
//! the body, then nothing more, so a client is caught part way through writing a blob.

use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures::StreamExt as _;

use super::metrics::InFlightGuard;
use super::reply::Reply;

/// Runtime handle to the body stalls; cheap to clone, shared with the server.
#[derive(Debug, Clone, Default)]
pub struct BodyStalls {
    after_bytes: Arc<Mutex<Option<usize>>>,
}

impl BodyStalls {
    fn lock(&self) -> MutexGuard<'_, Option<usize>> {
        self.after_bytes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every successful blob GET from now on sends its full `Content-Length` and the first
    /// `after_bytes` bytes, then stalls for ever (until [`BodyStalls::clear`] and a new request).
    pub fn stall_blob_bodies(&self, after_bytes: usize) {
        *self.lock() = Some(after_bytes);
    }

    /// Blob GETs are answered in full again.
    pub fn clear(&self) {
        *self.lock() = None;
    }

    pub(crate) fn after_bytes(&self) -> Option<usize> {
        *self.lock()
    }
}

/// The reply with its body cut at `after_bytes` and then held open without an end.
pub(crate) fn stalled(reply: Reply, after_bytes: usize, guard: InFlightGuard) -> Response {
    guard.set_status(reply.status.as_u16());
    let sent = reply.body.slice(..after_bytes.min(reply.body.len()));
    let mut headers = reply.headers;
    if let Ok(value) = HeaderValue::from_str(&reply.body.len().to_string()) {
        headers.insert(header::CONTENT_LENGTH, value);
    }
    let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(sent) }).chain(
        futures::stream::once(async move {
            let _guard = guard;
            std::future::pending::<Result<bytes::Bytes, std::io::Error>>().await
        }),
    );
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = reply.status;
    *response.headers_mut() = headers;
    response
}
