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

/// `src/app:TAG`, one OCI image whose uncompressed layer is `noise(seed)`; its config and layer
/// digests.
async fn push_one(c: &RegistryClient, tag: &str, seed: u64) -> (Digest, Digest) {
    let config = format!(r#"{{"architecture":"amd64","os":"linux","tag":"{tag}"}}"#).into_bytes();
    let layer = noise(seed, 200_000);
    let mut descriptors = Vec::new();
    for bytes in [config, layer] {
        let d = Digest::of_bytes(Algorithm::Sha256, &bytes);
        descriptors.push(json!({"digest": d.to_string(), "size": bytes.len()}));
        c.push_blob_bytes("src/app", &d, bytes.into())
            .await
            .unwrap();
    }
    descriptors[0]["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    descriptors[1]["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
    let digest = |v: &serde_json::Value| Digest::parse(v["digest"].as_str().unwrap()).unwrap();
    let out = (digest(&descriptors[0]), digest(&descriptors[1]));
    let doc = json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": descriptors[0], "layers": [descriptors[1]]});
    put_manifest(c, "src/app", tag, OCI_MANIFEST, &doc).await;
    out
}

/// The config and layer digests of `repo:latest` on the registry.
async fn pushed_digests(c: &RegistryClient, repo: &str) -> (String, Vec<String>) {
    let m = c.get_manifest(repo, "latest").await.unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&m.bytes).unwrap();
    let layers = doc["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["digest"].as_str().unwrap().to_owned())
        .collect();
    (doc["config"]["digest"].as_str().unwrap().to_owned(), layers)
}

/// One tar holding the images of two skopeo docker-archives (what `docker save a b` writes:
/// one manifest.json listing both), every other entry kept as written (links included).
fn merge_docker_archives(parts: &[&Path], to: &Path) {
    use std::io::Read as _;
    let mut listed: Vec<serde_json::Value> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut out = tar::Builder::new(std::fs::File::create(to).unwrap());
    for part in parts {
        let mut archive = tar::Archive::new(std::fs::File::open(part).unwrap());
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().to_string_lossy().into_owned();
            let mut body = Vec::new();
            entry.read_to_end(&mut body).unwrap();
            match name.as_str() {
                "manifest.json" => {
                    listed.extend(serde_json::from_slice::<Vec<serde_json::Value>>(&body).unwrap())
                }
                "repositories" => {}
                _ if seen.insert(name.clone()) => {
                    let header = entry.header().clone();
                    out.append(&header, &body[..]).unwrap();
                }
                _ => {}
            }
        }
    }
    let manifest = serde_json::to_vec(&listed).unwrap();
    let mut header = tar::Header::new_ustar();
    header.set_path("manifest.json").unwrap();
    header.set_size(manifest.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    out.append(&header, &manifest[..]).unwrap();
    out.finish().unwrap();
}

/// The docker-archive skopeo writes with no name inside (`skopeo copy docker://… docker-archive:
/// x.tar`: `RepoTags: []`) is copied by `ferry copy docker-archive:x.tar HOST/REPO` as skopeo
/// would take it (its only image, as `latest`), config and layer digests kept. An archive of
/// two images needs `:@N` (skopeo's position, from 0), and without it fails naming the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_archive_skopeo_wrote_without_a_name_is_copied_and_at_n_picks_one_of_several() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let first = push_one(&client, "1", 11).await;
    let second = push_one(&client, "2", 12).await;
    let dir = tempfile::tempdir().unwrap();
    let host = registry.host();
    let archive = |n: &str| dir.path().join(format!("{n}.tar"));
    for (tag, name) in [("1", "one"), ("2", "two")] {
        run(
            "skopeo",
            &[
                "copy",
                "-q",
                "--src-tls-verify=false",
                &format!("docker://{host}/src/app:{tag}"),
                &format!("docker-archive:{}", archive(name).display()),
            ],
        )
        .await;
    }
    let listed = {
        let mut a = tar::Archive::new(std::fs::File::open(archive("one")).unwrap());
        let mut e = a
            .entries()
            .unwrap()
            .map(|e| e.unwrap())
            .find(|e| e.path().unwrap().to_str() == Some("manifest.json"))
            .unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut e, &mut text).unwrap();
        text
    };
    assert!(
        listed.contains(r#""RepoTags":[]"#),
        "skopeo wrote no name: {listed}"
    );

    let copy = |from: String, to: String| async move {
        let c = tokio::process::Command::new(FERRY)
            .args([
                "--progress",
                "none",
                "copy",
                "--dest-tls-verify=false",
                &from,
                &to,
            ])
            .env_remove("RUST_LOG")
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(Duration::from_secs(120), c)
            .await
            .unwrap()
            .unwrap()
    };
    let out = copy(
        format!("docker-archive:{}", archive("one").display()),
        format!("{host}/copied/one"),
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (config, layers) = pushed_digests(&client, "copied/one").await;
    assert_eq!(config, first.0.to_string());
    assert_eq!(layers, [first.1.to_string()]);

    merge_docker_archives(&[&archive("one"), &archive("two")], &archive("both"));
    let both = format!("docker-archive:{}", archive("both").display());
    let out = copy(both.clone(), format!("{host}/copied/any")).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("holds 2 images") && stderr.contains(":@N"),
        "{stderr}"
    );
    assert!(
        client
            .head_manifest("copied/any", "latest")
            .await
            .unwrap()
            .is_none(),
        "nothing pushed"
    );
    let out = copy(format!("{both}:@1"), format!("{host}/copied/second")).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (config, layers) = pushed_digests(&client, "copied/second").await;
    assert_eq!(config, second.0.to_string());
    assert_eq!(layers, [second.1.to_string()]);
    let out = copy(format!("{both}:@2"), format!("{host}/copied/third")).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("@2: the archive holds 2 images"),
        "{stderr}"
    );
}
