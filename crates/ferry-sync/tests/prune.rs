//! Pruning after a sync: target tags the source no longer has and the filter selects are
//! deleted by tag (in-process registry), tags outside the filter and referrer tags stay, a dry
//! run sends no DELETE, and a real distribution 2.8 (no tag deletion) is reported as such.

mod common;

use bytes::Bytes;
use common::{QUICK_RETRY, prepare_only, run_sync};
use ferry_config::Config;
use ferry_distribution::capabilities::{Feature, Support};
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions, media};
use ferry_sync::StopSignal;
use ferry_sync::prune::{self, PruneReport, PruneStatus};
use ferry_sync::registries::Registries;
use ferry_testkit::registry::{FaultAction, FaultRule, OpKind, TestRegistry};

/// A source→target config; `extra` is appended to the mapping (e.g. `    prune: true\n`).
fn two_registry_config(src: &TestRegistry, dst: &TestRegistry, tags: &str, extra: &str) -> Config {
    common::config()
        .registries(&[src, dst], &[QUICK_RETRY])
        .mapping(
            format!("{}/lib/app", src.host()),
            &[format!("{}/mirror/app", dst.host())],
            &[&format!("tags: {tags}")],
        )
        .mappings(extra)
        .build()
}

/// Prepare, sync, then prune (or its dry run), deciding as `ferry sync` does: the dry run from
/// the plan alone, the real run from the plan and the sync's report.
async fn sync_and_prune(config: &Config, dry_run: bool) -> PruneReport {
    if dry_run {
        return common::dry_run(config, None)
            .await
            .pruned
            .unwrap_or_default();
    }
    let run = run_sync(config).await;
    let report = run.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    let pruned = run.pruned.unwrap_or_default();
    assert!(pruned.skipped.is_empty(), "a clean run: {pruned:?}");
    pruned
}

fn deletes(reg: &TestRegistry) -> Vec<String> {
    reg.requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect()
}

/// Source lib/app: v1, v2. Target mirror/app: v0 (gone from the source), keep-me (outside
/// `v*`) and a cosign signature tag, all pointing at one manifest.
fn seed(src: &TestRegistry, dst: &TestRegistry) -> String {
    src.seed_image("lib/app", "v1", &[b"one"]);
    src.seed_image("lib/app", "v2", &[b"two"]);
    let old = dst.seed_image("mirror/app", "v0", &[b"zero"]);
    let (_, bytes) = dst.manifest("mirror/app", &old).unwrap();
    let media = ferry_testkit::registry::OCI_MANIFEST;
    dst.seed_manifest("mirror/app", "keep-me", media, &bytes);
    let sig = format!("{}.sig", old.replace(':', "-"));
    dst.seed_manifest("mirror/app", &sig, media, &bytes);
    sig
}

#[tokio::test(start_paused = true)]
async fn prune_deletes_by_tag_only_what_the_filter_selects_and_the_source_lost() {
    let (src, dst) = common::pair().await;
    let sig = seed(&src, &dst);
    let cfg = two_registry_config(&src, &dst, "{ include: [\"v*\"] }", "    prune: true\n");

    let report = sync_and_prune(&cfg, false).await;
    assert_eq!(report.deleted, 1, "{}", report.render_text());
    assert!(!report.has_failures());
    assert_eq!(report.tags[0].tag, "v0");
    assert_eq!(report.tags[0].status, PruneStatus::Deleted);
    // One DELETE, by tag: never by digest, which would take keep-me and the signature along.
    assert_eq!(
        deletes(&dst),
        vec!["/v2/mirror/app/manifests/v0".to_string()]
    );
    let mut expected = vec![sig, "keep-me".to_string(), "v1".into(), "v2".into()];
    expected.sort();
    assert_eq!(dst.tags("mirror/app"), expected);

    // A re-run finds nothing more to prune.
    let again = sync_and_prune(&cfg, false).await;
    assert_eq!(again, PruneReport::default());
}

