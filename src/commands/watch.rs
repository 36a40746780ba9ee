//! `ferry watch`: syncs a config every interval, one run at a time, re-reading the config before
//! each run, and answers /healthz and /readyz on a minimal HTTP listener until SIGINT/SIGTERM.
//!
//! /metrics serves the Prometheus metrics (`crate::metrics`).
//!
//! /healthz is 200 while the process runs. /readyz is 200 when the last run finished within
//! twice the interval, else 503 (before the first run ends, or when runs stall or stop).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, MissedTickBehavior};

use crate::cli::WatchArgs;
use crate::commands::scope;
use crate::commands::sync::{RunOptions, Signals, run_config};
use crate::exit::Exit;
use crate::metrics::WatchMetrics;
use crate::progress::Progress;

/// What /metrics answers: prometheus-client writes OpenMetrics text, which Prometheus reads.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Requests larger than this (request line and headers) are answered from what was read.
const MAX_REQUEST: usize = 8 * 1024;
/// A client gets this long to send its request and read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

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
    progress.eprint(&format!(
        "watch: listening on {local} (/healthz, /readyz, /metrics); a sync every {}s",
        args.interval.as_secs_f64()
    ));
    let health = Arc::new(Health::new(args.interval));
    let metrics = Arc::new(WatchMetrics::new());
    let server = tokio::spawn(serve(listener, Arc::clone(&health), Arc::clone(&metrics)));

    let options = RunOptions {
        dry_run: false,
        json: false,
        report: args.report.clone(),
        metrics: Some(metrics),
    };
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
        let code = run_config(&config, &options, progress).await;
        health.finished(code.code(), Instant::now());
        progress.eprint(&format!("watch: run finished with exit code {code}"));
    }
    progress.eprint("watch: signal received, stopping");
    server.abort();
    Exit::Clean
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

/// Accepts connections until aborted; each gets one answer and is closed.
async fn serve(listener: TcpListener, health: Arc<Health>, metrics: Arc<WatchMetrics>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let health = Arc::clone(&health);
                let metrics = Arc::clone(&metrics);
                tokio::spawn(async move {
                    let answered = answer(stream, &health, &metrics);
                    let _ = tokio::time::timeout(CLIENT_TIMEOUT, answered).await;
                });
            }
            Err(e) => tracing::warn!("health listener: accept failed: {e}"),
        }
    }
}

async fn answer(
    mut stream: TcpStream,
    health: &Health,
    metrics: &WatchMetrics,
) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&request);
    let line = text.lines().next().unwrap_or_default();
    let (status, body, head_only) = respond(line, health, metrics, Instant::now());
    let content_type = match (status, line.split_whitespace().nth(1)) {
        (200, Some(t)) if t.split('?').next() == Some("/metrics") => OPENMETRICS,
        _ => "text/plain; charset=utf-8",
    };
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let body = if body.ends_with('\n') {
        body
    } else {
        format!("{body}\n")
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if !head_only {
        out.push_str(&body);
    }
    stream.write_all(out.as_bytes()).await?;
    stream.shutdown().await
}

/// Status, body and whether to leave the body out (HEAD), for a request line.
fn respond(
    line: &str,
    health: &Health,
    metrics: &WatchMetrics,
    now: Instant,
) -> (u16, String, bool) {
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default();
    let target = parts.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default();
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return (405, "only GET and HEAD".into(), false);
    }
    match path {
        "/healthz" => (200, "ok".into(), head_only),
        "/readyz" => {
            let (status, body) = health.readiness(now);
            (status, body, head_only)
        }
        "/metrics" => (200, metrics.encode(), head_only),
        _ => (404, "try /healthz, /readyz or /metrics".into(), head_only),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

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

    #[tokio::test(start_paused = true)]
    async fn healthz_readyz_and_the_rest_over_http() {
        let health = Arc::new(Health::new(MINUTE));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(WatchMetrics::new());
        let server = tokio::spawn(serve(listener, Arc::clone(&health), Arc::clone(&metrics)));
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
