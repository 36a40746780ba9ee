//! Shared fixtures for the ferry-distribution integration tests: clients aimed at a loopback
//! registry with a fast seeded retry policy, and a multi-arch image built, pushed and checked.
#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;

use ferry_distribution::client::{RegistryClient, RegistryOptions};
use ferry_distribution::digest::{Algorithm, Digest};
use ferry_distribution::media::{OCI_CONFIG, OCI_INDEX, OCI_LAYER_TAR, OCI_MANIFEST};
use ferry_distribution::ops::Manifest;
use ferry_distribution::retry::RetryPolicy;

/// A retry policy with `attempts` and short seeded backoffs (10–100 ms), so tests that do not
/// look at waits stay quick on the paused clock and deterministic.
pub fn fast_policy(attempts: u32) -> RetryPolicy {
    let mut policy = RetryPolicy::default().with_seed(7);
    policy.attempts = attempts;
    policy.base = Duration::from_millis(10);
    policy.cap = Duration::from_millis(100);
    policy
}

/// Options for a plain-HTTP registry at `url` with `policy`, and timeouts so generous that a
/// paused clock jumping ahead never cuts a loopback exchange.
pub fn options_at(url: &str, policy: RetryPolicy) -> RegistryOptions {
    let mut options = RegistryOptions::insecure_at(url);
    options.gate.retry = policy;
    options.connect_timeout = Duration::from_secs(3600);
    options.read_timeout = Duration::from_secs(3600);
    options.ping_timeout = Duration::from_secs(3600);
    options
}

/// A client for `url` with a fast policy of `attempts`.
pub fn client_at(url: &str, attempts: u32) -> RegistryClient {
    RegistryClient::new(options_at(url, fast_policy(attempts))).unwrap()
}

pub use ferry_testkit::noise;

pub fn sha256(bytes: &[u8]) -> Digest {
    Digest::of_bytes(Algorithm::Sha256, bytes)
}

/// A blob with the digest of its bytes.
#[derive(Debug, Clone)]
pub struct Blob {
    pub digest: Digest,
    pub bytes: Bytes,
}

impl Blob {
    pub fn new(bytes: Vec<u8>) -> Self {
        Blob {
            digest: sha256(&bytes),
            bytes: Bytes::from(bytes),
        }
    }
}

/// A manifest from its JSON value, with its exact bytes and digest.
pub fn manifest_of(media_type: &str, value: &serde_json::Value) -> Manifest {
    let bytes = serde_json::to_vec(value).unwrap();
    Manifest {
        digest: sha256(&bytes),
        bytes: Bytes::from(bytes),
        media_type: media_type.to_owned(),
    }
}

/// An image index over two platform manifests, each with a config and two layers (one layer
/// shared by both platforms).
#[derive(Debug, Clone)]
pub struct MultiArchImage {
    /// Every distinct blob (configs and layers).
    pub blobs: Vec<Blob>,
    /// The platform manifests, in index order.
    pub children: Vec<Manifest>,
    pub index: Manifest,
}

impl MultiArchImage {
    /// Layers of about `layer_len` bytes; `seed` makes the content (and so the digests) differ.
    pub fn build(seed: u64, layer_len: usize) -> Self {
        let shared = Blob::new(noise(seed * 10 + 1, layer_len));
        let mut blobs = vec![shared.clone()];
        let mut children = Vec::new();
        for (i, (arch, variant)) in [("amd64", None), ("arm64", Some("v8"))]
            .into_iter()
            .enumerate()
        {
            let own = Blob::new(noise(seed * 10 + 2 + i as u64, layer_len + 1000 * i));
            let layers = [&shared, &own];
            let config = Blob::new(
                serde_json::to_vec(&json!({
                    "architecture": arch,
                    "os": "linux",
                    "rootfs": {
                        "type": "layers",
                        "diff_ids": layers.iter().map(|l| l.digest.to_string()).collect::<Vec<_>>(),
                    },
                    "config": {},
                }))
                .unwrap(),
            );
            let manifest = manifest_of(
                OCI_MANIFEST,
                &json!({
                    "schemaVersion": 2,
                    "mediaType": OCI_MANIFEST,
                    "config": {
                        "mediaType": OCI_CONFIG,
                        "digest": config.digest.to_string(),
                        "size": config.bytes.len(),
                    },
                    "layers": layers.iter().map(|l| json!({
                        "mediaType": OCI_LAYER_TAR,
                        "digest": l.digest.to_string(),
                        "size": l.bytes.len(),
                    })).collect::<Vec<_>>(),
                }),
            );
            let mut platform = json!({"architecture": arch, "os": "linux"});
            if let Some(v) = variant {
                platform["variant"] = json!(v);
            }
            blobs.push(own);
            blobs.push(config);
            children.push((manifest, platform));
        }
        let index = manifest_of(
            OCI_INDEX,
            &json!({
                "schemaVersion": 2,
                "mediaType": OCI_INDEX,
                "manifests": children.iter().map(|(m, platform)| json!({
                    "mediaType": m.media_type,
                    "digest": m.digest.to_string(),
                    "size": m.bytes.len(),
                    "platform": platform,
                })).collect::<Vec<_>>(),
            }),
        );
        MultiArchImage {
            blobs,
            children: children.into_iter().map(|(m, _)| m).collect(),
            index,
        }
    }
}

