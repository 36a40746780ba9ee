//! Benchmark: politeness against a rate-limited registry. The source allows 20 requests per
//! second (token bucket, burst 20, 429 with Retry-After past it); ferry mirrors 36 tags from it.
//!
//! Reported: requests the source received, how many it answered 429, and the wall time against
//! the time the limit itself imposes ((accepted requests - burst) / rate). Two runs: with the
//! registry's `requests_per_second: 20` in mirror.yaml, and without it (the AIMD window and
//! Retry-After alone). Run: `cargo bench --bench politeness`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use ferry_sync::config;
use ferry_sync::engine::{EngineOptions, StopSignal, sync};
use ferry_sync::prepare::{PrepareOptions, PrepareTracker, resolve_all};
use ferry_sync::registries::Registries;
use ferry_testkit::registry::{RetryAfterStyle, TestRegistry, TokenBucket};

const RATE: f64 = 20.0;
const BURST: u32 = 20;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!(
        "politeness: source limited to {RATE} requests/s (burst {BURST}), 6 repositories x 6 tags, 2 layers each"
    );
    println!();
    println!(
        "| mirror.yaml | run | source requests | answered 429 | 429 share | wall time | limit-imposed time | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (configured, round) in [true, false]
        .into_iter()
        .flat_map(|c| (1..=3).map(move |r| (c, r)))
    {
        let src = TestRegistry::builder().start().await.expect("source");
        let dst = TestRegistry::builder().start().await.expect("target");
        let mut mappings = String::new();
        for r in 0..6 {
            for t in 0..6 {
                let layer = format!("repo {r} tag {t}");
                src.seed_image(
                    &format!("lib/r{r}"),
                    &format!("v{t}"),
                    &[b"shared base", layer.as_bytes()],
                );
            }
            mappings.push_str(&format!(
                "  - source: \"{}/lib/r{r}\"\n    targets: [\"{}/mirror/r{r}\"]\n    tags: {{ include: [\"*\"] }}\n",
                src.host(),
                dst.host()
            ));
        }
        // The limit applies from here on (seeding went around it).
        src.faults().set_rate_limit(Some(TokenBucket {
            per_second: RATE,
            burst: BURST,
            retry_after: RetryAfterStyle::Seconds,
            announce_window_secs: None,
        }));
        src.reset_stats();
        let rps = if configured {
            format!("    requests_per_second: {RATE}\n")
        } else {
            String::new()
        };
        let text = format!(
            "version: 1\nconcurrency: 16\nregistries:\n  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    max_concurrent: 16\n{rps}  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\nmappings:\n{mappings}",
            src.host(),
            src.url(),
            dst.host(),
            dst.url()
        );
        let cfg = config::parse(&text, Path::new("bench.yaml"), &|_| None).expect("config");
        let registries = Registries::new(&cfg);
        let mut options = PrepareOptions::from_config(&cfg);
        options.watch_interval = None;
        let start = Instant::now();
        let plan = resolve_all(
            &cfg,
            &registries,
            &options,
            Arc::new(PrepareTracker::new(cfg.mappings.len())),
        )
        .await;
        let report = sync(
            &plan,
            &registries,
            &EngineOptions::from_settings(&cfg.engine),
            &StopSignal::default(),
        )
        .await;
        let wall = start.elapsed().as_secs_f64();
        assert_eq!(report.totals.images_synced, 36, "{}", report.render_text());
        let s = src.stats();
        let throttled = s.too_many_requests;
        let accepted = s.requests - throttled;
        let imposed = (accepted.saturating_sub(BURST as u64)) as f64 / RATE;
        println!(
            "| {} | {round} | {} | {} | {:.1}% | {:.2} s | {:.2} s | {:.2} |",
            if configured {
                "`requests_per_second: 20`"
            } else {
                "no rate set (learned from throttles)"
            },
            s.requests,
            throttled,
            100.0 * throttled as f64 / s.requests as f64,
            wall,
            imposed,
            wall / imposed
        );
    }
}
