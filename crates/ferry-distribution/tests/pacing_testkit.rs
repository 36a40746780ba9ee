//! Each throttle signal scoped to what it governs, counted at the in-process test registry on the
//! paused clock: repository holds, announced quotas, the learned rate, and the breaker's evidence.

mod common;

use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;

use ferry_distribution::breaker::BreakerState;
use ferry_distribution::client::RegistryClient;
use ferry_distribution::error::ErrorKind;
use ferry_testkit::registry::{
    FaultAction, FaultRule, OpKind, RandomFaultKind, RandomFaults, TestRegistry, TokenBucket,
};

use common::client_at;

/// A registry holding `v1` in each of `repos`, and a client (no configured rate) that has pinged it.
async fn seeded(
    reg: TestRegistry,
    repos: &[String],
    attempts: u32,
) -> (TestRegistry, RegistryClient) {
    for repo in repos {
        reg.seed_image(repo, "v1", &[b"layer"]);
    }
    let client = client_at(&reg.url(), attempts);
    client.ensure_ready().await.unwrap();
    reg.reset_stats();
    (reg, client)
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Gets `v1` of each repository in `repos`, `rounds` times over, all at once.
async fn get_all(client: &RegistryClient, repos: &[String], rounds: usize) -> usize {
    let gets = (0..rounds)
        .flat_map(|_| repos.iter())
        .map(|repo| client.get_manifest(repo, "v1"));
    join_all(gets).await.iter().filter(|r| r.is_ok()).count()
}

#[tokio::test(start_paused = true)]
async fn a_persistently_throttled_repository_does_not_slow_a_healthy_one() {
    let healthy = names("ok/app", 4);
    let mut all = healthy.clone();
    all.push("slow/app".into());
    let (reg, client) = seeded(TestRegistry::builder().start().await.unwrap(), &all, 5).await;
    for rule in FaultRule::throttle_manifests("slow/", 1) {
        reg.faults().push(rule);
    }

    // Four operations on the throttled repository, retrying after each Retry-After.
    let stuck = {
        let client = client.clone();
        tokio::spawn(async move {
            let gets = (0..4).map(|_| client.get_manifest("slow/app", "v1"));
            join_all(gets).await
        })
    };
    // While they wait, the healthy repositories are served at once, every time.
    for step in 0..8u64 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let start = Instant::now();
        assert_eq!(get_all(&client, &healthy, 3).await, 12);
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "healthy repositories waited at step {step}"
        );
    }
    let healthy_gets = reg
        .requests()
        .iter()
        .filter(|r| r.op == OpKind::ManifestGet && r.repo.as_deref() != Some("slow/app"))
        .count();
    assert_eq!(
        healthy_gets,
        8 * 12,
        "one request per healthy get: no throttle there"
    );

    // The throttled repository fails after its bounded attempts, with the registry's reason.
    for result in stuck.await.unwrap() {
        let err = result.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Throttled { seconds: 1 }, "{err}");
        assert!(err.to_string().contains("slow/app"), "{err}");
    }
    let slow: Vec<Instant> = reg
        .requests()
        .iter()
        .filter(|r| r.repo.as_deref() == Some("slow/app"))
        .map(|r| r.at)
        .collect();
    assert!(slow.len() <= 4 * 5, "bounded: {} requests", slow.len());
    assert!(slow.len() >= 5, "it was tried: {} requests", slow.len());
    // Held as a repository: its requests come in rounds no closer than the Retry-After.
    let mut rounds: Vec<Instant> = slow.clone();
    rounds.dedup();
    for pair in rounds.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_secs(1), "{rounds:?}");
    }
}

/// Sends `n` manifest GETs over `repos`, 16 at a time, returning the virtual time they took.
async fn drive(client: &RegistryClient, repos: &[String], n: usize) -> Duration {
    let start = Instant::now();
    let gets = (0..n).map(|i| client.get_manifest(&repos[i % repos.len()], "v1"));
    let results = join_all(gets).await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    assert_eq!(failed, 0, "{:?}", results.iter().find(|r| r.is_err()));
    start.elapsed()
}

