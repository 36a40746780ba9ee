//! Immutable tags (`immutable: [globs]`): a tag matching one that a target's listing already
//! names is up to date there without a manifest HEAD, and one every target names costs the
//! source nothing either, so a warm run over immutable tags costs the two listings alone. What
//! is given up: a tag re-pushed on the source under an immutable name is not noticed.
//!
//! A registry that makes tags immutable itself (ECR's immutable repositories: a re-push refused
//! even with the same digest) is the auth task's `Personality::ecr_immutable()`, tested in
//! field_auth.rs (`ecr_immutable_tag_*`): there ferry learns it and HEADs before a tag PUT.
//!
//! Measured here (3 tags, referrers on): a warm run sent the source 7 requests (listing, 3
//! HEADs, 3 referrers) and the target 4 (listing, 3 HEADs) before; 1 and 1 with `immutable`.
//! Since issue 39 each registry's first Link-less listing of a run is asked once more with
//! `last=` to prove it whole: one more request on each side, before and after.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{QUICK_RETRY, run_sync};
use ferry_config::{self as config, Config};
use ferry_sync::dryrun::DryRun;
use ferry_sync::plan::{Plan, TargetState};
use ferry_sync::report::SyncReport;
use ferry_testkit::registry::{OpKind, TestRegistry};

/// A listing's requests on a fresh run: its one page, and the `last=` probe that proves a
/// registry's first Link-less listing whole (issue 39).
const LISTING: u64 = 2;

/// `src/lib/app` to `dst/mirror/app` (and `dst/<extra target>` when given), tags `v*` and
/// `latest`; `extra` is appended to the mapping (`immutable: …`, `prune: true`).
fn config(src: &TestRegistry, dst: &TestRegistry, targets: &[&str], extra: &str) -> Config {
    let targets: Vec<String> = targets
        .iter()
        .map(|t| format!("{}/{t}", dst.host()))
        .collect();
    common::config()
        .registries(&[src, dst], &[QUICK_RETRY])
        .mapping(
            format!("{}/lib/app", src.host()),
            &targets,
            &["tags: { include: [\"v*\", latest] }"],
        )
        .mappings(extra)
        .build()
}

/// A whole run: prepare, then sync; the plan too (for the dry run and pruning).
async fn run(config: &Config) -> (Plan, SyncReport) {
    let run = run_sync(config).await;
    let report = run.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    (run.plan, report)
}

/// Requests per operation (ping and token excluded: they are per client, not per image).
fn requests(reg: &TestRegistry) -> BTreeMap<OpKind, u64> {
    reg.stats()
        .ops
        .into_iter()
        .filter(|(op, n)| *n > 0 && !matches!(op, OpKind::Ping | OpKind::Token))
        .collect()
}