#[tokio::test(start_paused = true)]
async fn a_filter_of_every_tag_still_leaves_referrer_tags_alone() {
    let (src, dst) = common::pair().await;
    let sig = seed(&src, &dst);
    let cfg = two_registry_config(&src, &dst, "{ include: [\"*\"] }", "    prune: true\n");
    let report = sync_and_prune(&cfg, false).await;
    let mut pruned: Vec<&str> = report.tags.iter().map(|t| t.tag.as_str()).collect();
    pruned.sort();
    assert_eq!(pruned, vec!["keep-me", "v0"], "{}", report.render_text());
    assert!(dst.tags("mirror/app").contains(&sig));
}

#[tokio::test(start_paused = true)]
async fn without_prune_or_in_a_dry_run_nothing_is_deleted() {
    let (src, dst) = common::pair().await;
    seed(&src, &dst);

    let off = two_registry_config(&src, &dst, "{ include: [\"v*\"] }", "");
    assert_eq!(sync_and_prune(&off, false).await, PruneReport::default());
    assert!(deletes(&dst).is_empty());

    let on = two_registry_config(&src, &dst, "{ include: [\"v*\"] }", "    prune: true\n");
    let dry = sync_and_prune(&on, true).await;
    assert_eq!(dry.would_delete, 1);
    assert_eq!(dry.tags[0].tag, "v0");
    assert!(
        dry.render_text().contains("would prune"),
        "{}",
        dry.render_text()
    );
    assert!(deletes(&dst).is_empty(), "a dry run sends no DELETE");
    assert!(dst.tags("mirror/app").contains(&"v0".to_string()));
}

#[tokio::test(start_paused = true)]
async fn a_stopped_run_prunes_nothing() {
    let (src, dst) = common::pair().await;
    seed(&src, &dst);
    let cfg = two_registry_config(&src, &dst, "{ include: [\"v*\"] }", "    prune: true\n");
    let registries = Registries::new(&cfg);
    let plan = prepare_only(&cfg, &registries).await;
    let stop = StopSignal::default();
    stop.stop();
    let report = prune::execute(prune::candidates(&plan, &cfg), &registries, &stop).await;
    assert_eq!(report.interrupted, 1);
    assert!(report.has_failures());
    assert!(deletes(&dst).is_empty());
}

async fn push_image(c: &RegistryClient, repo: &str, tag: &str, own: &[u8]) {
    let mut descriptors = Vec::new();
    for bytes in [format!("{{\"tag\":\"{tag}\"}}").as_bytes(), own] {
        let d = Digest::of_bytes(Algorithm::Sha256, bytes);
        c.push_blob_bytes(repo, &d, Bytes::copy_from_slice(bytes))
            .await
            .unwrap();
        descriptors.push((d, bytes.len()));
    }
    let json = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": descriptors[0].0.to_string(), "size": descriptors[0].1},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": descriptors[1].0.to_string(), "size": descriptors[1].1}],
    });
    let bytes = Bytes::from(serde_json::to_vec(&json).unwrap());
    let m = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes,
        media_type: media::OCI_MANIFEST.to_owned(),
    };
    c.put_manifest(repo, tag, &m).await.unwrap();
}

/// distribution 2.8 cannot delete a tag (with deletes on it answers 400 DIGEST_INVALID): the
/// report says so once, the tag stays, nothing is deleted by digest, and the registry gets one
/// DELETE however many tags were due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_distribution_registry_that_cannot_delete_tags_is_reported_clearly() {
    let Some((src, dst)) = common::real_pair().await else {
        return;
    };
    let s = RegistryClient::new(RegistryOptions::insecure_at(&src.url())).unwrap();
    let t = RegistryClient::new(RegistryOptions::insecure_at(&dst.url())).unwrap();
    push_image(&s, "lib/app", "v1", b"one").await;
    push_image(&t, "mirror/app", "v0", b"zero").await;
    push_image(&t, "mirror/app", "v00", b"zero zero").await;
    let cfg = common::parse(&format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/lib/app\"\n    targets: [\"{}/mirror/app\"]\n    tags: {{ include: [\"v*\"] }}\n    prune: true\n",
        common::registry_entry(&src.host(), &src.url(), &[QUICK_RETRY]),
        common::registry_entry(&dst.host(), &dst.url(), &[QUICK_RETRY]),
        src.host(),
        dst.host(),
    ));
    let registries = Registries::new(&cfg);
    let plan = prepare_only(&cfg, &registries).await;
    let report = prune::execute(
        prune::candidates(&plan, &cfg),
        &registries,
        &StopSignal::default(),
    )
    .await;
    let text = report.render_text();
    assert_eq!(report.unsupported, 2, "{text}");
    assert_eq!(report.deleted, 0, "{text}");
    assert!(report.has_failures());
    assert!(
        text.contains(&format!(
            "PRUNE UNSUPPORTED  {} does not delete tags",
            dst.host()
        )),
        "{text}"
    );
    assert!(text.contains("does not delete by digest"), "{text}");
    assert_eq!(
        text.matches("PRUNE UNSUPPORTED").count(),
        1,
        "said once: {text}"
    );
    for tag in ["v0", "v00"] {
        assert!(
            t.head_manifest("mirror/app", tag).await.unwrap().is_some(),
            "{tag}"
        );
    }
    let log = dst.access_log().await.unwrap();
    assert_eq!(
        log.count("DELETE", "/v2/mirror/app/manifests/"),
        1,
        "one DELETE in all"
    );
    assert_eq!(log.count("DELETE", "/v2/mirror/app/manifests/sha256:"), 0);
}

