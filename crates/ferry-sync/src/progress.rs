//! Live counters of the copy phase for progress displays: images to bring to targets, images
//! finished, blob bytes expected and read, layout I/O, large blobs in flight (and their 10% log
//! lines); the engine bumps, a display polls (the run's [`Totals`] live through [`SyncProgress::live_totals`]).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::time::Instant;

use crate::report::{Totals, human_bytes};

/// Blobs at least this large get a bar of their own while they are copied (and, with
/// [`SyncProgress::log_large_blobs`], a log line per 10%), unless
/// [`SyncProgress::set_large_blob`] chose another threshold.
pub const LARGE_BLOB: u64 = 64 << 20;

/// One large blob being copied.
#[derive(Debug)]
struct LargeBlob {
    /// What the log lines call it: `source@sha256:<12 hex>…`.
    name: String,
    size: u64,
    done: u64,
    started: Instant,
    /// The last tenth logged (0 before the first line).
    logged: u64,
}

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
    /// Large blobs being copied, by digest.
    large: Mutex<BTreeMap<String, LargeBlob>>,
    /// The large-blob threshold in bytes; 0 stands for [`LARGE_BLOB`].
    large_at: AtomicU64,
    /// Whether a large blob logs a line per 10% read (`ferry::blob`, info): the plain display.
    log_tenths: AtomicBool,
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
                .map(|c| Totals::of(&c.stats()))
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

    fn large(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, LargeBlob>> {
        self.large.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blobs of at least `bytes` count as large from now on (at least 1 byte).
    pub fn set_large_blob(&self, bytes: u64) {
        self.large_at.store(bytes.max(1), Ordering::Relaxed);
    }

    /// The large-blob threshold in bytes.
    pub(crate) fn large_blob(&self) -> u64 {
        match self.large_at.load(Ordering::Relaxed) {
            0 => LARGE_BLOB,
            n => n,
        }
    }

    /// With `on`, each large blob logs a line per 10% of it read (`ferry::blob`, info): what a
    /// display without bars (plain lines, a log collector) shows of a blob that takes minutes.
    pub fn log_large_blobs(&self, on: bool) {
        self.log_tenths.store(on, Ordering::Relaxed);
    }

    /// A transfer of `digest` (`size` bytes) from `source` started.
    pub(crate) fn blob_started(&self, source: &str, digest: &str, size: u64) {
        if size >= self.large_blob() {
            let hex = digest.split_once(':').map_or(digest, |(_, h)| h);
            let algorithm = digest.split_once(':').map_or("", |(a, _)| a);
            let short = hex.get(..12).unwrap_or(hex);
            self.large().insert(
                digest.to_owned(),
                LargeBlob {
                    name: format!("{source}@{algorithm}:{short}\u{2026}"),
                    size,
                    done: 0,
                    started: Instant::now(),
                    logged: 0,
                },
            );
        }
    }

    /// `n` more bytes of `digest` were read.
    pub(crate) fn blob_read(&self, digest: &str, n: u64) {
        self.blob_bytes_read.fetch_add(n, Ordering::Relaxed);
        let log = self.log_tenths.load(Ordering::Relaxed);
        let line = {
            let mut large = self.large();
            let Some(blob) = large.get_mut(digest) else {
                return;
            };
            blob.done = blob.done.saturating_add(n);
            let tenth = tenths(blob.done, blob.size);
            (log && tenth > blob.logged).then(|| {
                blob.logged = tenth;
                TenthLine::of(blob, tenth)
            })
        };
        if let Some(line) = line {
            line.log(digest);
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
            .map(|(d, b)| (d.clone(), b.size, b.done))
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

/// How many whole tenths of `size` `done` is (0 to 10).
fn tenths(done: u64, size: u64) -> u64 {
    if size == 0 {
        return 10;
    }
    (u128::from(done.min(size)) * 10 / u128::from(size)) as u64
}

/// One 10% line of a large blob, formatted outside the lock.
struct TenthLine {
    text: String,
    percent: u64,
    done: u64,
    size: u64,
}

impl TenthLine {
    fn of(blob: &LargeBlob, tenth: u64) -> TenthLine {
        let secs = blob.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            (blob.done as f64 / secs) as u64
        } else {
            0
        };
        let left = blob.size.saturating_sub(blob.done);
        let eta = match (left, rate) {
            (0, _) => String::from("0s"),
            (_, 0) => String::from("-"),
            (left, rate) => format!("{}s", left.div_ceil(rate)),
        };
        TenthLine {
            text: format!(
                "{} {}% {}/{} {}/s ETA {eta}",
                blob.name,
                tenth * 10,
                human_bytes(blob.done),
                human_bytes(blob.size),
                human_bytes(rate)
            ),
            percent: tenth * 10,
            done: blob.done,
            size: blob.size,
        }
    }

    fn log(self, digest: &str) {
        tracing::info!(
            target: "ferry::blob",
            blob = digest,
            percent = self.percent,
            bytes_read = self.done,
            size = self.size,
            "{}",
            self.text
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blobs_are_tracked_from_start_to_end_and_small_ones_only_counted() {
        let p = SyncProgress::default();
        p.expect_bytes(LARGE_BLOB + 10);
        p.blob_started("src/repo", "sha256:big", LARGE_BLOB);
        p.blob_started("src/repo", "sha256:small", 10);
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

#[cfg(test)]
mod tenth_tests {
    use super::*;

    #[test]
    fn tenths_are_whole_and_capped() {
        assert_eq!(tenths(0, 100), 0);
        assert_eq!(tenths(9, 100), 0);
        assert_eq!(tenths(10, 100), 1);
        assert_eq!(tenths(99, 100), 9);
        assert_eq!(tenths(100, 100), 10);
        assert_eq!(tenths(500, 100), 10, "never past 100%");
        assert_eq!(
            tenths(u64::MAX - 1, u64::MAX),
            9,
            "no overflow on huge sizes"
        );
        assert_eq!(tenths(0, 0), 10);
    }

    #[test]
    fn a_lowered_threshold_makes_a_small_blob_large() {
        let p = SyncProgress::default();
        assert_eq!(p.large_blob(), LARGE_BLOB);
        p.set_large_blob(1000);
        p.blob_started("reg/alpine", "sha256:0123456789abcdef", 1000);
        p.blob_started("reg/alpine", "sha256:small", 999);
        assert_eq!(p.large_blobs().len(), 1);
        let name = p
            .large()
            .get("sha256:0123456789abcdef")
            .map(|b| b.name.clone());
        assert_eq!(
            name.as_deref(),
            Some("reg/alpine@sha256:0123456789ab\u{2026}")
        );
    }
}
