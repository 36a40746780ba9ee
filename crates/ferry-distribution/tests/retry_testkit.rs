//! The one retry shape against the in-process test registry, counted at the registry: throttles,
//! Retry-After, deadlines, replay per operation, shared budgets, window, breaker and token path.

mod common;

use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;

use ferry_distribution::Secret;
use ferry_distribution::auth::{Credentials, Scopes};
use ferry_distribution::breaker::{BreakerSettings, BreakerState};
use ferry_distribution::client::{RegistryClient, RegistryOptions};
use ferry_distribution::digest::Digest;
use ferry_distribution::error::ErrorKind;
use ferry_distribution::media::OCI_MANIFEST;
use ferry_distribution::operation::Operation;
use ferry_distribution::ops::Manifest;
use ferry_distribution::retry::{Call, Failure, RetryPolicy, with_retry};
use ferry_testkit::registry::{
    FaultAction, FaultRule, OpKind, RetryAfter, TestRegistry, TokenAuthConfig,
};

use common::{fast_policy, options_at};

const REPO: &str = "team/app";

async fn registry() -> TestRegistry {
    TestRegistry::builder().start().await.unwrap()
}

fn client_at(url: &str, policy: RetryPolicy) -> RegistryClient {
    RegistryClient::new(options_at(url, policy)).unwrap()
}

fn client_with(
    url: &str,
    policy: RetryPolicy,
    tweak: impl FnOnce(&mut RegistryOptions),
) -> RegistryClient {
    let mut options = options_at(url, policy);
    tweak(&mut options);
    RegistryClient::new(options).unwrap()
}

fn status(code: u16, retry_after: Option<RetryAfter>) -> FaultAction {
    FaultAction::Status { code, retry_after }
}

fn expect_status(kind: &ErrorKind, code: u16) {
    assert!(
        matches!(kind, ErrorKind::Status { status, .. } if *status == code),
        "expected HTTP {code}, got {kind:?}"
    );
}

/// A registry holding an image tagged `v1` in [`REPO`], and a client that has pinged it.
async fn seeded(policy: RetryPolicy) -> (TestRegistry, RegistryClient) {
    let reg = registry().await;
    reg.seed_image(REPO, "v1", &[b"layer one", b"layer two"]);
    let client = client_at(&reg.url(), policy);
    client.ensure_ready().await.unwrap();
    reg.reset_stats();
    (reg, client)
}

/// Runs `get_manifest(REPO, "v1")` and returns its result with the virtual time it took.
async fn timed_get(
    client: &RegistryClient,
) -> (Result<Manifest, ferry_distribution::error::Error>, Duration) {
    let start = Instant::now();
    let result = client.get_manifest(REPO, "v1").await;
    (result, start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_429_then_success_is_one_retry() {
    let (reg, client) = seeded(fast_policy(4)).await;
    reg.faults()
        .push(FaultRule::on(OpKind::ManifestGet, status(429, None)));
    client.get_manifest(REPO, "v1").await.unwrap();
    let stats = reg.stats();
    assert_eq!(stats.op(OpKind::ManifestGet), 2);
    assert_eq!(stats.too_many_requests, 1);
    let ours = client.gate().stats.snapshot();
    assert_eq!(ours.retries, 1);
    assert_eq!(ours.throttled, 1);
}

#[tokio::test(start_paused = true)]
async fn a_persistent_429_gives_up_after_exactly_the_policy_attempts() {
    let (reg, client) = seeded(fast_policy(4)).await;
    reg.faults()
        .push(FaultRule::on(OpKind::ManifestGet, status(429, None)).times(100));
    let err = client.get_manifest(REPO, "v1").await.unwrap_err();
    expect_status(&err.kind, 429);
    assert_eq!(err.attempts, 4);
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 4);
    assert_eq!(client.gate().stats.snapshot().retries, 3);

    // The repository has now answered 429 to a whole operation's attempts in a row: the next
    // operation on it is refused unsent (politeness, `breaker::repository`), the registry's
    // other repositories are not.
    reg.reset_stats();
    let err = client.get_manifest(REPO, "v1").await.unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Throttled { .. }), "{err}");
    assert_eq!(err.attempts, 0);
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 0);

    // With a Retry-After the registry asked for a wait: the end says so (a fresh client, so
    // one operation's own attempts are what is counted).
    let (reg, client) = seeded(fast_policy(4)).await;
    reg.faults().push(
        FaultRule::on(
            OpKind::ManifestGet,
            status(429, Some(RetryAfter::Seconds(2))),
        )
        .times(100),
    );
    let (result, elapsed) = timed_get(&client).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Throttled { seconds: 2 });
    assert_eq!(err.attempts, 4);
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 4);
    // Three waits of exactly the asked 2 s (the backoff is at most 100 ms).
    assert_eq!(elapsed, Duration::from_secs(6));
}

