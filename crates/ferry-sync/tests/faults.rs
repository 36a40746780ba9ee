//! Fault injection against the whole sync (prepare and engine) on in-process registries: random
//! transient faults, persistent throttles, dead and silent targets, sheds and lost write replies.

mod common;

use std::time::Duration;

use common::{ALL_TAGS, parse, run_sync};
use ferry_sync::report::{ImageStatus, SyncReport};
use ferry_testkit::registry::{
    FaultAction, FaultRule, OCI_INDEX, OpKind, RandomFaultKind, RandomFaults, RetryAfter,
    TestRegistry,
};
use tokio::time::Instant;

/// A registry entry for `host` served at `url` over plain HTTP: 16 connections, `retry`.
fn registry_entry(host: &str, url: &str, retry: &str) -> String {
    common::registry_entry(
        host,
        url,
        &["max_concurrent: 16", &format!("retry: {{ {retry} }}")],
    )
}

const FAST_RETRY: &str = "attempts: 5, base: 100ms, cap: 2s";
/// For a fault rate as high as 20% on every write: with 5 attempts one write in about 3,000
/// exhausts them (0.2^5), and a run makes hundreds; with 10 it is one in ten million.
const PATIENT_RETRY: &str = "attempts: 10, base: 100ms, cap: 2s";

fn config_text(registries: &str, mappings: &str) -> String {
    format!(
        "version: 1\nconcurrency: 4\nengine: {{ images_in_flight: 4, chunk_size: \"64KiB\", monolithic_limit: \"64KiB\" }}\nregistries:\n{registries}mappings:\n{mappings}"
    )
}

/// A status answer that names its wait in `Retry-After` seconds.
fn status(code: u16, retry_after_secs: u64) -> FaultAction {
    FaultAction::Status {
        code,
        retry_after: Some(RetryAfter::Seconds(retry_after_secs)),
    }
}

fn mapping(src: &TestRegistry, repo: &str, target: &str) -> String {
    common::mapping(
        format!("{}/{repo}", src.host()),
        &[target.to_owned()],
        &[ALL_TAGS],
    )
}

/// Syncs `lib/app` from `src` to `mirror/app` on `dst` under the fast retry policy and checks
/// that it arrived whole, with no failure reported.
async fn sync_app_whole(src: &TestRegistry, dst: &TestRegistry) {
    let registries = registry_entry(&src.host(), &src.url(), FAST_RETRY)
        + &registry_entry(&dst.host(), &dst.url(), FAST_RETRY);
    let mappings = mapping(src, "lib/app", &format!("{}/mirror/app", dst.host()));
    let report = run_sync(&parse(&config_text(&registries, &mappings)))
        .await
        .report;
    assert_eq!(failures(&report), vec![], "{}", report.render_text());
    assert_mirrored(src, "lib/app", dst, "mirror/app");
}

fn failures(report: &SyncReport) -> Vec<(String, ImageStatus)> {
    report
        .images
        .iter()
        .filter(|i| matches!(i.status, ImageStatus::Failed { .. }))
        .map(|i| {
            (
                format!("{}:{} -> {}", i.source, i.image, i.target),
                i.status.clone(),
            )
        })
        .chain(
            report
                .failed_mappings
                .iter()
                .map(|m| (m.source.clone(), m.status.clone())),
        )
        .collect()
}

const REPOS: usize = 6;

