//! The sync engine against two in-process registries (source and target): multi-arch copies
//! land byte-identical, shared blobs are read once, same-registry targets mount, a broken
//! transfer resumes, a corrupt blob tags nothing, and a warm re-run writes nothing.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{ALL_TAGS, RunOptions, run_sync, run_sync_with};
use ferry_config::Config;
use ferry_sync::StopSignal;
use ferry_sync::report::{ImageStatus, SyncReport};
use ferry_testkit::registry::{FaultAction, FaultRule, OCI_MANIFEST, OpKind, TestRegistry};

/// Each of `regs` (16 connections, five quick attempts), four mappings resolving at once, the
/// engine's `engine` fields.
fn config(regs: &[&TestRegistry], mappings: &str, engine: &str) -> Config {
    common::engine_config(regs)
        .engine(engine)
        .mappings(mappings)
        .build()
}

fn mapping(src: &TestRegistry, repo: &str, targets: &[String]) -> String {
    common::mapping(format!("{}/{repo}", src.host()), targets, &[ALL_TAGS])
}

/// Every tag of `repo` points at a manifest whose config and layers are all there.
fn assert_no_tag_on_missing_content(dst: &TestRegistry, repo: &str) {
    for tag in dst.tags(repo) {
        let (_, bytes) = dst.manifest(repo, &tag).unwrap();
        let m: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        for d in std::iter::once(&m["config"]).chain(m["layers"].as_array().unwrap()) {
            assert!(dst.has_blob(repo, d["digest"].as_str().unwrap()), "{tag}");
        }
    }
}

fn statuses(report: &SyncReport) -> Vec<(String, ImageStatus)> {
    report
        .images
        .iter()
        .map(|i| (format!("{}->{}", i.image, i.target), i.status.clone()))
        .collect()
}

fn write_ops(reg: &TestRegistry) -> u64 {
    let s = reg.stats();
    [
        OpKind::ManifestPut,
        OpKind::UploadStart,
        OpKind::UploadMonolithic,
        OpKind::UploadPatch,
        OpKind::UploadPut,
        OpKind::Mount,
        OpKind::ManifestDelete,
    ]
    .iter()
    .map(|k| s.op(*k))
    .sum()
}

/// A multi-arch image whose two platforms share a base layer.
fn seed_multi_arch(reg: &TestRegistry, repo: &str, tag: &str, base: &[u8]) -> String {
    let amd = reg.seed_image(
        repo,
        &format!("{tag}-amd64"),
        &[base, format!("{repo} amd64").as_bytes()],
    );
    let arm = reg.seed_image(
        repo,
        &format!("{tag}-arm64"),
        &[base, format!("{repo} arm64").as_bytes()],
    );
    reg.seed_index(repo, tag, &[amd, arm])
}

