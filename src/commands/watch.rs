//! `ferry watch`: syncs a config every interval (one run at a time, each bounded, the config
//! re-read each run) and serves /healthz, /readyz, /metrics and /v1/events, plain or TLS.
//!
//! /metrics serves the Prometheus metrics (`crate::metrics`). /healthz is 200 while the process
//! runs; /readyz says whether runs finish on schedule and not all fail (`health`). The listener
//! is in `listener`, the per-mapping schedules in `schedule`.
//!
//! A run that passes its bound (`--run-timeout`) is stopped as a signal stops one: no new work
//! starts, work in flight gets [`GRACE`] (at most the bound) to finish, then the run is dropped.

mod clients;
mod endpoint;
mod events;
mod health;
mod intake;
mod jwks;
mod listener;
mod schedule;
mod tls;

pub use health::Health;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ferry_sync::StopSignal;
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::cli::WatchArgs;
use crate::commands::scope;
use crate::commands::sync::{RunOptions, Signals, run_config};
use crate::exit::Exit;
use crate::metrics::WatchMetrics;
use crate::progress::Progress;

/// How long work in flight may go on after a run passed its bound (at most the bound itself).
pub const GRACE: Duration = Duration::from_secs(30);
/// The default bound is this many intervals…
pub const RUN_BOUND_INTERVALS: u32 = 4;
/// …and at least this (the default retry deadline of one request).
pub const RUN_BOUND_FLOOR: Duration = Duration::from_secs(600);

/// The bound on one run: `--run-timeout`, else [`RUN_BOUND_INTERVALS`] intervals, at least
/// [`RUN_BOUND_FLOOR`].
pub fn run_bound(interval: Duration, flag: Option<Duration>) -> Duration {
    flag.unwrap_or_else(|| {
        interval
            .saturating_mul(RUN_BOUND_INTERVALS)
            .max(RUN_BOUND_FLOOR)
    })
}

