//! `ferry watch`: syncs a config every interval, one run at a time and each within a bound,
//! re-reading the config before each run, and serves /healthz, /readyz and /metrics until a signal.
//!
//! /metrics serves the Prometheus metrics (`crate::metrics`). /healthz is 200 while the process
//! runs. /readyz is 200 when the last run finished within twice the interval, else 503 (before
//! the first run ends, or when runs stall or stop). The listener is in `listener`.
//!
//! A run that passes its bound (`--run-timeout`) is stopped as a signal stops one: no new work
//! starts, work in flight gets [`GRACE`] (at most the bound) to finish, then the run is dropped.

mod listener;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_sync::engine::StopSignal;
use tokio::net::TcpListener;
use tokio::time::{Instant, MissedTickBehavior};

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
    let mut first = match super::load_config(path, progress) {
        Ok(c) => Some(scope::apply(c, shard, args.scope.prune, progress)),
        Err(code) => return code,
    };
    // Held for the life of the process: a cron `ferry sync` of this config waits its turn.
    let _lock = match scope::lock(path, &args.scope, shard, progress) {
        Ok(lock) => lock,
        Err(code) => return code,
    };
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
        "watch: listening on {local} (/healthz, /readyz, /metrics; at most {} connections); a sync every {}s, each stopped after {}s",
        limits.connections,
        args.interval.as_secs_f64(),
        bound.as_secs_f64()
    ));
    let health = Arc::new(Health::new(args.interval));
    let metrics = Arc::new(WatchMetrics::new());
    let server = tokio::spawn(listener::serve(
        listener,
        limits,
        Arc::clone(&health),
        Arc::clone(&metrics),
    ));

    let mut options = RunOptions {
        dry_run: false,
        json: false,
        report: args.report.clone(),
        metrics: Some(Arc::clone(&metrics)),
        stop: None,
        // What one run learned about a registry's health carries into the next: a target
        // found down is not hammered afresh every interval.
        breakers: Some(ferry_sync::registries::Breakers::default()),
    };
    let mut last_verify: Option<Instant> = None;
    let mut ticker = tokio::time::interval(args.interval);
    // A run longer than the interval delays the next; runs never overlap and never bunch up.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = signals.next() => break,
            _ = ticker.tick() => {}
        }
        let config = match first.take() {
            Some(c) => c,
            None => match super::load_config(path, progress) {
                Ok(c) => scope::apply(c, shard, args.scope.prune, progress),
                Err(_) => {
                    progress.eprint("watch: the config is invalid; skipping this run");
                    continue;
                }
            },
        };
        let stop = StopSignal::default();
        options.stop = Some(stop.clone());
        let code = bounded(
            run_config(&config, &options, progress),
            bound,
            &stop,
            progress,
        )
        .await;
        if code.cancelled {
            // The run never reached its report, so its metrics are recorded here.
            metrics.record(None, code.exit, std::time::SystemTime::now());
        }
        let code = code.exit;
        health.finished(code.code(), Instant::now());
        progress.eprint(&format!("watch: run finished with exit code {code}"));
        if let Some(every) = args.verify_every
            && last_verify.is_none_or(|at: Instant| at.elapsed() >= every)
        {
            last_verify = Some(Instant::now());
            let stop = StopSignal::default();
            let verified = bounded(deep_verify(&config, &metrics), bound, &stop, progress).await;
            progress.eprint(&format!(
                "watch: verify finished with exit code {}",
                verified.exit
            ));
        }
    }
    progress.eprint("watch: signal received, stopping");
    server.abort();
    Exit::Clean
}

/// `--verify-every`'s deep verify of `config`, its findings recorded in `metrics`. Read-only,
/// under the same registries set-up as a sync (its own breakers: a verify's failures do not
/// open a sync's breaker).
async fn deep_verify(config: &ferry_sync::config::Config, metrics: &WatchMetrics) -> Exit {
    let registries = ferry_sync::registries::Registries::new(config);
    let tracker = Arc::new(ferry_sync::prepare::PrepareTracker::new(
        config.mappings.len(),
    ));
    let mut prepare = ferry_sync::prepare::PrepareOptions::from_config(config);
    prepare.watch_interval = None;
    let options = ferry_sync::verify::VerifyOptions { deep: true };
    let report = ferry_sync::verify::run(config, &registries, &prepare, tracker, options).await;
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

/// When the last run finished, for /readyz.
#[derive(Debug)]
struct Health {
    interval: Duration,
    last: Mutex<Option<(Instant, u8)>>,
}

impl Health {
    fn new(interval: Duration) -> Self {
        Health {
            interval,
            last: Mutex::new(None),
        }
    }

    fn finished(&self, code: u8, at: Instant) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some((at, code));
    }

    /// The /readyz answer at `now`: status and a line saying why.
    fn readiness(&self, now: Instant) -> (u16, String) {
        let last = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        let Some((at, code)) = last else {
            return (503, "no run has finished yet".into());
        };
        let ago = now.saturating_duration_since(at);
        let limit = self.interval.saturating_mul(2);
        if ago <= limit {
            (
                200,
                format!(
                    "last run finished {}s ago (exit code {code})",
                    ago.as_secs()
                ),
            )
        } else {
            (
                503,
                format!(
                    "last run finished {}s ago, more than twice the interval ({}s)",
                    ago.as_secs(),
                    limit.as_secs()
                ),
            )
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

    #[tokio::test(start_paused = true)]
    async fn ready_only_while_the_last_run_is_within_twice_the_interval() {
        let health = Health::new(15 * MINUTE);
        let start = Instant::now();
        assert_eq!(health.readiness(start).0, 503, "no run yet");
        health.finished(1, start);
        let (status, body) = health.readiness(start + 30 * MINUTE);
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("exit code 1"), "{body}");
        let (status, body) = health.readiness(start + 30 * MINUTE + Duration::from_secs(1));
        assert_eq!(status, 503, "{body}");
        assert!(
            body.contains("more than twice the interval (1800s)"),
            "{body}"
        );
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