#[tokio::test(start_paused = true)]
async fn a_multi_arch_image_lands_byte_identical_and_a_warm_rerun_writes_nothing() {
    let (src, dst) = common::pair().await;
    let index = seed_multi_arch(&src, "lib/app", "1.0", b"base layer");
    let cfg = config(
        &[&src, &dst],
        &mapping(&src, "lib/app", &[format!("{}/mirror/app", dst.host())]),
        "images_in_flight: 4",
    );
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    assert_eq!(report.totals.images_synced, 3);
    // Same digests, same bytes, every child and blob present.
    let (_, bytes) = dst.manifest("mirror/app", "1.0").expect("tagged");
    assert_eq!(bytes, src.manifest("lib/app", &index).unwrap().1);
    assert_eq!(dst.manifest("mirror/app", &index).unwrap().1, bytes);
    for tag in ["1.0-amd64", "1.0-arm64"] {
        assert_eq!(
            dst.manifest("mirror/app", tag),
            src.manifest("lib/app", tag)
        );
    }

    // Warm: nothing changed, nothing written, at most one request per tag beyond the listing.
    src.reset_stats();
    dst.reset_stats();
    let warm = run_sync(&cfg).await.report;
    assert_eq!(warm.totals.images_up_to_date, 3, "{}", warm.render_text());
    assert_eq!(write_ops(&dst), 0, "a warm re-run writes nothing");
    let s = dst.stats();
    // The listing: its page and the `last=` probe that proves a registry's first Link-less
    // listing whole (issue 39).
    assert_eq!(s.op(OpKind::TagList), 2);
    assert!(s.op(OpKind::ManifestHead) <= 3);
    assert_eq!(
        s.requests,
        1 + 2 + s.op(OpKind::ManifestHead),
        "ping, listing, HEADs: {s:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn shared_blobs_are_read_from_the_source_once_and_mounted_within_a_registry() {
    let (src, dst_a) = common::pair().await;
    let dst_b = common::started().await;
    let base = vec![7u8; 300_000];
    seed_multi_arch(&src, "lib/one", "1", &base);
    seed_multi_arch(&src, "lib/two", "1", &base);
    let mappings = mapping(
        &src,
        "lib/one",
        &[
            format!("{}/m/one", dst_a.host()),
            format!("{}/m/one", dst_b.host()),
        ],
    ) + &mapping(
        &src,
        "lib/two",
        &[
            format!("{}/m/two", dst_a.host()),
            format!("{}/m/two", dst_b.host()),
        ],
    );
    let cfg = config(&[&src, &dst_a, &dst_b], &mappings, "images_in_flight: 8");
    src.reset_stats();
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());

    // Unique blobs: the base, 4 platform layers, 4 configs. Each read once.
    let s = src.stats();
    let unique_blobs = 9;
    assert_eq!(s.op(OpKind::BlobGet), unique_blobs, "{s:?}");
    let base_digest = ferry_testkit::registry::sha256_digest(&base);
    assert_eq!(s.blob_bytes(&base_digest), base.len() as u64);

    // The base reached m/one and m/two on each target: one upload and one mount per registry.
    for dst in [&dst_a, &dst_b] {
        assert!(dst.has_blob("m/one", &base_digest) && dst.has_blob("m/two", &base_digest));
        let d = dst.stats();
        assert_eq!(d.op(OpKind::Mount), 1, "{d:?}");
    }
    assert_eq!(report.totals.blobs_mounted, 2);
}

#[tokio::test(start_paused = true)]
async fn a_transfer_broken_part_way_resumes_from_the_registrys_offset() {
    let (src, dst) = common::pair().await;
    let big: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
    src.seed_image("lib/big", "1", &[&big]);
    let big_digest = ferry_testkit::registry::sha256_digest(&big);
    // The source breaks the first read of the big layer after 2.5 MB. (The rule covers the
    // first two blob reads, config and layer, in whichever order they come; the config is far
    // shorter than the cut and passes whole.)
    src.faults().push(
        FaultRule::on(
            OpKind::BlobGet,
            FaultAction::ResetBody {
                after_bytes: 2_500_000,
            },
        )
        .times(2),
    );
    let cfg = config(
        &[&src, &dst],
        &mapping(&src, "lib/big", &[format!("{}/m/big", dst.host())]),
        "chunk_size: \"1MiB\", monolithic_limit: \"1MiB\"",
    );
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    assert_eq!(dst.blob(&big_digest).as_deref(), Some(&big[..]));
    // Two committed 1 MiB chunks survive the break: the resumed read starts at 2 MiB.
    let served = src.stats().blob_bytes(&big_digest);
    assert!(served > big.len() as u64, "the break happened: {served}");
    let resent = served - 2_500_000;
    assert!(
        resent <= big.len() as u64 - 2 * 1024 * 1024,
        "re-read {resent} bytes of a {} byte blob",
        big.len()
    );
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_source_blob_fails_the_image_and_tags_nothing() {
    let (src, dst) = common::pair().await;
    let config_digest = src.seed_blob("lib/bad", b"{}");
    let layer = b"layer bytes";
    let layer_digest = src.seed_blob("lib/bad", layer);
    // The manifest claims one more byte than the blob has.
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config_digest}","size":2}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{layer_digest}","size":{}}}]}}"#,
        layer.len() + 1
    );
    src.seed_manifest("lib/bad", "1", OCI_MANIFEST, manifest.as_bytes());
    let cfg = config(
        &[&src, &dst],
        &mapping(&src, "lib/bad", &[format!("{}/m/bad", dst.host())]),
        "images_in_flight: 1",
    );
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_failed, 1, "{}", report.render_text());
    let s = statuses(&report);
    assert!(
        matches!(&s[0].1, ImageStatus::Failed { error, .. } if error.to_string().contains("digest mismatch")),
        "{s:?}"
    );
    assert!(dst.tags("m/bad").is_empty(), "nothing tagged");
    assert!(!dst.has_blob("m/bad", &layer_digest));
}

