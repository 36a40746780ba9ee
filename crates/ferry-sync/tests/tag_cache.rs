//! The warm run with the state directory's tag cache (`engine.tag_cache_ttl`): a tag ferry gave
//! its digest within the TTL, still in the target's listing, costs the source's HEAD alone.
//!
//! Measured here (3 tags, referrers on, in-process registries; pings and tokens left out): a
//! warm run without the cache sent the source 8 requests (listing and its `last=` probe, 3
//! HEADs, 3 referrers) and the target 5 (listing and probe, 3 HEADs); with the cache 5 and 2:
//! one request per tag plus the listings.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{QUICK_RETRY, RunOptions, run_sync_with};
use ferry_config::Config;
use ferry_store::resume::TagCache;
use ferry_sync::report::SyncReport;
use ferry_testkit::registry::{OpKind, TestRegistry};

/// A listing's requests on a fresh run: its page and the `last=` probe (issue 39).
const LISTING: u64 = 2;
const TAGS: u64 = 3;
const HOUR: Duration = Duration::from_secs(3600);
const T0: u64 = 1_800_000_000;

fn config(src: &TestRegistry, dst: &TestRegistry) -> Config {
    common::config()
        .registries(&[src, dst], &[QUICK_RETRY])
        .mapping(
            format!("{}/lib/app", src.host()),
            &[format!("{}/mirror/app", dst.host())],
            &["tags: { include: [\"v*\"] }"],
        )
        .build()
}

fn requests(reg: &TestRegistry) -> BTreeMap<OpKind, u64> {
    reg.stats()
        .ops
        .into_iter()
        .filter(|(op, n)| *n > 0 && !matches!(op, OpKind::Ping | OpKind::Token))
        .collect()
}