/// Six repositories of six tags each over shared base layers; `lib/r0` and `lib/r1` hold a
/// multi-arch index (`m` over `m-amd64` and `m-arm64`) besides three plain images.
fn seed_corpus(src: &TestRegistry) -> Vec<String> {
    let base = vec![0x5au8; 150_000];
    let runtime = vec![0x33u8; 40_000];
    let mut repos = Vec::new();
    for r in 0..REPOS {
        let repo = format!("lib/r{r}");
        let own = format!("{repo} own layer").into_bytes();
        if r < 2 {
            for t in 1..=3 {
                let top = format!("{repo}:{t}").into_bytes();
                src.seed_image(&repo, &format!("{t}"), &[&base, &own, &top]);
            }
            let amd = src.seed_image(&repo, "m-amd64", &[&base, &runtime, b"amd64 top"]);
            let arm = src.seed_image(&repo, "m-arm64", &[&base, &runtime, b"arm64 top"]);
            src.seed_index(&repo, "m", &[amd, arm]);
        } else {
            for t in 1..=6 {
                let top = format!("{repo}:{t} {}", "x".repeat(t * 5000)).into_bytes();
                let layers: Vec<&[u8]> = if t % 2 == 0 {
                    vec![&base, &own, &top]
                } else {
                    vec![&runtime, &top]
                };
                src.seed_image(&repo, &format!("{t}"), &layers);
            }
        }
        repos.push(repo);
    }
    repos
}

/// Every tag of `src_repo` is on `dst` under `dst_repo` with the same manifest bytes, and every
/// manifest reachable from a target tag has all its children and blobs in `dst_repo`.
fn assert_mirrored(src: &TestRegistry, src_repo: &str, dst: &TestRegistry, dst_repo: &str) {
    assert_eq!(src.tags(src_repo), dst.tags(dst_repo), "{dst_repo}: tags");
    for tag in src.tags(src_repo) {
        assert_eq!(
            src.manifest(src_repo, &tag),
            dst.manifest(dst_repo, &tag),
            "{dst_repo}:{tag}: manifest bytes and media type"
        );
    }
    assert_complete(dst, dst_repo);
}

/// Walks every tag of `repo`: no tag points at a manifest with a missing child or blob.
fn assert_complete(reg: &TestRegistry, repo: &str) {
    for tag in reg.tags(repo) {
        let mut stack = vec![tag.clone()];
        while let Some(reference) = stack.pop() {
            let (media_type, bytes) = reg
                .manifest(repo, &reference)
                .unwrap_or_else(|| panic!("{repo}:{tag}: {reference} is missing"));
            let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            if media_type == OCI_INDEX {
                for child in doc["manifests"].as_array().unwrap() {
                    stack.push(child["digest"].as_str().unwrap().to_string());
                }
                continue;
            }
            for blob in std::iter::once(&doc["config"]).chain(doc["layers"].as_array().unwrap()) {
                let digest = blob["digest"].as_str().unwrap();
                assert!(
                    reg.has_blob(repo, digest),
                    "{repo}:{tag}: {reference} references {digest}, which is missing"
                );
            }
        }
    }
}

fn faulted(reg: &TestRegistry) -> u64 {
    let s = reg.stats();
    [0, 429, 502, 503].iter().map(|c| s.status(*c)).sum()
}

