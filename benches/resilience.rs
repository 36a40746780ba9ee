//! Benchmark: ferry's resilience. 12 repositories / 36 tags in a real distribution registry, a
//! fault proxy in front of it (or of the target), ferry syncing into a second real registry.
//!
//! Every condition runs in the same process run as a clean baseline, into a fresh target, and
//! every tag is verified by digest afterwards:
//! - clean: no faults;
//! - mixed: ~10% transient faults (2.5% each of 429 `Retry-After: 1`, 503 `Retry-After: 1`, 500,
//!   502, before the request is handled) and 5% of blob GET bodies reset part way;
//! - throttled: one repository answers 429 (`Retry-After: 1`) to every manifest request;
//! - announced / silent / configured: a 20 requests/s token bucket (burst 20) at the source,
//!   with `ratelimit-*` headers, without them, and without them but with
//!   `requests_per_second: 20` in mirror.yaml (the politeness bench's row);
//! - lost replies: 20% of the target's upload and manifest writes lose their reply (502) after
//!   the write committed.
//!
//! Run: `cargo bench --bench resilience` (or `scripts/bench`). Options after `--`: `--runs N`
//! (default 1), `--only clean,mixed,...`, `--json PATH` (every outcome as JSON, for
//! `scripts/bench compare`: benches/versus.rs reads it), `--requests DIR` (every request
//! each side saw, one file per run, condition and side: `runN-KEY-source.txt`). `RUST_LOG=ferry_distribution=debug` logs each retry.

#[allow(dead_code)]
#[path = "compare/corpus.rs"]
mod corpus;
#[allow(dead_code)]
#[path = "compare/measure.rs"]
mod measure;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_config as config;
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_sync::registries::Registries;
use ferry_sync::report::{ImageStatus, SyncReport};
use ferry_sync::run::{Outcome as Finished, Run, RunContext, RunObserver};

/// Draws nothing; with it the prepare phase writes no watch line (as the CLI's display).
struct Quiet;

impl RunObserver for Quiet {}
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::registry::{
    FaultProxy, FaultRule, OpKind, RandomFaultKind, RandomFaults, RequestRecord, TokenBucket,
};
use futures::StreamExt as _;

use corpus::{Corpus, Shape};

/// Source token bucket of the rate conditions: requests per second and burst.
const RATE: f64 = 20.0;
const BURST: u32 = 20;

/// The repository the throttled condition throttles (a prefix no other corpus name extends).
const THROTTLED: &str = "small/svc-07";

/// Writes the lost-reply condition may hit.
const WRITES: [OpKind; 6] = [
    OpKind::UploadStart,
    OpKind::UploadPatch,
    OpKind::UploadPut,
    OpKind::UploadMonolithic,
    OpKind::Mount,
    OpKind::ManifestPut,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Condition {
    Clean,
    Mixed,
    Throttled,
    Announced,
    Silent,
    Configured,
    LostReplies,
}

impl Condition {
    const ALL: [Condition; 7] = [
        Condition::Clean,
        Condition::Mixed,
        Condition::Throttled,
        Condition::Announced,
        Condition::Silent,
        Condition::Configured,
        Condition::LostReplies,
    ];

    fn key(self) -> &'static str {
        match self {
            Condition::Clean => "clean",
            Condition::Mixed => "mixed",
            Condition::Throttled => "throttled",
            Condition::Announced => "announced",
            Condition::Silent => "silent",
            Condition::Configured => "configured",
            Condition::LostReplies => "lost",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Condition::Clean => "clean",
            Condition::Mixed => {
                "(a) ~10% mixed transient faults (429/503 `Retry-After: 1`, 500, 502) + 5% blob GET bodies reset"
            }
            Condition::Throttled => {
                "(b) one repository answers 429 (`Retry-After: 1`) to every manifest request"
            }
            Condition::Announced => {
                "(c) 20 req/s bucket sending `ratelimit-limit: 20;w=1`, no rate configured"
            }
            Condition::Silent => "(d) 20 req/s bucket without headers, no rate configured",
            Condition::Configured => "20 req/s bucket, `requests_per_second: 20` configured",
            Condition::LostReplies => {
                "(e) 20% of upload/manifest writes lose their reply after commit"
            }
        }
    }

    fn bucket(self) -> Option<TokenBucket> {
        match self {
            Condition::Announced => Some(TokenBucket::new(RATE, BURST).announced(1)),
            Condition::Silent | Condition::Configured => Some(TokenBucket::new(RATE, BURST)),
            _ => None,
        }
    }

    /// Sets this condition's faults on the source and target proxies.
    fn arm(self, source: &FaultProxy, target: &FaultProxy, seed: u64) {
        source.faults().set_rate_limit(self.bucket());
        match self {
            Condition::Mixed => {
                source.faults().set_random(RandomFaults {
                    rate: 0.10,
                    seed,
                    kinds: vec![
                        RandomFaultKind::TooManyRequests {
                            retry_after_secs: 1,
                        },
                        RandomFaultKind::Shed {
                            retry_after_base_secs: 1,
                            jitter_secs: 0,
                        },
                        RandomFaultKind::InternalErrorBeforeCommit,
                        RandomFaultKind::BadGatewayBeforeCommit,
                    ],
                    ops: Vec::new(),
                });
                source.faults().add_random(RandomFaults {
                    rate: 0.05,
                    seed: seed ^ 0xb10b,
                    kinds: vec![RandomFaultKind::ResetBody { after_bytes: 4096 }],
                    ops: vec![OpKind::BlobGet],
                });
            }
            Condition::Throttled => {
                for rule in FaultRule::throttle_manifests(THROTTLED, 1) {
                    source.faults().push(rule);
                }
            }
            Condition::LostReplies => target.faults().set_random(RandomFaults {
                rate: 0.20,
                seed,
                kinds: vec![RandomFaultKind::BadGatewayAfterCommit],
                ops: WRITES.to_vec(),
            }),
            _ => {}
        }
    }
}

