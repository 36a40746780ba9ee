//! The sync engine between two REAL distribution registries (Debian's docker-registry on
//! loopback): a multi-arch image and a plain one land byte-identical, the target serves them by
//! digest, shared blobs are mounted, and a warm re-run writes nothing.

mod common;

use bytes::Bytes;
use common::{ALL_TAGS, run_sync};
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions, media};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::noise;

async fn push_blob(c: &RegistryClient, repo: &str, bytes: &[u8]) -> (Digest, usize) {
    let d = Digest::of_bytes(Algorithm::Sha256, bytes);
    c.push_blob_bytes(repo, &d, Bytes::copy_from_slice(bytes))
        .await
        .unwrap();
    (d, bytes.len())
}

async fn push_manifest(
    c: &RegistryClient,
    repo: &str,
    reference: &str,
    media_type: &str,
    json: serde_json::Value,
) -> Manifest {
    let bytes = Bytes::from(serde_json::to_vec(&json).unwrap());
    let m = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes,
        media_type: media_type.to_owned(),
    };
    c.put_manifest(repo, reference, &m).await.unwrap();
    m
}

/// An image manifest over a shared base layer and a layer of its own.
async fn push_image(
    c: &RegistryClient,
    repo: &str,
    tag: &str,
    base: &[u8],
    own: &[u8],
) -> Manifest {
    let (cfg, cfg_len) = push_blob(
        c,
        repo,
        format!("{{\"architecture\":\"{tag}\"}}").as_bytes(),
    )
    .await;
    let (b, b_len) = push_blob(c, repo, base).await;
    let (o, o_len) = push_blob(c, repo, own).await;
    push_manifest(c, repo, tag, media::OCI_MANIFEST, serde_json::json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg.to_string(), "size": cfg_len},
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": b.to_string(), "size": b_len},
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": o.to_string(), "size": o_len},
        ]
    })).await
}

/// `src` and `dst` with no retry policy of their own, blobs over 400 KiB sent in 256 KiB chunks.
fn real_config(src: &RealRegistry, dst: &RealRegistry) -> common::ConfigBuilder {
    common::config()
        .engine("chunk_size: \"256KiB\", monolithic_limit: \"400KiB\"")
        .entry(&src.host(), &src.url(), &[])
        .entry(&dst.host(), &dst.url(), &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_between_real_registries_byte_identical_and_a_warm_rerun_writes_nothing() {
    let Some((src, dst)) = common::real_pair().await else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&src.url())).unwrap();
    let base = noise(1, 600_000);
    let amd = push_image(&c, "lib/app", "1.0-amd64", &base, &noise(2, 300_000)).await;
    let arm = push_image(&c, "lib/app", "1.0-arm64", &base, &noise(3, 300_000)).await;
    let index = push_manifest(&c, "lib/app", "1.0", media::OCI_INDEX, serde_json::json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_INDEX,
        "manifests": [
            {"mediaType": media::OCI_MANIFEST, "digest": amd.digest.to_string(), "size": amd.bytes.len(), "platform": {"os": "linux", "architecture": "amd64"}},
            {"mediaType": media::OCI_MANIFEST, "digest": arm.digest.to_string(), "size": arm.bytes.len(), "platform": {"os": "linux", "architecture": "arm64"}},
        ]
    })).await;
    push_image(&c, "lib/tool", "2", &base, &noise(4, 1000)).await;

    let (s, d) = (src.host(), dst.host());
    let config = real_config(&src, &dst)
        .mapping(
            format!("{s}/lib/app"),
            &[format!("{d}/mirror/app")],
            &[ALL_TAGS],
        )
        .mapping(
            format!("{s}/lib/tool"),
            &[format!("{d}/mirror/tool")],
            &[ALL_TAGS],
        )
        .build();
    let cold = run_sync(&config).await.report;
    assert_eq!(cold.totals.images_failed, 0, "{}", cold.render_text());
    assert_eq!(cold.totals.images_synced, 4);
    // The shared base went up once and was mounted into the second repository.
    assert_eq!(cold.totals.blobs_mounted, 1, "{}", cold.render_text());

    // The target serves the same bytes under the same digests.
    let t = RegistryClient::new(RegistryOptions::insecure_at(&dst.url())).unwrap();
    let got = t.get_manifest("mirror/app", "1.0").await.unwrap();
    assert_eq!(got.digest, index.digest);
    assert_eq!(got.bytes, index.bytes);
    for child in [&amd, &arm] {
        let m = t
            .get_manifest("mirror/app", &child.digest.to_string())
            .await
            .unwrap();
        assert_eq!(m.bytes, child.bytes);
        let v: serde_json::Value = serde_json::from_slice(&m.bytes).unwrap();
        for layer in v["layers"].as_array().unwrap() {
            let d = Digest::parse(layer["digest"].as_str().unwrap()).unwrap();
            let size = t.head_blob("mirror/app", &d).await.unwrap();
            assert_eq!(size, layer["size"].as_u64(), "{d}");
        }
    }
    // A chunked upload was used for the large base layer (PATCH seen by the real registry).
    let log = dst.access_log().await.unwrap();
    assert!(log.count("PATCH", "/v2/mirror/") > 0);

    // Warm: nothing changed, nothing written.
    let before = dst.access_log().await.unwrap();
    let warm = run_sync(&config).await.report;
    assert_eq!(warm.totals.images_up_to_date, 4, "{}", warm.render_text());
    let after = dst.access_log().await.unwrap();
    for method in ["PUT", "POST", "PATCH", "DELETE"] {
        assert_eq!(
            after.count(method, "/v2/") - before.count(method, "/v2/"),
            0,
            "a warm re-run sent {method}"
        );
    }
}

