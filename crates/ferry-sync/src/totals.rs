//! The one counters value of a run ([`Totals`]): what the report's totals, the progress display
//! and `ferry watch`'s metrics read, each field with one meaning, summed from its parts.

use serde::Serialize;

/// Sums over the run: the one counters value of a run. The report's totals, the progress
/// display and `ferry watch`'s metrics all read these fields, each with the one meaning its doc
/// gives; parts (a registry's, the layouts', a worker's) add up with `+`/`+=`/`sum()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// (image, target) pairs written.
    pub images_synced: u64,
    /// (image, target) pairs already identical.
    pub images_up_to_date: u64,
    /// (image, target) pairs that failed.
    pub images_failed: u64,
    /// (image, target) pairs not started because the run was interrupted.
    pub images_interrupted: u64,
    /// (image, target) pairs held by a `min_age` cooldown (signed too recently; not failed).
    pub images_held: u64,
    /// Of `images_synced`, the pairs `ferry sync --repair` wrote again because a blob or child
    /// manifest under the tag was missing on the target.
    pub images_repaired: u64,
    /// Mappings the prepare phase could not resolve.
    pub mappings_failed: u64,
    /// Blob copies streamed from a source, one per place written.
    pub blobs_copied: u64,
    /// Blobs a registry got by a cross-repository mount.
    pub blobs_mounted: u64,
    /// Places that already held a blob.
    pub blobs_skipped: u64,
    /// Blob bytes that reached a place (a registry repository or a layout) by a copy, once per
    /// place written: a blob copied to two targets counts twice, a mounted one not at all.
    pub bytes_copied: u64,
    /// Uploads that went on from a session an earlier (interrupted) run recorded in the state
    /// directory.
    pub blobs_resumed: u64,
    /// The bytes those sessions already held when resumed: neither read from the source nor
    /// sent again (not part of `bytes_read` or `bytes_written`; part of `bytes_copied`).
    pub bytes_resumed: u64,
    /// Blob bytes ferry read: blob GET bodies received from registries (retried reads
    /// included) and blob bytes read from layout and archive sources. Manifests and listings
    /// are not counted.
    pub bytes_read: u64,
    /// Bytes ferry wrote: blob upload and manifest PUT bodies sent to registries, and the blob
    /// and manifest bytes written into layout targets.
    pub bytes_written: u64,
    /// Of `bytes_written`, the blob and manifest bytes written into layout targets.
    pub layout_bytes_written: u64,
    /// HTTP requests sent to registries' own endpoints, retries included, each counted (an
    /// upload session's POST and PUT are two; token realms and redirects to object storage not):
    /// what the registries' access logs show. A name that did not resolve or a connection that
    /// could not be opened sent nothing and is not counted.
    pub requests: u64,
    /// Attempts sent again after a transient failure, over every registry (one whose connection
    /// never opened sent nothing and is not counted).
    pub retries: u64,
    /// Throttling answers (429, or 503 with `Retry-After`) over every registry.
    pub throttled: u64,
}

impl Totals {
    /// One registry's share: the bytes, requests, retries and throttles its client counted.
    pub fn of(stats: &ferry_distribution::stats::StatsSnapshot) -> Totals {
        Totals {
            bytes_read: stats.bytes_read,
            bytes_written: stats.bytes_written,
            requests: stats.http_requests,
            retries: stats.retries,
            throttled: stats.throttled,
            ..Totals::default()
        }
    }
}

impl std::ops::AddAssign for Totals {
    fn add_assign(&mut self, o: Totals) {
        self.images_synced += o.images_synced;
        self.images_up_to_date += o.images_up_to_date;
        self.images_failed += o.images_failed;
        self.images_interrupted += o.images_interrupted;
        self.images_held += o.images_held;
        self.images_repaired += o.images_repaired;
        self.mappings_failed += o.mappings_failed;
        self.blobs_copied += o.blobs_copied;
        self.blobs_mounted += o.blobs_mounted;
        self.blobs_skipped += o.blobs_skipped;
        self.bytes_copied += o.bytes_copied;
        self.blobs_resumed += o.blobs_resumed;
        self.bytes_resumed += o.bytes_resumed;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.layout_bytes_written += o.layout_bytes_written;
        self.requests += o.requests;
        self.retries += o.retries;
        self.throttled += o.throttled;
    }
}

impl std::ops::Add for Totals {
    type Output = Totals;
    fn add(mut self, o: Totals) -> Totals {
        self += o;
        self
    }
}

impl std::iter::Sum for Totals {
    fn sum<I: Iterator<Item = Totals>>(parts: I) -> Totals {
        parts.fold(Totals::default(), std::ops::Add::add)
    }
}
