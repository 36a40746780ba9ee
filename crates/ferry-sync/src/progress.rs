//! Live counters of the copy phase for progress displays: images to bring to targets, images
//! finished, bytes expected and read, large blobs in flight; the engine bumps, a display polls.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Blobs at least this large get a bar of their own while they are copied.
pub const LARGE_BLOB: u64 = 64 << 20;

/// What the engine has done so far. Share it as `Arc<SyncProgress>`.
#[derive(Debug, Default)]
pub struct SyncProgress {
    images_total: AtomicU64,
    images_done: AtomicU64,
    bytes_copied: AtomicU64,
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
    /// Blob bytes copied so far.
    pub bytes_copied: u64,
    /// Blob bytes the run will copy, as far as known.
    pub bytes_total: u64,
}

impl SyncProgress {
    /// `n` more (image, target) pairs to copy (mappings reach the engine as they resolve).
    pub fn expect_images(&self, n: u64) {
        self.images_total.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` (image, target) pairs finished.
    pub fn images_done(&self, n: u64) {
        self.images_done.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more bytes read from a source for a transfer.
    pub fn bytes_copied(&self, n: u64) {
        self.bytes_copied.fetch_add(n, Ordering::Relaxed);
    }

    /// The transfers the engine planned will read about `n` more bytes.
    pub fn expect_bytes(&self, n: u64) {
        self.bytes_total.fetch_add(n, Ordering::Relaxed);
    }

    /// A planned blob needed no transfer after all.
    pub fn bytes_not_needed(&self, n: u64) {
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
    pub fn blob_started(&self, digest: &str, size: u64) {
        if size >= LARGE_BLOB {
            self.large().insert(digest.to_owned(), (size, 0));
        }
    }

    /// `n` more bytes of `digest` were read.
    pub fn blob_read(&self, digest: &str, n: u64) {
        self.bytes_copied(n);
        if let Some(entry) = self.large().get_mut(digest) {
            entry.1 += n;
        }
    }

    /// The transfer of `digest` ended (either way).
    pub fn blob_finished(&self, digest: &str) {
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
            bytes_copied: self.bytes_copied.load(Ordering::Relaxed),
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
        assert_eq!((s.bytes_copied, s.bytes_total), (1010, LARGE_BLOB + 10));
        p.blob_finished("sha256:big");
        assert!(p.large_blobs().is_empty());
        p.bytes_not_needed(LARGE_BLOB + 100);
        assert_eq!(p.snapshot().bytes_total, 0, "never below zero");
    }
}
