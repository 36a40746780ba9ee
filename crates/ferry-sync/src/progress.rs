//! Live counters of the copy phase for progress displays: images to bring to targets, images
//! finished, blob bytes expected and read, layout I/O, large blobs in flight; the engine bumps,
//! a display polls (the run's [`Totals`] live through [`SyncProgress::live_totals`]).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::report::Totals;

/// Blobs at least this large get a bar of their own while they are copied.
pub(crate) const LARGE_BLOB: u64 = 64 << 20;

/// What the engine has done so far. Share it as `Arc<SyncProgress>`.
#[derive(Debug, Default)]
pub struct SyncProgress {
    images_total: AtomicU64,
    images_done: AtomicU64,
    /// Blob bytes read from sources (registries and layouts) for transfers.
    blob_bytes_read: AtomicU64,
    /// Blob bytes read from layout sources: the layouts' share of [`Totals::bytes_read`].
    layout_read: AtomicU64,
    /// Blob and manifest bytes written into layout targets: [`Totals::layout_bytes_written`].
    layout_written: AtomicU64,
    /// Source bytes the run expects to read (unique blobs some place lacks), known once the
    /// engine has planned its transfers; shrinks when a blob turns out to be there already.
    bytes_total: AtomicU64,
    /// Large blobs being copied: digest → (size, bytes read so far).
    large: Mutex<BTreeMap<String, (u64, u64)>>,
}

/// A moment's view of [`SyncProgress`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncSnapshot {
    /// (image, target) pairs the run will copy.
    pub images_total: u64,
    /// Of those, finished (synced, failed or skipped on stop).
    pub images_done: u64,
    /// Blob bytes read from sources for transfers so far, each blob's bytes once (however
    /// many places it goes to): what `bytes_total` is measured against.
    pub blob_bytes_read: u64,
    /// Blob bytes the run expects to read from sources, as far as known.
    pub bytes_total: u64,
}

impl SyncProgress {
    /// `n` more (image, target) pairs to copy (mappings reach the engine as they resolve).
    pub(crate) fn expect_images(&self, n: u64) {
        self.images_total.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` (image, target) pairs finished.
    pub fn images_done(&self, n: u64) {
        self.images_done.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more blob bytes read from a layout source (counted by [`SyncProgress::blob_read`]
    /// too).
    pub(crate) fn layout_read(&self, n: u64) {
        self.layout_read.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more blob or manifest bytes written into a layout target.
    pub(crate) fn layout_written(&self, n: u64) {
        self.layout_written.fetch_add(n, Ordering::Relaxed);
    }

    /// The layouts' share of the run's totals so far: the bytes read from layout sources and
    /// written into layout targets (registries count their own, `Totals::of`).
    pub fn totals(&self) -> Totals {
        let written = self.layout_written.load(Ordering::Relaxed);
        Totals {
            bytes_read: self.layout_read.load(Ordering::Relaxed),
            bytes_written: written,
            layout_bytes_written: written,
            ..Totals::default()
        }
    }

    /// The run's bytes and requests so far: the layouts' share and every registry `registries`
    /// built, summed (what the report's totals will say of them, live).
    pub fn live_totals(&self, registries: &crate::registries::Registries) -> Totals {
        self.totals()
            + registries
                .built()
                .iter()
                .map(|c| Totals::of(&c.gate().stats.snapshot()))
                .sum()
    }

    /// The transfers the engine planned will read about `n` more bytes.
    pub(crate) fn expect_bytes(&self, n: u64) {
        self.bytes_total.fetch_add(n, Ordering::Relaxed);
    }

    /// A planned blob needed no transfer after all.
    pub(crate) fn bytes_not_needed(&self, n: u64) {
        let _ = self
            .bytes_total
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_sub(n))
            });
    }

    fn large(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (u64, u64)>> {
        self.large.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A transfer of `digest` (`size` bytes) started.
    pub(crate) fn blob_started(&self, digest: &str, size: u64) {
        if size >= LARGE_BLOB {
            self.large().insert(digest.to_owned(), (size, 0));
        }
    }

    /// `n` more bytes of `digest` were read.
    pub(crate) fn blob_read(&self, digest: &str, n: u64) {
        self.blob_bytes_read.fetch_add(n, Ordering::Relaxed);
        if let Some(entry) = self.large().get_mut(digest) {
            entry.1 += n;
        }
    }

    /// The transfer of `digest` ended (either way).
    pub(crate) fn blob_finished(&self, digest: &str) {
        self.large().remove(digest);
    }

    /// Large blobs in flight: (digest, size, bytes read).
    pub fn large_blobs(&self) -> Vec<(String, u64, u64)> {
        self.large()
            .iter()
            .map(|(d, (size, done))| (d.clone(), *size, *done))
            .collect()
    }

    /// The counters now.
    pub fn snapshot(&self) -> SyncSnapshot {
        SyncSnapshot {
            images_total: self.images_total.load(Ordering::Relaxed),
            images_done: self.images_done.load(Ordering::Relaxed),
            blob_bytes_read: self.blob_bytes_read.load(Ordering::Relaxed),
            bytes_total: self.bytes_total.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blobs_are_tracked_from_start_to_end_and_small_ones_only_counted() {
        let p = SyncProgress::default();
        p.expect_bytes(LARGE_BLOB + 10);
        p.blob_started("sha256:big", LARGE_BLOB);
        p.blob_started("sha256:small", 10);
        p.blob_read("sha256:big", 1000);
        p.blob_read("sha256:small", 10);
        assert_eq!(
            p.large_blobs(),
            vec![("sha256:big".to_owned(), LARGE_BLOB, 1000)]
        );
        let s = p.snapshot();
        assert_eq!((s.blob_bytes_read, s.bytes_total), (1010, LARGE_BLOB + 10));
        p.blob_finished("sha256:big");
        assert!(p.large_blobs().is_empty());
        p.bytes_not_needed(LARGE_BLOB + 100);
        assert_eq!(p.snapshot().bytes_total, 0, "never below zero");
    }
}