pub async fn run(args: &WatchArgs, progress: &Progress) -> Exit {
    let shard = match scope::resolve_shard(&args.scope, &|name| std::env::var(name).ok()) {
        Ok(s) => s,
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Failed;
        }
    };
    let path = args.config.path();
    // An invalid config at start is exit 3; later, a bad edit skips runs until it is fixed.
    let mut current = match super::load_config(path, progress) {
        Ok(c) => match with_access(scope::apply(c, shard, args.scope.prune, progress), args) {
            Ok(c) => c,
            Err(message) => {
                progress.eprint(&format!("error: {message}"));
                return Exit::Usage;
            }
        },
        Err(code) => return code,
    };
    let mut first = Some(current.clone());
    // Held for the life of the process: a cron `ferry sync` of this config waits its turn.
    let _lock = match scope::lock(path, &args.scope, shard, progress) {
        Ok(lock) => lock,
        Err(code) => return code,
    };
    let tls = match current.listener_tls.as_ref().map(tls::acceptor).transpose() {
        Ok(tls) => tls,
        Err(message) => {
            progress.eprint(&format!("error: {}: {message}", path.display()));
            return Exit::Config;
        }
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = match TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            progress.eprint(&format!("error: cannot listen on {}: {e}", args.listen));
            return Exit::Failed;
        }
    };
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            progress.eprint(&format!("error: cannot watch for SIGINT/SIGTERM: {e}"));
            return Exit::Failed;
        }
    };
    let local = listener.local_addr().unwrap_or(args.listen);
    let bound = run_bound(args.interval, args.run_timeout);
    let limits = listener::Limits::for_open_files(listener::open_file_limit());
    progress.eprint(&format!(
        "watch: listening on {local} ({scheme}: /healthz, /readyz, /metrics, /v1/events; at most {} connections); a sync every {}s, each stopped after {}s",
        limits.connections,
        args.interval.as_secs_f64(),
        bound.as_secs_f64()
    ));
    let health = Arc::new(Health::new(args.interval));
    let metrics = Arc::new(WatchMetrics::new());
    let queue = current
        .events
        .as_ref()
        .map_or(ferry_config::DEFAULT_EVENTS_QUEUE, |e| e.queue);
    let state_dir = scope::state_dir(path, &args.scope, shard, current.state_dir.as_deref());
    let state_dir_named = args.scope.state_dir.is_some() || current.state_dir.is_some();
    // Accepted events are journaled there before their answer and replayed after a restart.
    let journal = match ferry_store::event_journal::EventJournal::open(&state_dir, queue) {
        Ok(j) => Some(j),
        Err(e) => {
            progress.eprint(&format!(
                "watch: warning: {e}: accepted events are kept in memory only (not replayed after a restart)"
            ));
            None
        }
    };
    let (intake, queued) = intake::Intake::with(queue, journal, Some(Arc::clone(&metrics)));
    intake.set_config(&current);
    let replayed = intake.replay().await;
    if replayed > 0 {
        progress.eprint(&format!(
            "watch: {replayed} event syncs queued from the journal (accepted before a restart)"
        ));
    }
    let server = tokio::spawn(listener::serve_all(
        listener,
        limits,
        Arc::clone(&health),
        Arc::clone(&metrics),
        Some(Arc::clone(&intake)),
        tls,
    ));
    // One set of clients for the process (what they learned carries from run to run; a
    // registry one run found down is not hammered afresh by the next), made again only when
    // the config's `registries:` change.
    let clients = Arc::new(clients::Clients::new(
        &current,
        ferry_sync::registries::Breakers::default(),
    ));
    let event_syncs = event_syncs(
        Arc::clone(&intake),
        queued,
        Arc::clone(&clients),
        progress.quieted(),
        Arc::clone(&metrics),
    );

    let mut options = RunOptions {
        dry_run: false,
        json: false,
        report: args.report.report.clone(),
        metrics: Some(Arc::clone(&metrics)),
        stop: None,
        copy: None,
        registries: None,
        // Each periodic run records its uploads there (its own view of the shared clients).
        state_dir: Some(state_dir.clone()),
        state_dir_named,
        every_host: None,
        command: "watch",
        digestfile: None,
        tag_cache: super::sync::TagCacheUse::of(args.scope.no_cache),
    };
    // Each mapping runs on its own schedule (`interval:`/`schedule:`) or every --interval; a
    // run syncs the mappings due, so runs never overlap and a long one never makes a burst.
    let mut due = schedule::Due::new(args.interval);
    let mut last_verify: Option<Instant> = None;
    let periodic = async {
        loop {
            let wait = due
                .next_wake(&current, SystemTime::now())
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            // Waits for a signal until the next mapping is due.
            if tokio::time::timeout(wait, signals.next()).await.is_ok() {
                break;
            }
            let config = match first.take() {
                Some(c) => c,
                None => match super::load_config(path, progress)
                    .map_err(|_| ())
                    .and_then(|c| {
                        with_access(scope::apply(c, shard, args.scope.prune, progress), args)
                            .map_err(|message| progress.eprint(&format!("error: {message}")))
                    }) {
                    Ok(c) => c,
                    Err(()) => {
                        progress.eprint("watch: the config is invalid; skipping this run");
                        let now = SystemTime::now();
                        let skipped = due.take_due(current.clone(), now);
                        due.ran(&skipped, now, now);
                        continue;
                    }
                },
            };
            let started = SystemTime::now();
            let run = due.take_due(config.clone(), started);
            health.expect_runs_every(due.expected_gap(&config, started));
            intake.set_config(&config);
            clients.reload(&config, &metrics);
            current = config;
            if run.mappings.is_empty() {
                continue;
            }
            if run.mappings.len() < current.mappings.len() {
                progress.eprint(&format!(
                    "watch: syncing the {} of {} mappings that are due",
                    run.mappings.len(),
                    current.mappings.len()
                ));
            }
            let stop = StopSignal::default();
            options.stop = Some(stop.clone());
            options.registries = Some(clients.registries());
            // The mappings' locks, in index order: an event sync of one of them waits for this run,
            // and this run for it; other mappings' events go on.
            let mut held = Vec::with_capacity(run.mappings.len());
            for m in &run.mappings {
                held.push(intake.mapping_lock(m.index).lock_owned().await);
            }
            health.started(Instant::now(), bound);
            let sync = run_config(&run, &options, progress);
            let code = bounded(sync, bound, &stop, progress).await;
            drop(held);
            due.ran(&run, started, SystemTime::now());
            // What the clients sent, a run cancelled at its bound included (the access logs
            // saw those requests too).
            clients.count(&metrics);
            if code.cancelled {
                // The run never reached its report, so its exit code is recorded here.
                metrics.record(None, code.exit, std::time::SystemTime::now());
            }
            let code = code.exit;
            if code == Exit::Clean {
                intake.mirrored(run.mappings.iter().map(|m| m.index)).await;
            }
            health.finished(code.code(), Instant::now());
            progress.eprint(&format!("watch: run finished with exit code {code}"));
            if let Some(every) = args.verify_every
                && last_verify.is_none_or(|at: Instant| at.elapsed() >= every)
            {
                last_verify = Some(Instant::now());
                let stop = StopSignal::default();
                let verify = deep_verify(&current, clients.registries(), &metrics);
                let verified = bounded(verify, bound, &stop, progress).await;
                clients.count(&metrics);
                progress.eprint(&format!(
                    "watch: verify finished with exit code {}",
                    verified.exit
                ));
            }
        }
    };
    // The periodic runs end on a signal; the event syncs go on beside them until then.
    tokio::select! {
        () = periodic => {}
        () = event_syncs => {}
    }
    progress.eprint("watch: signal received, stopping");
    server.abort();
    Exit::Clean
}

