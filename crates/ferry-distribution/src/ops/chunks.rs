//! How large each PATCH of a chunked upload is: `chunk_size`, and larger chunks for a blob above
//! a GiB, so that the registry's per-PATCH commit does not set a big layer's pace (issue 42).

use super::push::UploadShape;

/// A blob above this size goes in at most [`PATCHES_PER_LARGE_BLOB`] PATCHes (issue 42).
pub const LARGE_BLOB: u64 = 1 << 30;
/// PATCHes at most for a blob above [`LARGE_BLOB`], while its chunks stay under
/// [`LARGE_CHUNK`]: each PATCH costs distribution 2.8 five `fsync`s, 40-65 ms while ferry
/// waits for its 202 (docs/performance.md, "What limits a big layer").
pub const PATCHES_PER_LARGE_BLOB: u64 = 16;
/// The largest chunk the rule above chooses: what a stop lets finish, and a break loses.
pub const LARGE_CHUNK: u64 = 256 << 20;

impl UploadShape {
    /// Bytes per PATCH for a blob of `size`: `chunk_size`, raised for a blob above
    /// [`LARGE_BLOB`] to a whole number of MiB that sends it in at most
    /// [`PATCHES_PER_LARGE_BLOB`] PATCHes, up to [`LARGE_CHUNK`] (2 GiB: 128 MiB, 4 GiB and
    /// above: 256 MiB). A registry's learned `max_patch` still caps it.
    pub fn chunk_for(&self, size: u64) -> u64 {
        if size <= LARGE_BLOB {
            return self.chunk_size;
        }
        let spread = size
            .div_ceil(PATCHES_PER_LARGE_BLOB)
            .next_multiple_of(1 << 20)
            .min(LARGE_CHUNK);
        self.chunk_size.max(spread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn large_blobs_go_in_at_most_sixteen_patches_of_at_most_256_mib() {
        let shape = UploadShape {
            chunk_size: 64 * MIB,
            monolithic_limit: 64 * MIB,
        };
        // Up to a GiB: the configured size, as before.
        assert_eq!(shape.chunk_for(24 * MIB), 64 * MIB);
        assert_eq!(shape.chunk_for(1024 * MIB), 64 * MIB);
        // 2 GiB in 16 PATCHes of 128 MiB, 4 GiB in 16 of 256 MiB, 8 GiB in 32 of 256 MiB.
        assert_eq!(shape.chunk_for(2048 * MIB), 128 * MIB);
        assert_eq!(shape.chunk_for(4096 * MIB), 256 * MIB);
        assert_eq!(shape.chunk_for(8192 * MIB), 256 * MIB);
        // A whole number of MiB, never fewer bytes than asked for.
        assert_eq!(shape.chunk_for(2048 * MIB + 1), 129 * MIB);
        // A configured size above the rule's stays.
        let big = UploadShape {
            chunk_size: 512 * MIB,
            ..shape
        };
        assert_eq!(big.chunk_for(4096 * MIB), 512 * MIB);
    }
}
