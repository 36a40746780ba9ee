//! The sync engine's own windows: `images_in_flight` and `blobs_in_flight` are ceilings and
//! floors (while work waits, every slot is busy), counted as blob GETs in flight at the source
//! under skewed latency (an ordered queue would keep slots idle behind a slow head).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_sync::config::{self, Config};
use ferry_sync::engine::{EngineOptions, StopSignal, sync};
use ferry_sync::prepare::{PrepareOptions, PrepareTracker, resolve_all};
use ferry_sync::registries::Registries;
use ferry_sync::report::SyncReport;
use ferry_testkit::registry::{FaultAction, FaultRule, OpKind, TestRegistry};
use tokio::time::Instant;

/// Images, one per source repository; each has its own config blob and its own layer.
const IMAGES: usize = 24;

/// Every this many images, one is in a slow repository.
const SLOW_EVERY: usize = 4;

/// Every blob GET at the source takes this long (tokio clock), so transfers overlap.
const BLOB_GET: Duration = Duration::from_millis(100);

fn config(regs: &[&TestRegistry], mappings: &str, images: usize, blobs: usize) -> Config {
    let registries: String = regs
        .iter()
        .map(|r| {
            format!(
                "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    max_concurrent: 64\n",
                r.host(),
                r.url()
            )
        })
        .collect();
    let text = format!(
        "version: 1\nconcurrency: 4\nengine: {{ images_in_flight: {images}, blobs_in_flight: {blobs} }}\nregistries:\n{registries}mappings:\n{mappings}"
    );
    config::parse(&text, Path::new("test.yaml"), &|_| None).expect("test config parses")
}

fn repository(i: usize) -> String {
    if i.is_multiple_of(SLOW_EVERY) {
        format!("slow/r{i}")
    } else {
        format!("fast/r{i}")
    }
}

/// One mapping per image, in image order.
fn mappings(src: &TestRegistry, dst: &TestRegistry) -> String {
    (0..IMAGES)
        .map(|i| {
            format!(
                "  - source: \"{}/{}\"\n    targets: [\"{}/m{i}\"]\n    tags: {{ include: [\"*\"] }}\n",
                src.host(),
                repository(i),
                dst.host()
            )
        })
        .collect()
}

async fn run(config: &Config, registries: &Registries) -> SyncReport {
    let mut prepare = PrepareOptions::from_config(config);
    prepare.watch_interval = None;
    let tracker = Arc::new(PrepareTracker::new(config.mappings.len()));
    let plan = resolve_all(config, registries, &prepare, tracker).await;
    let options = EngineOptions::from_settings(&config.engine);
    sync(&plan, registries, &options, &StopSignal::default()).await
}

/// Syncs every image into a fresh target registry with the given windows, after a
/// warm-up sync into another registry (cold, the source's AIMD window opens at 2 and would
/// cap the engine below its own limits). Returns the source's in-flight series of the
/// measured sync, in which every request is a blob GET.
async fn measured_series(images: usize, blobs: usize) -> Vec<(Instant, usize)> {
    let src = TestRegistry::builder()
        .repo_latency("slow/", Duration::from_millis(700))
        .start()
        .await
        .unwrap();
    let warm = TestRegistry::builder().start().await.unwrap();
    let dst = TestRegistry::builder().start().await.unwrap();
    for i in 0..IMAGES {
        src.seed_image(&repository(i), "t", &[format!("layer {i}").as_bytes()]);
    }
    src.faults()
        .push(FaultRule::on(OpKind::BlobGet, FaultAction::Delay(BLOB_GET)).times(u32::MAX));
    let regs = [&src, &warm, &dst];

    let warm_config = config(&regs, &mappings(&src, &warm), images, blobs);
    let registries = Registries::new(&warm_config);
    let report = run(&warm_config, &registries).await;
    assert_eq!(report.totals.images_synced, IMAGES as u64, "warm-up");

    let measured = config(&regs, &mappings(&src, &dst), images, blobs);
    // The prepare phase's manifest reads happen before the engine; count only the engine.
    let mut prepare = PrepareOptions::from_config(&measured);
    prepare.watch_interval = None;
    let tracker = Arc::new(PrepareTracker::new(measured.mappings.len()));
    let plan = resolve_all(&measured, &registries, &prepare, tracker).await;
    src.reset_stats();
    let options = EngineOptions::from_settings(&measured.engine);
    let report = sync(&plan, &registries, &options, &StopSignal::default()).await;
    assert_eq!(report.totals.images_synced, IMAGES as u64);
    let stats = src.stats();
    assert_eq!(
        stats.op(OpKind::BlobGet),
        stats.requests,
        "the engine read only blobs from the source"
    );
    assert_eq!(stats.op(OpKind::BlobGet), 2 * IMAGES as u64);
    src.in_flight_series()
}

/// `(in flight, started so far)` at every instant where fewer than `total` requests had
/// started and the number in flight (after the instant's last event) was not `expected`.
fn floor_violations(
    series: &[(Instant, usize)],
    total: usize,
    expected: usize,
) -> Vec<(usize, usize)> {
    let mut started = 0;
    let mut previous = 0;
    let mut violations = Vec::new();
    for (i, (at, in_flight)) in series.iter().enumerate() {
        if *in_flight > previous {
            started += 1;
        }
        previous = *in_flight;
        let last_at_this_instant = series.get(i + 1).is_none_or(|(next, _)| next != at);
        if last_at_this_instant && started < total && *in_flight != expected {
            violations.push((*in_flight, started));
        }
    }
    violations
}

#[tokio::test(start_paused = true)]
async fn blobs_in_flight_is_a_ceiling_and_a_floor() {
    let blobs = 4;
    let series = measured_series(64, blobs).await;
    let peak = series.iter().map(|(_, n)| *n).max().unwrap_or(0);
    assert_eq!(peak, blobs, "the ceiling");
    let violations = floor_violations(&series, 2 * IMAGES, blobs);
    assert!(
        violations.is_empty(),
        "blob slots sat idle while blobs waited: (in_flight, started) = {violations:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn images_in_flight_is_a_ceiling_and_a_floor() {
    // Each image reads its config and its layer at once: two blob GETs per image in flight.
    let images = 3;
    let series = measured_series(images, 64).await;
    let peak = series.iter().map(|(_, n)| *n).max().unwrap_or(0);
    assert_eq!(peak, 2 * images, "the ceiling");
    let violations = floor_violations(&series, 2 * IMAGES, 2 * images);
    assert!(
        violations.is_empty(),
        "image slots sat idle while images waited: (in_flight, started) = {violations:?}"
    );
}