/// Event syncs at once (each of one tag; a mapping's own syncs take turns on its lock).
const EVENT_SYNCS_AT_ONCE: usize = 4;

/// Runs the syncs events ask for as they are queued, until aborted: each of one tag (or one
/// mapping), under its mapping's lock, on the watch's clients; its requests are counted in the
/// registry metrics, its time from first event in `ferry_event_to_synced_seconds`.
async fn event_syncs(
    intake: Arc<intake::Intake>,
    mut queued: tokio::sync::mpsc::Receiver<intake::Key>,
    clients: Arc<clients::Clients>,
    progress: Progress,
    metrics: Arc<WatchMetrics>,
) {
    let keys = futures::stream::unfold(&mut queued, |rx| async move {
        rx.recv().await.map(|key| (key, rx))
    });
    futures::StreamExt::for_each_concurrent(keys, EVENT_SYNCS_AT_ONCE, |key| {
        let (intake, clients, progress, metrics) = (&intake, &clients, &progress, &metrics);
        async move {
            let lock = intake.mapping_lock(key.mapping);
            let _held = lock.lock().await;
            let Some((received, config)) = intake.start(&key) else {
                intake.finish(&key, true, Instant::now()).await;
                return;
            };
            let options = RunOptions {
                dry_run: false,
                json: false,
                report: None,
                metrics: None,
                stop: None,
                copy: None,
                registries: Some(clients.registries()),
                // An event sync (one tag, beside the periodic runs) records nothing: two runs
                // must not share one upload's record.
                state_dir: None,
                state_dir_named: false,
                every_host: None,
                command: "watch",
                digestfile: None,
                tag_cache: super::sync::TagCacheUse::Off,
            };
            let code = run_config(&config, &options, progress).await;
            clients.count(metrics);
            let seconds = received.elapsed().as_secs_f64();
            metrics.event_synced(key.mapping, code, seconds);
            let what = key.tag.as_deref().map_or("every tag".to_owned(), |t| format!("tag {t}"));
            let again = intake
                .finish(&key, code == Exit::Clean, Instant::now())
                .await;
            let then = match (code == Exit::Clean, again) {
                (false, true) => "; queued once more (a tag announced before the registry linked it)",
                _ => "",
            };
            progress.eprint(&format!(
                "watch: event sync of mapping {} ({what}) finished with exit code {code}, {seconds:.2}s after the event{then}",
                key.mapping
            ));
        }
    })
    .await;
}

/// `config` with the command line's access flags (`--tls-verify`, `--src-*`, `--dest-*`, …)
/// written into its registries' entries, so the watch's kept clients and its event syncs see
/// them alike.
fn with_access(
    mut config: ferry_config::Config,
    args: &WatchArgs,
) -> Result<ferry_config::Config, String> {
    let access = super::access::for_config(&config, &args.tls, &args.src, &args.dest)?;
    access.apply_to_config(&mut config);
    Ok(config)
}

/// A deep verify of `config` (`--verify-every`) on the watch's clients, its findings recorded
/// in `metrics`.
async fn deep_verify(
    config: &ferry_config::Config,
    registries: ferry_sync::registries::Registries,
    metrics: &WatchMetrics,
) -> Exit {
    /// Draws nothing, and keeps the prepare phase from logging lines of its own.
    struct Quiet;
    impl ferry_sync::run::RunObserver for Quiet {}
    let mut ctx = ferry_sync::run::RunContext::new(config);
    ctx.registries = registries;
    ctx.progress.observer = Some(Arc::new(Quiet));
    let report = ferry_sync::run::Run::new(config.clone(), ctx)
        .verify(true)
        .await;
    metrics.record_verify(&report, std::time::SystemTime::now());
    super::verify::exit_for(&report)
}

/// How a bounded run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounded {
    exit: Exit,
    /// Whether the run was dropped before it finished (and wrote its report).
    cancelled: bool,
}

