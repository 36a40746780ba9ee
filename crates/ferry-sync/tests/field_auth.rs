//! The engine end to end under the auth, manifest and politeness personalities of the field
//! registries (issue 31): GAR refusing tokens for several scopes, ACR refusing wildcard scopes,
//! ECR's manifest commit lag and immutable tags, Docker Hub's pull counting, GHCR's referrers
//! redirect, and a repository that answers 429 to everything. Each copies every image with the
//! same digests, spends no retry on what it learned, and names what it learned in the report.

mod common;

use std::time::Duration;

use common::run_sync;
use ferry_config::Config;
use ferry_distribution::capabilities::{CapabilitiesSnapshot, Support};
use ferry_sync::report::{ImageStatus, SyncReport, Verdict};
use ferry_testkit::registry::{
    FaultAction, FaultRule, OpKind, Personality, RequestRecord, RetryAfter, TestRegistry,
    TokenAuthConfig,
};

const USER: &str = "robot";
const PASSWORD: &str = "field-auth-password";

fn token_auth() -> TokenAuthConfig {
    TokenAuthConfig {
        users: vec![(USER.into(), PASSWORD.into())],
        anonymous_pull: false,
        token_ttl_secs: 300,
    }
}

async fn start(personality: Personality, tokens: bool) -> TestRegistry {
    let mut b = TestRegistry::builder().personality(personality);
    if tokens {
        b = b.token_auth(token_auth());
    }
    b.start().await.expect("test registry starts")
}

/// Both registries with basic credentials (traded for tokens where the registry asks), and
/// `src/lib/app` (tags `tags`) copied to `mirror/app` and `second/app` of the target.
fn config(src: &TestRegistry, dst: &TestRegistry, tags: &[&str]) -> Config {
    let fields = [
        "max_concurrent: 16",
        "retry: { attempts: 5, base: 100ms, cap: 2s }",
        &format!("auth: {{ type: basic, username: {USER}, password: \"{PASSWORD}\" }}"),
    ];
    let exact = tags
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(", ");
    common::config()
        .setting("concurrency: 4")
        .registries(&[src, dst], &fields)
        .mappings(&format!(
            "  - source: \"{}/lib/app\"\n    targets: [\"{d}/mirror/app\", \"{d}/second/app\"]\n    tags: {{ exact: [{exact}] }}\n",
            src.host(),
            d = dst.host()
        ))
        .build()
}

fn capabilities(report: &SyncReport, reg: &TestRegistry) -> CapabilitiesSnapshot {
    report
        .registries
        .iter()
        .find(|r| r.registry == reg.host())
        .map(|r| r.capabilities)
        .expect("the registry is in the report")
}

/// Retries the run spent, less those a broken connection explains (a loaded machine's).
fn retries(report: &SyncReport) -> u64 {
    report
        .registries
        .iter()
        .map(|r| r.stats.retries.saturating_sub(r.stats.transport_errors))
        .sum()
}

/// A multi-arch index over two images sharing a base layer, and a cosign-style signature tag
/// of the index (found by the tag schema where there is no referrers API).
fn seed(src: &TestRegistry) -> Vec<String> {
    let amd = src.seed_image("lib/app", "1.0-amd64", &[b"base layer", b"amd64 layer"]);
    let arm = src.seed_image("lib/app", "1.0-arm64", &[b"base layer", b"arm64 layer"]);
    let index = src.seed_index("lib/app", "1.0", &[amd, arm]);
    let sig = format!("{}.sig", index.replace(':', "-"));
    src.seed_image("lib/app", &sig, &[b"a signature"]);
    vec!["1.0".into(), sig]
}

