//! In-memory content of the test registry: globally content-addressed blobs, per-repository blob
//! links, manifests by digest, tags, and open upload sessions.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

/// `sha256:<hex>` of some bytes.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Whether `text` looks like a digest (`alg:hex`) rather than a tag.
pub(crate) fn is_digest(text: &str) -> bool {
    match text.split_once(':') {
        Some((alg, encoded)) => {
            !alg.is_empty()
                && !encoded.is_empty()
                && alg
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+._-".contains(c))
                && encoded
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "=_-".contains(c))
        }
        None => false,
    }
}

/// A stored manifest: its bytes exactly as pushed and the media type it was pushed with.
#[derive(Debug, Clone)]
pub(crate) struct StoredManifest {
    pub(crate) media_type: String,
    pub(crate) bytes: Bytes,
}

/// One repository's view of the store.
#[derive(Debug, Default)]
pub(crate) struct Repository {
    pub(crate) blobs: BTreeSet<String>,
    pub(crate) manifests: HashMap<String, StoredManifest>,
    pub(crate) tags: BTreeMap<String, String>,
}

/// An open blob upload session.
#[derive(Debug)]
pub(crate) struct UploadSession {
    pub(crate) repo: String,
    pub(crate) data: Vec<u8>,
    #[allow(dead_code)]
    pub(crate) started: Instant,
}

/// Everything the registry stores.
#[derive(Debug, Default)]
pub(crate) struct Store {
    pub(crate) blobs: HashMap<String, Bytes>,
    pub(crate) repos: BTreeMap<String, Repository>,
    pub(crate) uploads: HashMap<String, UploadSession>,
}

impl Store {
    pub(crate) fn repo_mut(&mut self, name: &str) -> &mut Repository {
        self.repos.entry(name.to_string()).or_default()
    }

    /// Stores a blob globally and links it into `repo`; returns its digest.
    pub(crate) fn put_blob(&mut self, repo: &str, bytes: Bytes) -> String {
        let digest = sha256_digest(&bytes);
        self.blobs.entry(digest.clone()).or_insert(bytes);
        self.repo_mut(repo).blobs.insert(digest.clone());
        digest
    }

    /// The blob's bytes if it is linked into `repo`.
    pub(crate) fn repo_blob(&self, repo: &str, digest: &str) -> Option<Bytes> {
        let linked = self.repos.get(repo)?.blobs.contains(digest);
        if linked {
            self.blobs.get(digest).cloned()
        } else {
            None
        }
    }

    /// Resolves a tag or digest to `(digest, manifest)` in `repo`.
    pub(crate) fn manifest(&self, repo: &str, reference: &str) -> Option<(String, StoredManifest)> {
        let repository = self.repos.get(repo)?;
        let digest = if is_digest(reference) {
            reference.to_string()
        } else {
            repository.tags.get(reference)?.clone()
        };
        let manifest = repository.manifests.get(&digest)?.clone();
        Some((digest, manifest))
    }
}