#[tokio::test(start_paused = true)]
async fn without_retries_one_429_does_not_shut_the_repository() {
    // `attempts: 1`: a single 429 fails its operation, and the next one is still sent; only
    // four in a row (the floor) make the repository's operations end unsent.
    let (reg, client) = seeded(fast_policy(1)).await;
    reg.faults()
        .push(FaultRule::on(OpKind::ManifestGet, status(429, None)).times(4));
    for sent in 1..=4 {
        client.get_manifest(REPO, "v1").await.unwrap_err();
        assert_eq!(reg.stats().op(OpKind::ManifestGet), sent);
    }
    let err = client.get_manifest(REPO, "v1").await.unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Throttled { .. }), "{err}");
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 4, "refused unsent");
}

#[tokio::test(start_paused = true)]
async fn retry_after_in_seconds_is_honoured() {
    let (reg, client) = seeded(fast_policy(3)).await;
    reg.faults().push(FaultRule::on(
        OpKind::ManifestGet,
        status(429, Some(RetryAfter::Seconds(3))),
    ));
    let (result, elapsed) = timed_get(&client).await;
    result.unwrap();
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 2);
    assert_eq!(
        elapsed,
        Duration::from_secs(3),
        "the wait is the Retry-After"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_as_an_http_date_is_honoured() {
    let (reg, client) = seeded(fast_policy(3)).await;
    reg.faults().push(FaultRule::on(
        OpKind::ManifestGet,
        status(429, Some(RetryAfter::HttpDate(Duration::from_secs(4)))),
    ));
    let (result, elapsed) = timed_get(&client).await;
    result.unwrap();
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 2);
    // An HTTP date has one-second resolution: 4 s ahead reads as between 3 and 4 s.
    assert!(elapsed >= Duration::from_secs(3), "{elapsed:?}");
    assert!(elapsed <= Duration::from_secs(4), "{elapsed:?}");
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_beyond_the_policy_cap_ends_throttled_never_retried_early() {
    let mut policy = fast_policy(3);
    policy.retry_after_cap = Duration::from_secs(2);
    let (reg, client) = seeded(policy).await;
    reg.faults().push(FaultRule::on(
        OpKind::ManifestGet,
        status(429, Some(RetryAfter::Seconds(90))),
    ));
    let (result, elapsed) = timed_get(&client).await;
    assert_eq!(
        result.unwrap_err().kind,
        ErrorKind::Throttled { seconds: 90 }
    );
    assert_eq!(
        reg.stats().op(OpKind::ManifestGet),
        1,
        "no retry sooner than its Retry-After"
    );
    assert_eq!(elapsed, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_floored_at_the_backoff() {
    let mut policy = fast_policy(3);
    policy.base = Duration::from_secs(2);
    policy.cap = Duration::from_secs(2);
    let (reg, client) = seeded(policy).await;
    reg.faults().push(FaultRule::on(
        OpKind::ManifestGet,
        status(429, Some(RetryAfter::Seconds(0))),
    ));
    let (result, elapsed) = timed_get(&client).await;
    result.unwrap();
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 2);
    assert_eq!(
        elapsed,
        Duration::from_secs(2),
        "Retry-After: 0 waits the backoff"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_the_deadline_ends_throttled_at_once() {
    let mut policy = fast_policy(5);
    policy.deadline = Duration::from_secs(10);
    let (reg, client) = seeded(policy).await;
    reg.faults().push(
        FaultRule::on(
            OpKind::ManifestGet,
            status(429, Some(RetryAfter::Seconds(60))),
        )
        .times(10),
    );
    let (result, elapsed) = timed_get(&client).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Throttled { seconds: 60 });
    assert_eq!(err.attempts, 1);
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 1);
    assert_eq!(elapsed, Duration::ZERO, "no wait that cannot end in time");
}

#[tokio::test(start_paused = true)]
async fn a_lost_reply_to_a_tag_delete_is_not_sent_again() {
    let (reg, client) = seeded(fast_policy(4)).await;
    reg.faults().push(FaultRule::on(
        OpKind::ManifestDelete,
        FaultAction::AfterCommit { code: 502 },
    ));
    let err = client.delete_manifest(REPO, "v1").await.unwrap_err();
    expect_status(&err.kind, 502);
    assert_eq!(err.attempts, 1);
    assert_eq!(reg.stats().op(OpKind::ManifestDelete), 1);
    assert!(reg.tags(REPO).is_empty(), "the registry did the work");
}

#[tokio::test(start_paused = true)]
async fn a_lost_reply_to_a_delete_by_digest_is_sent_again() {
    let (reg, client) = seeded(fast_policy(4)).await;
    let digest = client
        .head_manifest(REPO, "v1")
        .await
        .unwrap()
        .unwrap()
        .digest;
    reg.reset_stats();
    reg.faults().push(FaultRule::on(
        OpKind::ManifestDelete,
        FaultAction::AfterCommit { code: 502 },
    ));
    client
        .delete_manifest(REPO, &digest.to_string())
        .await
        .unwrap();
    // The replay finds it gone (404), which is what deleting it means.
    assert_eq!(reg.stats().op(OpKind::ManifestDelete), 2);
    assert!(reg.manifest(REPO, &digest.to_string()).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_lost_reply_to_a_manifest_put_by_tag_is_asked_about_then_sent_again() {
    let (reg, client) = seeded(fast_policy(4)).await;
    let manifest = client.get_manifest(REPO, "v1").await.unwrap();
    // Stored, reply lost: the retry's HEAD names the digest, and no second PUT goes out.
    reg.reset_stats();
    reg.faults().push(FaultRule::on(
        OpKind::ManifestPut,
        FaultAction::AfterCommit { code: 502 },
    ));
    let stored = client.put_manifest(REPO, "v2", &manifest).await.unwrap();
    assert_eq!(stored, manifest.digest);
    assert_eq!(reg.stats().op(OpKind::ManifestPut), 1);
    assert_eq!(reg.stats().op(OpKind::ManifestHead), 1);
    let (media_type, bytes) = reg.manifest(REPO, "v2").unwrap();
    assert_eq!(media_type, OCI_MANIFEST);
    assert_eq!(bytes, manifest.bytes);
    // Refused before it was stored: the HEAD finds nothing, and the PUT is sent again.
    reg.reset_stats();
    reg.faults().push(FaultRule::on(
        OpKind::ManifestPut,
        FaultAction::Status {
            code: 502,
            retry_after: None,
        },
    ));
    client.put_manifest(REPO, "v3", &manifest).await.unwrap();
    assert_eq!(reg.stats().op(OpKind::ManifestPut), 2);
    assert!(reg.manifest(REPO, "v3").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_transient_even_for_an_unsafe_operation() {
    let port = TestRegistry::closed_port().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let client = client_at(&url, fast_policy(4));

    // One attempt composed by hand (no ping): the connection never opened, so even a tag
    // DELETE may be sent again, and it is, exactly `attempts` times.
    let target = client.api_url(&format!("{REPO}/manifests/v1"));
    let budget = client.gate().policy.budget();
    let call = Call::new(Operation::TagDelete, Some(REPO));
    let err = with_retry(client.gate(), call, &budget, |_| {
        let target = target.clone();
        let client = &client;
        async move {
            let response = client
                .send(&Scopes::push(REPO), |http| http.delete(target.clone()))
                .await?;
            Ok::<_, Failure>(response.status())
        }
    })
    .await
    .unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Transport(_)), "{err:?}");
    assert_eq!(err.attempts, 4);
    let ours = client.gate().stats.snapshot();
    assert_eq!(ours.requests, 4);
    assert_eq!(ours.transport_errors, 4);
    // No attempt's connection opened: none was sent again, so none counts as a retry (issue
    // 40: an offline run said "1 retries" with nothing sent).
    assert_eq!(ours.retries, 0);

    // Through an operation: the ping finds the registry unreachable, trips the breaker, and the
    // next operation is refused without a connection attempt.
    let fresh = client_with(&url, fast_policy(4), |_| {});
    let err = fresh.list_tags(REPO).await.unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Transport(_)), "{err:?}");
    assert_eq!(err.operation, Operation::Ping);
    assert_eq!(
        err.attempts,
        ferry_distribution::client::PING_FAULT_ATTEMPTS,
        "a fault of the registry gets the ping's two attempts (docs/retry.md), not the policy's 4"
    );
    assert_eq!(fresh.gate().breaker.state(), BreakerState::Open);
    let err = fresh.list_tags(REPO).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BreakerOpen);
    assert_eq!(
        fresh.gate().stats.snapshot().requests,
        u64::from(ferry_distribution::client::PING_FAULT_ATTEMPTS)
    );
}

/// A registry with `tags` tags in [`REPO`], `page` to a page, whose every tag page fails once
/// with 502 before it is served.
async fn flaky_pages(tags: usize, page: usize) -> TestRegistry {
    let reg = TestRegistry::builder()
        .page_size(page)
        .start()
        .await
        .unwrap();
    let digest = reg.seed_image(REPO, "t00", &[b"layer"]);
    let (_, bytes) = reg.manifest(REPO, &digest).unwrap();
    for i in 1..tags {
        reg.seed_manifest(REPO, &format!("t{i:02}"), OCI_MANIFEST, &bytes);
    }
    for _ in 0..tags.div_ceil(page) {
        // The first rule still live wins: fail one request, let the next through, and so on.
        reg.faults()
            .push(FaultRule::on(OpKind::TagList, status(502, None)));
        reg.faults().push(FaultRule::on(
            OpKind::TagList,
            FaultAction::Delay(Duration::ZERO),
        ));
    }
    reg
}

#[tokio::test(start_paused = true)]
async fn a_tag_walk_draws_every_page_from_one_budget() {
    // Control: 5 pages each failing once need 5 retries; a budget of 5 finishes the walk.
    let reg = flaky_pages(10, 2).await;
    let client = client_at(&reg.url(), fast_policy(6));
    let tags = client.list_tags(REPO).await.unwrap();
    assert_eq!(tags.len(), 10);
    assert_eq!(reg.stats().op(OpKind::TagList), 10);

    // A budget of 3 retries covers three pages' failures, not three per page.
    let reg = flaky_pages(10, 2).await;
    let client = client_at(&reg.url(), fast_policy(4));
    let err = client.list_tags(REPO).await.unwrap_err();
    expect_status(&err.kind, 502);
    assert_eq!(
        reg.stats().op(OpKind::TagList),
        7,
        "3 pages × 2 + the failure on page 4"
    );
    assert_eq!(client.gate().stats.snapshot().retries, 3);
}

/// Sends `n` blob HEADs at once to the slow repository.
async fn burst(client: &RegistryClient, digest: &Digest, n: usize) {
    let heads = (0..n).map(|_| client.head_blob("slow/app", digest));
    for result in join_all(heads).await {
        assert!(result.unwrap().is_some());
    }
}

/// The most requests the registry had in flight at once before `until`.
fn peak_before(reg: &TestRegistry, until: Instant) -> usize {
    reg.in_flight_series()
        .iter()
        .filter(|(at, _)| *at < until)
        .map(|(_, n)| *n)
        .max()
        .unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn the_window_halves_on_a_429_and_grows_back() {
    let latency = Duration::from_secs(1);
    let reg = TestRegistry::builder()
        .repo_latency("slow/", latency)
        .start()
        .await
        .unwrap();
    let slow = ferry_distribution::digest::Digest::parse(&reg.seed_blob("slow/app", b"s")).unwrap();
    let fast = ferry_distribution::digest::Digest::parse(&reg.seed_blob("fast/app", b"f")).unwrap();
    let client = client_with(&reg.url(), fast_policy(4), |o| o.gate.max_concurrent = 8);
    let window = client.gate().window(Operation::BlobHead).clone();
    assert_eq!(window.snapshot().limit, 2);

    // Slow start: the ping and six successes open it to the ceiling.
    for _ in 0..6 {
        client.head_blob("fast/app", &fast).await.unwrap();
    }
    assert_eq!(window.snapshot().limit, 8);
    reg.reset_stats();
    burst(&client, &slow, 16).await;
    assert_eq!(reg.stats().max_in_flight, 8, "the full window is used");

    // One 429 is that request's own: the window stays.
    tokio::time::advance(Duration::from_secs(4)).await;
    reg.faults()
        .push(FaultRule::on(OpKind::BlobHead, status(429, None)));
    client.head_blob("fast/app", &fast).await.unwrap();
    assert_eq!(window.snapshot().limit, 8);
    // Throttles that are most of what the registry answers halve it, once per epoch.
    reg.faults()
        .push(FaultRule::on(OpKind::BlobHead, status(429, None)).times(3));
    client.head_blob("fast/app", &fast).await.unwrap();
    let snapshot = window.snapshot();
    assert_eq!(snapshot.limit, 4);
    assert_eq!(snapshot.halvings, 1);
    reg.reset_stats();
    let start = Instant::now();
    burst(&client, &slow, 16).await;
    assert_eq!(
        peak_before(&reg, start + latency),
        4,
        "half the window, and all of it"
    );
    assert!(reg.stats().max_in_flight < 8);

    // Additive increase brings it back.
    for _ in 0..40 {
        client.head_blob("fast/app", &fast).await.unwrap();
    }
    assert_eq!(window.snapshot().limit, 8);
    reg.reset_stats();
    burst(&client, &slow, 16).await;
    assert_eq!(reg.stats().max_in_flight, 8);
    assert_eq!(window.snapshot().halvings, 1);
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_fails_fast_and_recovers_after_the_cool_down() {
    let cooldown = Duration::from_secs(30);
    let reg = registry().await;
    reg.seed_image(REPO, "v1", &[b"layer"]);
    let client = client_with(&reg.url(), fast_policy(3), |o| {
        o.gate.breaker = BreakerSettings {
            min_requests: 3,
            failure_rate: 0.5,
            cooldown,
            ..BreakerSettings::default()
        }
    });
    client.ensure_ready().await.unwrap();
    reg.faults()
        .push(FaultRule::on(OpKind::ManifestGet, status(502, None)).times(100));

    let err = client.get_manifest(REPO, "v1").await.unwrap_err();
    expect_status(&err.kind, 502);
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 3);
    assert_eq!(client.gate().breaker.state(), BreakerState::Open);

    let err = client.get_manifest(REPO, "v1").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BreakerOpen);
    assert_eq!(err.attempts, 0);
    assert_eq!(
        reg.stats().op(OpKind::ManifestGet),
        3,
        "nothing sent while open"
    );

    tokio::time::advance(cooldown - Duration::from_secs(1)).await;
    let err = client.get_manifest(REPO, "v1").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BreakerOpen);
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 3);

    reg.faults().clear_rules();
    tokio::time::advance(Duration::from_secs(1)).await;
    client.get_manifest(REPO, "v1").await.unwrap();
    assert_eq!(
        reg.stats().op(OpKind::ManifestGet),
        4,
        "one probe, and it worked"
    );
    assert_eq!(client.gate().breaker.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_server_fails_within_a_bound_and_trips_the_breaker() {
    let server = TestRegistry::hanging_server().await.unwrap();
    let mut options = RegistryOptions::insecure_at(&server.url());
    options.gate.retry = fast_policy(3);
    let ping_timeout = options.ping_timeout;
    let client = RegistryClient::new(options).unwrap();

    let start = Instant::now();
    let err = client.ensure_ready().await.unwrap_err();
    let elapsed = start.elapsed();
    assert!(
        matches!(
            err.kind,
            ErrorKind::Transport(_) | ErrorKind::DeadlineExceeded
        ),
        "{err:?}"
    );
    // Two pings of at most ping_timeout each, inside the ping's own deadline.
    assert!(elapsed >= ping_timeout, "{elapsed:?}");
    assert!(
        elapsed <= ping_timeout * 2 + Duration::from_secs(5),
        "{elapsed:?}"
    );
    assert_eq!(client.gate().breaker.state(), BreakerState::Open);

    let start = Instant::now();
    let err = client.list_tags(REPO).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BreakerOpen);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn an_operation_that_hangs_fails_within_its_read_timeouts_and_trips_the_breaker() {
    let reg = registry().await;
    reg.seed_image(REPO, "v1", &[b"layer"]);
    let read_timeout = Duration::from_secs(5);
    let client = client_with(&reg.url(), fast_policy(3), |o| {
        o.read_timeout = read_timeout;
        o.gate.breaker = BreakerSettings {
            min_requests: 3,
            failure_rate: 0.5,
            cooldown: Duration::from_secs(30),
            ..BreakerSettings::default()
        };
    });
    client.ensure_ready().await.unwrap();
    reg.faults()
        .push(FaultRule::on(OpKind::ManifestGet, FaultAction::Hang).times(100));
    let (result, elapsed) = timed_get(&client).await;
    let err = result.unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Transport(_)), "{err:?}");
    assert_eq!(err.attempts, 3);
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 3);
    assert!(elapsed >= read_timeout * 3, "{elapsed:?}");
    assert!(
        elapsed <= read_timeout * 3 + Duration::from_secs(1),
        "{elapsed:?}"
    );
    assert_eq!(client.gate().breaker.state(), BreakerState::Open);
}