/// Runs the scenario with `src` and `dst` and checks what every personality must keep: every
/// image in both repositories with the source's digests, a clean verdict, no retry spent; and a
/// warm run that writes nothing. Returns the cold run's report and the requests each registry
/// received in it (source, target).
async fn scenario(name: &str, src: &TestRegistry, dst: &TestRegistry) -> Cold {
    let tags = seed(src);
    let cfg = config(src, dst, &["1.0"]);
    let report = run_sync(&cfg).await.report;
    let text = report.render_text();
    for repo in ["mirror/app", "second/app"] {
        for tag in &tags {
            let copied = dst.manifest(repo, tag);
            assert!(copied.is_some(), "{name}: {repo}:{tag} missing\n{text}");
            assert_eq!(copied, src.manifest("lib/app", tag), "{name}: {repo}:{tag}");
        }
    }
    assert_eq!(report.verdict(), Verdict::Clean, "{name}\n{text}");
    assert_eq!(retries(&report), 0, "{name}: retries spent\n{text}");
    assert!(!text.contains("breaker"), "{name}\n{text}");
    let cold = Cold {
        report,
        src: src.requests(),
        dst: dst.requests(),
    };

    src.reset_stats();
    dst.reset_stats();
    let warm = run_sync(&cfg).await.report;
    let writes = dst
        .requests()
        .iter()
        .filter(|r| {
            matches!(
                r.op,
                OpKind::ManifestPut | OpKind::UploadStart | OpKind::Mount
            )
        })
        .count();
    assert_eq!(writes, 0, "{name}: warm run wrote\n{}", warm.render_text());
    assert_eq!(
        warm.verdict(),
        Verdict::Clean,
        "{name}\n{}",
        warm.render_text()
    );
    cold
}

/// The cold run of a scenario: its report and the requests each registry received.
struct Cold {
    report: SyncReport,
    src: Vec<RequestRecord>,
    dst: Vec<RequestRecord>,
}

/// Token requests among `requests` answered with `status`.
fn token_answers(requests: &[RequestRecord], status: u16) -> usize {
    requests
        .iter()
        .filter(|r| r.op == OpKind::Token && r.status == status)
        .count()
}

fn count(requests: &[RequestRecord], op: OpKind) -> usize {
    requests.iter().filter(|r| r.op == op).count()
}