#[tokio::test(start_paused = true)]
async fn an_interrupted_run_starts_nothing_and_a_rerun_completes_it() {
    let (src, dst) = common::pair().await;
    for t in ["1", "2", "3"] {
        src.seed_image("lib/app", t, &[t.as_bytes(), b"shared"]);
    }
    let cfg = config(
        &[&src, &dst],
        &mapping(&src, "lib/app", &[format!("{}/m/app", dst.host())]),
        "images_in_flight: 1",
    );
    let stop = StopSignal::default();
    stop.stop();
    let options = RunOptions {
        stop: Some(stop),
        ..RunOptions::default()
    };
    let report = run_sync_with(&cfg, options).await.report;
    assert!(report.interrupted);
    assert_eq!(report.totals.images_interrupted, 3);
    assert_eq!(write_ops(&dst), 0);

    let again = run_sync(&cfg).await.report;
    assert_eq!(again.totals.images_synced, 3, "{}", again.render_text());
    assert_no_tag_on_missing_content(&dst, "m/app");
    let _ = Duration::ZERO;
}

#[tokio::test(start_paused = true)]
async fn a_platform_filter_copies_only_those_platforms_and_a_rerun_sees_them_up_to_date() {
    let (src, dst) = common::pair().await;
    let index = seed_multi_arch(&src, "lib/app", "1.0", b"base");
    let (_, original) = src.manifest("lib/app", &index).unwrap();
    let children: serde_json::Value = serde_json::from_slice(&original).unwrap();
    let amd = children["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let arm = children["manifests"][1]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let mappings = format!(
        "  - source: \"{}/lib/app\"\n    targets: [\"{}/m/app\"]\n    tags: {{ exact: [\"1.0\"] }}\n    platforms: [\"{}\"]\n",
        src.host(),
        dst.host(),
        children["manifests"][0]["platform"]["os"]
            .as_str()
            .unwrap()
            .to_owned()
            + "/"
            + children["manifests"][0]["platform"]["architecture"]
                .as_str()
                .unwrap()
    );
    let cfg = config(&[&src, &dst], &mappings, "images_in_flight: 2");
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    let (_, copied) = dst.manifest("m/app", "1.0").expect("tagged");
    assert_ne!(copied, original, "the index was rewritten");
    let v: serde_json::Value = serde_json::from_slice(&copied).unwrap();
    assert_eq!(v["manifests"].as_array().unwrap().len(), 1);
    assert_eq!(v["manifests"][0]["digest"].as_str(), Some(amd.as_str()));
    assert!(dst.manifest("m/app", &amd).is_some());
    assert!(
        dst.manifest("m/app", &arm).is_none(),
        "the other platform stays behind"
    );
    // The report names the digest the target now holds.
    assert_eq!(
        report.images[0].digest,
        ferry_testkit::registry::sha256_digest(&copied)
    );

    dst.reset_stats();
    let warm = run_sync(&cfg).await.report;
    assert_eq!(warm.totals.images_up_to_date, 1, "{}", warm.render_text());
    assert_eq!(write_ops(&dst), 0);
}

#[tokio::test(start_paused = true)]
async fn signatures_and_attestations_stored_as_tags_follow_their_image() {
    let src = TestRegistry::builder()
        .referrers_api(false)
        .start()
        .await
        .unwrap();
    let dst = common::started().await;
    let image = src.seed_image("lib/app", "1", &[b"app layer"]);
    let hex = image.trim_start_matches("sha256:");
    // cosign's legacy signature tag, and the referrers tag schema's index of an attestation.
    src.seed_image(
        "lib/app",
        &format!("sha256-{hex}.sig"),
        &[b"signature payload"],
    );
    let attestation = src.seed_image("lib/app", "attestation-tmp", &[b"sbom payload"]);
    src.seed_index(
        "lib/app",
        &format!("sha256-{hex}"),
        std::slice::from_ref(&attestation),
    );
    src.seed_image("lib/app", "2", &[b"not selected"]);

    let mapping = |referrers: bool| {
        format!(
            "  - source: \"{}/lib/app\"\n    targets: [\"{}/m/app\"]\n    tags: {{ exact: [\"1\"] }}\n    referrers: {referrers}\n",
            src.host(),
            dst.host()
        )
    };
    let off = config(&[&src, &dst], &mapping(false), "images_in_flight: 2");
    let report = run_sync(&off).await.report;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    assert_eq!(dst.tags("m/app"), vec!["1".to_owned()]);

    let on = config(&[&src, &dst], &mapping(true), "images_in_flight: 2");
    let report = run_sync(&on).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    let mut tags = dst.tags("m/app");
    tags.sort();
    let mut expected = vec![
        "1".to_owned(),
        format!("sha256-{hex}"),
        format!("sha256-{hex}.sig"),
    ];
    expected.sort();
    assert_eq!(tags, expected);
    assert!(
        dst.manifest("m/app", &attestation).is_some(),
        "the attestation the index lists"
    );
}

