//! The prepare phase against the fault-injecting test registry: the window stays full while
//! mappings wait (the floor, not only the ceiling), outcomes stay in config order, one failed
//! mapping stops no other, target states are right, and the phase sends no write.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::ALL_TAGS;
use ferry_config::Config;
use ferry_sync::PrepareTracker;
use ferry_sync::plan::TargetState;
use ferry_sync::registries::Registries;
use ferry_testkit::registry::{FaultAction, FaultRule, OpKind, TestRegistry};

fn config_for(reg: &TestRegistry, mappings: &str, concurrency: usize) -> Config {
    common::config()
        .setting(&format!("concurrency: {concurrency}"))
        .registry(
            reg,
            &[
                "max_concurrent: 64",
                "retry: { attempts: 4, base: 100ms, cap: 2s }",
            ],
        )
        .mappings(mappings)
        .build()
}

fn mapping(reg: &TestRegistry, source: &str, target: &str) -> String {
    let h = reg.host();
    common::mapping(
        format!("{h}/{source}"),
        &[format!("{h}/{target}")],
        &[ALL_TAGS],
    )
}

async fn run(
    config: &Config,
    registries: &Registries,
) -> (ferry_sync::plan::Plan, Arc<PrepareTracker>) {
    common::prepare_tracked(config, registries).await
}

/// A few deep, slow repositories placed among shallow ones, so an ordered queue would be held
/// by its head while the mappings behind it finish and wait.
async fn skewed_registry(
    mappings: usize,
    deep_every: usize,
    shallow_tags: usize,
) -> (TestRegistry, String) {
    let reg = TestRegistry::builder()
        .page_size(5)
        .repo_latency("deep/", Duration::from_millis(300))
        .repo_latency("shallow/", Duration::from_millis(20))
        .start()
        .await
        .unwrap();
    let mut yaml = String::new();
    for i in 0..mappings {
        let (repo, tags) = if i % deep_every == 0 {
            (format!("deep/r{i}"), 40)
        } else {
            (format!("shallow/r{i}"), shallow_tags)
        };
        let digest = reg.seed_image(&repo, "t0", &[format!("layer {i}").as_bytes()]);
        for t in 1..tags {
            reg.seed_manifest(
                &repo,
                &format!("t{t}"),
                ferry_testkit::registry::OCI_MANIFEST,
                &reg.manifest(&repo, &digest).unwrap().1,
            );
        }
        yaml.push_str(&mapping(&reg, &repo, &format!("mirror/r{i}")));
    }
    (reg, yaml)
}

/// Whenever time moves on while mappings are still unstarted, every slot is busy.
fn window_floor_violations(tracker: &PrepareTracker, concurrency: usize) -> Vec<(usize, usize)> {
    let events = tracker.events();
    let mut violations = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let last_at_this_instant = events.get(i + 1).is_none_or(|n| n.at != e.at);
        if last_at_this_instant && e.unstarted > 0 && e.in_flight != concurrency {
            violations.push((e.in_flight, e.unstarted));
        }
    }
    violations
}

#[tokio::test(start_paused = true)]
async fn resolve_all_keeps_its_window_full_while_mappings_wait() {
    assert_window_stays_full(40, 8, 2, 8).await;
}

/// Issue 42's scale: 1,000 mappings of 5 tags (the 1,000 × 5 corpus's shape), one in 50 deep,
/// under the default window of 16.
#[tokio::test(start_paused = true)]
async fn at_a_thousand_mappings_of_five_tags_the_window_stays_full() {
    assert_window_stays_full(1000, 50, 5, 16).await;
}

/// Prepares `mappings` (one in `deep_every` a slow 40-tag repository, the rest `shallow_tags`
/// tags) twice, the first to warm the AIMD window, and asserts the second's floor and ceiling.
async fn assert_window_stays_full(
    mappings: usize,
    deep_every: usize,
    shallow_tags: usize,
    concurrency: usize,
) {
    let (reg, yaml) = skewed_registry(mappings, deep_every, shallow_tags).await;
    let config = config_for(&reg, &yaml, concurrency);
    let registries = Registries::new(&config);
    // Warm the AIMD window first: cold, it opens at 2 and the first permits hide the bug.
    let (warm, _) = run(&config, &registries).await;
    assert_eq!(warm.failed().count(), 0);
    let client = registries.client(&reg.host()).await.unwrap();
    assert!(
        client
            .gate()
            .window(ferry_distribution::Operation::TagList)
            .snapshot()
            .limit
            >= concurrency * 2,
        "window warmed"
    );

    let (plan, tracker) = run(&config, &registries).await;
    assert_eq!(plan.mappings.len(), mappings);
    assert_eq!(plan.failed().count(), 0);
    let violations = window_floor_violations(&tracker, concurrency);
    assert!(
        violations.is_empty(),
        "slots sat idle while mappings waited: (in_flight, unstarted) = {violations:?}"
    );
    // The ceiling too.
    assert!(tracker.events().iter().all(|e| e.in_flight <= concurrency));
}