#[tokio::test(start_paused = true)]
async fn gar_refusing_multi_scope_tokens_gets_single_scope_tokens_and_no_mounts() {
    let src = start(Personality::gar(), true).await;
    let dst = start(Personality::gar(), true).await;
    let cold = scenario("gar", &src, &dst).await;
    let report = cold.report;
    let caps = capabilities(&report, &dst);
    assert_eq!(caps.auth.multi_scope_tokens, Support::Refused);
    // Learned from one refusal: the mount's token (push here, pull on the first repository)
    // was asked for once, and no mount was sent after it.
    assert_eq!(token_answers(&cold.dst, 403), 1, "{:?}", cold.dst);
    assert_eq!(count(&cold.dst, OpKind::Mount), 0);
    // The source was only read: one scope per request, nothing to learn there.
    assert_eq!(
        capabilities(&report, &src).auth.multi_scope_tokens,
        Support::Unknown
    );
    let json = serde_json::to_value(&report).unwrap();
    let entry = json["registries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["registry"] == dst.host())
        .cloned()
        .unwrap();
    assert_eq!(entry["capabilities"]["multi_scope_tokens"], "refused");
}

#[tokio::test(start_paused = true)]
async fn a_registry_granting_multi_scope_tokens_keeps_its_mounts() {
    let src = start(Personality::default(), true).await;
    let dst = start(Personality::default(), true).await;
    let cold = scenario("plain tokens", &src, &dst).await;
    assert_eq!(
        capabilities(&cold.report, &dst).auth.multi_scope_tokens,
        Support::Works
    );
    assert!(count(&cold.dst, OpKind::Mount) > 0);
    assert_eq!(token_answers(&cold.dst, 403), 0);
}

#[tokio::test(start_paused = true)]
async fn acr_refusing_wildcard_scopes_is_never_asked_for_one() {
    let src = start(Personality::acr(), true).await;
    let dst = start(Personality::acr(), true).await;
    let cold = scenario("acr", &src, &dst).await;
    for requests in [&cold.src, &cold.dst] {
        assert!(count(requests, OpKind::Token) > 0);
        assert_eq!(token_answers(requests, 401), 0);
        let wildcard = requests.iter().any(|r| {
            r.op == OpKind::Token
                && r.query
                    .as_deref()
                    .is_some_and(|q| q.contains("repository%3A") && q.contains('*'))
        });
        assert!(!wildcard, "a wildcard repository scope was asked for");
    }
}

#[tokio::test(start_paused = true)]
async fn ecr_lagging_manifest_commits_are_waited_for_without_a_retry() {
    let src = start(Personality::default(), false).await;
    let dst = start(Personality::ecr(), false).await;
    dst.create_repository("mirror/app");
    dst.create_repository("second/app");
    let cold = scenario("ecr", &src, &dst).await;
    let report = cold.report;
    assert!(capabilities(&report, &dst).auth.manifest_commit_lag);
    let lagged = cold
        .dst
        .iter()
        .filter(|r| r.op == OpKind::ManifestPut && r.status == 400)
        .count();
    assert!(lagged > 0, "the target lagged");
    let text = report.render_text();
    assert!(text.contains("commit lag"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn ecr_commit_lag_costs_bounded_refusals_and_never_the_breaker() {
    let (src, dst) = (
        start(Personality::default(), false).await,
        start(Personality::ecr(), false).await,
    );
    dst.create_repository("mirror/app");
    dst.create_repository("second/app");
    seed(&src);
    let report = run_sync(&config(&src, &dst, &["1.0"])).await.report;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    let puts = |status: u16| {
        dst.requests()
            .iter()
            .filter(|r| r.op == OpKind::ManifestPut && r.status == status)
            .count()
    };
    // Three manifests and a signature per repository: every one is refused at least once
    // (its blobs were committed just before), none more often than the lag (300 ms) holds
    // against waits of at least the policy's base (100 ms) each.
    let stored = puts(201);
    assert_eq!(stored, 8, "{:?}", dst.requests());
    let refused = puts(400);
    assert!(refused >= 1, "the lag was met");
    assert!(refused <= stored * 3, "{refused}");
    let dst_stats = &report
        .registries
        .iter()
        .find(|r| r.registry == dst.host())
        .unwrap()
        .stats;
    assert_eq!(dst_stats.retries, 0);
    assert_eq!(dst_stats.server_errors, 0);
}

#[tokio::test(start_paused = true)]
async fn ecr_lag_is_waited_for_when_the_target_already_held_a_shared_layer() {
    let src = start(Personality::default(), false).await;
    let dst = start(Personality::ecr(), false).await;
    dst.create_repository("second/app");
    // The target holds the base layer already (an image pushed earlier): ferry does not upload
    // it, and the lag is about the layer it did upload, which the refusal names.
    dst.seed_image("mirror/app", "old", &[b"base layer"]);
    seed(&src);
    let report = run_sync(&config(&src, &dst, &["1.0"])).await.report;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    assert!(capabilities(&report, &dst).auth.manifest_commit_lag);
    assert_eq!(retries(&report), 0);
}

#[tokio::test(start_paused = true)]
async fn ecr_immutable_tag_moved_on_the_source_is_a_clear_error_never_retried() {
    let src = start(Personality::default(), false).await;
    let dst = start(Personality::ecr_immutable(), false).await;
    dst.create_repository("mirror/app");
    dst.create_repository("second/app");
    let old = src.seed_image("lib/app", "v1", &[b"first layer"]);
    let cfg = config(&src, &dst, &["v1"]);
    let cold = run_sync(&cfg).await.report;
    assert_eq!(cold.verdict(), Verdict::Clean, "{}", cold.render_text());

    let new = src.seed_image("lib/app", "v1", &[b"second layer"]);
    dst.reset_stats();
    let report = run_sync(&cfg).await.report;
    let text = report.render_text();
    let failed: Vec<_> = report
        .images
        .iter()
        .filter_map(|i| match &i.status {
            ImageStatus::Failed { error, .. } => Some(error.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 2, "{text}");
    for error in &failed {
        assert!(error.contains("immutable"), "{error}");
        assert!(error.contains(&old) && error.contains(&new), "{error}");
        assert!(error.contains(&dst.host()), "{error}");
        assert!(error.contains("v1"), "{error}");
    }
    // One refused PUT taught it; the other repository's tag was HEADed and not pushed.
    let refused = dst
        .requests()
        .iter()
        .filter(|r| r.op == OpKind::ManifestPut && r.status == 400)
        .count();
    assert_eq!(refused, 1, "{:?}", dst.requests());
    assert_eq!(
        capabilities(&report, &dst).auth.tag_overwrite,
        Support::Refused
    );
    assert_eq!(retries(&report), 0, "{text}\n{:?}", report.registries);
    let held = dst
        .manifest("mirror/app", "v1")
        .map(|m| ferry_testkit::registry::sha256_digest(&m.1));
    assert_eq!(held, Some(old));
}

#[tokio::test(start_paused = true)]
async fn ecr_immutable_tag_holding_the_same_digest_is_success_without_a_push() {
    let (src, dst) = (
        start(Personality::default(), false).await,
        start(Personality::ecr_immutable(), false).await,
    );
    dst.create_repository("app");
    src.seed_image("app", "v1", &[b"layer"]);
    let source = ferry_distribution::RegistryClient::new(
        ferry_distribution::RegistryOptions::insecure_at(&src.url()),
    )
    .unwrap();
    let target = ferry_distribution::RegistryClient::new(
        ferry_distribution::RegistryOptions::insecure_at(&dst.url()),
    )
    .unwrap();
    let m = source.get_manifest("app", "v1").await.unwrap();
    for blob in dst_blobs(&src, &m.bytes) {
        target
            .push_blob_bytes("app", &blob.0, blob.1)
            .await
            .unwrap();
    }
    target.put_manifest("app", "v1", &m).await.unwrap();
    // The same digest again: refused by the registry, settled by a HEAD.
    target.put_manifest("app", "v1", &m).await.unwrap();
    assert!(target.capabilities().auth.tags_immutable());
    // Once learned: HEAD first, no PUT at all.
    dst.reset_stats();
    target.put_manifest("app", "v1", &m).await.unwrap();
    assert_eq!(dst.stats().op(OpKind::ManifestPut), 0);
    assert_eq!(dst.stats().op(OpKind::ManifestHead), 1);
}

/// The blobs a seeded single-image manifest names, as (digest, bytes) from `src`.
fn dst_blobs(
    src: &TestRegistry,
    manifest: &[u8],
) -> Vec<(ferry_distribution::Digest, bytes::Bytes)> {
    let m: serde_json::Value = serde_json::from_slice(manifest).unwrap();
    m["layers"]
        .as_array()
        .unwrap()
        .iter()
        .chain([&m["config"]])
        .map(|d| {
            let digest = d["digest"].as_str().unwrap();
            (
                digest.parse().unwrap(),
                bytes::Bytes::from(src.blob(digest).unwrap()),
            )
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn docker_hub_as_source_costs_no_manifest_get_on_a_warm_run() {
    let src = start(Personality::docker_hub(), false).await;
    let dst = start(Personality::default(), false).await;
    let cold = scenario("docker_hub source", &src, &dst).await;
    assert_eq!(
        capabilities(&cold.report, &src).referrers_api,
        Support::Refused
    );
    assert!(count(&cold.src, OpKind::ManifestGet) > 0);
    let cold_pulls = src.pulls();
    // A warm run: every tag HEADed up to date, no pull counted.
    src.reset_stats();
    let warm = run_sync(&config(&src, &dst, &["1.0"])).await.report;
    assert_eq!(warm.verdict(), Verdict::Clean);
    assert_eq!(src.stats().op(OpKind::ManifestGet), 0);
    assert!(src.stats().op(OpKind::ManifestHead) > 0);
    assert_eq!(src.pulls(), cold_pulls);
}

#[tokio::test(start_paused = true)]
async fn docker_hub_answers_its_pull_limit_with_the_documented_429() {
    let limited = Personality {
        pull_limit: Some(2),
        ..Personality::docker_hub()
    };
    let src = start(limited, false).await;
    src.seed_image("app", "v1", &[b"layer"]);
    let client = ferry_distribution::RegistryClient::new(
        ferry_distribution::RegistryOptions::insecure_at(&src.url()),
    )
    .unwrap();
    for _ in 0..2 {
        client.get_manifest("app", "v1").await.unwrap();
    }
    client.head_manifest("app", "v1").await.unwrap();
    assert_eq!(src.pulls(), 2, "a HEAD is not a pull");
    let e = client.get_manifest("app", "v1").await.unwrap_err();
    assert!(
        e.to_string().contains("429") || e.to_string().contains("throttled"),
        "{e}"
    );
    let last = src.requests().into_iter().last().unwrap();
    assert_eq!(last.status, 429);
}

#[tokio::test(start_paused = true)]
async fn ghcr_referrers_redirect_to_a_404_is_no_referrers_api() {
    let src = start(Personality::ghcr(), false).await;
    let dst = start(Personality::ghcr(), false).await;
    let cold = scenario("ghcr", &src, &dst).await;
    assert_eq!(
        capabilities(&cold.report, &src).referrers_api,
        Support::Refused
    );
    // The signature tag came by the tag schema (checked by the scenario); the redirect was
    // followed (to a page answered 404) and read as no API, not as an error.
    let referrers = count(&cold.src, OpKind::Referrers);
    assert!(referrers >= 1);
    assert!(
        cold.src
            .iter()
            .all(|r| r.op != OpKind::Referrers || r.status == 303)
    );
    let followed = cold
        .src
        .iter()
        .filter(|r| r.path.contains("/referrers-page/") && r.status == 404)
        .count();
    assert_eq!(followed, referrers);
}

/// Requests `reg` received for `repo`.
fn requests_for(reg: &TestRegistry, repo: &str) -> usize {
    reg.requests()
        .iter()
        .filter(|r| r.repo.as_deref() == Some(repo))
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_repository_answering_429_to_everything_gets_at_most_twelve_requests() {
    // Exact tags, so that each tag is an operation of its own (three HEADs, each with a whole
    // retry budget), as the resilience bench's condition (b) has them.
    let (src, dst) = common::pair().await;
    let repos: Vec<String> = (0..4).map(|i| format!("lib/r{i}")).collect();
    for repo in &repos {
        for tag in ["a", "b", "c"] {
            src.seed_image(repo, tag, &[format!("{repo}:{tag}").as_bytes()]);
        }
    }
    let mapping = |repo: &str| {
        format!(
            "  - source: \"{}/{repo}\"\n    targets: [\"{}/m/{repo}\"]\n    tags: {{ exact: [a, b, c] }}\n",
            src.host(),
            dst.host()
        )
    };
    let cfg = |repos: &[String]| {
        common::config()
            .registries(&[&src, &dst], &[])
            .mappings(&repos.iter().map(|r| mapping(r)).collect::<String>())
            .build()
    };
    // Without the throttled repository: what the others cost.
    let healthy = &repos[1..];
    let clean = run_sync(&cfg(healthy)).await.report;
    assert_eq!(clean.verdict(), Verdict::Clean);
    let floor: Vec<usize> = healthy.iter().map(|r| requests_for(&src, r)).collect();

    // Again into a fresh target, with lib/r0 answering 429 `Retry-After: 1` to everything.
    let dst2 = common::started().await;
    src.reset_stats();
    src.faults().push(
        FaultRule::any(FaultAction::Status {
            code: 429,
            retry_after: Some(RetryAfter::Seconds(1)),
        })
        .repo("lib/r0")
        .forever(),
    );
    let cfg = common::config()
        .registries(&[&src, &dst2], &[])
        .mappings(
            &repos
                .iter()
                .map(|r| {
                    format!(
                        "  - source: \"{}/{r}\"\n    targets: [\"{}/m/{r}\"]\n    tags: {{ exact: [a, b, c] }}\n",
                        src.host(),
                        dst2.host()
                    )
                })
                .collect::<String>(),
        )
        .build();
    let started = tokio::time::Instant::now();
    let report = run_sync(&cfg).await.report;
    let elapsed = started.elapsed();
    let throttled = requests_for(&src, "lib/r0");
    eprintln!("lib/r0: {throttled} requests, run {elapsed:?}");
    assert!(throttled <= 12, "lib/r0 got {throttled} requests");
    assert!(throttled >= 2, "it was asked, and retried: {throttled}");
    for (repo, before) in healthy.iter().zip(&floor) {
        let now = requests_for(&src, repo);
        assert!(
            now <= *before,
            "{repo}: {now} requests, {before} without the throttled one"
        );
        for tag in ["a", "b", "c"] {
            assert!(
                dst2.manifest(&format!("m/{repo}"), tag).is_some(),
                "{repo}:{tag}"
            );
        }
    }
    assert_eq!(
        report.verdict(),
        Verdict::Partial,
        "{}",
        report.render_text()
    );
    // Its Retry-After of 1 s, eight times at most, and nothing else waited on it.
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
}
