//! `signatures:` between two REAL distribution registries: a key-signed image (cosign's tag
//! scheme, logged under a custom trusted root) and a multi-arch index signed at its digest are
//! mirrored with their signature tags; an unsigned image is refused and the target never hears
//! of it (its access log names none of its digests).

mod common;

use bytes::Bytes;
use common::run_sync;
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions, media};
use ferry_sync::report::ImageStatus;
use ferry_testkit::trust_signer::{SIGNED_AT, SignedLayer, TestSigstore};
use ferry_trust::PrivateKey;

async fn blob(c: &RegistryClient, bytes: &[u8]) -> serde_json::Value {
    let d = Digest::of_bytes(Algorithm::Sha256, bytes);
    c.push_blob_bytes("lib/app", &d, Bytes::copy_from_slice(bytes))
        .await
        .unwrap();
    serde_json::json!({"digest": d.to_string(), "size": bytes.len()})
}

async fn manifest(
    c: &RegistryClient,
    reference: &str,
    kind: &str,
    doc: serde_json::Value,
) -> Digest {
    let bytes = Bytes::from(serde_json::to_vec(&doc).unwrap());
    let m = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes,
        media_type: kind.to_owned(),
    };
    c.put_manifest("lib/app", reference, &m).await.unwrap();
    m.digest
}

async fn image(c: &RegistryClient, tag: &str, layer: &[u8]) -> Digest {
    let mut config = blob(c, format!("{{\"architecture\":\"{tag}\"}}").as_bytes()).await;
    config["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    let mut l = blob(c, layer).await;
    l["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
    manifest(
        c,
        tag,
        media::OCI_MANIFEST,
        serde_json::json!({
            "schemaVersion": 2, "mediaType": media::OCI_MANIFEST, "config": config, "layers": [l]
        }),
    )
    .await
}

async fn sign(c: &RegistryClient, subject: &Digest, layer: SignedLayer) -> Digest {
    let mut config = blob(c, b"{}").await;
    config["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    let mut l = blob(c, &layer.payload).await;
    l["mediaType"] = "application/vnd.dev.cosign.simplesigning.v1+json".into();
    l["annotations"] = serde_json::to_value(&layer.annotations).unwrap();
    let tag = format!("sha256-{}.sig", subject.hex());
    manifest(
        c,
        &tag,
        media::OCI_MANIFEST,
        serde_json::json!({
            "schemaVersion": 2, "mediaType": media::OCI_MANIFEST, "config": config, "layers": [l]
        }),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_images_are_mirrored_and_an_unsigned_one_never_reaches_the_real_target() {
    let Some((src, dst)) = common::real_pair().await else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&src.url())).unwrap();
    let sigstore = TestSigstore::new();
    let key = PrivateKey::generate_p256();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("release.pub"), key.public_key().to_pem()).unwrap();
    std::fs::write(dir.path().join("root.json"), sigstore.root_json()).unwrap();

    let signed = image(&c, "signed", b"signed layer").await;
    let signed_sig = sign(
        &c,
        &signed,
        sigstore.key_signed_layer_logged(&key, &signed, SIGNED_AT),
    )
    .await;
    let amd = image(&c, "amd", b"amd64 layer").await;
    let arm = image(&c, "arm", b"arm64 layer").await;
    let index = manifest(&c, "multi", media::OCI_INDEX, serde_json::json!({
        "schemaVersion": 2, "mediaType": media::OCI_INDEX,
        "manifests": [
            {"mediaType": media::OCI_MANIFEST, "digest": amd.to_string(), "size": 1, "platform": {"os": "linux", "architecture": "amd64"}},
            {"mediaType": media::OCI_MANIFEST, "digest": arm.to_string(), "size": 1, "platform": {"os": "linux", "architecture": "arm64"}},
        ]
    }))
    .await;
    sign(
        &c,
        &index,
        sigstore.key_signed_layer_logged(&key, &index, SIGNED_AT),
    )
    .await;
    let unsigned = image(&c, "unsigned", b"unsigned layer").await;

    let (s, d) = (src.host(), dst.host());
    let policy = format!(
        "tags: {{include: [signed, multi, unsigned, \"sha256-*\"]}}\n    signatures: {{keys: [\"{}\"], trusted_root: \"{}\"}}",
        dir.path().join("release.pub").display(),
        dir.path().join("root.json").display()
    );
    let config = common::config()
        .entry(&s, &src.url(), &[])
        .entry(&d, &dst.url(), &[])
        .mapping(
            format!("{s}/lib/app"),
            &[format!("{d}/mirror/app")],
            &[&policy],
        )
        .build();
    let report = run_sync(&config).await.report;
    let text = report.render_text();

    let t = RegistryClient::new(RegistryOptions::insecure_at(&dst.url())).unwrap();
    let mut tags = t.list_tags("mirror/app").await.unwrap();
    tags.sort();
    let sig_tag = |d: &Digest| format!("sha256-{}.sig", d.hex());
    let mut expected = vec![
        "multi".to_owned(),
        "signed".to_owned(),
        sig_tag(&signed),
        sig_tag(&index),
    ];
    expected.sort();
    assert_eq!(tags, expected, "{text}");
    assert_eq!(
        t.get_manifest("mirror/app", &sig_tag(&signed))
            .await
            .unwrap()
            .digest,
        signed_sig
    );
    let refused: Vec<&str> = report
        .images
        .iter()
        .filter(|i| matches!(i.status, ImageStatus::Failed { .. }))
        .map(|i| i.image.as_str())
        .collect();
    assert_eq!(refused, ["unsigned"], "{text}");
    assert!(
        text.contains("signature refused (no signature): unsigned"),
        "{text}"
    );
    // Each `.sig` manifest is read once from the source: to verify, and the copy reuses it.
    let _ = src.access_log().await;
    let source_log = std::fs::read_to_string(src.access_log_path()).unwrap();
    let reads = source_log
        .lines()
        .filter(|l| l.contains("\"GET /v2/lib/app/manifests/") && l.contains(&sig_tag(&signed)))
        .count();
    assert_eq!(reads, 1, "the .sig manifest was read {reads} times");
    let log = std::fs::read_to_string(dst.access_log_path()).unwrap_or_default();
    let layer = Digest::of_bytes(Algorithm::Sha256, b"unsigned layer");
    assert!(
        !log.contains(unsigned.hex()) && !log.contains(layer.hex()),
        "the target heard of the unsigned image"
    );
}
