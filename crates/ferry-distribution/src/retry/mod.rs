//! The one retry shape for every request ferry sends: [`with_retry`], its policy, the shared
//! budget a walk draws from, jittered backoff, `Retry-After`, one deadline, window and breaker.

pub mod classify;
pub mod retry_after;

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

pub use classify::{Failure, Sent, Transience};

use crate::error::{Error, ErrorKind};
use crate::gate::{RegistryGate, Slot};
use crate::operation::Operation;

/// How hard to try. Attempts count the first request: `attempts: 5` is one try and four retries.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub attempts: u32,
    /// The first backoff's lower bound, and the floor of every later one.
    pub base: Duration,
    /// No backoff sleeps longer than this.
    pub cap: Duration,
    /// No `Retry-After` is honoured beyond this.
    pub retry_after_cap: Duration,
    /// One operation, every attempt and every sleep included, ends by then.
    pub deadline: Duration,
    jitter: Jitter,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            base: Duration::from_millis(250),
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
        let base = self.base.max(Duration::from_millis(1));
        let upper = previous.map_or(base * 3, |p| p.saturating_mul(3)).max(base);
        let upper = upper.min(self.cap.max(base));
        let millis = self
            .jitter
            .between(base.as_millis() as u64, upper.as_millis() as u64);
        Duration::from_millis(millis).min(self.cap.max(base))
    }
}

#[derive(Clone)]
struct Jitter(Arc<Mutex<StdRng>>);

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

    pub fn remaining(&self) -> u32 {
        self.remaining.load(Ordering::Acquire)
    }
}

/// What one attempt is handed: its number (1 for the first) and access to its slot in the
/// registry's window. The loop holds the slot until the attempt's future ends; an attempt that
/// returns a stream still being read takes the slot into it with [`Attempt::keep_slot`].
#[derive(Debug)]
pub struct Attempt {
    pub number: u32,
    slot: Arc<Mutex<Option<Slot>>>,
}

impl Attempt {
    /// Moves the window slot out of the loop's hands, to be released when the caller drops it.
    pub fn keep_slot(&self) -> Option<Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Names the operation for errors, logs and the replay rule.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub operation: Operation,
    pub repository: Option<&'a str>,
    /// Overrides the policy's deadline (an absolute instant), e.g. for a caller's larger task.
    pub deadline: Option<Instant>,
}

impl<'a> Call<'a> {
    pub fn new(operation: Operation, repository: Option<&'a str>) -> Self {
        Call {
            operation,
            repository,
            deadline: None,
        }
    }
}

