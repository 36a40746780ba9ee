//! How hard one operation tries ([`RetryPolicy`]: attempts, backoff with jitter, caps, deadline)
//! and the retries it has left ([`RetryBudget`]); the gate holds a policy, the loop spends it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How hard to try. Attempts count the first request: `attempts: 5` is one try and four retries.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Requests at most, the first included; 1 means no retries.
    pub attempts: u32,
    /// The first backoff's lower bound, and the floor of every later one.
    pub base: Duration,
    /// No backoff sleeps longer than this.
    pub cap: Duration,
    /// No `Retry-After` is honoured beyond this.
    pub retry_after_cap: Duration,
    /// One operation, every attempt and every sleep included, ends by then.
    pub deadline: Duration,
    pub(super) jitter: Jitter,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            // Eight, not five: at one lost reply in five (the resilience bench's condition (e)),
            // a run of a few hundred writes exhausts five attempts about one run in ten (300 x
            // 0.2^5) and eight about one run in 1,300. A dead registry costs none of them: the
            // breaker refuses first attempts once the ping or the fault rate says it is down.
            attempts: 8,
            // Short: the window, the pacer and the breaker protect the registry; the backoff
            // spaces one request's attempts (docs/retry.md, "Waiting").
            base: Duration::from_millis(50),
            cap: Duration::from_secs(30),
            retry_after_cap: Duration::from_secs(120),
            deadline: Duration::from_secs(600),
            jitter: Jitter::from_entropy(),
        }
    }
}

impl RetryPolicy {
    /// A fresh budget for one operation: the retries its policy allows.
    pub fn budget(&self) -> RetryBudget {
        RetryBudget::new(self.attempts.saturating_sub(1))
    }

    /// The same policy with a seeded jitter source, for tests that look at the spread.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.jitter = Jitter::seeded(seed);
        self
    }

    /// The next backoff after `previous` (decorrelated jitter: uniform in [base, 3 × previous],
    /// capped), so requests throttled together do not come back together.
    pub fn next_backoff(&self, previous: Option<Duration>) -> Duration {
        self.next_backoff_within(previous, self.cap)
    }

    /// [`RetryPolicy::next_backoff`] under a lower ceiling (the policy's cap still applies):
    /// drawn between `base` and the ceiling, not drawn higher and clipped, so waits that reach
    /// the ceiling stay spread over it instead of piling up at it.
    pub fn next_backoff_within(&self, previous: Option<Duration>, ceiling: Duration) -> Duration {
        let base = self.base.max(Duration::from_millis(1));
        let ceiling = ceiling.min(self.cap).max(base);
        let upper = previous.map_or(base * 3, |p| p.saturating_mul(3)).max(base);
        let upper = upper.min(ceiling);
        let millis = self
            .jitter
            .between(base.as_millis() as u64, upper.as_millis() as u64);
        Duration::from_millis(millis).min(ceiling)
    }
}

#[derive(Clone)]
pub(super) struct Jitter(Arc<Mutex<StdRng>>);

impl Jitter {
    fn from_entropy() -> Self {
        Jitter(Arc::new(Mutex::new(StdRng::from_os_rng())))
    }
    fn seeded(seed: u64) -> Self {
        Jitter(Arc::new(Mutex::new(StdRng::seed_from_u64(seed))))
    }
    fn between(&self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        let mut rng = self.0.lock().unwrap_or_else(|p| p.into_inner());
        rng.random_range(low..=high)
    }
}

impl std::fmt::Debug for Jitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Jitter")
    }
}

/// Retries left for one operation, or for a whole walk (every page of a tag listing draws from
/// the same budget, so a bound per page does not become a bound only on paper).
#[derive(Debug)]
pub struct RetryBudget {
    remaining: AtomicU32,
}

impl RetryBudget {
    /// A budget of `retries` retries (not counting the first attempts).
    pub fn new(retries: u32) -> Self {
        RetryBudget {
            remaining: AtomicU32::new(retries),
        }
    }

    /// Takes one retry, if any is left.
    pub fn take(&self) -> bool {
        self.remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| r.checked_sub(1))
            .is_ok()
    }

    /// Retries not yet taken.
    pub fn remaining(&self) -> u32 {
        self.remaining.load(Ordering::Acquire)
    }
}
