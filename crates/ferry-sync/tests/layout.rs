//! OCI image-layout directories as sources and as pruned targets: a layout built by hand (as
//! skopeo or buildkit write one) mirrors to a real registry byte-identical, a corrupt blob is
//! caught, platforms are filtered, referrers follow, and pruning frees only what nothing reaches.

mod common;
#[path = "layout/targets.rs"]
mod targets;

use std::path::{Path, PathBuf};

use common::layout::{HandLayout, digest_of, layout_tags, read_blob};
use common::{ALL_TAGS, QUICK_RETRY, parse, prepare_only, run_sync};
use ferry_config::Config;
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions, media};
use ferry_sync::plan::TargetState;
use ferry_sync::prune::{PruneReport, PruneStatus};
use ferry_sync::registries::Registries;
use ferry_sync::report::{ImageStatus, SyncReport};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::noise;
use serde_json::json;

/// A config copying every tag of the layout at `src` into the layout at `dst`; `extra` is
/// appended to the mapping (e.g. `    prune: true\n`).
fn layout_to_layout(src: &Path, dst: &Path, extra: &str) -> Config {
    common::config()
        .mapping(
            format!("oci:{}", src.display()),
            &[format!("oci:{}", dst.display())],
            &[ALL_TAGS],
        )
        .mappings(extra)
        .build()
}

/// Prepare, then either the prune dry run (no sync report) or sync and prune.
async fn run_with_prune(config: &Config, dry_run: bool) -> (Option<SyncReport>, PruneReport) {
    if dry_run {
        let dry = common::dry_run(config, None).await;
        return (None, dry.pruned.unwrap_or_default());
    }
    let run = run_sync(config).await;
    (Some(run.report), run.pruned.unwrap_or_default())
}