/// A delete the registry refuses for another reason (403 here) fails that tag alone: the
/// registry is not written off as unable to delete tags, so the next tag is still tried.
#[tokio::test(start_paused = true)]
async fn a_refused_delete_fails_that_tag_and_the_next_is_still_tried() {
    let (src, dst) = common::pair().await;
    seed(&src, &dst);
    dst.seed_image("mirror/app", "v00", &[b"zero zero"]);
    dst.faults().push(
        FaultRule::on(
            OpKind::ManifestDelete,
            FaultAction::Status {
                code: 403,
                retry_after: None,
            },
        )
        .times(u32::MAX),
    );
    let cfg = two_registry_config(&src, &dst, "{ include: [\"v*\"] }", "    prune: true\n");
    let registries = Registries::new(&cfg);
    let plan = prepare_only(&cfg, &registries).await;
    let candidates = prune::candidates(&plan, &cfg);
    let report = prune::execute(candidates, &registries, &StopSignal::default()).await;
    let text = report.render_text();
    assert_eq!((report.failed, report.unsupported), (2, 0), "{text}");
    assert!(report.has_failures());
    assert_eq!(text.matches("PRUNE FAILED").count(), 2, "{text}");
    assert_eq!(deletes(&dst).len(), 2, "each tag was tried");
    assert!(dst.tags("mirror/app").contains(&"v00".to_string()));
    let client = registries.client(&dst.host()).await.unwrap();
    assert_eq!(
        client.capabilities().support(Feature::TagDelete),
        Support::Unknown,
        "a 403 does not say that the registry cannot delete tags"
    );
}

/// In a whole-registry mapping each expanded repository decides for itself: an image that
/// failed in one (lib/b) skips pruning there, and only there; its sibling (lib/a) prunes.
#[tokio::test(start_paused = true)]
async fn a_failure_in_one_expanded_repository_skips_pruning_only_there() {
    let (src, dst) = common::pair().await;
    src.seed_image("lib/a", "v1", &[b"a one"]);
    src.seed_image("lib/b", "v1", &[b"b one"]);
    dst.seed_image("mirror/a", "v0", &[b"a zero"]);
    dst.seed_image("mirror/b", "v0", &[b"b zero"]);
    src.faults().push(
        FaultRule::on(
            OpKind::BlobGet,
            FaultAction::Status {
                code: 500,
                retry_after: None,
            },
        )
        .repo("lib/b")
        .forever(),
    );
    let config = common::parse(&format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/lib/*\"\n    targets: [\"{}/mirror\"]\n    tags: {{ include: [\"v*\"] }}\n    prune: true\n",
        common::registry_entry(&src.host(), &src.url(), &[QUICK_RETRY]),
        common::registry_entry(&dst.host(), &dst.url(), &[QUICK_RETRY]),
        src.host(),
        dst.host(),
    ));
    let run = run_sync(&config).await;
    let report = run.report;
    assert_eq!(report.totals.images_failed, 1, "{}", report.render_text());
    let pruned = run.pruned.expect("the mapping prunes");
    assert_eq!(pruned.skipped.len(), 1, "{pruned:?}");
    assert_eq!(deletes(&dst), vec!["/v2/mirror/a/manifests/v0".to_string()]);
}