#[tokio::test(start_paused = true)]
async fn referrers_from_the_api_follow_their_image_and_are_indexed_where_the_target_cannot() {
    let (src, with_api) = common::pair_with(|b| b.referrers_api(true)).await;
    let without_api = TestRegistry::builder()
        .referrers_api(false)
        .start()
        .await
        .unwrap();
    let image = src.seed_image("lib/app", "1", &[b"app layer"]);
    let (image_type, image_bytes) = src.manifest("lib/app", &image).unwrap();
    let empty = src.seed_blob("lib/app", b"{}");
    let sbom = src.seed_blob("lib/app", b"an sbom");
    let artifact = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","artifactType":"application/spdx+json","config":{{"mediaType":"application/vnd.oci.empty.v1+json","digest":"{empty}","size":2}},"layers":[{{"mediaType":"application/spdx+json","digest":"{sbom}","size":7}}],"subject":{{"mediaType":"{image_type}","digest":"{image}","size":{}}}}}"#,
        image_bytes.len()
    );
    let artifact_digest = src.seed_manifest(
        "lib/app",
        &ferry_testkit::registry::sha256_digest(artifact.as_bytes()),
        OCI_MANIFEST,
        artifact.as_bytes(),
    );

    let mappings = format!(
        "  - source: \"{}/lib/app\"\n    targets: [\"{}/m/app\", \"{}/m/app\"]\n    tags: {{ exact: [\"1\"] }}\n",
        src.host(),
        with_api.host(),
        without_api.host()
    );
    let cfg = config(
        &[&src, &with_api, &without_api],
        &mappings,
        "images_in_flight: 2",
    );
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    for dst in [&with_api, &without_api] {
        assert!(
            dst.manifest("m/app", &artifact_digest).is_some(),
            "the referrer is copied"
        );
        assert!(dst.has_blob("m/app", &sbom));
    }
    let fallback = format!("sha256-{}", image.trim_start_matches("sha256:"));
    assert!(
        with_api.manifest("m/app", &fallback).is_none(),
        "a target with the API indexes it itself"
    );
    let (_, index) = without_api
        .manifest("m/app", &fallback)
        .expect("the tag-schema index");
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    assert_eq!(
        index["manifests"][0]["digest"].as_str(),
        Some(artifact_digest.as_str())
    );
    assert_eq!(
        index["manifests"][0]["artifactType"].as_str(),
        Some("application/spdx+json")
    );

    // Warm: the referrer is up to date everywhere, nothing is written.
    with_api.reset_stats();
    without_api.reset_stats();
    let warm = run_sync(&cfg).await.report;
    assert_eq!(warm.totals.images_synced, 0, "{}", warm.render_text());
    assert_eq!(write_ops(&with_api) + write_ops(&without_api), 0);
}

/// Issue 27: a run stopped by a signal with nothing left undone was reported interrupted (exit
/// 1). Stopped while its only image's manifest PUT is in flight, the image finishes: the run is
/// clean and not interrupted.
#[tokio::test(start_paused = true)]
async fn a_stop_that_leaves_nothing_undone_is_a_clean_run() {
    let (src, dst) = common::pair().await;
    src.seed_image("lib/app", "1", &[b"one"]);
    dst.faults().push(
        FaultRule::on(
            OpKind::ManifestPut,
            FaultAction::Delay(Duration::from_secs(30)),
        )
        .times(1),
    );
    let cfg = config(
        &[&src, &dst],
        &mapping(&src, "lib/app", &[format!("{}/m/app", dst.host())]),
        "images_in_flight: 1",
    );
    let stop = StopSignal::default();
    let options = RunOptions {
        stop: Some(stop.clone()),
        ..RunOptions::default()
    };
    let syncing = run_sync_with(&cfg, options);
    tokio::pin!(syncing);
    let report = loop {
        tokio::select! {
            run = &mut syncing => break run.report,
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                if dst.stats().op(OpKind::ManifestPut) > 0 {
                    stop.stop();
                }
            }
        }
    };
    assert!(
        stop.is_stopped(),
        "the stop came while the PUT was in flight"
    );
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    assert!(!report.interrupted, "{}", report.render_text());
    assert_eq!(report.verdict(), ferry_sync::report::Verdict::Clean);
}