/// The personality scenario (tests/personalities.rs) against the real registry: an exact-only
/// mapping lists nothing on the source, every image reaches three repositories (one of them a
/// one-component name, which distribution takes) with the cheapest upload flow, and the report
/// shows what distribution 2.8 turned out to accept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exact_mapping_against_the_real_registry_lists_nothing_and_learns_its_capabilities() {
    use ferry_distribution::capabilities::{Support, UploadFlow};
    let Some((src, dst)) = common::real_pair().await else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&src.url())).unwrap();
    let base = noise(5, 600_000);
    let one = push_image(&c, "lib/app", "1.0", &base, &noise(6, 1000)).await;
    let two = push_image(&c, "lib/app", "2.0", &base, &noise(7, 1000)).await;
    push_image(&c, "lib/app", "3.0", &base, &noise(8, 1000)).await;

    let (s, d) = (src.host(), dst.host());
    let config = real_config(&src, &dst)
        .mapping(
            format!("{s}/lib/app"),
            &[
                format!("{d}/mirror/app"),
                format!("{d}/second/app"),
                format!("{d}/app"),
            ],
            &["tags: { exact: [\"1.0\", \"2.0\", \"9.9\"] }"],
        )
        .build();
    let report = run_sync(&config).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    assert_eq!(report.totals.images_synced, 6, "{}", report.render_text());
    let t = RegistryClient::new(RegistryOptions::insecure_at(&dst.url())).unwrap();
    for repo in ["mirror/app", "second/app", "app"] {
        for (tag, m) in [("1.0", &one), ("2.0", &two)] {
            let got = t.get_manifest(repo, tag).await.unwrap();
            assert_eq!((got.digest, got.bytes), (m.digest.clone(), m.bytes.clone()));
        }
    }
    let log = src.access_log().await.unwrap();
    assert_eq!(log.count("GET", "/v2/lib/app/tags/list"), 0);
    let caps = |host: String| {
        report
            .registries
            .iter()
            .find(|r| r.registry == host)
            .unwrap()
            .capabilities
    };
    let (s, d) = (caps(src.host()), caps(dst.host()));
    assert_eq!(d.upload_flow, UploadFlow::Monolithic);
    assert_eq!(d.mount, Support::Works);
    assert_eq!(
        s.referrers_api,
        Support::Refused,
        "distribution 2.8 has none"
    );
    assert_eq!(s.tag_list, Support::Unknown, "the source was never listed");
}

/// A sync within ONE registry (issue 42): every blob is mounted from the source repository the
/// run reads, never read and uploaded again, and the dry run says so first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_within_one_registry_mounts_every_blob_from_the_source_repository() {
    let Some(reg) = RealRegistry::start_for_test().await.unwrap() else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&reg.url())).unwrap();
    let base = noise(9, 600_000);
    push_image(&c, "lib/app", "1.0", &base, &noise(10, 1000)).await;
    push_image(&c, "lib/app", "2.0", &base, &noise(11, 1000)).await;

    let h = reg.host();
    let config = common::config()
        .engine("chunk_size: \"256KiB\", monolithic_limit: \"400KiB\"")
        .entry(&h, &reg.url(), &[])
        .mapping(
            format!("{h}/lib/app"),
            &[format!("{h}/mirror/app"), format!("{h}/second/app")],
            &[ALL_TAGS],
        )
        .build();
    let dry = common::dry_run(&config, None).await.dry.totals;
    // Five distinct blobs (a shared base, two configs, two own layers) into two repositories.
    assert_eq!(
        (
            dry.blobs_to_transfer,
            dry.blobs_to_mount,
            dry.bytes_to_transfer
        ),
        (0, 10, 0),
        "{dry:?}"
    );

    let before = reg.access_log().await.unwrap();
    let report = run_sync(&config).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    assert_eq!(report.totals.images_synced, 4, "{}", report.render_text());
    assert_eq!(
        (report.totals.blobs_copied, report.totals.blobs_mounted),
        (0, 10),
        "{}",
        report.render_text()
    );
    let after = reg.access_log().await.unwrap();
    let sent =
        |method: &str, prefix: &str| after.count(method, prefix) - before.count(method, prefix);
    // Not a byte read from the source or sent to a target: no blob GET, PATCH or upload PUT.
    assert_eq!(sent("GET", "/v2/lib/app/blobs/"), 0);
    assert_eq!(sent("PATCH", "/v2/"), 0);
    assert_eq!(sent("PUT", "/v2/mirror/app/blobs/"), 0);
    assert_eq!(sent("PUT", "/v2/second/app/blobs/"), 0);
    let t = RegistryClient::new(RegistryOptions::insecure_at(&reg.url())).unwrap();
    for repo in ["mirror/app", "second/app"] {
        let got = t.get_manifest(repo, "1.0").await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&got.bytes).unwrap();
        for layer in v["layers"].as_array().unwrap() {
            let d = Digest::parse(layer["digest"].as_str().unwrap()).unwrap();
            let size = t.head_blob(repo, &d).await.unwrap();
            assert_eq!(size, layer["size"].as_u64(), "{repo} {d}");
        }
    }
}