fn token_registry_config() -> TokenAuthConfig {
    TokenAuthConfig {
        users: vec![("alice".into(), "wonderland-7".into())],
        anonymous_pull: true,
        token_ttl_secs: 300,
    }
}

#[tokio::test(start_paused = true)]
async fn a_throttled_token_endpoint_is_retried_once_over_not_per_outer_attempt() {
    let reg = TestRegistry::builder()
        .token_auth(token_registry_config())
        .start()
        .await
        .unwrap();
    reg.seed_image(REPO, "v1", &[b"layer"]);
    let client = client_at(&reg.url(), fast_policy(4));
    client.ensure_ready().await.unwrap();
    reg.reset_stats();
    reg.faults()
        .push(FaultRule::on(OpKind::Token, status(429, None)).times(100));

    let err = client.get_manifest(REPO, "v1").await.unwrap_err();
    assert_eq!(err.operation, Operation::TokenExchange);
    expect_status(&err.kind, 429);
    assert_eq!(err.attempts, 4);
    let stats = reg.stats();
    assert_eq!(
        stats.op(OpKind::Token),
        4,
        "the token exchange's own attempts, once"
    );
    assert_eq!(
        stats.op(OpKind::ManifestGet),
        0,
        "no outer attempt went out"
    );
    assert_eq!(stats.requests, 4);

    // Once the token service answers again, so does the operation.
    reg.faults().clear_rules();
    client.get_manifest(REPO, "v1").await.unwrap();
    assert_eq!(reg.stats().op(OpKind::Token), 5);
}