#[tokio::test(start_paused = true)]
async fn a_run_stopped_part_way_leaves_no_tag_on_missing_content_and_a_rerun_completes() {
    let src = TestRegistry::builder()
        .repo_latency("lib/", Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    let dst = common::started().await;
    for t in 0..8 {
        let t = t.to_string();
        src.seed_image("lib/app", &t, &[t.as_bytes(), b"shared base"]);
    }
    let cfg = config(
        &[&src, &dst],
        &mapping(&src, "lib/app", &[format!("{}/m/app", dst.host())]),
        "images_in_flight: 2",
    );
    let stop = StopSignal::default();
    let options = RunOptions {
        stop: Some(stop.clone()),
        ..RunOptions::default()
    };
    let syncing = run_sync_with(&cfg, options);
    tokio::pin!(syncing);
    // Stop once the first tag has landed on the target.
    let report = loop {
        tokio::select! {
            run = &mut syncing => break run.report,
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                if !dst.tags("m/app").is_empty() {
                    stop.stop();
                }
            }
        }
    };
    assert!(report.interrupted);
    assert!(report.totals.images_synced >= 1, "{}", report.render_text());
    assert!(
        report.totals.images_interrupted >= 1,
        "{}",
        report.render_text()
    );
    assert_no_tag_on_missing_content(&dst, "m/app");

    let again = run_sync(&cfg).await.report;
    assert_eq!(again.totals.images_failed, 0, "{}", again.render_text());
    assert_eq!(
        again.totals.images_synced + again.totals.images_up_to_date,
        8,
        "{}",
        again.render_text()
    );
    assert_eq!(dst.tags("m/app").len(), 8);
    assert_no_tag_on_missing_content(&dst, "m/app");
}

#[tokio::test(start_paused = true)]
async fn two_tags_of_one_index_push_its_children_once_and_both_land() {
    let src = common::started().await;
    let dst = TestRegistry::builder()
        .repo_latency("m/", Duration::from_millis(50))
        .start()
        .await
        .unwrap();
    let index = seed_multi_arch(&src, "lib/app", "1.0", b"base");
    let (mt, bytes) = src.manifest("lib/app", &index).unwrap();
    src.seed_manifest("lib/app", "latest", &mt, &bytes);
    let mappings = format!(
        "  - source: \"{}/lib/app\"\n    targets: [\"{}/m/app\"]\n    tags: {{ exact: [\"1.0\", \"latest\"] }}\n",
        src.host(),
        dst.host()
    );
    let cfg = config(&[&src, &dst], &mappings, "images_in_flight: 4");
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    assert_eq!(report.totals.images_synced, 2);
    // Two children by digest, once each, then the index under each tag.
    assert_eq!(dst.stats().op(OpKind::ManifestPut), 4, "{:?}", dst.stats());
    assert_eq!(dst.manifest("m/app", "latest").unwrap().1, bytes);
}

#[tokio::test(start_paused = true)]
async fn progress_counts_the_source_bytes_the_run_expects_and_reads() {
    let (src, dst) = common::pair().await;
    let base = vec![3u8; 50_000];
    seed_multi_arch(&src, "lib/one", "1", &base);
    seed_multi_arch(&src, "lib/two", "1", &base);
    let cfg = config(
        &[&src, &dst],
        &(mapping(&src, "lib/one", &[format!("{}/m/one", dst.host())])
            + &mapping(&src, "lib/two", &[format!("{}/m/two", dst.host())])),
        "images_in_flight: 4",
    );
    let progress = Arc::default();
    let options = RunOptions {
        progress: Some(Arc::clone(&progress)),
        ..RunOptions::default()
    };
    let report = run_sync_with(&cfg, options).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    let s = progress.snapshot();
    // Every unique blob once: what the source served is what progress expected and counted.
    let served: u64 = src.stats().blob_bytes_served.values().sum();
    assert_eq!(s.bytes_total, served);
    assert_eq!(s.blob_bytes_read, served);
    assert_eq!((s.images_done, s.images_total), (6, 6));
    assert!(progress.large_blobs().is_empty(), "nothing left in flight");
}