/// Runs `run` for at most `bound`: past it, `stop` is set (no new work starts) and work in
/// flight gets [`GRACE`] (at most `bound`) to finish before the run is dropped. A run stopped
/// at its bound ends with at least [`Exit::Partial`]; one dropped, with [`Exit::Failed`].
async fn bounded(
    run: impl Future<Output = Exit>,
    bound: Duration,
    stop: &StopSignal,
    progress: &Progress,
) -> Bounded {
    tokio::pin!(run);
    if let Ok(exit) = tokio::time::timeout(bound, &mut run).await {
        return Bounded {
            exit,
            cancelled: false,
        };
    }
    let grace = GRACE.min(bound);
    stop.stop();
    progress.eprint(&format!(
        "watch: the run passed its bound of {}s (--run-timeout): starting no new work, {}s for work in flight",
        bound.as_secs_f64(),
        grace.as_secs_f64()
    ));
    match tokio::time::timeout(grace, &mut run).await {
        Ok(exit) => Bounded {
            exit: exit.max(Exit::Partial),
            cancelled: false,
        },
        Err(_) => {
            progress.eprint(&format!(
                "watch: the run was still going {}s after its bound: cancelled; the next run starts on schedule",
                grace.as_secs_f64()
            ));
            Bounded {
                exit: Exit::Failed,
                cancelled: true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    /// A run that honours its stop, and says when it saw it.
    async fn stops_when_told(stop: StopSignal) -> Exit {
        while !stop.is_stopped() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Exit::Clean
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_within_its_bound_keeps_its_code() {
        let (stop, progress) = (
            StopSignal::default(),
            Progress::new(crate::cli::ProgressMode::None, false),
        );
        let quick = async {
            tokio::time::sleep(Duration::from_secs(59)).await;
            Exit::Auth
        };
        let out = bounded(quick, MINUTE, &stop, &progress).await;
        assert_eq!(
            out,
            Bounded {
                exit: Exit::Auth,
                cancelled: false
            }
        );
        assert!(!stop.is_stopped());
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_past_its_bound_is_stopped_then_cancelled_after_the_grace() {
        let progress = Progress::new(crate::cli::ProgressMode::None, false);
        // One that stops when told ends within the grace: at least partial, not cancelled.
        let stop = StopSignal::default();
        let start = Instant::now();
        let out = bounded(stops_when_told(stop.clone()), MINUTE, &stop, &progress).await;
        assert_eq!(
            out,
            Bounded {
                exit: Exit::Partial,
                cancelled: false
            }
        );
        assert!(start.elapsed() >= MINUTE && start.elapsed() < MINUTE + GRACE);
        // One that never ends is dropped when the grace is over.
        let stop = StopSignal::default();
        let start = Instant::now();
        let out = bounded(std::future::pending(), MINUTE, &stop, &progress).await;
        assert_eq!(
            out,
            Bounded {
                exit: Exit::Failed,
                cancelled: true
            }
        );
        assert!(stop.is_stopped());
        assert_eq!(start.elapsed(), MINUTE + GRACE);
        // The grace is at most the bound.
        let stop = StopSignal::default();
        let start = Instant::now();
        let bound = Duration::from_secs(2);
        let out = bounded(std::future::pending(), bound, &stop, &progress).await;
        assert!(out.cancelled);
        assert_eq!(start.elapsed(), 2 * bound);
    }

    #[test]
    fn the_default_bound_is_four_intervals_and_at_least_ten_minutes() {
        assert_eq!(run_bound(15 * MINUTE, None), 60 * MINUTE);
        assert_eq!(run_bound(Duration::from_secs(30), None), 10 * MINUTE);
        assert_eq!(run_bound(Duration::from_secs(30), Some(MINUTE)), MINUTE);
    }

    // On the real clock: hyper's header timeout would fire on a paused one while the test waits
    // on loopback I/O. No assertion here is about time.
    #[tokio::test]
    async fn healthz_readyz_and_the_rest_over_http() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        use tokio::net::TcpStream;
        let health = Arc::new(Health::new(MINUTE));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(WatchMetrics::new());
        let limits = listener::Limits::for_open_files(Some(1024));
        let server = tokio::spawn(listener::serve(
            listener,
            limits,
            Arc::clone(&health),
            Arc::clone(&metrics),
        ));
        let get = |request: &'static str| async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(request.as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        let out = get("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.ends_with("\r\n\r\nok\n"), "{out}");
        let out = get("GET /readyz HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 503 "), "{out}");
        health.finished(0, Instant::now());
        let out = get("GET /readyz?verbose=1 HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        let out = get("HEAD /readyz HTTP/1.1\r\n\r\n").await;
        assert!(
            out.starts_with("HTTP/1.1 200 OK\r\n") && out.ends_with("\r\n\r\n"),
            "{out}"
        );
        let out = get("GET /metrics HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(
            out.contains("Content-Type: application/openmetrics-text"),
            "{out}"
        );
        assert!(
            out.contains("# TYPE ferry_runs counter") && out.ends_with("# EOF\n"),
            "{out}"
        );
        assert!(
            get("GET /nothing HTTP/1.1\r\n\r\n")
                .await
                .starts_with("HTTP/1.1 404 ")
        );
        assert!(
            get("POST /healthz HTTP/1.1\r\n\r\n")
                .await
                .starts_with("HTTP/1.1 405 ")
        );
        server.abort();
    }
}
