//! A mapping's own `concurrency:` (issue 40): a ceiling on that mapping's images in flight and
//! a floor too (while its images wait, it has that many in flight), and it takes none of the
//! engine's window it cannot use: the other mapping fills the rest of `images_in_flight`
//! while both have images waiting. Counted as blob GETs in flight at each mapping's own source.

mod common;

use std::time::Duration;

use common::{ALL_TAGS, RunOptions, run_sync_with};
use ferry_config::Config;
use ferry_sync::registries::Registries;
use ferry_testkit::registry::{FaultAction, FaultRule, OpKind, TestRegistry};
use tokio::time::Instant;

/// Images (tags) in each mapping's repository.
const IMAGES: usize = 12;
/// The engine's window.
const WINDOW: usize = 6;
/// The capped mapping's own `concurrency:`.
const CAP: usize = 2;

/// `dst` is one of `targets`, every registry of the test (one client set serves both runs).
fn config(
    capped: &TestRegistry,
    free: &TestRegistry,
    targets: [&TestRegistry; 2],
    dst: &TestRegistry,
) -> Config {
    let regs = [capped, free, targets[0], targets[1]];
    let cap = format!("concurrency: {CAP}");
    common::config()
        .engine(&format!("images_in_flight: {WINDOW}, blobs_in_flight: 64"))
        .registries(&regs, &["max_concurrent: 64"])
        .mapping(
            format!("{}/app", capped.host()),
            &[format!("{}/capped", dst.host())],
            &[ALL_TAGS, &cap],
        )
        .mapping(
            format!("{}/app", free.host()),
            &[format!("{}/free", dst.host())],
            &[ALL_TAGS],
        )
        .build()
}

async fn source() -> TestRegistry {
    let src = TestRegistry::builder().start().await.unwrap();
    for i in 0..IMAGES {
        src.seed_image(
            "app",
            &format!("t{i}"),
            &[format!("{} layer {i}", src.host()).as_bytes()],
        );
    }
    src.faults().push(
        FaultRule::on(
            OpKind::BlobGet,
            FaultAction::Delay(Duration::from_millis(100)),
        )
        .times(u32::MAX),
    );
    src
}

/// At every instant (after its last event): (capped in flight, free in flight, capped GETs
/// started so far, free GETs started so far).
fn instants(capped: &[(Instant, usize)], free: &[(Instant, usize)]) -> Vec<[usize; 4]> {
    let mut events: Vec<(Instant, usize, usize)> = capped
        .iter()
        .map(|(t, n)| (*t, 0, *n))
        .chain(free.iter().map(|(t, n)| (*t, 1, *n)))
        .collect();
    events.sort_by_key(|(t, ..)| *t);
    let (mut now, mut started) = ([0usize; 2], [0usize; 2]);
    let mut out = Vec::new();
    for (i, (at, which, n)) in events.iter().enumerate() {
        if *n > now[*which] {
            started[*which] += 1;
        }
        now[*which] = *n;
        if events.get(i + 1).is_none_or(|(next, ..)| next != at) {
            out.push([now[0], now[1], started[0], started[1]]);
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_mappings_concurrency_is_its_ceiling_and_floor_and_leaves_the_rest_of_the_window_busy() {
    let (capped, free) = (source().await, source().await);
    let (warm, dst) = common::pair().await;
    // Warm-up into another registry: cold, each source's AIMD window opens small and would cap
    // the engine below its own limits.
    let warm_config = config(&capped, &free, [&warm, &dst], &warm);
    let registries = Registries::new(&warm_config);
    let options = RunOptions {
        registries: Some(registries.clone()),
        ..RunOptions::default()
    };
    let report = run_sync_with(&warm_config, options).await.report;
    assert_eq!(report.totals.images_synced, 2 * IMAGES as u64, "warm-up");

    let measured = config(&capped, &free, [&warm, &dst], &dst);
    // The free mapping's images join the engine's queue after every capped one (its manifests
    // are read later): a cap that waited inside the window would then hold all its slots.
    free.faults().push(
        FaultRule::on(
            OpKind::ManifestGet,
            FaultAction::Delay(Duration::from_millis(50)),
        )
        .times(u32::MAX),
    );
    let plan = common::prepare_only(&measured, &registries).await;
    capped.reset_stats();
    free.reset_stats();
    let report = common::engine_only(&measured, &registries, &plan).await;
    assert_eq!(report.totals.images_synced, 2 * IMAGES as u64);
    for src in [&capped, &free] {
        assert_eq!(src.stats().op(OpKind::BlobGet), 2 * IMAGES as u64);
    }
    // Each image reads its config and its layer at once: two blob GETs per image in flight.
    let capped_series = capped.in_flight_series();
    let free_series = free.in_flight_series();
    let peak = |s: &[(Instant, usize)]| s.iter().map(|(_, n)| *n).max().unwrap_or(0);
    assert_eq!(
        peak(&capped_series),
        2 * CAP,
        "the capped mapping's ceiling"
    );
    // The floors. While the free mapping has images waiting, the window is full: the capped
    // mapping's waiting images hold no slot of it. While the capped one has images waiting, it
    // runs CAP of them, unless the window is full.
    let total = 2 * IMAGES;
    let mut idle = Vec::new();
    for [c, f, c_started, f_started] in instants(&capped_series, &free_series) {
        let full = c + f == 2 * WINDOW;
        if (f_started < total && !full) || (c_started < total && c != 2 * CAP && !full) {
            idle.push([c, f, c_started, f_started]);
        }
    }
    assert!(
        idle.is_empty(),
        "slots sat idle while images waited: [capped, free in flight, capped, free started] = {idle:?}"
    );
}