/// How blobs are uploaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upload {
    /// POST, then one PUT with the bytes.
    Monolithic,
    /// POST, PATCHes of this many bytes, then PUT.
    Chunked(usize),
}

/// Pushes every blob, then each platform manifest by digest, then the index under `tag`.
pub async fn push_image(
    client: &RegistryClient,
    repository: &str,
    tag: &str,
    image: &MultiArchImage,
    upload: Upload,
) {
    for blob in &image.blobs {
        match upload {
            Upload::Monolithic => client
                .push_blob_bytes(repository, &blob.digest, blob.bytes.clone())
                .await
                .unwrap(),
            Upload::Chunked(chunk) => client
                .push_blob_chunked(repository, &blob.digest, blob.bytes.clone(), chunk)
                .await
                .unwrap(),
        }
    }
    for child in &image.children {
        let stored = client
            .put_manifest(repository, &child.digest.to_string(), child)
            .await
            .unwrap();
        assert_eq!(stored, child.digest);
    }
    let stored = client
        .put_manifest(repository, tag, &image.index)
        .await
        .unwrap();
    assert_eq!(stored, image.index.digest);
}

/// A whole blob, read through the client's stream.
pub async fn read_blob(client: &RegistryClient, repository: &str, digest: &Digest) -> Vec<u8> {
    let mut stream = client.get_blob(repository, digest, 0).await.unwrap();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk.unwrap());
    }
    out
}

/// Pulls the image by `tag` and checks every manifest and blob is byte-identical and hashes to
/// the digest that named it.
pub async fn pull_and_check(
    client: &RegistryClient,
    repository: &str,
    tag: &str,
    image: &MultiArchImage,
) {
    let index = client.get_manifest(repository, tag).await.unwrap();
    assert_eq!(index.digest, image.index.digest);
    assert_eq!(index.bytes, image.index.bytes);
    assert_eq!(index.media_type, OCI_INDEX);
    let parsed: serde_json::Value = serde_json::from_slice(&index.bytes).unwrap();
    let listed: Vec<&str> = parsed["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["digest"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), image.children.len());
    for (child, listed) in image.children.iter().zip(listed) {
        assert_eq!(listed, child.digest.to_string());
        let got = client.get_manifest(repository, listed).await.unwrap();
        assert_eq!(got.bytes, child.bytes);
        assert_eq!(got.digest, child.digest);
        assert_eq!(got.media_type, OCI_MANIFEST);
        let parsed: serde_json::Value = serde_json::from_slice(&got.bytes).unwrap();
        let mut wanted = vec![parsed["config"]["digest"].as_str().unwrap().to_owned()];
        for layer in parsed["layers"].as_array().unwrap() {
            wanted.push(layer["digest"].as_str().unwrap().to_owned());
        }
        for digest in wanted {
            let digest = Digest::parse(&digest).unwrap();
            let bytes = read_blob(client, repository, &digest).await;
            assert_eq!(sha256(&bytes), digest, "blob {digest} read back changed");
            let original = image.blobs.iter().find(|b| b.digest == digest).unwrap();
            assert_eq!(bytes, original.bytes, "blob {digest}");
        }
    }
}
