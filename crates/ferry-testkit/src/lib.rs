//! Test-only parts for ferry: an in-process OCI registry with fault knobs (`registry`), a
//! harness that starts the real CNCF distribution registry on loopback (`distribution`), a
//! private CA for TLS tests (`pki`), what both test layers set a run up with (`fixtures`), and a
//! test Sigstore that signs images (`trust_signer`).

pub mod distribution;
pub mod fixtures;
pub mod pki;
pub mod registry;
pub mod trust_signer;

/// Deterministic pseudo-random bytes (xorshift) for test blobs that neither compress nor repeat.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}