/// Runs `attempt` until it succeeds, fails for good, the budget is spent or the deadline would
/// pass. This is the only retry loop in ferry: everything that sends a request goes through it.
///
/// - Before each attempt: the breaker (open means `BreakerOpen` at once, never retried), then a
///   window slot and rate pass.
/// - After a failure: the classifier decides; an unknown outcome is replayed only for an
///   operation whose replay is safe.
/// - The wait is the jittered backoff, or `Retry-After` capped at the policy's cap and floored
///   at the backoff. A wait that would not fit the deadline ends the operation now: `Throttled`
///   when the registry asked for it, the last answer otherwise.
pub async fn with_retry<T, F, Fut>(
    gate: &RegistryGate,
    call: Call<'_>,
    budget: &RetryBudget,
    mut attempt: F,
) -> Result<T, Error>
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let policy = &gate.policy;
    let op = call.operation;
    let deadline = call
        .deadline
        .unwrap_or_else(|| Instant::now() + policy.deadline);
    let fail = |attempts: u32, kind: ErrorKind| {
        Error::new(gate.registry(), call.repository, op, kind).with_attempts(attempts)
    };
    let mut attempts = 0u32;
    let mut previous_backoff = None;
    loop {
        if Instant::now() >= deadline {
            return Err(fail(attempts, ErrorKind::DeadlineExceeded));
        }
        if gate.breaker.admit().is_err() {
            return Err(fail(attempts, ErrorKind::BreakerOpen));
        }
        // A request made inside another attempt on the same registry rides on that attempt's
        // slot: waiting for a second one could wait forever on a window of one.
        let nested = holds_slot(gate);
        let slot = if nested {
            None
        } else {
            match tokio::time::timeout_at(deadline, gate.acquire(op)).await {
                Ok(slot) => Some(slot),
                Err(_) => {
                    gate.breaker.record_nothing();
                    return Err(fail(attempts, ErrorKind::DeadlineExceeded));
                }
            }
        };
        attempts += 1;
        gate.stats.request();
        let held = Arc::new(Mutex::new(slot));
        let mut holding = HOLDING.try_with(Clone::clone).unwrap_or_default();
        holding.push(gate_id(gate));
        let outcome = tokio::time::timeout_at(
            deadline,
            HOLDING.scope(
                holding,
                attempt(Attempt {
                    number: attempts,
                    slot: Arc::clone(&held),
                }),
            ),
        )
        .await;
        // The slot is released here unless the attempt kept it.
        drop(held);
        let failure = match outcome {
            Ok(Ok(value)) => {
                gate.breaker.record_success();
                gate.window(op).on_success();
                gate.pacer.on_success();
                return Ok(value);
            }
            Ok(Err(failure)) => failure,
            Err(_) => {
                // Our deadline cut the attempt: that is ours, not the registry's.
                gate.breaker.record_nothing();
                return Err(fail(attempts, ErrorKind::DeadlineExceeded));
            }
        };

        record(gate, op, &failure);
        let retry_after = match &failure {
            Failure::Status { retry_after, .. } => *retry_after,
            _ => None,
        };
        let throttled_error = |attempts| {
            retry_after.map(|ra| {
                fail(
                    attempts,
                    ErrorKind::Throttled {
                        seconds: ra.as_secs().max(1),
                    },
                )
            })
        };
        let last_answer = |failure: Failure, attempts: u32| match failure.into_kind() {
            Ok(kind) => fail(attempts, kind),
            Err(inner) => *inner,
        };

        if !classify::may_retry(&failure, op) {
            return Err(last_answer(failure, attempts));
        }
        if !budget.take() {
            let throttled = classify::transience(&failure) == Transience::Declined;
            return Err(match throttled_error(attempts) {
                Some(e) if throttled => e,
                _ => last_answer(failure, attempts),
            });
        }
        let backoff = policy.next_backoff(previous_backoff);
        previous_backoff = Some(backoff);
        let wait = match retry_after {
            Some(ra) => ra.min(policy.retry_after_cap).max(backoff),
            None => backoff,
        };
        if Instant::now() + wait >= deadline {
            return Err(match throttled_error(attempts) {
                Some(e) => e,
                None => last_answer(failure, attempts),
            });
        }
        if retry_after.is_some() {
            // The registry named a time and this operation honours it: so does every other
            // request to the registry, rather than each finding out with a 429 of its own.
            gate.pacer.pause(wait);
        }
        gate.stats.retry();
        tracing::debug!(
            registry = gate.registry(),
            repository = call.repository.unwrap_or(""),
            operation = op.name(),
            attempt = attempts,
            wait_ms = wait.as_millis() as u64,
            reason = %failure.reason(),
            "retrying"
        );
        tokio::time::sleep(wait).await;
    }
}

tokio::task_local! {
    /// The gates whose window slot the running attempt (and so everything nested in it) holds.
    static HOLDING: Vec<usize>;
}

fn gate_id(gate: &RegistryGate) -> usize {
    gate as *const RegistryGate as usize
}

fn holds_slot(gate: &RegistryGate) -> bool {
    HOLDING
        .try_with(|h| h.contains(&gate_id(gate)))
        .unwrap_or(false)
}

/// Feeds one failed attempt to the breaker, the window and the counters.
fn record(gate: &RegistryGate, op: Operation, failure: &Failure) {
    match classify::breaker_verdict(failure) {
        Some(true) => gate.breaker.record_fault(),
        Some(false) => gate.breaker.record_success(),
        None => gate.breaker.record_nothing(),
    }
    if classify::is_throttle(failure) {
        gate.stats.throttled();
        gate.window(op).on_throttle();
        gate.pacer.on_throttle();
    }
    match failure {
        Failure::Status { status, .. } if *status >= 500 => gate.stats.server_error(),
        Failure::Transport { .. } => gate.stats.transport_error(),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
