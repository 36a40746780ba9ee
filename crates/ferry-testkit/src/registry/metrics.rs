//! Request accounting for the test registry: operation kinds, per-request records, counters per
//! operation and status, blob bytes served, and the in-flight series sampled at every start and end.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

/// What a request asked the registry to do, as the registry classified it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    /// `GET /v2/`
    Ping,
    /// `GET /v2/NAME/tags/list`
    TagList,
    /// `GET /v2/_catalog`
    Catalog,
    /// `HEAD /v2/NAME/manifests/REF`
    ManifestHead,
    /// `GET /v2/NAME/manifests/REF`
    ManifestGet,
    /// `PUT /v2/NAME/manifests/REF`
    ManifestPut,
    /// `DELETE /v2/NAME/manifests/REF`
    ManifestDelete,
    /// `HEAD /v2/NAME/blobs/DIGEST`
    BlobHead,
    /// `GET /v2/NAME/blobs/DIGEST` on the registry itself (answered 200/206, or 307 when redirecting)
    BlobGet,
    /// `DELETE /v2/NAME/blobs/DIGEST`
    BlobDelete,
    /// `POST /v2/NAME/blobs/uploads/` without `digest` or `mount`: opens a session
    UploadStart,
    /// `POST /v2/NAME/blobs/uploads/?digest=D` with the whole blob as body
    UploadMonolithic,
    /// `PATCH` on an upload session
    UploadPatch,
    /// `PUT` on an upload session (closes it)
    UploadPut,
    /// `GET` on an upload session
    UploadStatus,
    /// `DELETE` on an upload session
    UploadCancel,
    /// `POST /v2/NAME/blobs/uploads/?mount=D&from=REPO`
    Mount,
    /// `GET /v2/NAME/referrers/DIGEST`
    Referrers,
    /// `GET /token` (or the `POST /token` form) on the registry's token endpoint
    Token,
    /// `GET /blobs/DIGEST` on the second (redirect target) listener
    RedirectBlobGet,
    /// Anything the registry does not route (answered 404)
    Unknown,
}

/// One request as the registry saw it.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// Sequence number, unique within one registry.
    pub id: u64,
    /// Classified operation.
    pub op: OpKind,
    /// HTTP method.
    pub method: String,
    /// Request path (without query).
    pub path: String,
    /// Raw query string, if any.
    pub query: Option<String>,
    /// Repository name parsed from the path, if any.
    pub repo: Option<String>,
    /// Answered status; `0` while unanswered and for requests whose connection was cut or that hang.
    pub status: u16,
    /// Whether the request carried an `Authorization` header.
    pub authorization: bool,
    /// All request headers as received (names lower-case; values lossily decoded).
    pub headers: Vec<(String, String)>,
    /// When the request arrived (tokio clock, so it follows a paused test clock).
    pub at: Instant,
}

/// Counters since the registry started or since the last `reset_stats`.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Requests per operation kind.
    pub ops: BTreeMap<OpKind, u64>,
    /// Responses per status code (`0` = connection cut before a status was sent).
    pub statuses: BTreeMap<u16, u64>,
    /// Body bytes actually handed to the connection for blob GETs, per digest (both listeners).
    pub blob_bytes_served: BTreeMap<String, u64>,
    /// Number of 429 answers.
    pub too_many_requests: u64,
    /// Highest number of requests in flight at once.
    pub max_in_flight: usize,
    /// Total requests seen.
    pub requests: u64,
}

impl Stats {
    /// Requests seen for one operation kind.
    pub fn op(&self, op: OpKind) -> u64 {
        self.ops.get(&op).copied().unwrap_or(0)
    }

    /// Responses sent with one status code.
    pub fn status(&self, code: u16) -> u64 {
        self.statuses.get(&code).copied().unwrap_or(0)
    }

    /// Blob bytes served for one digest.
    pub fn blob_bytes(&self, digest: &str) -> u64 {
        self.blob_bytes_served.get(digest).copied().unwrap_or(0)
    }
}

#[derive(Debug, Default)]
pub(crate) struct MetricsInner {
    pub(crate) stats: Stats,
    pub(crate) records: Vec<RequestRecord>,
    pub(crate) in_flight: usize,
    pub(crate) in_flight_series: Vec<(Instant, usize)>,
    next_id: u64,
}

/// Shared, lock-protected metrics; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Metrics {
    inner: Arc<Mutex<MetricsInner>>,
    /// Woken whenever a request starts, is answered or ends (`FaultProxy::wait_until`).
    pub(crate) changed: Arc<tokio::sync::Notify>,
}

impl Metrics {
    pub(crate) fn lock(&self) -> MutexGuard<'_, MetricsInner> {
        match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Records a request's arrival and returns a guard that marks it finished when dropped.
    pub(crate) fn start(&self, mut record: RequestRecord) -> InFlightGuard {
        let mut inner = self.lock();
        inner.next_id += 1;
        record.id = inner.next_id;
        let id = record.id;
        *inner.stats.ops.entry(record.op).or_insert(0) += 1;
        inner.stats.requests += 1;
        inner.records.push(record);
        inner.in_flight += 1;
        let now = Instant::now();
        let in_flight = inner.in_flight;
        inner.in_flight_series.push((now, in_flight));
        if in_flight > inner.stats.max_in_flight {
            inner.stats.max_in_flight = in_flight;
        }
        drop(inner);
        self.changed.notify_waiters();
        InFlightGuard {
            metrics: self.clone(),
            id,
        }
    }

    pub(crate) fn add_blob_bytes(&self, digest: &str, bytes: u64) {
        let mut inner = self.lock();
        *inner
            .stats
            .blob_bytes_served
            .entry(digest.to_string())
            .or_insert(0) += bytes;
    }

    pub(crate) fn reset(&self) {
        let mut inner = self.lock();
        inner.stats = Stats::default();
        inner.records.clear();
        inner.in_flight_series.clear();
    }
}

/// Marks one request in flight until dropped (moved into a streamed body to cover its transfer).
#[derive(Debug)]
pub(crate) struct InFlightGuard {
    metrics: Metrics,
    id: u64,
}

impl InFlightGuard {
    /// Records the status the request is answered with.
    pub(crate) fn set_status(&self, status: u16) {
        let mut inner = self.metrics.lock();
        *inner.stats.statuses.entry(status).or_insert(0) += 1;
        if status == 429 {
            inner.stats.too_many_requests += 1;
        }
        if let Some(record) = inner.records.iter_mut().rev().find(|r| r.id == self.id) {
            record.status = status;
        }
        drop(inner);
        self.metrics.changed.notify_waiters();
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut inner = self.metrics.lock();
        inner.in_flight = inner.in_flight.saturating_sub(1);
        let in_flight = inner.in_flight;
        inner.in_flight_series.push((Instant::now(), in_flight));
        drop(inner);
        self.metrics.changed.notify_waiters();
    }
}