#[tokio::test(start_paused = true)]
async fn ten_percent_mixed_transient_faults_on_both_sides_lose_nothing() {
    for seed in [1u64, 7, 42, 1234] {
        let (src, dst) = common::pair().await;
        let repos = seed_corpus(&src);
        let kinds = vec![
            RandomFaultKind::TooManyRequests {
                retry_after_secs: 1,
            },
            RandomFaultKind::BadGatewayBeforeCommit,
            RandomFaultKind::BadGatewayAfterCommit,
            RandomFaultKind::Shed {
                retry_after_base_secs: 1,
                jitter_secs: 2,
            },
            RandomFaultKind::ResetBody { after_bytes: 1000 },
        ];
        // Every operation but the ping and the token exchange: two throttles on the ping fail
        // the mapping (see `two_throttles_on_the_ping_do_not_fail_the_mapping`).
        let ops = vec![
            OpKind::TagList,
            OpKind::ManifestHead,
            OpKind::ManifestGet,
            OpKind::ManifestPut,
            OpKind::BlobHead,
            OpKind::BlobGet,
            OpKind::UploadStart,
            OpKind::UploadMonolithic,
            OpKind::UploadPatch,
            OpKind::UploadPut,
            OpKind::UploadStatus,
            OpKind::Mount,
            OpKind::Referrers,
        ];
        for (reg, salt) in [(&src, 0u64), (&dst, 0x9e37)] {
            reg.faults().set_random(RandomFaults {
                rate: 0.10,
                seed: seed ^ salt,
                kinds: kinds.clone(),
                ops: ops.clone(),
            });
        }
        // An upload attempt is three or four requests, each faulted one time in ten, so about a
        // quarter of attempts fail: with 5 attempts one blob in a few hundred exhausts them
        // (0.27^5), seen once in 180 runs. 10 attempts make that one in a million.
        let registries = registry_entry(&src.host(), &src.url(), PATIENT_RETRY)
            + &registry_entry(&dst.host(), &dst.url(), PATIENT_RETRY);
        let mappings: String = repos
            .iter()
            .map(|repo| mapping(&src, repo, &format!("{}/mirror/{repo}", dst.host())))
            .collect();
        let cfg = parse(&config_text(&registries, &mappings));
        let report = run_sync(&cfg).await.report;

        assert_eq!(
            failures(&report),
            vec![],
            "seed {seed}: {}",
            report.render_text()
        );
        // 6 repos × 6 tags; the two index children are tags of their own.
        assert_eq!(report.totals.images_synced, 36, "seed {seed}");
        for repo in &repos {
            assert_mirrored(&src, repo, &dst, &format!("mirror/{repo}"));
        }
        // The faults happened on both sides (a floor: a run with faults off passes the rest).
        assert!(faulted(&src) >= 5, "seed {seed}: {:?}", src.stats());
        assert!(faulted(&dst) >= 5, "seed {seed}: {:?}", dst.stats());
        assert!(report.totals.retries > 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_persistently_throttled_repository_gets_bounded_attempts_and_a_clear_error() {
    let (src, dst) = common::pair().await;
    src.seed_image("lib/hot", "1", &[b"hot layer"]);
    src.seed_image("lib/cool", "1", &[b"cool layer"]);
    src.seed_image("lib/cool", "2", &[b"cool layer two"]);
    src.faults().push(
        FaultRule::any(status(429, 2))
            .repo("lib/hot")
            .times(100_000),
    );
    let attempts = 4u64;
    let retry = format!("attempts: {attempts}, base: 100ms, cap: 2s");
    let registries = registry_entry(&src.host(), &src.url(), &retry)
        + &registry_entry(&dst.host(), &dst.url(), &retry);
    let mappings = mapping(&src, "lib/hot", &format!("{}/m/hot", dst.host()))
        + &mapping(&src, "lib/cool", &format!("{}/m/cool", dst.host()));
    let cfg = parse(&config_text(&registries, &mappings));
    let report = run_sync(&cfg).await.report;

    // The other mapping finishes.
    assert_eq!(dst.tags("m/cool"), ["1", "2"], "{}", report.render_text());
    assert_eq!(report.totals.images_synced, 2, "{}", report.render_text());
    // The throttled one fails with an error naming the registry and the throttle.
    let failed = failures(&report);
    assert_eq!(failed.len(), 1, "{failed:?}");
    let ImageStatus::Failed { error } = &failed[0].1 else {
        unreachable!()
    };
    assert_eq!(error.place(), src.host(), "{failed:?}");
    assert!(!error.operation().is_empty());
    let message = error.to_string();
    assert!(
        error.status() == Some(429) || message.contains("throttled"),
        "{failed:?}"
    );
    assert!(message.contains(&src.host()), "{message}");
    // Bounded: at most `attempts` requests per operation the registry saw for that repository.
    let hot: Vec<_> = src
        .requests()
        .into_iter()
        .filter(|r| r.repo.as_deref() == Some("lib/hot"))
        .collect();
    let mut kinds: Vec<OpKind> = hot.iter().map(|r| r.op).collect();
    kinds.sort();
    kinds.dedup();
    assert!(!hot.is_empty());
    assert!(
        hot.len() as u64 <= attempts * kinds.len() as u64,
        "{} requests for {} operations ({kinds:?}) with {attempts} attempts each",
        hot.len(),
        kinds.len()
    );
    assert!(hot.iter().all(|r| r.status == 429));
}

#[tokio::test(start_paused = true)]
async fn a_dead_and_a_silent_target_end_in_bounded_time_and_the_rest_syncs() {
    let (src, good) = common::pair().await;
    let silent = TestRegistry::hanging_server().await.unwrap();
    let dead_port = TestRegistry::closed_port().unwrap();
    let dead_host = format!("127.0.0.1:{dead_port}");
    for t in ["1", "2", "3"] {
        src.seed_image("lib/app", t, &[t.as_bytes(), b"shared"]);
    }
    let registries = registry_entry(&src.host(), &src.url(), FAST_RETRY)
        + &registry_entry(&good.host(), &good.url(), FAST_RETRY)
        + &registry_entry(&silent.host(), &silent.url(), FAST_RETRY)
        + &registry_entry(&dead_host, &format!("http://{dead_host}"), FAST_RETRY);
    // One mapping per target: a target whose ping fails fails its whole mapping in the prepare
    // phase (see the report on why that takes a good target of the same mapping down with it).
    let mappings = mapping(&src, "lib/app", &format!("{}/m/app", good.host()))
        + &mapping(&src, "lib/app", &format!("{}/m/app", silent.host()))
        + &mapping(&src, "lib/app", &format!("{dead_host}/m/app"));
    let cfg = parse(&config_text(&registries, &mappings));
    let start = Instant::now();
    let report = run_sync(&cfg).await.report;
    let took = start.elapsed();

    assert!(
        took <= Duration::from_secs(60),
        "took {took:?} of tokio time"
    );
    assert_eq!(
        good.tags("m/app"),
        ["1", "2", "3"],
        "{}",
        report.render_text()
    );
    let failed = failures(&report);
    assert!(!failed.is_empty(), "{}", report.render_text());
    for (what, status) in &failed {
        let ImageStatus::Failed { error } = status else {
            unreachable!()
        };
        let (registry, error) = (error.place(), error.to_string());
        assert!(
            registry == silent.host() || registry == dead_host,
            "{what}: {status:?}"
        );
        assert!(
            error.contains("breaker open")
                || error.contains("connection failed")
                || error.contains("deadline"),
            "{what}: {error}"
        );
    }
    for host in [silent.host(), dead_host.clone()] {
        let images = report
            .images
            .iter()
            .filter(|i| i.target.starts_with(&host))
            .count();
        let mappings = report
            .failed_mappings
            .iter()
            .filter(|m| matches!(&m.status, ImageStatus::Failed { error } if error.place() == host))
            .count();
        assert!(
            images + mappings > 0,
            "{host} is reported: {}",
            report.render_text()
        );
        assert!(
            report
                .images
                .iter()
                .filter(|i| i.target.starts_with(&host))
                .all(|i| matches!(i.status, ImageStatus::Failed { .. })),
            "{}",
            report.render_text()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_shed_with_retry_after_is_waited_out_and_then_succeeds() {
    let (src, dst) = common::pair().await;
    src.seed_image("lib/app", "1", &[b"one"]);
    src.faults()
        .push(FaultRule::on(OpKind::ManifestGet, status(503, 7)).times(2));
    let registries = registry_entry(&src.host(), &src.url(), FAST_RETRY)
        + &registry_entry(&dst.host(), &dst.url(), FAST_RETRY);
    let cfg = parse(&config_text(
        &registries,
        &mapping(&src, "lib/app", &format!("{}/m/app", dst.host())),
    ));
    let start = Instant::now();
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    assert!(
        src.faults().pending_rules().is_empty(),
        "both sheds answered"
    );
    // Each shed's Retry-After was honoured (a floor), and not much more (a ceiling).
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(14), "took {took:?}");
    assert!(took <= Duration::from_secs(30), "took {took:?}");
    assert_eq!(src.stats().status(503), 2);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_beyond_the_deadline_is_a_throttled_error_at_once() {
    let (src, other) = common::pair().await;
    let dst = common::started().await;
    src.seed_image("lib/app", "1", &[b"one"]);
    other.seed_image("lib/other", "1", &[b"other"]);
    src.faults().push(
        FaultRule::on(OpKind::ManifestGet, status(503, 120))
            .repo("lib/app")
            .times(1000),
    );
    let retry = "attempts: 5, base: 100ms, cap: 2s, deadline: 30s";
    let registries = registry_entry(&src.host(), &src.url(), retry)
        + &registry_entry(&other.host(), &other.url(), retry)
        + &registry_entry(&dst.host(), &dst.url(), retry);
    let cfg = parse(&config_text(
        &registries,
        &(mapping(&src, "lib/app", &format!("{}/m/app", dst.host()))
            + &mapping(&other, "lib/other", &format!("{}/m/other", dst.host()))),
    ));
    let start = Instant::now();
    let report = run_sync(&cfg).await.report;
    let took = start.elapsed();
    assert_eq!(dst.tags("m/other"), ["1"], "{}", report.render_text());
    let failed = failures(&report);
    assert_eq!(failed.len(), 1, "{failed:?}");
    let ImageStatus::Failed { error } = &failed[0].1 else {
        unreachable!()
    };
    let (registry, error) = (error.place(), error.to_string());
    assert_eq!(registry, src.host());
    assert!(
        error.contains("throttled") && error.contains("120"),
        "{error}"
    );
    // At once: no 120 s sleep, no retry of the refused wait.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let gets = src
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::ManifestGet && r.repo.as_deref() == Some("lib/app"))
        .count();
    assert_eq!(gets, 1, "one GET, answered 503, not retried");
}

#[tokio::test(start_paused = true)]
async fn lost_replies_on_writes_lose_nothing_and_nothing_unsafe_is_replayed() {
    for seed in [3u64, 11, 99] {
        let (src, dst) = common::pair().await;
        let repos = seed_corpus(&src);
        dst.faults().set_random(RandomFaults {
            rate: 0.20,
            seed,
            kinds: vec![RandomFaultKind::BadGatewayAfterCommit],
            ops: vec![
                OpKind::ManifestPut,
                OpKind::UploadPut,
                OpKind::UploadMonolithic,
            ],
        });
        let registries = registry_entry(&src.host(), &src.url(), PATIENT_RETRY)
            + &registry_entry(&dst.host(), &dst.url(), PATIENT_RETRY);
        let mappings: String = repos
            .iter()
            .map(|repo| mapping(&src, repo, &format!("{}/mirror/{repo}", dst.host())))
            .collect();
        let cfg = parse(&config_text(&registries, &mappings));
        let report = run_sync(&cfg).await.report;
        assert_eq!(
            failures(&report),
            vec![],
            "seed {seed}: {}",
            report.render_text()
        );
        assert_eq!(report.totals.images_synced, 36);
        for repo in &repos {
            assert_mirrored(&src, repo, &dst, &format!("mirror/{repo}"));
        }
        let requests = dst.requests();
        let lost = requests.iter().filter(|r| r.status == 502).count();
        assert!(lost >= 5, "seed {seed}: the faults happened ({lost})");
        // Nothing replay-unsafe was sent at all: no DELETE (a tag DELETE is unsafe) and no
        // PATCH without Content-Range (an append PATCH is unsafe).
        let deletes: Vec<_> = requests.iter().filter(|r| r.method == "DELETE").collect();
        assert!(deletes.is_empty(), "{deletes:?}");
        let patches: Vec<_> = requests.iter().filter(|r| r.method == "PATCH").collect();
        assert!(!patches.is_empty(), "the corpus has chunked uploads");
        for p in patches {
            assert!(
                p.headers.iter().any(|(k, _)| k == "content-range"),
                "PATCH without Content-Range: {p:?}"
            );
        }
        assert_eq!(dst.open_uploads(), 0, "seed {seed}: no session left open");
    }
}

#[tokio::test(start_paused = true)]
async fn a_long_retry_after_on_one_repository_does_not_fail_a_transfer_from_another() {
    // The source answers one repository's manifest GET with 503 + Retry-After 120, beyond the
    // 30 s deadline. That operation gives up at once (Throttled); the wait must not pause the
    // whole source (it once did, stalling another image's stream until the target's PATCH timed
    // out and was blamed on the target).
    let (src, dst) = common::pair().await;
    src.seed_image("lib/app", "1", &[b"one"]);
    src.seed_image("lib/other", "1", &[b"other"]);
    src.faults().push(
        FaultRule::on(OpKind::ManifestGet, status(503, 120))
            .repo("lib/app")
            .times(1000),
    );
    let retry = "attempts: 5, base: 100ms, cap: 2s, deadline: 30s";
    let registries = registry_entry(&src.host(), &src.url(), retry)
        + &registry_entry(&dst.host(), &dst.url(), retry);
    let cfg = parse(&config_text(
        &registries,
        &(mapping(&src, "lib/app", &format!("{}/m/app", dst.host()))
            + &mapping(&src, "lib/other", &format!("{}/m/other", dst.host()))),
    ));
    let report = run_sync(&cfg).await.report;
    let failed = failures(&report);
    assert!(
        failed.iter().all(
            |(_, s)| matches!(s, ImageStatus::Failed { error } if error.place() == src.host())
        ),
        "no failure is blamed on the target: {failed:?}"
    );
    assert_eq!(dst.tags("m/other"), ["1"], "{}", report.render_text());
}

#[tokio::test(start_paused = true)]
async fn two_throttles_on_the_ping_do_not_fail_the_mapping() {
    let (src, dst) = common::pair().await;
    src.seed_image("lib/app", "1", &[b"one"]);
    src.faults()
        .push(FaultRule::on(OpKind::Ping, status(429, 1)).times(2));
    let registries = registry_entry(&src.host(), &src.url(), FAST_RETRY)
        + &registry_entry(&dst.host(), &dst.url(), FAST_RETRY);
    let cfg = parse(&config_text(
        &registries,
        &mapping(&src, "lib/app", &format!("{}/m/app", dst.host())),
    ));
    let report = run_sync(&cfg).await.report;
    // A throttle is proof of life and is retried for every other operation (docs/retry.md).
    assert_eq!(failures(&report), vec![], "{}", report.render_text());
    assert_eq!(dst.tags("m/app"), ["1"]);
}

/// The session POST is retried on its own: four lost POST replies and then a lost PUT reply on
/// one blob cost five retries of two operations, not five attempts of one (which would leave
/// the blob, and the image, failed under the default five attempts).
#[tokio::test(start_paused = true)]
async fn lost_post_replies_are_retried_apart_from_the_upload_they_open() {
    let (src, dst) = common::pair().await;
    src.seed_image("lib/app", "1", &[b"one small layer"]);
    let lost = FaultAction::AfterCommit { code: 502 };
    dst.faults()
        .push(FaultRule::on(OpKind::UploadStart, lost.clone()).times(4));
    dst.faults()
        .push(FaultRule::on(OpKind::UploadPut, lost).times(1));
    let registries = registry_entry(&src.host(), &src.url(), FAST_RETRY)
        + &registry_entry(&dst.host(), &dst.url(), FAST_RETRY);
    let text = format!(
        "version: 1\nengine: {{ images_in_flight: 1, blobs_in_flight: 1 }}\nregistries:\n{registries}mappings:\n{}",
        mapping(&src, "lib/app", &format!("{}/mirror/app", dst.host()))
    );
    let report = run_sync(&parse(&text)).await.report;
    assert_eq!(failures(&report), vec![], "{}", report.render_text());
    assert_mirrored(&src, "lib/app", &dst, "mirror/app");
    let lost = dst.requests().iter().filter(|r| r.status == 502).count();
    assert_eq!(lost, 5, "every injected fault happened");
}

/// A chunked upload whose last PATCH landed but lost its reply holds every byte: the next
/// attempt finds the whole blob in the session and only closes it, instead of asking the
/// source for the bytes past its end (a 416 that failed the image).
#[tokio::test(start_paused = true)]
async fn a_lost_reply_to_the_last_chunk_is_closed_without_reading_past_the_end() {
    let (src, dst) = common::pair().await;
    let layer = vec![0x5au8; 150_000];
    src.seed_image("lib/app", "1", &[&layer]);
    // Three chunks of 64 KiB: the first two answered, the third committed and its reply lost.
    dst.faults()
        .push(FaultRule::on(OpKind::UploadPatch, FaultAction::Delay(Duration::ZERO)).times(2));
    dst.faults().push(FaultRule::on(
        OpKind::UploadPatch,
        FaultAction::AfterCommit { code: 502 },
    ));
    sync_app_whole(&src, &dst).await;
    let ranged: Vec<_> = src
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::BlobGet && r.headers.iter().any(|(k, _)| k == "range"))
        .collect();
    assert!(ranged.is_empty(), "nothing read again: {ranged:?}");
}

/// A target whose session POST needs a retry lets the tee go on without it: the other target
/// takes the blob from the one source read, and the retried target reads the source again
/// (the second-read case of ferry-sync's RULES.md) instead of holding the shared stream through
/// its backoff.
#[tokio::test(start_paused = true)]
async fn a_retried_session_post_does_not_hold_the_other_targets_stream() {
    let (src, a) = common::pair().await;
    let b = common::started().await;
    let layer = vec![0x42u8; 40_000];
    src.seed_image("lib/app", "1", &[&layer]);
    a.faults().push(FaultRule::on(
        OpKind::UploadStart,
        FaultAction::AfterCommit { code: 502 },
    ));
    let registries = [&src, &a, &b]
        .iter()
        .map(|r| registry_entry(&r.host(), &r.url(), FAST_RETRY))
        .collect::<String>();
    let mappings = format!(
        "  - source: \"{}/lib/app\"\n    targets: [\"{}/mirror/app\", \"{}/mirror/app\"]\n    tags: {{ include: [\"*\"] }}\n",
        src.host(),
        a.host(),
        b.host()
    );
    let report = run_sync(&parse(&config_text(&registries, &mappings)))
        .await
        .report;
    assert_eq!(failures(&report), vec![], "{}", report.render_text());
    assert_mirrored(&src, "lib/app", &a, "mirror/app");
    assert_mirrored(&src, "lib/app", &b, "mirror/app");
    // Two blobs (the config and the layer), each read once for both targets, and the one
    // whose POST to `a` was retried read again for `a`.
    let reads = src
        .requests()
        .iter()
        .filter(|r| r.op == OpKind::BlobGet)
        .count();
    assert_eq!(
        reads, 3,
        "one read shared, one again for the retried target"
    );
}

/// A manifest PUT whose reply was lost after the registry stored it is settled by a HEAD that
/// names its digest, not by a second PUT that could lose its reply again.
#[tokio::test(start_paused = true)]
async fn a_lost_manifest_put_reply_is_settled_by_a_head() {
    let (src, dst) = common::pair().await;
    src.seed_image("lib/app", "1", &[b"a layer"]);
    dst.faults().push(FaultRule::on(
        OpKind::ManifestPut,
        FaultAction::AfterCommit { code: 502 },
    ));
    sync_app_whole(&src, &dst).await;
    let puts = dst
        .requests()
        .iter()
        .filter(|r| r.op == OpKind::ManifestPut)
        .count();
    assert_eq!(puts, 1, "the one PUT landed; the retry asked with a HEAD");
}

/// The HEAD settles a retry only when it names the digest being pushed: a tag that still holds
/// an older manifest (the PUT failed before it was stored) is pushed again.
#[tokio::test(start_paused = true)]
async fn a_head_naming_another_digest_does_not_settle_a_manifest_put() {
    let (src, dst) = common::pair().await;
    src.seed_image("lib/app", "1", &[b"the new layer"]);
    dst.seed_image("mirror/app", "1", &[b"an old layer"]);
    dst.faults().push(FaultRule::on(
        OpKind::ManifestPut,
        FaultAction::Status {
            code: 502,
            retry_after: None,
        },
    ));
    sync_app_whole(&src, &dst).await;
}
