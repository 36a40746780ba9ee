//! Everything that paces and guards the requests to one registry: its retry policy, AIMD windows
//! (one, or one per action class), optional requests-per-second bucket, breaker and counters.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::breaker::{Breaker, BreakerSettings};
use crate::operation::Operation;
use crate::retry::RetryPolicy;
use crate::stats::RegistryStats;
use crate::window::{AimdWindow, Permit, WindowSettings};

/// How a registry is paced.
#[derive(Debug, Clone)]
pub struct GateSettings {
    pub max_concurrent: usize,
    /// Separate windows for reads and writes (registries that meter them separately).
    pub split_read_write: bool,
    pub requests_per_second: Option<f64>,
    pub retry: RetryPolicy,
    pub breaker: BreakerSettings,
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            max_concurrent: 16,
            split_read_write: false,
            requests_per_second: None,
            retry: RetryPolicy::default(),
            breaker: BreakerSettings::default(),
        }
    }
}

/// The pacing and protection shared by every request to one registry.
#[derive(Debug)]
pub struct RegistryGate {
    registry: String,
    pub policy: RetryPolicy,
    read: Arc<AimdWindow>,
    write: Arc<AimdWindow>,
    bucket: Option<Mutex<TokenBucket>>,
    pub breaker: Breaker,
    pub stats: RegistryStats,
}

/// A slot in the window plus the pass from the rate bucket: held for one attempt, or longer
/// when the attempt hands back a stream that is still being read.
#[derive(Debug)]
pub struct Slot {
    _permit: Permit,
}

impl RegistryGate {
    pub fn new(registry: impl Into<String>, settings: GateSettings) -> Self {
        let registry = registry.into();
        let window = WindowSettings::new(settings.max_concurrent);
        let read = AimdWindow::new(registry.clone(), window);
        let write = if settings.split_read_write {
            AimdWindow::new(format!("{registry} (writes)"), window)
        } else {
            Arc::clone(&read)
        };
        RegistryGate {
            bucket: settings
                .requests_per_second
                .filter(|r| *r > 0.0)
                .map(|r| Mutex::new(TokenBucket::new(r))),
            breaker: Breaker::new(registry.clone(), settings.breaker),
            policy: settings.retry,
            stats: RegistryStats::default(),
            registry,
            read,
            write,
        }
    }

    pub fn registry(&self) -> &str {
        &self.registry
    }

    pub fn window(&self, operation: Operation) -> &Arc<AimdWindow> {
        if operation.is_write() {
            &self.write
        } else {
            &self.read
        }
    }

    /// Waits for a window slot and a rate-bucket pass for one attempt of `operation`.
    pub async fn acquire(&self, operation: Operation) -> Slot {
        let permit = self.window(operation).acquire().await;
        if let Some(bucket) = &self.bucket {
            loop {
                let wait = {
                    let mut b = bucket.lock().unwrap_or_else(|p| p.into_inner());
                    b.take(Instant::now())
                };
                match wait {
                    None => break,
                    Some(wait) => tokio::time::sleep(wait).await,
                }
            }
        }
        Slot { _permit: permit }
    }
}

/// A requests-per-second bucket with a burst of one second's worth.
#[derive(Debug)]
struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    fn new(rate: f64) -> Self {
        let burst = rate.max(1.0);
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            last: None,
        }
    }

    /// Takes a token, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Option<Duration> {
        if let Some(last) = self.last {
            let refill = now.duration_since(last).as_secs_f64() * self.rate;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_rate_bucket_spaces_requests_after_the_burst() {
        let gate = RegistryGate::new(
            "r",
            GateSettings {
                requests_per_second: Some(10.0),
                max_concurrent: 64,
                ..GateSettings::default()
            },
        );
        let start = Instant::now();
        for _ in 0..30 {
            // Warm the window so it never limits this test.
            gate.read.on_success();
        }
        for _ in 0..30 {
            drop(gate.acquire(Operation::BlobHead).await);
        }
        let elapsed = start.elapsed();
        // 10 from the burst, then 20 more at 10 per second.
        assert!(elapsed >= Duration::from_millis(1990), "{elapsed:?}");
        assert!(elapsed < Duration::from_millis(2100), "{elapsed:?}");
    }

    #[test]
    fn split_windows_are_separate() {
        let gate = RegistryGate::new(
            "r",
            GateSettings {
                split_read_write: true,
                ..GateSettings::default()
            },
        );
        assert!(!Arc::ptr_eq(
            gate.window(Operation::BlobGet),
            gate.window(Operation::UploadFinish)
        ));
        let shared = RegistryGate::new("r", GateSettings::default());
        assert!(Arc::ptr_eq(
            shared.window(Operation::BlobGet),
            shared.window(Operation::UploadFinish)
        ));
    }
}
