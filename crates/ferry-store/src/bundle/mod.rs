//! An air-gapped bundle's own record, `ferry-bundle.json`: what `ferry export` wrote into the
//! OCI archive (the images, their sources, the bundles it builds on) and `ferry import` checks.

pub mod check;
pub mod export;

use serde::{Deserialize, Serialize};

/// The tar entry that holds a bundle's record, written after every blob and `index.json`.
pub const BUNDLE_ENTRY: &str = "ferry-bundle.json";

/// The record's format, as written in [`BundleRecord::format`].
pub const BUNDLE_FORMAT: &str = "ferry-bundle/v1";

/// A `ferry-bundle.json` larger than this is refused before it is read.
pub const BUNDLE_ENTRY_LIMIT: u64 = 64 * 1024 * 1024;

/// The tar entry that holds the record's signature (`ferry export --sign-key`), written right
/// after the record; beside a file bundle it is `BUNDLE.json.sig`. Its text is the base64 of
/// the signature over the record's exact bytes (P-256: ECDSA over SHA-256, DER; Ed25519: 64
/// bytes), as `cosign sign-blob` writes one.
pub const SIGNATURE_ENTRY: &str = "ferry-bundle.json.sig";

/// A signature entry larger than this is refused before it is read.
pub const SIGNATURE_LIMIT: u64 = 64 * 1024;

/// Signs a record's bytes, giving the signature file's text: set by `ferry export --sign-key`
/// (the key stays with the caller; this crate holds no key code).
#[derive(Clone)]
pub struct RecordSigner(pub std::sync::Arc<SignFn>);

/// What a [`RecordSigner`] calls: the record's bytes in, the signature file's text out.
pub type SignFn = dyn Fn(&[u8]) -> Vec<u8> + Send + Sync;

impl std::fmt::Debug for RecordSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordSigner")
    }
}

/// `ferry-bundle.json`: what a bundle holds and what it builds on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleRecord {
    /// [`BUNDLE_FORMAT`]; a reader refuses any other.
    pub format: String,
    /// When the export ran (RFC 3339, UTC).
    pub created: String,
    /// The config's mappings as exported, without credentials: source, targets, tag filter.
    pub mappings: Vec<BundleMapping>,
    /// Every image the export selected, whether its bytes are in this bundle or a base's.
    pub images: Vec<BundleImage>,
    /// The bundles this one leaves content out for (`--since`), by their digest.
    #[serde(default)]
    pub bases: Vec<BundleBase>,
    /// Every manifest and blob digest this bundle's images need, whether carried here or by a
    /// base: the next export `--since` this one leaves all of them out.
    pub content: Vec<String>,
    /// The digests of `content` that are in this bundle's tar (`blobs/sha256/...`).
    pub carried: Vec<String>,
    /// This bundle's digest: `sha256:` over the sorted `carried` digests and `index.json`'s
    /// bytes (see `bundle_digest`); bases and `--since` name a bundle by it.
    pub digest: String,
    /// `sha256:` of `index.json`'s bytes as written into the tar (a record written before
    /// signed bundles has none, and cannot be trusted under a key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// The size in bytes of every entry of `carried` (its tar entry's size).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sizes: std::collections::BTreeMap<String, u64>,
}

/// `sha256:` of `bytes`, as the record names `index.json`.
pub fn sha256_of(bytes: &[u8]) -> String {
    use sha2::{Digest as _, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// One mapping of the exported config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleMapping {
    /// The source as written (`docker.io/library/alpine`).
    pub source: String,
    /// The targets as written (`registry.internal/mirror/alpine`).
    pub targets: Vec<String>,
}

/// One image in a bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleImage {
    /// The full target reference a sync would give it, also its `ref.name` in `index.json`
    /// (`registry.internal/mirror/alpine:3.20`).
    pub reference: String,
    /// Where it came from (`docker.io/library/alpine:3.20`).
    pub source: String,
    /// The image's manifest (or index) digest, the same at the source and in the bundle.
    pub digest: String,
    /// The index of its mapping in [`BundleRecord::mappings`].
    pub mapping: usize,
}

/// A bundle this one builds on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleBase {
    /// Its [`BundleRecord::digest`].
    pub digest: String,
    /// Its file name when the export read it, to name it in errors (`weekly-47.tar`).
    pub name: String,
}

/// A bundle's digest from what it carries: `sha256:` over each sorted carried digest followed
/// by a newline, then `index.json`'s bytes.
pub fn bundle_digest(carried: &[String], index_json: &[u8]) -> String {
    use sha2::{Digest as _, Sha256};
    let mut sorted: Vec<&String> = carried.iter().collect();
    sorted.sort();
    sorted.dedup();
    let mut hasher = Sha256::new();
    for d in sorted {
        hasher.update(d.as_bytes());
        hasher.update(b"\n");
    }
    hasher.update(index_json);
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_digest_depends_on_what_is_carried_not_on_its_order() {
        let a = vec!["sha256:aa".to_owned(), "sha256:bb".to_owned()];
        let b = vec!["sha256:bb".to_owned(), "sha256:aa".to_owned()];
        assert_eq!(bundle_digest(&a, b"{}"), bundle_digest(&b, b"{}"));
        assert_ne!(bundle_digest(&a, b"{}"), bundle_digest(&a[..1], b"{}"));
        assert_ne!(bundle_digest(&a, b"{}"), bundle_digest(&a, b"{ }"));
    }
}
