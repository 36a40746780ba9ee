//! The sync engine's own windows: `images_in_flight` and `blobs_in_flight` are ceilings and
//! floors (while work waits, every slot is busy), counted as blob GETs in flight at the source
//! under skewed latency (an ordered queue would keep slots idle behind a slow head).

mod common;

use std::time::Duration;

use common::{ALL_TAGS, RunOptions, run_sync_with};
use ferry_config::Config;
use ferry_sync::registries::Registries;
use ferry_testkit::registry::{FaultAction, FaultRule, OpKind, TestRegistry};
use tokio::time::Instant;

/// Images, one per source repository; each has its own config blob and its own layer.
const IMAGES: usize = 24;

/// Every this many images, one is in a slow repository.
const SLOW_EVERY: usize = 4;

/// Every blob GET at the source takes this long (tokio clock), so transfers overlap.
const BLOB_GET: Duration = Duration::from_millis(100);

fn config(regs: &[&TestRegistry], mappings: &str, images: usize, blobs: usize) -> Config {
    common::config()
        .setting("concurrency: 4")
        .engine(&format!(
            "images_in_flight: {images}, blobs_in_flight: {blobs}"
        ))
        .registries(regs, &["max_concurrent: 64"])
        .mappings(mappings)
        .build()
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
            common::mapping(
                format!("{}/{}", src.host(), repository(i)),
                &[format!("{}/m{i}", dst.host())],
                &[ALL_TAGS],
            )
        })
        .collect()
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
    let (warm, dst) = common::pair().await;
    for i in 0..IMAGES {
        src.seed_image(&repository(i), "t", &[format!("layer {i}").as_bytes()]);
    }
    src.faults()
        .push(FaultRule::on(OpKind::BlobGet, FaultAction::Delay(BLOB_GET)).times(u32::MAX));
    let regs = [&src, &warm, &dst];

    let warm_config = config(&regs, &mappings(&src, &warm), images, blobs);
    let registries = Registries::new(&warm_config);
    let options = RunOptions {
        registries: Some(registries.clone()),
        ..RunOptions::default()
    };
    let report = run_sync_with(&warm_config, options).await.report;
    assert_eq!(report.totals.images_synced, IMAGES as u64, "warm-up");

    let measured = config(&regs, &mappings(&src, &dst), images, blobs);
    // The engine's windows over a finished plan: the prepare phase's manifest reads happen
    // before the engine starts, and only the engine is counted.
    let plan = common::prepare_only(&measured, &registries).await;
    src.reset_stats();
    let report = common::engine_only(&measured, &registries, &plan).await;
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
