//! How the C allocator is set up for streaming: a blob's read buffers are reused by the
//! allocator rather than handed back to the kernel and faulted in again (issue 42).

/// Allocations up to this size come from the allocator's arenas, never a mapping of their own:
/// a response body is read in buffers of up to about 400 KiB (hyper's largest read buffer).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 4 << 20;

/// Free memory an arena keeps at its top before it gives pages back to the kernel. glibc's
/// default follows the largest buffer freed (about 800 KiB here), so a streamed blob's buffers
/// were returned and faulted in again: 155-178 thousand page faults and half a CPU-second per
/// 2 GiB copied (docs/performance.md, "ferry's own share: read buffers faulted in again").
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 32 << 20;

/// Sets glibc's thresholds; other C libraries are left as they are.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets allocator parameters; it is called before any other thread
    // exists, and both values are in the range glibc documents for them.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}