/// A config copying every tag of the layout at `src` to `host/repository`; `engine` holds the
/// engine settings' fields, if any.
fn layout_to_registry(src: &Path, host: &str, url: &str, repository: &str, engine: &str) -> Config {
    common::config()
        .engine(engine)
        .entry(host, url, &[QUICK_RETRY])
        .mapping(
            format!("oci:{}", src.display()),
            &[format!("{host}/{repository}")],
            &[ALL_TAGS],
        )
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_mirrors_to_a_real_registry_byte_identical_and_a_warm_rerun_writes_nothing() {
    let Some(dst) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("app");
    let mut layout = HandLayout::new(&src);
    let base = noise(1, 700_000);
    let amd = layout.image("amd64", &[&base, &noise(2, 200_000)]);
    let arm = layout.image("arm64", &[&base, &noise(3, 200_000)]);
    let index = layout.index(&[amd.clone(), arm.clone()]);
    layout.tag(&index, Some("1.0"));
    // Some tools write the full reference in ref.name; its tag is what counts.
    let plain = layout.image("amd64", &[&noise(4, 5000)]);
    layout.tag(&plain, Some("example.com/lib/app:2"));

    let engine = r#"chunk_size: "256KiB", monolithic_limit: "400KiB""#;
    let config = layout_to_registry(&src, &dst.host(), &dst.url(), "mirror/app", engine);
    let cold = run_sync(&config).await.report;
    assert_eq!(cold.totals.images_failed, 0, "{}", cold.render_text());
    assert_eq!(cold.totals.images_synced, 2, "{}", cold.render_text());

    let t = RegistryClient::new(RegistryOptions::insecure_at(&dst.url())).unwrap();
    let got = t.get_manifest("mirror/app", "1.0").await.unwrap();
    assert_eq!(got.digest.to_string(), digest_of(&index));
    assert_eq!(got.bytes.to_vec(), read_blob(&src, &digest_of(&index)));
    let got = t.get_manifest("mirror/app", "2").await.unwrap();
    assert_eq!(got.digest.to_string(), digest_of(&plain));
    for child in [&amd, &arm] {
        let m = t
            .get_manifest("mirror/app", &digest_of(child))
            .await
            .unwrap();
        assert_eq!(m.bytes.to_vec(), read_blob(&src, &digest_of(child)));
        let v: serde_json::Value = serde_json::from_slice(&m.bytes).unwrap();
        for layer in v["layers"].as_array().unwrap() {
            let d = Digest::parse(layer["digest"].as_str().unwrap()).unwrap();
            assert_eq!(
                t.head_blob("mirror/app", &d).await.unwrap(),
                layer["size"].as_u64(),
                "{d}"
            );
        }
    }
    // The 700 kB base went up in chunks, read from the file as it went.
    let log = dst.access_log().await.unwrap();
    assert!(log.count("PATCH", "/v2/mirror/app/blobs/uploads/") > 0);

    let before = dst.access_log().await.unwrap();
    let warm = run_sync(&config).await.report;
    assert_eq!(warm.totals.images_up_to_date, 2, "{}", warm.render_text());
    let after = dst.access_log().await.unwrap();
    for method in ["PUT", "POST", "PATCH"] {
        assert_eq!(
            after.count(method, "/v2/") - before.count(method, "/v2/"),
            0,
            "a warm re-run sent {method}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_layout_blob_fails_its_image_and_the_target_gets_no_tag() {
    let dst = common::started().await;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("app");
    let mut layout = HandLayout::new(&src);
    let good = layout.image("amd64", &[b"good layer"]);
    layout.tag(&good, Some("good"));
    let bad_layer = b"a layer that will rot".to_vec();
    let bad = layout.image("amd64", &[&bad_layer]);
    layout.tag(&bad, Some("bad"));
    // Same size, one byte changed: only the digest can tell.
    let rotten = Digest::of_bytes(Algorithm::Sha256, &bad_layer);
    let mut bytes = bad_layer.clone();
    bytes[0] ^= 1;
    std::fs::write(src.join("blobs/sha256").join(rotten.hex()), bytes).unwrap();

    let config = layout_to_registry(&src, &dst.host(), &dst.url(), "mirror/app", "");
    let report = run_sync(&config).await.report;
    let status = |tag: &str| {
        report
            .images
            .iter()
            .find(|i| i.image == tag)
            .map(|i| i.status.clone())
            .unwrap()
    };
    assert_eq!(status("good"), ImageStatus::Synced);
    match status("bad") {
        ImageStatus::Failed { error, .. } => {
            let error = error.to_string();
            assert!(error.contains("digest mismatch"), "{error}");
            assert!(error.contains(&format!("oci:{}", src.display())), "{error}");
        }
        other => panic!("a rotten blob went through: {other:?}"),
    }
    assert_eq!(dst.tags("mirror/app"), vec!["good".to_string()]);
    assert!(!dst.has_blob("mirror/app", &rotten.to_string()));
}

#[tokio::test(start_paused = true)]
async fn a_missing_layout_fails_its_mapping_naming_the_directory() {
    let dst = common::started().await;
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nowhere");
    let config = layout_to_registry(&missing, &dst.host(), &dst.url(), "mirror/app", "");
    let plan = prepare_only(&config, &Registries::new(&config)).await;
    let error = plan.mappings[0].outcome.as_ref().unwrap_err().to_string();
    assert!(
        error.contains(&format!("oci:{}", missing.display()))
            && error.contains("not an OCI image layout"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_platform_filter_applies_to_a_layout_source_and_referrers_follow_their_subject() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    let mut layout = HandLayout::new(&src);
    let (amd, arm, index) = layout.multi_arch("1.0");
    // A signature of the plain image, stored untagged with a subject (as oras writes one).
    let plain = layout.image("amd64", &[b"plain layer"]);
    layout.tag(&plain, Some("plain"));
    let empty = layout.blob(b"{}");
    let sig_layer = layout.blob(b"signature bytes");
    let signature = json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "artifactType": "application/vnd.example.signature",
        "config": {"mediaType": media::OCI_EMPTY_JSON, "digest": empty["digest"], "size": 2},
        "layers": [{"mediaType": "application/octet-stream", "digest": sig_layer["digest"], "size": sig_layer["size"]}],
        "subject": {"mediaType": media::OCI_MANIFEST, "digest": plain["digest"], "size": plain["size"]},
    });
    let mut sig = layout.blob(&serde_json::to_vec(&signature).unwrap());
    sig["mediaType"] = json!(media::OCI_MANIFEST);
    layout.tag(&sig, None);

    let config = layout_to_layout(&src, &dst, "    platforms: [linux/arm64]\n");
    let report = run_sync(&config).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    let has = |d: &str| {
        let d = Digest::parse(d).unwrap();
        dst.join("blobs/sha256").join(d.hex()).is_file()
    };
    let amd_layer = Digest::of_bytes(Algorithm::Sha256, b"amd layer").to_string();
    let arm_layer = Digest::of_bytes(Algorithm::Sha256, b"arm layer").to_string();
    assert!(has(&arm_layer) && has(&digest_of(&arm)));
    assert!(
        !has(&amd_layer) && !has(&digest_of(&amd)),
        "amd64 was copied"
    );
    // The tag now names an index of the arm64 image alone (rewritten, so a new digest).
    let tags = layout_tags(&dst);
    let (_, filtered) = tags.iter().find(|(t, _)| t == "1.0").unwrap();
    assert_ne!(*filtered, digest_of(&index));
    let rewritten: serde_json::Value = serde_json::from_slice(&read_blob(&dst, filtered)).unwrap();
    assert_eq!(rewritten["manifests"].as_array().unwrap().len(), 1);
    // The signature came along with the image it signs.
    assert!(has(&digest_of(&sig)), "the referrer was left behind");
    assert!(has(sig_layer["digest"].as_str().unwrap()));
}

#[tokio::test(start_paused = true)]
async fn pruning_a_layout_removes_lost_tags_and_only_the_blobs_nothing_else_reaches() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    let mut layout = HandLayout::new(&src);
    let shared: &[u8] = b"shared base layer";
    let v1 = layout.image("amd64", &[shared, b"v1 only"]);
    let v2 = layout.image("amd64", &[shared, b"v2 only"]);
    let keep = layout.image("amd64", &[b"outside the filter"]);
    layout.tag(&v1, Some("v1"));
    layout.tag(&v2, Some("v2"));
    layout.tag(&keep, Some("keep-me"));
    // A multi-arch tag: its layers are reached only through the index's children.
    let v3_amd = layout.image("amd64", &[shared, b"v3 amd"]);
    let v3_arm = layout.image("arm64", &[b"v3 arm"]);
    let v3 = layout.index(&[v3_amd, v3_arm]);
    layout.tag(&v3, Some("v3"));
    let text = format!(
        "version: 1\nmappings:\n  - source: \"oci:{}\"\n    targets: [\"oci:{}\"]\n    tags: {{ include: [\"*\"] }}\n    prune: true\n",
        src.display(),
        dst.display(),
    );
    let (first, _) = run_with_prune(&parse(&text), false).await;
    let first = first.unwrap();
    assert_eq!(first.totals.images_synced, 4, "{}", first.render_text());

    // The source loses v1; keep-me leaves the filter (and the source).
    layout.untag("v1");
    layout.untag("keep-me");
    let narrowed = text.replace("include: [\"*\"]", "include: [\"v*\"]");
    let blob_count = || std::fs::read_dir(dst.join("blobs/sha256")).unwrap().count();
    let before = blob_count();

    let (_, dry) = run_with_prune(&parse(&narrowed), true).await;
    assert_eq!(dry.would_delete, 1);
    assert_eq!(dry.tags[0].tag, "v1");
    assert_eq!(blob_count(), before, "a dry run removed blobs");
    assert_eq!(layout_tags(&dst).len(), 4, "a dry run changed the index");

    let (_, pruned) = run_with_prune(&parse(&narrowed), false).await;
    assert_eq!(pruned.deleted, 1, "{}", pruned.render_text());
    assert!(matches!(pruned.tags[0].status, PruneStatus::Deleted));
    let tags: Vec<String> = layout_tags(&dst).into_iter().map(|(t, _)| t).collect();
    assert_eq!(tags, ["keep-me", "v2", "v3"]);
    let has = |bytes: &[u8]| {
        let d = Digest::of_bytes(Algorithm::Sha256, bytes);
        dst.join("blobs/sha256").join(d.hex()).is_file()
    };
    // v1's manifest and its own layer are gone (its config is v2's too: same arch); the shared
    // base, v2 and the tag outside the filter stay.
    assert!(!has(b"v1 only"), "an unreferenced layer was kept");
    assert!(
        !has(&read_blob(&src, &digest_of(&v1))),
        "v1's manifest was kept"
    );
    assert!(has(shared) && has(b"v2 only") && has(b"outside the filter"));
    assert!(
        has(b"v3 amd") && has(b"v3 arm"),
        "an index's children were collected"
    );
    assert_eq!(pruned.layout_blobs_removed, 2, "{}", pruned.render_text());
    let freed = b"v1 only".len() + read_blob(&src, &digest_of(&v1)).len();
    assert_eq!(pruned.layout_bytes_freed, freed as u64);
    assert_eq!(blob_count(), before - 2);
}

#[tokio::test(start_paused = true)]
async fn a_layout_whose_manifest_cannot_be_read_is_not_garbage_collected() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dst");
    let mut layout = HandLayout::new(&dir);
    let a = layout.image("amd64", &[b"a layer"]);
    let b = layout.image("amd64", &[b"b layer"]);
    layout.tag(&a, Some("a"));
    layout.tag(&b, Some("b"));
    // b's manifest is lost: what it referenced cannot be known, so nothing may go.
    let b_digest = Digest::parse(&digest_of(&b)).unwrap();
    std::fs::remove_file(dir.join("blobs/sha256").join(b_digest.hex())).unwrap();
    assert!(
        ferry_store::layout::prune::remove_tag(&dir, "a")
            .await
            .unwrap()
    );
    let before = std::fs::read_dir(dir.join("blobs/sha256")).unwrap().count();
    let error =
        ferry_store::layout::prune::collect_garbage(&dir, ferry_store::layout::lock::LOCK_WAIT)
            .await
            .unwrap_err();
    assert!(error.contains(&b_digest.to_string()), "{error}");
    assert_eq!(
        std::fs::read_dir(dir.join("blobs/sha256")).unwrap().count(),
        before
    );
}

#[tokio::test(start_paused = true)]
async fn an_upload_from_a_layout_whose_reply_was_lost_resumes_at_the_registrys_offset() {
    use ferry_testkit::registry::{FaultAction, FaultRule, OpKind};
    let dst = common::started().await;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("big");
    let mut layout = HandLayout::new(&src);
    let big = noise(7, 3_000_000);
    let image = layout.image("amd64", &[&big]);
    layout.tag(&image, Some("1"));
    // The first 1 MiB chunk lands but its reply is lost: the session then holds 1 MiB, and the
    // rest must be read from the file at that offset.
    dst.faults().push(FaultRule::on(
        OpKind::UploadPatch,
        FaultAction::AfterCommit { code: 502 },
    ));
    let config = layout_to_registry(
        &src,
        &dst.host(),
        &dst.url(),
        "mirror/big",
        r#"chunk_size: "1MiB", monolithic_limit: "1MiB""#,
    );
    let report = run_sync(&config).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    let digest = Digest::of_bytes(Algorithm::Sha256, &big).to_string();
    assert_eq!(dst.blob(&digest).as_deref(), Some(&big[..]));
    let stats = dst.stats();
    assert_eq!(stats.op(OpKind::UploadStatus), 1, "{stats:?}");
    // Three chunks and one replayed after the status check said 1 MiB was held: never four
    // full chunks from offset zero.
    assert_eq!(stats.op(OpKind::UploadPatch), 3, "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn a_rotten_manifest_in_a_layout_fails_its_mapping_with_a_digest_mismatch() {
    let dst = common::started().await;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("app");
    let mut layout = HandLayout::new(&src);
    let image = layout.image("amd64", &[b"layer"]);
    layout.tag(&image, Some("1"));
    let d = Digest::parse(&digest_of(&image)).unwrap();
    let path = src.join("blobs/sha256").join(d.hex());
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("\"schemaVersion\":2", "\"schemaVersion\":3"),
    )
    .unwrap();
    let config = layout_to_registry(&src, &dst.host(), &dst.url(), "mirror/app", "");
    let report = run_sync(&config).await.report;
    assert_eq!(report.failed_mappings.len(), 1, "{}", report.render_text());
    let text = report.render_text();
    assert!(text.contains("digest mismatch"), "{text}");
    assert!(dst.tags("mirror/app").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_layout_referrer_is_planned_under_its_own_subject_only() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let mut layout = HandLayout::new(&src);
    // "a" sorts first and has no referrers; "b" is signed.
    let a = layout.image("amd64", &[b"a layer"]);
    let b = layout.image("amd64", &[b"b layer"]);
    layout.tag(&a, Some("a"));
    layout.tag(&b, Some("b"));
    let empty = layout.blob(b"{}");
    let signature = json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "artifactType": "application/vnd.example.signature",
        "config": {"mediaType": media::OCI_EMPTY_JSON, "digest": empty["digest"], "size": 2},
        "layers": [],
        "subject": {"mediaType": media::OCI_MANIFEST, "digest": b["digest"], "size": b["size"]},
    });
    let mut sig = layout.blob(&serde_json::to_vec(&signature).unwrap());
    sig["mediaType"] = json!(media::OCI_MANIFEST);
    layout.tag(&sig, None);
    let config = layout_to_layout(&src, &tmp.path().join("dst"), "");
    let plan = prepare_only(&config, &Registries::new(&config)).await;
    let resolved = plan.mappings[0].outcome.as_ref().unwrap();
    let referrers: Vec<_> = resolved
        .images
        .iter()
        .filter(|i| i.subject.is_some())
        .map(|i| {
            (
                i.digest.to_string(),
                i.subject.as_ref().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(referrers, [(digest_of(&sig), digest_of(&b))]);
}

#[tokio::test(start_paused = true)]
async fn a_blob_broken_part_way_leaves_nothing_under_its_digest_and_a_rerun_completes() {
    use ferry_testkit::registry::{FaultAction, FaultRule, OpKind};
    let src = common::started().await;
    let layer = noise(9, 300_000);
    src.seed_image("lib/app", "v1", &[&layer]);
    // Every read of a blob breaks after 100 kB, more often than the retries allow.
    src.faults().push(
        FaultRule::on(
            OpKind::BlobGet,
            FaultAction::ResetBody {
                after_bytes: 100_000,
            },
        )
        .times(20),
    );
    let tmp = tempfile::tempdir().unwrap();
    let dst = tmp.path().join("mirror");
    let config = parse(&format!(
        "version: 1\nregistries:\n  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    retry: {{ attempts: 2, base: 10ms, cap: 50ms }}\nmappings:\n  - source: \"{}/lib/app\"\n    targets: [\"oci:{}\"]\n",
        src.host(),
        src.url(),
        src.host(),
        dst.display(),
    ));
    let broken = run_sync(&config).await.report;
    assert_eq!(broken.totals.images_failed, 1, "{}", broken.render_text());
    let digest = Digest::of_bytes(Algorithm::Sha256, &layer);
    let blobs = dst.join("blobs/sha256");
    assert!(
        !blobs.join(digest.hex()).exists(),
        "a partial blob sits under its digest"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&blobs)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        leftovers
            .iter()
            .all(|n| !n.to_string_lossy().ends_with(".partial")),
        "temporary files left: {leftovers:?}"
    );
    assert!(
        !dst.join("index.json").exists() || layout_tags(&dst).is_empty(),
        "the image was tagged without its layer"
    );

    src.faults().clear_rules();
    let rerun = run_sync(&config).await.report;
    assert_eq!(rerun.totals.images_synced, 1, "{}", rerun.render_text());
    assert_eq!(std::fs::read(blobs.join(digest.hex())).unwrap(), layer);
    assert_eq!(layout_tags(&dst).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_layout_write_cut_off_mid_blob_like_a_crash_leaves_nothing_under_the_digest() {
    use ferry_store::layout::writer::LayoutWriter;
    /// A blob's digest and size.
    struct BlobRef {
        digest: Digest,
        size: u64,
    }
    use futures::StreamExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let bytes = noise(11, 200_000);
    let blob = BlobRef {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        size: bytes.len() as u64,
    };
    // Half the blob arrives, then the source goes silent; the write is dropped where it stands
    // (no error path runs, as when the process is killed).
    let first = bytes::Bytes::copy_from_slice(&bytes[..100_000]);
    let stream = futures::stream::once(async move { Ok(first) }).chain(futures::stream::pending());
    let cut = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        LayoutWriter::new(tmp.path()).write_blob(&blob.digest, blob.size, Box::pin(stream)),
    )
    .await;
    assert!(cut.is_err(), "the write finished without its bytes");
    assert!(
        !tmp.path()
            .join("blobs/sha256")
            .join(blob.digest.hex())
            .exists(),
        "a cut-off write left bytes under the blob's digest"
    );
}

#[tokio::test(start_paused = true)]
async fn an_index_and_its_children_tagged_too_land_in_one_layout_target() {
    // The index and each child are separate images of the run, writing the same manifest
    // files into one layout at the same time.
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    let mut layout = HandLayout::new(&src);
    let (amd, arm, index) = layout.multi_arch("1.0");
    layout.tag(&amd, Some("1.0-amd64"));
    layout.tag(&arm, Some("1.0-arm64"));
    let config = layout_to_layout(&src, &dst, "");
    let report = run_sync(&config).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    assert_eq!(
        layout_tags(&dst),
        [
            ("1.0".to_string(), digest_of(&index)),
            ("1.0-amd64".to_string(), digest_of(&amd)),
            ("1.0-arm64".to_string(), digest_of(&arm)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_sync_into_a_layout_holding_several_repositories_keeps_their_full_references() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    let mut source = HandLayout::new(&src);
    let v1 = source.image("amd64", &[b"the source's v1"]);
    source.tag(&v1, Some("v1"));
    // The target already holds two repositories' v1, named by full reference.
    let mut target = HandLayout::new(&dst);
    let a = target.image("amd64", &[b"a's v1"]);
    let b = target.image("amd64", &[b"b's v1"]);
    target.tag(&a, Some("a:v1"));
    target.tag(&b, Some("b:v1"));

    let report = run_sync(&layout_to_layout(&src, &dst, "")).await.report;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    assert_eq!(
        layout_tags(&dst),
        [
            ("a:v1".to_owned(), digest_of(&a)),
            ("b:v1".to_owned(), digest_of(&b)),
            ("v1".to_owned(), digest_of(&v1)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_mapping_with_an_image_that_failed_in_this_run_prunes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    let mut source = HandLayout::new(&src);
    let bad_layer = b"a layer that will rot".to_vec();
    let bad = source.image("amd64", &[&bad_layer]);
    source.tag(&bad, Some("v1"));
    let rotten = Digest::of_bytes(Algorithm::Sha256, &bad_layer);
    let mut bytes = bad_layer.clone();
    bytes[0] ^= 1;
    std::fs::write(src.join("blobs/sha256").join(rotten.hex()), bytes).unwrap();
    // The target holds a tag the source does not list: a candidate, on a clean run.
    let mut target = HandLayout::new(&dst);
    let old = target.image("amd64", &[b"old layer"]);
    target.tag(&old, Some("old"));

    let config = layout_to_layout(&src, &dst, "    prune: true\n");
    let before_run = common::dry_run(&config, None).await.pruned.unwrap();
    assert_eq!(before_run.tags.len(), 1, "the dry run's view");
    let run = run_sync(&config).await;
    let report = run.report;
    assert_eq!(report.totals.images_failed, 1, "{}", report.render_text());
    let pruned = run.pruned.expect("the mapping prunes");
    assert!(pruned.tags.is_empty(), "{pruned:?}");
    assert_eq!(pruned.skipped.len(), 1);
    assert!(pruned.skipped[0].reason.contains("failed"), "{pruned:?}");
    assert!(
        pruned.render_text().contains("prune skipped  mapping 0"),
        "{}",
        pruned.render_text()
    );
    assert_eq!(layout_tags(&dst), [("old".to_owned(), digest_of(&old))]);
}
