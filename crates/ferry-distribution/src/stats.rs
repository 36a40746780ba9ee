//! Counters for one registry, kept by the retry loop and the operations: requests sent,
//! answers by status, throttles, retries and bytes, read lock-free and reported at the end.

use std::sync::atomic::{AtomicU64, Ordering};

/// Lock-free counters for one registry, bumped by the retry loop and the operations.
#[derive(Debug, Default)]
pub struct RegistryStats {
    requests: AtomicU64,
    http_requests: AtomicU64,
    retries: AtomicU64,
    throttled: AtomicU64,
    server_errors: AtomicU64,
    transport_errors: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// A copy of a registry's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    /// Attempts of operations, retries included: one per attempt (an attempt that opens an
    /// upload session and closes it counts once). `attempts` in the JSON.
    #[serde(rename = "attempts")]
    pub requests: u64,
    /// HTTP requests sent to the registry's own endpoint, each counted (a session's POST and
    /// PUT are two; a redirect to object storage and a token realm are not counted): what the
    /// registry's access log shows. `requests` in the JSON, the meaning ferry-sync's report
    /// totals, progress and metrics give the word.
    #[serde(rename = "requests")]
    pub http_requests: u64,
    /// Attempts after the first that went out (one whose connection never opened, a name that
    /// did not resolve or a refused connect, sent nothing and is not counted).
    pub retries: u64,
    /// Answers that asked ferry to slow down (429, or a 503 with `Retry-After`).
    pub throttled: u64,
    /// 5xx answers.
    pub server_errors: u64,
    /// Connections refused, reset or timed out, and bodies broken part way.
    pub transport_errors: u64,
    /// Blob bytes received (blob GET bodies; manifests and listings not counted).
    pub bytes_read: u64,
    /// Bytes sent: blob upload and manifest PUT bodies.
    pub bytes_written: u64,
}

impl RegistryStats {
    /// Counts one request sent.
    pub fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts one HTTP request sent to the registry's endpoint.
    pub fn http_request(&self) {
        self.http_requests.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts one retry.
    pub fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts one throttling answer.
    pub fn throttled(&self) {
        self.throttled.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts one 5xx answer.
    pub fn server_error(&self) {
        self.server_errors.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts one transport failure.
    pub fn transport_error(&self) {
        self.transport_errors.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts `bytes` received.
    pub fn read(&self, bytes: u64) {
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }
    /// Counts `bytes` sent.
    pub fn written(&self, bytes: u64) {
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }
    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            http_requests: self.http_requests.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
            server_errors: self.server_errors.load(Ordering::Relaxed),
            transport_errors: self.transport_errors.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
        }
    }
}