/// One `ferry sync` on `state` with the cache read at `now` (`ignore`: `--no-cache`).
async fn run(config: &Config, state: &Path, now: u64, ignore: bool) -> SyncReport {
    let cache = Arc::new(TagCache::load(state, HOUR, now, ignore).await);
    let run = run_sync_with(
        config,
        RunOptions {
            state_dir: Some(state),
            tag_cache: Some(cache),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        run.report.totals.images_failed,
        0,
        "{}",
        run.report.render_text()
    );
    run.report
}

async fn seeded() -> (TestRegistry, TestRegistry, Config) {
    let (src, dst) = common::pair().await;
    for tag in ["v1.0.0", "v1.1.0", "v2.0.0"] {
        src.seed_image("lib/app", tag, &[tag.as_bytes()]);
    }
    let config = config(&src, &dst);
    (src, dst, config)
}

fn reset(src: &TestRegistry, dst: &TestRegistry) {
    src.reset_stats();
    dst.reset_stats();
}

#[tokio::test(start_paused = true)]
async fn a_warm_run_costs_one_request_per_tag_and_the_listings() {
    let (src, dst, config) = seeded().await;
    let state = tempfile::tempdir().unwrap();
    let cold = run(&config, state.path(), T0, false).await;
    assert_eq!(cold.totals.images_synced, TAGS);

    // Before: --no-cache asks the target about every tag, and the source for referrers.
    reset(&src, &dst);
    let before = run(&config, state.path(), T0 + 60, true).await;
    assert_eq!(before.totals.images_up_to_date, TAGS);
    assert_eq!(
        requests(&src),
        BTreeMap::from([
            (OpKind::TagList, LISTING),
            (OpKind::ManifestHead, TAGS),
            (OpKind::Referrers, TAGS)
        ])
    );
    assert_eq!(
        requests(&dst),
        BTreeMap::from([(OpKind::TagList, LISTING), (OpKind::ManifestHead, TAGS)])
    );

    // After: the source's HEAD per tag and the listings; nothing else.
    reset(&src, &dst);
    let after = run(&config, state.path(), T0 + 120, false).await;
    assert_eq!(
        after.totals.images_up_to_date,
        TAGS,
        "{}",
        after.render_text()
    );
    assert_eq!(after.totals.images_synced, 0);
    assert_eq!(
        requests(&src),
        BTreeMap::from([(OpKind::TagList, LISTING), (OpKind::ManifestHead, TAGS)]),
        "one HEAD per tag on the source"
    );
    assert_eq!(
        requests(&dst),
        BTreeMap::from([(OpKind::TagList, LISTING)]),
        "the target is listed, and asked about nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn a_tag_changed_behind_ferrys_back_is_put_back_once_the_ttl_is_over() {
    let (src, dst, config) = seeded().await;
    let state = tempfile::tempdir().unwrap();
    run(&config, state.path(), T0, false).await;
    let planted = dst.seed_image("mirror/app", "v1.0.0", &[b"changed by hand"]);
    let planted_bytes = dst.manifest("mirror/app", &planted).unwrap().1;
    let held = |dst: &TestRegistry| dst.manifest("mirror/app", "v1.0.0").unwrap().1;
    assert_eq!(held(&dst), planted_bytes);

    // Within the TTL the cache vouches for the tag: not noticed (the price of the cache).
    let within = run(&config, state.path(), T0 + HOUR.as_secs() - 1, false).await;
    assert_eq!(within.totals.images_synced, 0);

    // Once the TTL is over (an hour after the cold run confirmed it), the target is asked
    // and the tag put back.
    reset(&src, &dst);
    let over = run(&config, state.path(), T0 + HOUR.as_secs(), false).await;
    assert_eq!(over.totals.images_synced, 1, "{}", over.render_text());
    assert_eq!(over.totals.images_up_to_date, TAGS - 1);
    assert_ne!(held(&dst), planted_bytes);

    // The entries are fresh again: the next run asks the target nothing.
    reset(&src, &dst);
    run(&config, state.path(), T0 + HOUR.as_secs() + 60, false).await;
    assert_eq!(requests(&dst), BTreeMap::from([(OpKind::TagList, LISTING)]));
}

#[tokio::test(start_paused = true)]
async fn no_cache_catches_a_changed_tag_at_once() {
    let (_src, dst, config) = seeded().await;
    let state = tempfile::tempdir().unwrap();
    run(&config, state.path(), T0, false).await;
    dst.seed_image("mirror/app", "v2.0.0", &[b"changed by hand"]);
    let report = run(&config, state.path(), T0 + 60, true).await;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_cache_is_ignored_and_the_run_asks_the_target() {
    let (src, dst, config) = seeded().await;
    let state = tempfile::tempdir().unwrap();
    run(&config, state.path(), T0, false).await;
    let dir = state.path().join("tag-cache");
    let mut corrupted = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            std::fs::write(&path, b"{\"ferry_tag_cache\": 1, \"regis").unwrap();
            corrupted += 1;
        }
    }
    assert_eq!(corrupted, 1, "one file for the one target registry");
    reset(&src, &dst);
    let report = run(&config, state.path(), T0 + 60, false).await;
    assert_eq!(report.totals.images_up_to_date, TAGS);
    assert_eq!(
        requests(&dst),
        BTreeMap::from([(OpKind::TagList, LISTING), (OpKind::ManifestHead, TAGS)])
    );
    // Rewritten whole: the next run believes it again.
    reset(&src, &dst);
    run(&config, state.path(), T0 + 120, false).await;
    assert_eq!(requests(&dst), BTreeMap::from([(OpKind::TagList, LISTING)]));
}

#[tokio::test(start_paused = true)]
async fn another_state_directory_or_target_registry_learns_nothing_from_it() {
    let (src, dst, config) = seeded().await;
    let state = tempfile::tempdir().unwrap();
    run(&config, state.path(), T0, false).await;

    // The same targets through another state directory: every tag asked.
    let other = tempfile::tempdir().unwrap();
    reset(&src, &dst);
    run(&config, other.path(), T0 + 60, false).await;
    assert_eq!(
        requests(&dst),
        BTreeMap::from([(OpKind::TagList, LISTING), (OpKind::ManifestHead, TAGS)])
    );

    // Another target registry with the same repository, through the first state directory.
    let third = TestRegistry::builder().start().await.unwrap();
    for tag in ["v1.0.0", "v1.1.0", "v2.0.0"] {
        third.seed_image("mirror/app", tag, &[tag.as_bytes()]);
    }
    let to_third = self::config(&src, &third);
    let report = run(&to_third, state.path(), T0 + 60, false).await;
    assert_eq!(report.totals.images_up_to_date, TAGS);
    assert_eq!(
        requests(&third),
        BTreeMap::from([(OpKind::TagList, LISTING), (OpKind::ManifestHead, TAGS)])
    );
}

#[tokio::test(start_paused = true)]
async fn a_verify_handed_the_cache_still_asks_the_target() {
    let (_src, dst, config) = seeded().await;
    let state = tempfile::tempdir().unwrap();
    run(&config, state.path(), T0, false).await;
    dst.seed_image("mirror/app", "v1.1.0", &[b"changed by hand"]);
    let mut ctx = ferry_sync::run::RunContext::new(&config);
    ctx.tag_cache = Some(Arc::new(
        TagCache::load(state.path(), HOUR, T0 + 60, false).await,
    ));
    let report = ferry_sync::run::Run::new(config.clone(), ctx)
        .verify(false)
        .await;
    assert_eq!(report.totals.drifted, 1, "the changed tag is found");
}