/// Two mappings from `src` into `dst` (`lib/{first}` to `m/{first}`, likewise `second`) in one
/// run; the second resolves only after 600 s of the paused clock (its tag listing is held that
/// long). Returns the report and whether `m/{first}` held a tag once the second had resolved.
async fn sync_second_after_first_lands(
    src: &TestRegistry,
    dst: &TestRegistry,
    [first, second]: [&str; 2],
) -> (SyncReport, bool) {
    let cfg = config(
        &[src, dst],
        &(mapping(
            src,
            &format!("lib/{first}"),
            &[format!("{}/m/{first}", dst.host())],
        ) + &mapping(
            src,
            &format!("lib/{second}"),
            &[format!("{}/m/{second}", dst.host())],
        )),
        "images_in_flight: 4",
    );
    src.faults().push(
        FaultRule::on(
            OpKind::TagList,
            FaultAction::Delay(Duration::from_secs(600)),
        )
        .repo(format!("lib/{second}")),
    );
    let landed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (seen, repo) = (Arc::clone(&landed), format!("m/{first}"));
    let client = ferry_distribution::RegistryClient::new(
        ferry_distribution::RegistryOptions::insecure_at(&dst.url()),
    )
    .unwrap();
    let options = RunOptions {
        on_prepared: Some(Box::new(move |_| {
            Box::pin(async move {
                let tags = client.list_tags(&repo).await.unwrap_or_default();
                seen.store(!tags.is_empty(), std::sync::atomic::Ordering::SeqCst);
            })
        })),
        ..RunOptions::default()
    };
    let report = run_sync_with(&cfg, options).await.report;
    (report, landed.load(std::sync::atomic::Ordering::SeqCst))
}

/// The engine starts on a mapping the moment it is resolved: a healthy repository's image is
/// mirrored while another mapping is still resolving (in a real run, one waiting out throttles),
/// and the late mapping is synced too once it arrives.
#[tokio::test(start_paused = true)]
async fn a_resolved_mapping_is_synced_while_another_is_still_resolving() {
    let (src, dst) = common::pair().await;
    src.seed_image("lib/cool", "1", &[b"cool layer"]);
    src.seed_image("lib/late", "1", &[b"late layer"]);
    // `late` is held back until `cool` is on the target: an engine that waited for every
    // mapping would never get there, and the wait would time out.
    let (report, cool_landed) = sync_second_after_first_lands(&src, &dst, ["cool", "late"]).await;
    assert!(
        cool_landed,
        "m/cool was not synced before the other mapping resolved"
    );
    assert_eq!(report.totals.images_synced, 2, "{}", report.render_text());
    assert_eq!(dst.tags("m/late"), vec!["1".to_string()]);
    assert_no_tag_on_missing_content(&dst, "m/cool");
    assert_no_tag_on_missing_content(&dst, "m/late");
}

/// A mapping that arrives after a shared blob's transfer finished does not read it from the
/// source again: its repositories mount it from where the earlier transfer put it.
#[tokio::test(start_paused = true)]
async fn a_blob_shared_with_a_mapping_that_arrives_later_is_mounted_not_read_again() {
    let (src, dst) = common::pair().await;
    let base = vec![5u8; 200_000];
    src.seed_image("lib/one", "1", &[&base, b"one only"]);
    src.seed_image("lib/two", "1", &[&base, b"two only"]);
    let (report, one_landed) = sync_second_after_first_lands(&src, &dst, ["one", "two"]).await;
    assert!(one_landed, "m/one lands on its own");
    assert_eq!(report.totals.images_synced, 2, "{}", report.render_text());
    let base_digest = ferry_testkit::registry::sha256_digest(&base);
    assert!(dst.has_blob("m/two", &base_digest));
    let s = src.stats();
    assert_eq!(
        s.blob_bytes(&base_digest),
        base.len() as u64,
        "read once: {s:?}"
    );
    assert_eq!(dst.stats().op(OpKind::Mount), 1, "{:?}", dst.stats());
    assert_no_tag_on_missing_content(&dst, "m/two");
}
