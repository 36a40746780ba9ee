//! Live counters of the copy phase for progress displays: images to bring to targets, images
//! finished, bytes copied. Atomics only; the engine bumps them, a display polls `snapshot`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::plan::Plan;

/// What the engine has done so far. Share it as `Arc<SyncProgress>`.
#[derive(Debug, Default)]
pub struct SyncProgress {
    images_total: AtomicU64,
    images_done: AtomicU64,
    bytes_copied: AtomicU64,
}

/// A moment's view of [`SyncProgress`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncSnapshot {
    /// (image, target) pairs the run will copy.
    pub images_total: u64,
    /// Of those, finished (synced, failed or skipped on stop).
    pub images_done: u64,
    pub bytes_copied: u64,
}

impl SyncProgress {
    /// Counters whose total is every stale (image, target) pair of `plan`.
    pub fn for_plan(plan: &Plan) -> SyncProgress {
        let total = plan
            .resolved()
            .flat_map(|(_, r)| r.images.iter())
            .map(|i| i.targets.iter().filter(|t| t.state.needs_copy()).count() as u64)
            .sum();
        SyncProgress {
            images_total: AtomicU64::new(total),
            ..SyncProgress::default()
        }
    }

    /// `n` (image, target) pairs finished.
    pub fn images_done(&self, n: u64) {
        self.images_done.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more bytes written to a target.
    pub fn bytes_copied(&self, n: u64) {
        self.bytes_copied.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> SyncSnapshot {
        SyncSnapshot {
            images_total: self.images_total.load(Ordering::Relaxed),
            images_done: self.images_done.load(Ordering::Relaxed),
            bytes_copied: self.bytes_copied.load(Ordering::Relaxed),
        }
    }
}