/// Source lib/app: v1.0.0, v1.1.0, v2.0.0 and latest, each its own image.
fn seed(src: &TestRegistry) {
    for tag in ["v1.0.0", "v1.1.0", "v2.0.0", "latest"] {
        src.seed_image("lib/app", tag, &[tag.as_bytes()]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_warm_run_over_immutable_tags_costs_the_listings_alone() {
    let (src, dst) = common::pair().await;
    for tag in ["v1.0.0", "v1.1.0", "v2.0.0"] {
        src.seed_image("lib/app", tag, &[tag.as_bytes()]);
    }
    let immutable = "    immutable: [\"v*.*.*\"]\n";
    let (_, cold) = run(&config(&src, &dst, &["mirror/app"], immutable)).await;
    assert_eq!(cold.totals.images_synced, 3);

    // Before: the same warm run without `immutable` HEADs every tag on both sides (and asks
    // the source for each image's referrers).
    src.reset_stats();
    dst.reset_stats();
    let (_, before) = run(&config(&src, &dst, &["mirror/app"], "")).await;
    assert_eq!(before.totals.images_up_to_date, 3);
    assert_eq!(
        requests(&src),
        BTreeMap::from([
            (OpKind::TagList, LISTING),
            (OpKind::ManifestHead, 3),
            (OpKind::Referrers, 3)
        ]),
        "before: the source's listing, a HEAD and a referrers request per tag"
    );
    assert_eq!(
        requests(&dst),
        BTreeMap::from([(OpKind::TagList, LISTING), (OpKind::ManifestHead, 3)]),
        "before: the target's listing and a HEAD per tag"
    );

    // After: one listing on each side, nothing else.
    src.reset_stats();
    dst.reset_stats();
    let config = config(&src, &dst, &["mirror/app"], immutable);
    let (plan, after) = run(&config).await;
    assert_eq!(
        requests(&src),
        BTreeMap::from([(OpKind::TagList, LISTING)]),
        "the source is listed, and asked about nothing"
    );
    assert_eq!(
        requests(&dst),
        BTreeMap::from([(OpKind::TagList, LISTING)]),
        "the target is listed, and asked about nothing"
    );
    assert_eq!(after.totals.images_up_to_date, 3, "{}", after.render_text());
    assert_eq!(after.totals.images_synced, 0);
    let resolved = plan.resolved().next().unwrap().1;
    assert!(resolved.images.is_empty());
    assert_eq!(resolved.held_immutable.len(), 3);

    // The dry run says the same, from the same plan.
    let dry = DryRun::from_plan(&plan);
    assert_eq!((dry.totals.up_to_date, dry.totals.copies), (3, 0));
    let current: Vec<&str> = dry.mappings[0]
        .up_to_date
        .iter()
        .map(|i| i.image.as_str())
        .collect();
    assert_eq!(current, ["v1.0.0", "v1.1.0", "v2.0.0"]);
}

#[tokio::test(start_paused = true)]
async fn a_tag_no_glob_matches_is_still_compared_with_a_head() {
    let (src, dst) = common::pair().await;
    seed(&src);
    let config = config(
        &src,
        &dst,
        &["mirror/app"],
        "    immutable: [\"v*.*.*\"]\n    referrers: false\n",
    );
    run(&config).await;
    src.reset_stats();
    dst.reset_stats();
    let (plan, report) = run(&config).await;
    assert_eq!(report.totals.images_up_to_date, 4);
    // `latest` alone is HEADed, on both sides.
    let heads = |reg: &TestRegistry| -> Vec<String> {
        reg.requests()
            .into_iter()
            .filter(|r| matches!(r.op, OpKind::ManifestHead | OpKind::ManifestGet))
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    };
    assert_eq!(heads(&src), ["HEAD /v2/lib/app/manifests/latest"]);
    assert_eq!(heads(&dst), ["HEAD /v2/mirror/app/manifests/latest"]);
    let resolved = plan.resolved().next().unwrap().1;
    let compared: Vec<String> = resolved.images.iter().map(|i| i.name()).collect();
    assert_eq!(compared, ["latest"]);
}

#[tokio::test(start_paused = true)]
async fn an_immutable_tag_re_pushed_on_the_source_is_not_copied_again() {
    let (src, dst) = common::pair().await;
    seed(&src);
    let immutable = "    immutable: [\"v*.*.*\"]\n";
    let config = config(&src, &dst, &["mirror/app"], immutable);
    run(&config).await;
    let copied = dst.manifest("mirror/app", "v1.0.0").unwrap();

    // v1.0.0 and latest are re-pushed with other content.
    let repushed = src.seed_image("lib/app", "v1.0.0", &[b"re-pushed"]);
    src.seed_image("lib/app", "latest", &[b"newer"]);
    let (plan, report) = run(&config).await;
    // latest is noticed and copied; v1.0.0 is not (the documented loss).
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    assert_eq!(report.totals.images_up_to_date, 3);
    assert_eq!(dst.manifest("mirror/app", "v1.0.0").unwrap(), copied);
    assert_ne!(
        dst.manifest("mirror/app", "v1.0.0"),
        src.manifest("lib/app", &repushed)
    );
    assert!(
        plan.resolved()
            .next()
            .unwrap()
            .1
            .held_immutable
            .iter()
            .any(|t| t.as_str() == "v1.0.0")
    );

    // Without the glob, the same run notices and rewrites it.
    let (_, report) = run(&self::config(&src, &dst, &["mirror/app"], "")).await;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    assert_eq!(
        dst.manifest("mirror/app", "v1.0.0"),
        src.manifest("lib/app", &repushed)
    );
}

#[tokio::test(start_paused = true)]
async fn a_target_lacking_an_immutable_tag_gets_it_and_one_holding_it_is_not_asked() {
    let (src, dst) = common::pair().await;
    seed(&src);
    let immutable = "    immutable: [\"v*.*.*\"]\n    referrers: false\n";
    run(&config(&src, &dst, &["mirror/app"], immutable)).await;
    // A second target, new: the immutable tags are fetched whole from the source (no HEAD,
    // the engine needs the bytes) and copied there; the first target is asked only about
    // `latest`.
    dst.reset_stats();
    src.reset_stats();
    let both = config(&src, &dst, &["mirror/app", "second/app"], immutable);
    let (plan, report) = run(&both).await;
    assert_eq!(report.totals.images_synced, 4, "{}", report.render_text());
    assert_eq!(report.totals.images_up_to_date, 4);
    let resolved = plan.resolved().next().unwrap().1;
    assert!(resolved.held_immutable.is_empty());
    for image in &resolved.images {
        assert_eq!(image.targets[0].state, TargetState::UpToDate, "{image:?}");
        assert_eq!(image.targets[1].state, TargetState::NewRepository);
    }
    let heads_on_first: Vec<String> = dst
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::ManifestHead && r.repo.as_deref() == Some("mirror/app"))
        .map(|r| r.path)
        .collect();
    assert_eq!(heads_on_first, ["/v2/mirror/app/manifests/latest"]);
    assert_eq!(src.stats().op(OpKind::ManifestHead), 1, "latest only");
}

#[tokio::test(start_paused = true)]
async fn pruning_keeps_immutable_tags_it_did_not_ask_about() {
    let (src, dst) = common::pair().await;
    seed(&src);
    let extra = "    immutable: [\"v*.*.*\"]\n    prune: true\n";
    let config = config(&src, &dst, &["mirror/app"], extra);
    run(&config).await;
    dst.seed_image("mirror/app", "v0.9.0", &[b"gone from the source"]);
    let (plan, _) = run(&config).await;
    assert_eq!(plan.resolved().next().unwrap().1.held_immutable.len(), 3);
    let candidates: Vec<String> = ferry_sync::prune::candidates(&plan, &config)
        .into_iter()
        .map(|c| c.tag)
        .collect();
    assert_eq!(candidates, ["v0.9.0"], "only the tag the source dropped");
}

#[tokio::test(start_paused = true)]
async fn exact_immutable_tags_every_target_holds_cost_the_source_nothing() {
    let (src, dst) = common::pair().await;
    seed(&src);
    let text = |immutable: &str| {
        format!(
            "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/lib/app\"\n    targets: [\"{}/mirror/app\"]\n    tags: {{ exact: [v1.0.0, v2.0.0] }}\n    referrers: false\n    immutable: [{immutable}]\n",
            common::registry_entry(&src.host(), &src.url(), &[QUICK_RETRY]),
            common::registry_entry(&dst.host(), &dst.url(), &[QUICK_RETRY]),
            src.host(),
            dst.host(),
        )
    };
    let parse = |t: String| config::parse(&t, Path::new("x.yaml"), &|_| None).unwrap();
    run(&parse(text(""))).await;
    src.reset_stats();
    dst.reset_stats();
    let (plan, report) = run(&parse(text("\"v*\""))).await;
    assert_eq!(report.totals.images_up_to_date, 2);
    // Exact tags are not listed on the source, and both are held: no request at all.
    assert_eq!(requests(&src), BTreeMap::new());
    assert_eq!(requests(&dst), BTreeMap::from([(OpKind::TagList, LISTING)]));
    let resolved = plan.resolved().next().unwrap().1;
    assert!(
        resolved.missing_exact.is_empty(),
        "held, not missing: {:?}",
        resolved.missing_exact
    );
}

#[tokio::test(start_paused = true)]
async fn a_layout_target_naming_an_immutable_tag_keeps_it() {
    let (src, dst) = common::pair().await;
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("app");
    seed(&src);
    let text = |targets: &str| {
        format!(
            "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/lib/app\"\n    targets: [{targets}]\n    referrers: false\n    immutable: [\"v*.*.*\"]\n",
            common::registry_entry(&src.host(), &src.url(), &[QUICK_RETRY]),
            common::registry_entry(&dst.host(), &dst.url(), &[QUICK_RETRY]),
            src.host(),
        )
    };
    let parse = |t: String| config::parse(&t, Path::new("x.yaml"), &|_| None).unwrap();
    let only_layout = parse(text(&format!("\"oci:{}\"", layout.display())));
    run(&only_layout).await;
    src.reset_stats();
    let (plan, _) = run(&only_layout).await;
    assert_eq!(plan.resolved().next().unwrap().1.held_immutable.len(), 3);
    assert_eq!(
        requests(&src),
        BTreeMap::from([(OpKind::TagList, LISTING), (OpKind::ManifestHead, 1)]),
        "the listing, and a HEAD for latest"
    );

    // Re-pushed on the source: a new registry target gets the new content, the layout keeps
    // what it names (not compared, though comparing would cost no request).
    let repushed = src.seed_image("lib/app", "v1.0.0", &[b"re-pushed"]);
    let both = parse(text(&format!(
        "\"{}/new/app\", \"oci:{}\"",
        dst.host(),
        layout.display()
    )));
    let (plan, report) = run(&both).await;
    let resolved = plan.resolved().next().unwrap().1;
    let v1 = resolved
        .images
        .iter()
        .find(|i| i.name() == "v1.0.0")
        .unwrap();
    let states: Vec<&TargetState> = v1.targets.iter().map(|t| &t.state).collect();
    assert_eq!(
        states,
        [&TargetState::NewRepository, &TargetState::UpToDate],
        "{}",
        report.render_text()
    );
    assert_eq!(
        dst.manifest("new/app", "v1.0.0"),
        src.manifest("lib/app", &repushed)
    );
}

#[tokio::test(start_paused = true)]
async fn a_signature_tag_is_never_immutable_whatever_the_globs_match() {
    let (src, dst) = common::pair().await;
    let digest = src.seed_image("lib/app", "v1.0.0", &[b"one"]);
    let sig = format!("{}.sig", digest.replace(':', "-"));
    src.seed_image("lib/app", &sig, &[b"first signature"]);
    let text = format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/lib/app\"\n    targets: [\"{}/mirror/app\"]\n    referrers: false\n    immutable: [\"*\"]\n",
        common::registry_entry(&src.host(), &src.url(), &[QUICK_RETRY]),
        common::registry_entry(&dst.host(), &dst.url(), &[QUICK_RETRY]),
        src.host(),
        dst.host(),
    );
    let config = config::parse(&text, Path::new("x.yaml"), &|_| None).unwrap();
    assert_eq!(run(&config).await.1.totals.images_synced, 2);
    // cosign appends a signature: the `.sig` tag moves.
    let moved = src.seed_image("lib/app", &sig, &[b"first signature", b"second"]);
    let (plan, report) = run(&config).await;
    let resolved = plan.resolved().next().unwrap().1;
    let held: Vec<&str> = resolved.held_immutable.iter().map(|t| t.as_str()).collect();
    assert_eq!(held, ["v1.0.0"]);
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    assert_eq!(
        dst.manifest("mirror/app", &sig),
        src.manifest("lib/app", &moved)
    );
}