/// What one condition's run measured.
struct Outcome {
    condition: Condition,
    wall: Duration,
    prepare: Duration,
    source_requests: u64,
    source_429: u64,
    target_requests: u64,
    synced: u64,
    failed: u64,
    verified: usize,
    /// Per target repository: when (since the start) its last manifest PUT arrived.
    finished: BTreeMap<String, Duration>,
    /// The first failure's report line, if any.
    first_failure: Option<String>,
    /// When (since the start) the source proxy answered its first and last 429.
    throttled_between: Option<(Duration, Duration)>,
    /// Every request the source and the target proxy saw, one line each: id, seconds since
    /// the start, operation, method, path, status (for `--requests DIR`).
    request_logs: [(&'static str, String); 2],
}

impl Outcome {
    /// Time by which every repository except the throttled one had its last manifest written.
    fn healthy_done(&self) -> Duration {
        self.finished
            .iter()
            .filter(|(repo, _)| !repo.ends_with(THROTTLED))
            .map(|(_, at)| *at)
            .max()
            .unwrap_or_default()
    }

    /// The time the source's limit imposes on the requests it admitted.
    fn imposed(&self) -> Duration {
        let admitted = self.source_requests.saturating_sub(self.source_429);
        Duration::from_secs_f64(admitted.saturating_sub(u64::from(BURST)) as f64 / RATE)
    }
}

fn mirror_yaml(corpus: &Corpus, source: &str, target: &str, rate: bool) -> String {
    let rps = if rate {
        format!("    requests_per_second: {RATE}\n")
    } else {
        String::new()
    };
    let mut text = format!(
        "version: 1\nregistries:\n  - host: \"{source}\"\n    url: \"http://{source}\"\n    insecure: true\n{rps}  - host: \"{target}\"\n    url: \"http://{target}\"\n    insecure: true\nmappings:\n"
    );
    for repo in &corpus.repos {
        text.push_str(&format!(
            "  - source: \"{source}/{}\"\n    targets: [\"{target}/mirror/{}\"]\n    tags: {{ include: [\"*\"] }}\n",
            repo.name, repo.name
        ));
    }
    text
}

fn failure_line(report: &SyncReport) -> Option<String> {
    let statuses = report
        .failed_mappings
        .iter()
        .map(|m| (&m.source, &m.status))
        .chain(report.images.iter().map(|i| (&i.source, &i.status)));
    for (source, status) in statuses {
        if let ImageStatus::Failed { error } = status {
            return Some(format!(
                "{source}: {} status {} after {} attempts: {error}",
                error.operation(),
                error.status().map_or("-".to_string(), |s| s.to_string()),
                error.attempts()
            ));
        }
    }
    None
}

/// How many of the corpus's tags the target holds with the source's digest.
async fn verify(corpus: &Corpus, target: &RealRegistry) -> Result<usize, String> {
    let client = RegistryClient::new(RegistryOptions::insecure_at(&target.url()))
        .map_err(|e| format!("client for {}: {e}", target.url()))?;
    let checks = corpus
        .repos
        .iter()
        .flat_map(|repo| repo.tags.iter().map(move |tag| (repo, tag)))
        .map(|(repo, tag)| {
            let client = client.clone();
            async move {
                let repository = format!("mirror/{}", repo.name);
                matches!(
                    client.head_manifest(&repository, &tag.tag).await,
                    Ok(Some(info)) if info.digest == tag.top.digest
                )
            }
        });
    let results: Vec<bool> = futures::stream::iter(checks)
        .buffer_unordered(8)
        .collect()
        .await;
    Ok(results.into_iter().filter(|ok| *ok).count())
}

async fn run(
    condition: Condition,
    corpus: &Corpus,
    source: &RealRegistry,
    seed: u64,
) -> Result<Outcome, String> {
    let target = RealRegistry::start()
        .await
        .map_err(|e| format!("starting a target registry: {e}"))?;
    let source_proxy = FaultProxy::start(&source.url())
        .await
        .map_err(|e| format!("starting the source proxy: {e}"))?;
    let target_proxy = FaultProxy::start(&target.url())
        .await
        .map_err(|e| format!("starting the target proxy: {e}"))?;
    condition.arm(&source_proxy, &target_proxy, seed);
    let text = mirror_yaml(
        corpus,
        &source_proxy.host(),
        &target_proxy.host(),
        condition == Condition::Configured,
    );
    let cfg = config::parse(&text, Path::new("bench.yaml"), &|_| None)
        .map_err(|e| format!("bench config: {e:?}"))?;
    let registries = Registries::new(&cfg);
    let mut ctx = RunContext::new(&cfg);
    ctx.registries = registries.clone();
    ctx.progress.observer = Some(Arc::new(Quiet));
    let started = Instant::now();
    let started_tokio = tokio::time::Instant::now();
    // As `ferry sync` runs: each mapping is synced the moment it is resolved.
    let outcome = match Run::new(cfg.clone(), ctx).sync().await {
        Finished::Synced(outcome) => *outcome,
        Finished::DryRun(_) => return Err("a writing run measured nothing".into()),
    };
    let (plan, report) = (outcome.plan, outcome.report);
    let wall = started.elapsed();
    let mut finished = BTreeMap::new();
    for record in target_proxy.requests() {
        if record.op == OpKind::ManifestPut
            && let Some(repo) = record.repo
        {
            let at = record.at.saturating_duration_since(started_tokio);
            let entry = finished.entry(repo).or_insert(at);
            *entry = (*entry).max(at);
        }
    }
    let throttled_at: Vec<Duration> = source_proxy
        .requests()
        .iter()
        .filter(|r| r.status == 429)
        .map(|r| r.at.saturating_duration_since(started_tokio))
        .collect();
    let throttled_between = throttled_at
        .iter()
        .min()
        .zip(throttled_at.iter().max())
        .map(|(first, last)| (*first, *last));
    if condition.bucket().is_some() {
        eprintln!(
            "resilience: {} source arrivals per 100 ms, first 3 s (429s in brackets): {}",
            condition.key(),
            arrivals(&source_proxy.requests(), started_tokio)
        );
    }
    if condition == Condition::LostReplies {
        // Where the retries went (issue 42): per write, requests and answers lost (502).
        let mut by_op: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        for record in target_proxy.requests() {
            if WRITES.contains(&record.op) {
                let entry = by_op.entry(format!("{:?}", record.op)).or_default();
                entry.0 += 1;
                entry.1 += u32::from(record.status == 502);
            }
        }
        let line: Vec<String> = by_op
            .iter()
            .map(|(op, (all, lost))| format!("{op} {all} ({lost} lost)"))
            .collect();
        eprintln!("resilience: lost writes: {}", line.join(", "));
    }
    let verified = verify(corpus, &target).await?;
    let source_stats = source_proxy.stats();
    let outcome = Outcome {
        condition,
        wall,
        prepare: plan.elapsed,
        source_requests: source_stats.requests,
        source_429: source_stats.too_many_requests,
        target_requests: target_proxy.stats().requests,
        synced: report.totals.images_synced,
        failed: report.totals.images_failed + report.totals.mappings_failed,
        verified,
        finished,
        first_failure: failure_line(&report),
        throttled_between,
        request_logs: [
            (
                "source",
                request_lines(&source_proxy.requests(), started_tokio),
            ),
            (
                "target",
                request_lines(&target_proxy.requests(), started_tokio),
            ),
        ],
    };
    drop(source_proxy);
    drop(target_proxy);
    target
        .stop()
        .await
        .map_err(|e| format!("stopping the target registry: {e}"))?;
    Ok(outcome)
}

/// Requests per 100 ms slot over the first 3 s, with the 429s of each slot: `12 8[3] 2 ...`.
/// One line per request, in arrival order: id, seconds since `start`, operation, method, path,
/// status (200 for a blob GET whose body the proxy then cut: `ResetBody` answers first).
fn request_lines(records: &[RequestRecord], start: tokio::time::Instant) -> String {
    let mut sorted: Vec<&RequestRecord> = records.iter().collect();
    sorted.sort_by_key(|r| r.id);
    let mut out = String::new();
    for r in sorted {
        let at = r.at.saturating_duration_since(start).as_secs_f64();
        out.push_str(&format!(
            "{} {at:.3} {:?} {} {} {}\n",
            r.id, r.op, r.method, r.path, r.status
        ));
    }
    out
}

fn arrivals(records: &[RequestRecord], start: tokio::time::Instant) -> String {
    let mut slots = [(0u32, 0u32); 30];
    for record in records {
        let slot = (record.at.saturating_duration_since(start).as_millis() / 100) as usize;
        if let Some((all, throttled)) = slots.get_mut(slot) {
            *all += 1;
            *throttled += u32::from(record.status == 429);
        }
    }
    slots
        .iter()
        .map(|(all, throttled)| match throttled {
            0 => all.to_string(),
            n => format!("{all}[{n}]"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

fn verdict(holds: bool) -> &'static str {
    if holds { "holds" } else { "**misses**" }
}

/// The markdown table of one run, and a line per target.
fn table(run: usize, outcomes: &[Outcome], tags: usize) -> String {
    let mut out = String::new();
    let clean = outcomes.iter().find(|o| o.condition == Condition::Clean);
    out.push_str(&format!("\nrun {run}\n\n"));
    out.push_str("| condition | wall time | prepare | vs clean | source requests | answered 429 | target requests | synced / failed | verified by digest | target |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for o in outcomes {
        let vs_clean = clean.map_or(f64::NAN, |c| ratio(o.wall, c.wall));
        let share = 100.0 * o.source_429 as f64 / o.source_requests.max(1) as f64;
        let all = o.verified == tags;
        let target = match o.condition {
            Condition::Clean => String::from("—"),
            Condition::Mixed => format!(
                "≤ 3x clean, all synced: {}",
                verdict(vs_clean <= 3.0 && all)
            ),
            Condition::Throttled => {
                let healthy = clean.map_or(f64::NAN, |c| ratio(o.healthy_done(), c.healthy_done()));
                format!(
                    "others {} vs their clean {} = {healthy:.2}x (≤ 1.5x): {}",
                    secs(o.healthy_done()),
                    clean.map_or(String::new(), |c| secs(c.healthy_done())),
                    verdict(healthy <= 1.5 && o.verified == tags - 3)
                )
            }
            Condition::Announced | Condition::Silent | Condition::Configured => {
                let (max_share, max_ratio) = match o.condition {
                    Condition::Announced => (1.0, 1.3),
                    Condition::Silent => (5.0, 1.5),
                    // The politeness bench's documented target for a configured rate.
                    _ => (1.0, 1.2),
                };
                let r = ratio(o.wall, o.imposed());
                format!(
                    "{:.1}% 429 (< {max_share}%), {r:.2}x the {} the limit imposes (≤ {max_ratio}x): {}",
                    share,
                    secs(o.imposed()),
                    verdict(share < max_share && r <= max_ratio && all)
                )
            }
            Condition::LostReplies => format!(
                "≤ 2x clean, all synced: {}",
                verdict(vs_clean <= 2.0 && all)
            ),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {vs_clean:.2}x | {} | {} ({share:.1}%) | {} | {} / {} | {} / {tags} | {target} |\n",
            o.condition.describe(),
            secs(o.wall),
            secs(o.prepare),
            o.source_requests,
            o.source_429,
            o.target_requests,
            o.synced,
            o.failed,
            o.verified,
        ));
    }
    for o in outcomes {
        if let Some((first, last)) = o.throttled_between {
            out.push_str(&format!(
                "\n{}: {} answered 429 between {} and {} after the start",
                o.condition.key(),
                o.source_429,
                secs(first),
                secs(last)
            ));
        }
    }
    for o in outcomes {
        if let Some(line) = &o.first_failure {
            out.push_str(&format!(
                "\n{}: first failure: `{}`",
                o.condition.key(),
                line.replace('`', "'")
            ));
        }
    }
    out.push('\n');
    out
}

struct Options {
    runs: usize,
    only: Vec<Condition>,
    json: Option<std::path::PathBuf>,
    /// `--requests DIR`: each run's source requests, one file per run and condition.
    requests: Option<std::path::PathBuf>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        runs: 1,
        only: Condition::ALL.to_vec(),
        json: None,
        requests: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                options.runs = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or("--runs takes a positive number")?;
            }
            "--only" => {
                let list = measure::option_value(&mut args, "--only")?;
                let mut only = vec![Condition::Clean];
                for key in list.split(',') {
                    let condition = Condition::ALL
                        .into_iter()
                        .find(|c| c.key() == key)
                        .ok_or_else(|| format!("--only: unknown condition {key:?}"))?;
                    if !only.contains(&condition) {
                        only.push(condition);
                    }
                }
                options.only = only;
            }
            "--json" => {
                options.json = Some(measure::option_value(&mut args, "--json")?.into());
            }
            "--requests" => {
                let dir: std::path::PathBuf =
                    measure::option_value(&mut args, "--requests")?.into();
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("--requests: creating {}: {e}", dir.display()))?;
                options.requests = Some(dir);
            }
            // cargo bench passes `--bench`.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(options)
}

fn shape() -> Shape {
    Shape {
        name: "resilience: 12 repositories x 3 tags",
        seed: 0xF3_22_C0,
        small_repos: 12,
        small_tags: (3, 3),
        deep_repos: 0,
        deep_tags: 0,
        layer_size: (16 << 10, 128 << 10),
        base_size: (64 << 10, 128 << 10),
        repo_layer_size: (16 << 10, 64 << 10),
        base_pool: 3,
        index_every: 0,
    }
}

async fn bench(options: Options) -> Result<(), String> {
    let corpus = Corpus::generate(&shape());
    let tags = corpus.tag_count();
    let source = RealRegistry::start()
        .await
        .map_err(|e| format!("starting the source registry: {e}"))?;
    corpus.push(&source.url(), 8).await?;
    println!(
        "resilience: {} repositories / {tags} tags / {} blobs ({:.1} MiB) in a real distribution registry; fault proxy in front of the source (in front of the target for (e)); ferry in-process into a fresh real registry per condition",
        corpus.repos.len(),
        corpus.blobs.len(),
        corpus.unique_bytes() as f64 / f64::from(1 << 20)
    );
    let mut runs = Vec::new();
    for run_index in 1..=options.runs {
        let mut outcomes = Vec::new();
        for (i, condition) in options.only.iter().enumerate() {
            let seed = 0x5eed_0000 + (run_index * 100 + i) as u64;
            let outcome = run(*condition, &corpus, &source, seed).await?;
            eprintln!(
                "resilience: run {run_index} {}: {:.2} s, {} synced, {} failed, {} verified",
                condition.key(),
                outcome.wall.as_secs_f64(),
                outcome.synced,
                outcome.failed,
                outcome.verified
            );
            if let Some(dir) = &options.requests {
                for (side, lines) in &outcome.request_logs {
                    let path = dir.join(format!("run{run_index}-{}-{side}.txt", condition.key()));
                    std::fs::write(&path, lines)
                        .map_err(|e| format!("writing {}: {e}", path.display()))?;
                }
            }
            outcomes.push(outcome);
        }
        println!("{}", table(run_index, &outcomes, tags));
        let conditions: Vec<serde_json::Value> = outcomes
            .iter()
            .map(|o| {
                serde_json::json!({
                    "condition": o.condition.key(),
                    "wall_s": o.wall.as_secs_f64(),
                    "source_requests": o.source_requests,
                    "target_requests": o.target_requests,
                    "synced": o.synced,
                    "failed": o.failed,
                    "verified": o.verified,
                })
            })
            .collect();
        runs.push(serde_json::json!({ "run": run_index, "conditions": conditions }));
    }
    if let Some(path) = &options.json {
        let text = serde_json::to_string_pretty(&serde_json::json!({ "tags": tags, "runs": runs }))
            .map_err(|e| format!("encoding JSON: {e}"))?;
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    source
        .stop()
        .await
        .map_err(|e| format!("stopping the source registry: {e}"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    // `RUST_LOG=ferry_distribution=debug` shows every retry and its wait on stderr: where a
    // condition's time went.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let result = match parse_options() {
        Ok(options) => bench(options).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("resilience: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