/// The most requests the registry saw in any `window` of the records.
fn busiest(reg: &TestRegistry, window: Duration) -> usize {
    let at: Vec<Instant> = reg.requests().iter().map(|r| r.at).collect();
    (0..at.len())
        .map(|i| at[i..].iter().take_while(|t| **t - at[i] < window).count())
        .max()
        .unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn a_header_announced_limit_is_never_exceeded() {
    let repos = names("team/app", 6);
    let reg = TestRegistry::builder()
        .rate_limit(TokenBucket::new(20.0, 20).announced(1))
        .start()
        .await
        .unwrap();
    let (reg, client) = seeded(reg, &repos, 5).await;
    let elapsed = drive(&client, &repos, 300).await;
    let stats = reg.stats();
    assert_eq!(
        stats.too_many_requests, 0,
        "the announced limit was exceeded"
    );
    assert_eq!(stats.op(OpKind::ManifestGet), 300, "one request per get");
    // The limit allows 20 at once, then 20 a second: 300 need at least 14 s. Ceiling and floor.
    assert!(elapsed >= Duration::from_secs(14), "{elapsed:?}");
    assert!(
        elapsed.as_secs_f64() <= 14.0 * 1.3,
        "slower than 1.3x the limit: {elapsed:?}"
    );
    assert!(
        busiest(&reg, Duration::from_secs(1)) <= 40,
        "burst plus a second's refill"
    );
}

#[tokio::test(start_paused = true)]
async fn an_announced_limit_holds_from_the_first_answer_for_operations_not_yet_answered() {
    let repos = names("team/app", 8);
    let reg = TestRegistry::builder()
        .rate_limit(TokenBucket::new(20.0, 20).announced(1))
        .start()
        .await
        .unwrap();
    let (reg, client) = seeded(reg, &repos, 5).await;
    let paced = client.gate().pacer.rate().unwrap_or(0.0);
    assert!(
        paced > 18.0 && paced < 20.0,
        "the ping's answer set the pace: {paced}"
    );
    let blob = ferry_distribution::digest::Digest::parse(&reg.seed_blob(&repos[0], b"b")).unwrap();
    // Only the ping has been answered: a wave of four kinds of request, none answered before.
    let start = Instant::now();
    let first = repos[0].clone();
    let wave = repos.iter().map(|repo| {
        let (client, blob, first) = (client.clone(), blob.clone(), first.clone());
        async move {
            client.list_tags(repo).await.unwrap();
            client.head_manifest(repo, "v1").await.unwrap();
            client.get_manifest(repo, "v1").await.unwrap();
            client.head_blob(&first, &blob).await.unwrap();
        }
    });
    join_all(wave).await;
    let stats = reg.stats();
    assert_eq!(stats.too_many_requests, 0, "{:?}", stats.statuses);
    // One request each, and for the tag lists at most one `last=` probe each: a registry's
    // first Link-less listings are asked once more to prove them whole (issue 39).
    assert!(
        (32..=40).contains(&stats.requests),
        "one request each, plus probes: {}",
        stats.requests
    );
    // 19 tokens were left after the ping; 13 more at 20 a second.
    assert!(
        start.elapsed() >= Duration::from_millis(600),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_docker_hub_quota_is_spent_only_by_what_it_meters_and_never_overdrawn() {
    let repos = names("library/app", 3);
    let reg = TestRegistry::builder()
        .rate_limit(TokenBucket::new(100.0 / 21600.0, 100).announced(21600))
        .start()
        .await
        .unwrap();
    let (reg, client) = seeded(reg, &repos, 3).await;
    // 99 of 100 are left after the ping: 90 go at once.
    let elapsed = drive(&client, &repos, 90).await;
    assert_eq!(elapsed, Duration::ZERO, "what remains is spent freely");
    // Ten more overdraw the quota by one: that one waits for the refill, it is not refused.
    let elapsed = drive(&client, &repos, 10).await;
    let stats = reg.stats();
    assert_eq!(stats.too_many_requests, 0);
    assert_eq!(stats.op(OpKind::ManifestGet), 100, "one request per get");
    assert!(elapsed >= Duration::from_secs(216), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(600), "{elapsed:?}");
}

#[tokio::test(start_paused = true)]
async fn the_learned_rate_converges_near_the_limit_and_recovers_after_throttles_stop() {
    let repos = names("team/app", 6);
    let reg = TestRegistry::builder()
        .rate_limit(TokenBucket::new(20.0, 20))
        .start()
        .await
        .unwrap();
    let (reg, client) = seeded(reg, &repos, 8).await;
    let elapsed = drive(&client, &repos, 400).await;
    let stats = reg.stats();
    let learned = client
        .gate()
        .pacer
        .learned_rate()
        .expect("a rate was learned");
    let share = stats.too_many_requests as f64 / stats.requests as f64;
    assert!(
        share < 0.05,
        "{} of {} answered 429",
        stats.too_many_requests,
        stats.requests
    );
    assert!((14.0..=24.0).contains(&learned), "learned {learned}");
    // 400 need at least 19 s at the limit; within 1.5x of that.
    assert!(elapsed.as_secs_f64() <= 19.0 * 1.5, "{elapsed:?}");

    // A storm of throttles from a momentary squeeze, across every repository.
    reg.faults().set_rate_limit(Some(TokenBucket::new(4.0, 4)));
    drive(&client, &repos, 60).await;
    let squeezed = client.gate().pacer.learned_rate().unwrap();
    assert!(squeezed < 10.0, "the squeeze cut the rate: {squeezed}");

    // It ends: within a bounded number of requests the rate is back near the limit.
    reg.faults()
        .set_rate_limit(Some(TokenBucket::new(20.0, 20)));
    tokio::time::advance(Duration::from_secs(2)).await;
    let mut sent = 0;
    while client.gate().pacer.learned_rate().unwrap() < 0.8 * 20.0 {
        drive(&client, &repos, 10).await;
        sent += 10;
        assert!(
            sent <= 100,
            "still {} after {sent} requests",
            client.gate().pacer.learned_rate().unwrap()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_fifth_of_requests_failing_never_opens_the_breaker_but_a_dead_registry_does() {
    let repos = names("team/app", 8);
    let (reg, client) = seeded(TestRegistry::builder().start().await.unwrap(), &repos, 10).await;
    reg.faults().set_random(RandomFaults {
        rate: 0.2,
        seed: 13,
        kinds: vec![RandomFaultKind::BadGatewayBeforeCommit],
        ops: vec![OpKind::ManifestGet],
    });
    for _ in 0..4 {
        assert_eq!(get_all(&client, &repos, 25).await, 200);
        assert_eq!(client.gate().breaker.state(), BreakerState::Closed);
    }
    assert!(reg.stats().status(502) >= 100, "{:?}", reg.stats().statuses);

    // The registry dies: every answer a 502. The breaker opens; admitted gets end on their own.
    reg.faults().clear_random();
    reg.faults().push(
        FaultRule::any(FaultAction::Status {
            code: 502,
            retry_after: None,
        })
        .forever(),
    );
    let done = get_all(&client, &repos, 2).await;
    assert_eq!(done, 0);
    assert_eq!(client.gate().breaker.state(), BreakerState::Open);
    let before = reg.stats().requests;
    let err = client.get_manifest(&repos[0], "v1").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BreakerOpen);
    assert_eq!(reg.stats().requests, before, "nothing sent while open");
}
