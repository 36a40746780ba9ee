//! ferry's OCI layouts against another implementation: a layout skopeo wrote is a ferry source,
//! and a layout ferry wrote is read by skopeo, both around the real distribution registry.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::noise;
use serde_json::json;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

async fn run(program: &str, args: &[&str]) -> Output {
    let command = tokio::process::Command::new(program)
        .args(args)
        .env_remove("RUST_LOG")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), command)
        .await
        .unwrap_or_else(|_| panic!("{program} finished within two minutes"))
        .unwrap_or_else(|e| {
            panic!("{program} could not run ({e}); scripts/test installs skopeo when missing")
        });
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

async fn put_manifest(
    c: &RegistryClient,
    repo: &str,
    reference: &str,
    kind: &str,
    doc: &serde_json::Value,
) -> Manifest {
    let bytes = serde_json::to_vec(doc).unwrap();
    let m = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes: bytes.into(),
        media_type: kind.to_owned(),
    };
    c.put_manifest(repo, reference, &m).await.unwrap();
    m
}

/// A two-platform index at `repo:1.0` over images with a 300 kB layer each.
async fn push_index(c: &RegistryClient, repo: &str) -> Manifest {
    let mut children = Vec::new();
    for (seed, arch) in [(1, "amd64"), (2, "arm64")] {
        let mut descriptors = Vec::new();
        let config = format!(r#"{{"architecture":"{arch}","os":"linux"}}"#).into_bytes();
        for bytes in [config, noise(seed, 300_000)] {
            let d = Digest::of_bytes(Algorithm::Sha256, &bytes);
            descriptors.push(json!({"digest": d.to_string(), "size": bytes.len()}));
            c.push_blob_bytes(repo, &d, bytes.into()).await.unwrap();
        }
        descriptors[0]["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
        descriptors[1]["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
        let doc = json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": descriptors[0], "layers": [descriptors[1]]});
        let m = put_manifest(c, repo, &format!("1.0-{arch}"), OCI_MANIFEST, &doc).await;
        children.push(json!({
            "mediaType": OCI_MANIFEST, "digest": m.digest.to_string(), "size": m.bytes.len(),
            "platform": {"os": "linux", "architecture": arch}
        }));
    }
    let doc = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children});
    put_manifest(c, repo, "1.0", OCI_INDEX, &doc).await
}

/// Writes a one-mapping config (every tag of `source` to `target`) and runs `ferry sync` on it.
async fn ferry_sync(dir: &Path, registry: &RealRegistry, source: &str, target: &str) {
    let path = dir.join("mirror.yaml");
    let text = format!(
        "version: 1\nregistries:\n  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\nmappings:\n  - source: \"{source}\"\n    targets: [\"{target}\"]\n    tags: {{ include: [\"*\"] }}\n",
        registry.host(),
        registry.url()
    );
    std::fs::write(&path, text).unwrap();
    run(
        FERRY,
        &["--progress", "none", "sync", "-c", path.to_str().unwrap()],
    )
    .await;
}

/// `skopeo copy --all --preserve-digests` with TLS checks off on the registry side (`tls`).
async fn skopeo_copy(tls: &str, from: &str, to: &str) {
    run(
        "skopeo",
        &["copy", "-q", "--all", "--preserve-digests", tls, from, to],
    )
    .await;
}

/// The manifest bytes skopeo reads for `reference`.
async fn skopeo_raw(reference: &str) -> Vec<u8> {
    run("skopeo", &["inspect", "--raw", reference]).await.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_skopeo_wrote_is_a_ferry_source_and_one_ferry_wrote_is_read_by_skopeo() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let index = push_index(&client, "src/app").await;
    let dir = tempfile::tempdir().unwrap();
    let host = registry.host();
    let by_skopeo = format!("oci:{}", dir.path().join("by-skopeo").display());
    let by_ferry = format!("oci:{}", dir.path().join("by-ferry").display());

    // skopeo writes a layout; ferry syncs it into the registry, digests intact.
    let from_registry = format!("docker://{host}/src/app:1.0");
    skopeo_copy(
        "--src-tls-verify=false",
        &from_registry,
        &format!("{by_skopeo}:1.0"),
    )
    .await;
    ferry_sync(
        dir.path(),
        &registry,
        &by_skopeo,
        &format!("{host}/via-skopeo/app"),
    )
    .await;
    let got = client.get_manifest("via-skopeo/app", "1.0").await.unwrap();
    assert_eq!(got.digest, index.digest);
    assert_eq!(got.bytes, index.bytes);

    // ferry writes a layout; skopeo reads its manifest and copies it whole back to the registry.
    ferry_sync(dir.path(), &registry, &format!("{host}/src/app"), &by_ferry).await;
    assert_eq!(
        skopeo_raw(&format!("{by_ferry}:1.0")).await,
        index.bytes.to_vec()
    );
    let to_registry = format!("docker://{host}/via-ferry/app:1.0");
    skopeo_copy(
        "--dest-tls-verify=false",
        &format!("{by_ferry}:1.0"),
        &to_registry,
    )
    .await;
    let back = client.head_manifest("via-ferry/app", "1.0").await.unwrap();
    assert_eq!(back.map(|i| i.digest), Some(index.digest.clone()));

    // ferry adds tags to the layout skopeo wrote; skopeo still reads its own tag and ferry's.
    ferry_sync(
        dir.path(),
        &registry,
        &format!("{host}/src/app"),
        &by_skopeo,
    )
    .await;
    assert_eq!(
        skopeo_raw(&format!("{by_skopeo}:1.0")).await,
        index.bytes.to_vec()
    );
    let arm = client.get_manifest("src/app", "1.0-arm64").await.unwrap();
    assert_eq!(
        skopeo_raw(&format!("{by_skopeo}:1.0-arm64")).await,
        arm.bytes.to_vec()
    );
}
