//! ferry-trust: offline verification of cosign signatures and Sigstore bundles, and ferry's keys.
//! It reads only what the caller fetched; it sends no request and queries no transparency log.
//!
//! # What it verifies
//!
//! - [`Policy::verify_cosign_layer`]: one layer of a cosign `.sig` manifest (tag scheme): the
//!   simple-signing payload must name the digest being copied, its signature must verify under a
//!   policy key or a Fulcio certificate chained to the trusted root, and (with
//!   [`TlogPolicy::Require`], and always for certificates) a Rekor SET from a log of the root must
//!   cover an entry that logs exactly this payload, signature and signer.
//! - [`Policy::verify_bundle`]: a Sigstore bundle v0.1 to v0.3 (message signature over the
//!   manifest digest, or a DSSE in-toto statement whose subject is the digest), same rules.
//! - [`PublicKey`] and [`PrivateKey`]: cosign's PEM keys, PKCS#8, and cosign's encrypted private
//!   key, for signing and verifying bytes (ferry's signed bundles, issue 37).
//! - [`JwkSet`]: a JSON Web Token (RS256 or ES256) verified against a JWK Set, and its claims
//!   held to an issuer, audience, subject and time (`ferry watch`'s OIDC senders, issue 39).
//!
//! A bundle's inclusion proof, when present, must hold: the RFC 6962 path from the entry to the
//! proof's root and the checkpoint naming that root, signed by the log (ECDSA logs).
//!
//! Not yet: a proof alone does not stand in for a SET (a bundle whose entry has no SET is refused
//! under `Require`, and keyless always needs the SET's time); RFC 3161 timestamps (parsed from the
//! root, not checked); Rekor v2 entries (Ed25519 checkpoints, no SET).
//!
//! # Dependencies
//!
//! The `sigstore` crate (0.14) was not used: its cosign verification (`cosign` feature) pulls its
//! own OCI registry client (`oci-client`) and fetches signatures itself, and its bundle
//! verification (`bundle` = `sign` + `verify`) pulls `fulcio`, `rekor` and `oauth`, which bring
//! `reqwest` and `openidconnect`, with `native-tls` (OpenSSL) by default. ferry has already fetched
//! the signature with its own client and must stay offline with one TLS stack. So this crate uses
//! the RustCrypto crates directly: `p256`, `p384` (Fulcio's CA keys), `ecdsa`, `ed25519-dalek`,
//! `rsa`, `x509-cert`, `der`, `spki`, `pkcs8`, `sha2`, and for cosign's encrypted keys `scrypt` and
//! `crypto_secretbox` (XSalsa20-Poly1305). No OpenSSL, no HTTP.
//!
//! # The built-in root
//!
//! [`TrustedRoot::public_good`] is `targets/trusted_root.json` of sigstore/root-signing at
//! commit 60cf2ce8b2e45d600dc17c4421e8c751e75772be (2026-08-21; the file last changed in
//! c9bda74ad2221f938f7d2e0295ca3aad2da710a8, 2025-09-22, TUF targets version 14): Fulcio CAs of
//! 2021 and 2022, Rekor `rekor.sigstore.dev` and `log2025-1.rekor.sigstore.dev`, the Sigstore TSA.
//! [`TrustedRoot::from_json`] reads a replacement (`trusted_root:` in the config).

pub mod bundle;
pub mod cert;
pub mod cosign_key;
mod error;
mod inclusion;
pub mod jwt;
pub mod keys;
pub mod policy;
pub mod rekor;
pub mod root;
pub mod tag;

pub use cert::{Cert, CertIdentity};
pub use error::{Result, TrustError};
pub use jwt::{JwkSet, TokenExpectations};
pub use keys::{Fingerprint, HashAlg, PrivateKey, PublicKey};
pub use policy::{Identity, Policy, Signer, SubjectMatch, TlogPolicy, Verified};
pub use root::TrustedRoot;
pub use tag::CosignLayer;
