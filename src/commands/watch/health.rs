//! What `/readyz` says about a `ferry watch` process: ready while its runs finish on schedule
//! and not all fail, or while a run is in progress within its bound after a good one.
//!
//! In every case (docs/operations.md lists them): 503 before the first run ends; 503 when the
//! last finished run ended with exit code 2 or more (everything failed, or auth); 200 when the
//! last run ended 0 or 1 within twice the expected gap between runs; 200 while a run is in
//! progress and within its bound (`--run-timeout`) after such a run, however long it takes;
//! 503 otherwise (runs stalled, or stopped).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// When the last run finished and how, and the run in progress, for /readyz.
#[derive(Debug)]
pub struct Health {
    /// The longest a healthy watch goes between runs: --interval, or the shortest mapping
    /// schedule when every mapping has its own.
    interval: Mutex<Duration>,
    last: Mutex<Option<(Instant, u8)>>,
    /// The run in progress: when it started and its bound.
    running: Mutex<Option<(Instant, Duration)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Health {
    pub fn new(interval: Duration) -> Self {
        Health {
            interval: Mutex::new(interval),
            last: Mutex::new(None),
            running: Mutex::new(None),
        }
    }

    /// The expected gap between runs from now on.
    pub fn expect_runs_every(&self, gap: Duration) {
        *lock(&self.interval) = gap;
    }

    /// A run started at `at`, to be stopped after `bound`.
    pub fn started(&self, at: Instant, bound: Duration) {
        *lock(&self.running) = Some((at, bound));
    }

    /// The run in progress ended at `at` with exit code `code`.
    pub fn finished(&self, code: u8, at: Instant) {
        *lock(&self.running) = None;
        *lock(&self.last) = Some((at, code));
    }

    /// The /readyz answer at `now`: status and a line saying why.
    pub fn readiness(&self, now: Instant) -> (u16, String) {
        let last = *lock(&self.last);
        let Some((at, code)) = last else {
            return (503, "no run has finished yet".into());
        };
        let ago = now.saturating_duration_since(at).as_secs();
        if code >= 2 {
            return (
                503,
                format!("the last run, {ago}s ago, failed (exit code {code})"),
            );
        }
        let limit = lock(&self.interval).saturating_mul(2);
        if now.saturating_duration_since(at) <= limit {
            return (
                200,
                format!("last run finished {ago}s ago (exit code {code})"),
            );
        }
        if let Some((started, bound)) = *lock(&self.running) {
            let running = now.saturating_duration_since(started);
            if running <= bound {
                return (
                    200,
                    format!(
                        "a run in progress for {}s, within its bound of {}s; the last finished {ago}s ago (exit code {code})",
                        running.as_secs(),
                        bound.as_secs()
                    ),
                );
            }
        }
        (
            503,
            format!(
                "last run finished {ago}s ago, more than twice the interval ({}s)",
                limit.as_secs()
            ),
        )
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

    /// Issue 27: 200 right after a run in which everything failed, and 503 during a healthy
    /// run longer than twice the interval.
    #[tokio::test(start_paused = true)]
    async fn a_failed_run_is_not_ready_and_a_long_healthy_one_is() {
        let health = Health::new(15 * MINUTE);
        let start = Instant::now();
        health.finished(2, start);
        let (status, body) = health.readiness(start);
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("failed (exit code 2)"), "{body}");
        health.finished(4, start);
        assert_eq!(health.readiness(start).0, 503, "auth failures");
        // A good run, then one that takes longer than twice the interval, within its bound.
        health.finished(0, start);
        health.started(start + MINUTE, 60 * MINUTE);
        let (status, body) = health.readiness(start + 45 * MINUTE);
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("a run in progress for 2640s"), "{body}");
        assert_eq!(health.readiness(start + 61 * MINUTE).0, 200);
        // Past its bound it is a stalled run.
        let (status, body) = health.readiness(start + 62 * MINUTE);
        assert_eq!(status, 503, "{body}");
        // A long run after a failed one is still not ready.
        health.finished(2, start + 62 * MINUTE);
        health.started(start + 62 * MINUTE, 60 * MINUTE);
        assert_eq!(health.readiness(start + 63 * MINUTE).0, 503);
    }
}
