//! Counters for one registry, kept by the retry loop and the operations: requests sent,
//! answers by status, throttles, retries and bytes, read lock-free and reported at the end.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct RegistryStats {
    requests: AtomicU64,
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
    pub requests: u64,
    pub retries: u64,
    pub throttled: u64,
    pub server_errors: u64,
    pub transport_errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl RegistryStats {
    pub fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
    pub fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
    pub fn throttled(&self) {
        self.throttled.fetch_add(1, Ordering::Relaxed);
    }
    pub fn server_error(&self) {
        self.server_errors.fetch_add(1, Ordering::Relaxed);
    }
    pub fn transport_error(&self) {
        self.transport_errors.fetch_add(1, Ordering::Relaxed);
    }
    pub fn read(&self, bytes: u64) {
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }
    pub fn written(&self, bytes: u64) {
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
            server_errors: self.server_errors.load(Ordering::Relaxed),
            transport_errors: self.transport_errors.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
        }
    }
}