#[tokio::test(start_paused = true)]
async fn the_plan_is_in_config_order_and_a_failed_mapping_stops_no_other() {
    let reg = TestRegistry::builder()
        .repo_latency("slow/", Duration::from_millis(500))
        .start()
        .await
        .unwrap();
    reg.seed_image("slow/a", "1", &[b"a"]);
    reg.seed_image("fast/b", "1", &[b"b"]);
    let yaml = [
        mapping(&reg, "slow/a", "m/a"),
        mapping(&reg, "missing/repo", "m/x"),
        mapping(&reg, "fast/b", "m/b"),
    ]
    .concat();
    let config = config_for(&reg, &yaml, 4);
    let (plan, _) = run(&config, &Registries::new(&config)).await;
    let order: Vec<_> = plan.mappings.iter().map(|m| m.index).collect();
    assert_eq!(order, [0, 1, 2]);
    assert!(plan.mappings[0].outcome.is_ok());
    let err = plan.mappings[1].outcome.as_ref().unwrap_err();
    assert_eq!(err.status(), Some(404));
    assert_eq!(err.repository.as_deref(), Some("missing/repo"));
    assert!(plan.mappings[2].outcome.is_ok());
}

#[tokio::test(start_paused = true)]
async fn target_states_come_from_one_listing_and_a_head_per_present_tag() {
    let reg = common::started().await;
    let v1 = reg.seed_image("src/app", "v1", &[b"one"]);
    reg.seed_image("src/app", "v2", &[b"two"]);
    reg.seed_image("src/app", "v3", &[b"three"]);
    // The target has v1 identical, v2 pointing elsewhere, and no v3.
    let (mt, bytes) = reg.manifest("src/app", &v1).unwrap();
    reg.seed_image("dst/app", "v2", &[b"other"]);
    reg.seed_manifest("dst/app", "v1", &mt, &bytes);
    let yaml = mapping(&reg, "src/app", "dst/app") + &mapping(&reg, "src/app", "new/app");
    let config = config_for(&reg, &yaml, 2);
    let registries = Registries::new(&config);
    reg.reset_stats();
    let (plan, _) = run(&config, &registries).await;
    let images = &plan.mappings[0].outcome.as_ref().unwrap().images;
    let states: Vec<_> = images
        .iter()
        .map(|i| (i.name(), i.targets[0].state.clone()))
        .collect();
    assert_eq!(states[0], ("v1".to_owned(), TargetState::UpToDate));
    assert!(
        matches!(states[1].1, TargetState::Stale { .. }),
        "{states:?}"
    );
    assert_eq!(states[2].1, TargetState::Missing);
    let new = &plan.mappings[1].outcome.as_ref().unwrap().images;
    assert!(
        new.iter()
            .all(|i| i.targets[0].state == TargetState::NewRepository)
    );

    // Request economy at the target: one listing per target repository and one HEAD for each
    // tag it already has (v1, v2); nothing for the absent tag or the new repository.
    let at_target: Vec<_> = reg
        .requests()
        .into_iter()
        .filter(|r| {
            r.repo
                .as_deref()
                .is_some_and(|p| p.starts_with("dst/") || p.starts_with("new/"))
        })
        .collect();
    let lists = at_target.iter().filter(|r| r.op == OpKind::TagList).count();
    let heads = at_target
        .iter()
        .filter(|r| r.op == OpKind::ManifestHead)
        .count();
    assert_eq!((lists, heads), (2, 2), "{at_target:?}");
    // The prepare phase writes nothing.
    assert!(
        reg.requests()
            .iter()
            .all(|r| r.method == "GET" || r.method == "HEAD")
    );
}

#[tokio::test(start_paused = true)]
async fn a_throttled_listing_is_retried_and_the_mapping_resolves() {
    let reg = TestRegistry::builder().page_size(2).start().await.unwrap();
    for t in ["a", "b", "c", "d", "e"] {
        reg.seed_image("src/app", t, &[t.as_bytes()]);
    }
    reg.faults().push(
        FaultRule::on(
            OpKind::TagList,
            FaultAction::Status {
                code: 429,
                retry_after: Some(ferry_testkit::registry::RetryAfter::Seconds(1)),
            },
        )
        .repo("src/")
        .times(2),
    );
    let config = config_for(&reg, &mapping(&reg, "src/app", "dst/app"), 2);
    let (plan, _) = run(&config, &Registries::new(&config)).await;
    let resolved = plan.mappings[0]
        .outcome
        .as_ref()
        .expect("resolved after retries");
    assert_eq!(resolved.images.len(), 5);
    assert_eq!(reg.stats().status(429), 2);
}
