//! ferry-trust: offline verification of cosign signatures and Sigstore bundles, and ferry's keys.
//! It reads only what the caller fetched; it sends no request and queries no transparency log.
//!
//! (decision notes below)

pub mod cosign_key;
mod error;
pub mod keys;

pub use error::{Result, TrustError};
pub use keys::{Fingerprint, HashAlg, PrivateKey, PublicKey};