#[tokio::test(start_paused = true)]
async fn a_persistently_throttled_manifest_get_sends_exactly_the_policy_attempts() {
    let reg = TestRegistry::builder()
        .token_auth(token_registry_config())
        .start()
        .await
        .unwrap();
    reg.seed_image(REPO, "v1", &[b"layer"]);
    let policy = fast_policy(5);
    let client = client_with(&reg.url(), policy.clone(), |o| {
        o.credentials = Credentials::Basic {
            username: "alice".into(),
            password: Secret::new("wonderland-7"),
        }
    });
    client.ensure_ready().await.unwrap();
    reg.reset_stats();
    reg.faults()
        .push(FaultRule::on(OpKind::ManifestGet, status(429, None)).times(100));

    let err = client.get_manifest(REPO, "v1").await.unwrap_err();
    expect_status(&err.kind, 429);
    assert_eq!(err.attempts, policy.attempts);
    let stats = reg.stats();
    assert_eq!(stats.op(OpKind::ManifestGet), u64::from(policy.attempts));
    assert_eq!(
        stats.op(OpKind::Token),
        1,
        "one token, reused by every attempt"
    );
    assert_eq!(stats.requests, u64::from(policy.attempts) + 1);
}

#[tokio::test(start_paused = true)]
async fn every_operation_waits_for_a_window_slot() {
    let latency = Duration::from_secs(1);
    let reg = TestRegistry::builder()
        .repo_latency("slow/", latency)
        .start()
        .await
        .unwrap();
    let repo = "slow/app";
    let manifest = reg.seed_image(repo, "v1", &[b"layer"]);
    let (_, manifest_bytes) = reg.manifest(repo, &manifest).unwrap();
    let manifest = Manifest {
        digest: Digest::parse(&manifest).unwrap(),
        bytes: manifest_bytes.into(),
        media_type: OCI_MANIFEST.into(),
    };
    let blob = Digest::parse(&reg.seed_blob(repo, b"blob")).unwrap();
    let names = [
        "head_blob",
        "head_manifest",
        "get_manifest",
        "list_tags",
        "put_manifest",
        "push_blob_bytes",
    ];
    for name in names {
        let client = client_with(&reg.url(), fast_policy(3), |o| o.gate.max_concurrent = 16);
        client.ensure_ready().await.unwrap();
        let limit = client.gate().window(Operation::BlobHead).snapshot().limit;
        reg.reset_stats();
        let start = Instant::now();
        let calls = (0..8).map(|i| {
            let (client, manifest, blob) = (&client, &manifest, &blob);
            async move {
                match name {
                    "head_blob" => drop(client.head_blob(repo, blob).await.unwrap()),
                    "head_manifest" => drop(client.head_manifest(repo, "v1").await.unwrap()),
                    "get_manifest" => drop(client.get_manifest(repo, "v1").await.unwrap()),
                    "list_tags" => drop(client.list_tags(repo).await.unwrap()),
                    "put_manifest" => drop(
                        client
                            .put_manifest(repo, &format!("w{i}"), manifest)
                            .await
                            .unwrap(),
                    ),
                    _ => {
                        let bytes = bytes::Bytes::from(format!("pushed {i}"));
                        let digest = common::sha256(&bytes);
                        client.push_blob_bytes(repo, &digest, bytes).await.unwrap();
                    }
                }
            }
        });
        join_all(calls).await;
        assert_eq!(
            peak_before(&reg, start + latency),
            limit,
            "{name}: the registry saw more requests at once than the window allows"
        );
    }
}
