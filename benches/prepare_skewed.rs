//! Benchmark: the prepare phase over a skewed registry (a deep, slow repository placed every
//! eighth mapping among shallow ones), at concurrency 1, 8, 16 and 32, in real time.
//!
//! Prints the wall time and its ratio to the lower bound max(longest mapping, total work /
//! concurrency), where the work of each mapping is measured in the serial run. An ordered queue
//! shows here as a ratio far above 1 (the head holds the window); a window that refills on
//! completion stays near 1. Run: `cargo bench --bench prepare_skewed`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_config as config;
use ferry_sync::PrepareTracker;
use ferry_sync::plan::Plan;
use ferry_sync::registries::Registries;
use ferry_sync::run::{Run, RunContext, RunObserver};

/// Keeps the prepare phase's tracker (to read its durations) and draws nothing.
#[derive(Default)]
struct Keep(std::sync::Mutex<Option<Arc<PrepareTracker>>>);

impl RunObserver for Keep {
    fn preparing(&self, tracker: &Arc<PrepareTracker>) {
        *self.0.lock().unwrap() = Some(Arc::clone(tracker));
    }
}

/// The prepare phase alone over `cfg` with `registries`, and the tracker that counted it.
async fn prepare(cfg: &config::Config, registries: &Registries) -> (Plan, Arc<PrepareTracker>) {
    let keep = Arc::new(Keep::default());
    let mut ctx = RunContext::new(cfg);
    ctx.registries = registries.clone();
    ctx.progress.observer = Some(keep.clone());
    let plan = Run::new(cfg.clone(), ctx).plan().await;
    let tracker = keep
        .0
        .lock()
        .unwrap()
        .take()
        .expect("the run reported its prepare phase");
    (plan, tracker)
}
use ferry_testkit::registry::{OCI_MANIFEST, TestRegistry};

const MAPPINGS: usize = 95;
const DEEP_EVERY: usize = 8;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let reg = TestRegistry::builder()
        .page_size(5)
        .repo_latency("deep/", Duration::from_millis(40))
        .repo_latency("shallow/", Duration::from_millis(4))
        .start()
        .await
        .expect("test registry starts");
    let mut yaml = String::new();
    for i in 0..MAPPINGS {
        let (repo, tags) = if i % DEEP_EVERY == 0 {
            (format!("deep/r{i}"), 40)
        } else {
            (format!("shallow/r{i}"), 2)
        };
        let digest = reg.seed_image(&repo, "t0", &[format!("layer {i}").as_bytes()]);
        let (_, bytes) = reg.manifest(&repo, &digest).expect("seeded");
        for t in 1..tags {
            reg.seed_manifest(&repo, &format!("t{t}"), OCI_MANIFEST, &bytes);
        }
        yaml.push_str(&format!(
            "  - source: \"{h}/{repo}\"\n    targets: [\"{h}/mirror/r{i}\"]\n    tags: {{ include: [\"*\"] }}\n",
            h = reg.host()
        ));
    }

    println!(
        "prepare phase, skewed registry: {MAPPINGS} mappings, a deep repository (40 tags in 8 pages, 40 ms a request) every {DEEP_EVERY}th, the rest shallow (2 tags, 4 ms a request)"
    );
    println!();
    println!("| concurrency | wall time | lower bound | ratio |");
    println!("|---:|---:|---:|---:|");
    let mut work: Vec<Duration> = Vec::new();
    for concurrency in [1usize, 8, 16, 32] {
        let text = format!(
            "version: 1\nconcurrency: {concurrency}\nregistries:\n  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    max_concurrent: 64\nmappings:\n{yaml}",
            reg.host(),
            reg.url()
        );
        let cfg = config::parse(&text, Path::new("bench.yaml"), &|_| None).expect("config");
        let registries = Registries::new(&cfg);
        // Warm the AIMD window so it is not what limits the run.
        let _ = prepare(&cfg, &registries).await;
        let start = Instant::now();
        let (plan, tracker) = prepare(&cfg, &registries).await;
        let wall = start.elapsed();
        assert_eq!(plan.failed().count(), 0, "every mapping resolves");
        if concurrency == 1 {
            let mut d = tracker.durations();
            d.sort_by_key(|(i, _)| *i);
            work = d.into_iter().map(|(_, t)| t).collect();
        }
        let total: Duration = work.iter().sum();
        let longest = work.iter().max().copied().unwrap_or_default();
        let bound = longest.max(total / concurrency as u32);
        println!(
            "| {concurrency} | {:.2} s | {:.2} s | {:.2} |",
            wall.as_secs_f64(),
            bound.as_secs_f64(),
            wall.as_secs_f64() / bound.as_secs_f64()
        );
    }
}
