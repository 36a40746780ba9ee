//! The one retry shape for every request ferry sends: [`with_retry`], its policy, the shared
//! budget a walk draws from, jittered backoff, `Retry-After`, one deadline, window and breaker.

pub mod classify;
pub mod policy;
pub mod retry_after;

use crate::stats::RegistryStats;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

pub use classify::{Failure, Sent, Transience};
pub use policy::{RetryBudget, RetryPolicy};

use crate::breaker::Fault;
use crate::error::{Error, ErrorKind};
use crate::evidence::Scope;
use crate::gate::{RegistryGate, Slot};
use crate::operation::Operation;
use crate::pacer::Ticket;

/// What one attempt is handed: its number (1 for the first) and access to its slot in the
/// registry's window. The loop holds the slot until the attempt's future ends; an attempt that
/// returns a stream still being read takes the slot into it with [`Attempt::keep_slot`].
#[derive(Debug)]
pub struct Attempt {
    /// Which attempt this is: 1 for the first, so a retry sees 2 or more.
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
    /// What is being done: decides replay and names the operation in errors.
    pub operation: Operation,
    /// The repository it is done on, for errors and for the pacer's per-repository holds.
    pub repository: Option<&'a str>,
    /// Overrides the policy's deadline (an absolute instant), e.g. for a caller's larger task.
    pub deadline: Option<Instant>,
    /// A run's own counters, bumped beside the registry's (a client seen through
    /// [`crate::RegistryClient::for_run`]); `None` for the registry's alone.
    pub run_stats: Option<&'a RegistryStats>,
}

impl<'a> Call<'a> {
    /// A call of `operation` on `repository`, under the policy's own deadline.
    pub fn new(operation: Operation, repository: Option<&'a str>) -> Self {
        Call {
            operation,
            repository,
            deadline: None,
            run_stats: None,
        }
    }
}

/// Whether a failed attempt sent nothing: its connection never opened (a name that did not
/// resolve, a refused connect), as the attempt saw it or as an operation ended it for good
/// (the ping stops after `PING_FAULT_ATTEMPTS` such faults).
fn sent_nothing(failure: &Failure) -> bool {
    match failure {
        Failure::Transport {
            sent: Sent::No,
            local: false,
            ..
        } => true,
        Failure::Final(ErrorKind::Transport(message)) => {
            message.starts_with(classify::UNRESOLVED) || message.starts_with(classify::UNCONNECTED)
        }
        _ => false,
    }
}

/// Runs `attempt` until it succeeds, fails for good, the budget is spent or the deadline would
/// pass. This is the only retry loop in ferry: everything that sends a request goes through it.
///
/// - Before the first attempt: the breaker (open means `BreakerOpen` at once, never retried). An
///   operation it admitted finishes its own retries. Before each attempt: a hold on the
///   repository, then a window slot, then the pacer's pass.
/// - After a failure: the classifier decides; an unknown outcome is replayed only for an
///   operation whose replay is safe.
/// - The wait is the jittered backoff, or `Retry-After` floored at the backoff: never sooner
///   than the registry asked. A `Retry-After` beyond the policy's cap, or a wait that would not
///   fit the deadline, ends the operation now: `Throttled` when the registry asked for the wait,
///   the last answer otherwise.
/// - A throttle is judged for its scope ([`crate::evidence`]): that request alone, its
///   repository (held for the wait), or the registry (window and learned rate).
///
/// # Cancel safety
///
/// Dropping the future between attempts or inside one (a caller's timeout, a stop) returns its
/// window slot at once and records nothing: no success grows the window, no failure counts
/// against the breaker, no retry is spent. A request already sent may still land on the
/// registry; every write ferry sends is either idempotent (content-addressed PUTs, offset-
/// addressed PATCHes) or re-checked before it is sent again, so a later call is safe.
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
    // A retry is counted once its attempt has gone out: one whose connection never opened (a
    // name that did not resolve, a refused connect) sent nothing again (`Totals::retries`).
    let mut retrying = false;
    loop {
        if Instant::now() >= deadline {
            return Err(fail(attempts, ErrorKind::DeadlineExceeded));
        }
        if attempts == 0 && gate.breaker.admit().is_err() {
            // Held back because the host name did not resolve: said as the DNS failure it is,
            // naming the host, not as a registry that failed.
            if gate.breaker.opened_unresolved() {
                return Err(fail(
                    attempts,
                    ErrorKind::Transport(format!(
                        "{}: {} (not asked again until the breaker's cooldown ends; nothing was sent)",
                        classify::UNRESOLVED,
                        gate.registry()
                    )),
                ));
            }
            return Err(fail(attempts, ErrorKind::BreakerOpen));
        }
        // A repository that has answered 429 to as many requests in a row as one operation may
        // send is asked nothing more for a while (`breaker::repository`): the operation ends as
        // throttled, unsent, and the registry's other repositories go on.
        if let Some(repository) = call.repository
            && let Some(wait) = gate
                .breaker
                .repositories
                .refusal(repository, policy.attempts.max(REPOSITORY_STRIKES))
        {
            tracing::debug!(
                registry = gate.registry(),
                repository,
                operation = op.name(),
                "repository keeps answering 429: not asked again for now"
            );
            return Err(fail(
                attempts,
                ErrorKind::Throttled {
                    seconds: wait.as_secs().max(1),
                },
            ));
        }
        // A request made inside another attempt on the same registry rides on that attempt's
        // slot: waiting for a second one could wait forever on a window of one.
        let nested = holds_slot(gate);
        let (slot, ticket) = if nested {
            (None, gate.pacer.ticket(op))
        } else {
            match tokio::time::timeout_at(deadline, gate.acquire(op, call.repository)).await {
                Ok((slot, ticket)) => (Some(slot), ticket),
                Err(_) => {
                    gate.breaker.record_nothing();
                    return Err(fail(attempts, ErrorKind::DeadlineExceeded));
                }
            }
        };
        attempts += 1;
        count(gate, call.run_stats, RegistryStats::request);
        let held = Arc::new(Mutex::new(slot));
        let mut holding = HOLDING.try_with(Clone::clone).unwrap_or_default();
        holding.push(gate_id(gate));
        let outcome = tokio::time::timeout_at(
            deadline,
            HOLDING.scope(
                holding,
                TICKET.scope(
                    (gate_id(gate), ticket),
                    attempt(Attempt {
                        number: attempts,
                        slot: Arc::clone(&held),
                    }),
                ),
            ),
        )
        .await;
        // The slot is released here unless the attempt kept it.
        drop(held);
        if std::mem::take(&mut retrying) && !matches!(&outcome, Ok(Err(f)) if sent_nothing(f)) {
            count(gate, call.run_stats, RegistryStats::retry);
        }
        let failure = match outcome {
            Ok(Ok(value)) => {
                gate.breaker.record_success();
                if let Some(repository) = call.repository {
                    gate.breaker.repositories.answered(repository);
                }
                gate.window(op).on_success();
                gate.pacer.on_answer(call.repository, ticket);
                return Ok(value);
            }
            Ok(Err(failure)) => failure,
            Err(_) => {
                // Our deadline cut the attempt: that is ours, not the registry's.
                gate.breaker.record_nothing();
                return Err(fail(attempts, ErrorKind::DeadlineExceeded));
            }
        };

        let scope = record(gate, call.run_stats, op, call.repository, ticket, &failure);
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

        // A registry catching up with its own writes (`classify::commit_lag`) is waited for
        // with the jittered backoff until the deadline, outside the retry budget: that is not a
        // failure, and how long it lasts is the registry's to show (issue 39).
        let lagging = matches!(failure, Failure::Lagging { .. });
        if !classify::may_retry(&failure, op) {
            return Err(last_answer(failure, attempts));
        }
        if !lagging && !budget.take() {
            let throttled = classify::transience(&failure) == Transience::Declined;
            return Err(match throttled_error(attempts) {
                Some(e) if throttled => e,
                _ => last_answer(failure, attempts),
            });
        }
        // A registry that answered with an unknown outcome (a 5xx without `Retry-After`, a
        // reply lost after the request went out) is alive and already did or did not do the
        // work: waiting longer teaches it nothing, and an uncapped chain is what made one lost-
        // replies run (issue 42) several times another. Its waits stop growing at
        // `UNKNOWN_OUTCOME_CAP`, so one operation's sleeps are bounded by its attempts; at
        // `SCATTERED_FAULT_CAP` when its other answers show the faults scattered (fewer than
        // half of its recent answers), unless the answer was a shed (503), which asks for less.
        let ceiling = if classify::transience(&failure) == Transience::Unknown {
            if !classify::is_throttle(&failure) && gate.breaker.faults_scattered() {
                SCATTERED_FAULT_CAP
            } else {
                UNKNOWN_OUTCOME_CAP
            }
        } else {
            policy.cap
        };
        let backoff = policy.next_backoff_within(previous_backoff, ceiling);
        previous_backoff = Some(backoff);
        let wait = match retry_after {
            Some(ra) => ra.max(backoff),
            None => backoff,
        };
        let beyond_cap = retry_after.is_some_and(|ra| ra > policy.retry_after_cap);
        // Checked: a hostile Retry-After under a configured huge cap must not overflow.
        let past_deadline = Instant::now()
            .checked_add(wait)
            .is_none_or(|at| at >= deadline);
        if beyond_cap || past_deadline {
            return Err(match throttled_error(attempts) {
                Some(e) => e,
                None => last_answer(failure, attempts),
            });
        }
        if let (Some(Scope::Repository), Some(_), Some(repository)) =
            (scope, retry_after, call.repository)
        {
            // This repository keeps drawing throttles: its other requests wait out the time
            // the registry named rather than each finding out with a throttle of its own. The
            // rest of the registry is not held.
            gate.pacer.hold(repository, wait);
        }
        if !lagging {
            retrying = true;
        }
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

/// The longest wait after an answer whose outcome is unknown (see `with_retry`): with the
/// default 50 ms base, the waits run 50-150 ms, up to 450 ms, then at most this each, so the
/// seven retries of one operation sleep at most 0.15 + 0.45 + 5 x 1 = 5.6 s (30 s cap: 78 s).
pub const UNKNOWN_OUTCOME_CAP: std::time::Duration = std::time::Duration::from_secs(1);

/// The longest wait after an unknown outcome (not a shed) while the registry answers most of
/// its other requests (`Breaker::faults_scattered`): seven retries sleep at most 0.15 + 6 x
/// 0.25 = 1.65 s. Measured for issue 42 with 20% of write replies lost (docs/performance.md,
/// "Lost replies: a short wait while the registry answers").
pub const SCATTERED_FAULT_CAP: std::time::Duration = std::time::Duration::from_millis(250);

/// The fewest 429s in a row that make a repository's operations end unsent, whatever the
/// policy's attempts: with `attempts: 1`, one throttle must not shut a repository for a while.
const REPOSITORY_STRIKES: u32 = 4;

tokio::task_local! {
    /// The gates whose window slot the running attempt (and so everything nested in it) holds.
    static HOLDING: Vec<usize>;
    /// The innermost running attempt's gate and pacer ticket, for a quota its answer announces.
    static TICKET: (usize, Ticket);
}

/// The pacer ticket of the attempt running on this task, when it is an attempt on `gate`.
pub fn current_ticket(gate: &RegistryGate) -> Option<Ticket> {
    TICKET
        .try_with(|(id, ticket)| (*id == gate_id(gate)).then_some(*ticket))
        .ok()
        .flatten()
}

/// Bumps one counter of the registry's, and of the run's when the call carries them.
fn count(gate: &RegistryGate, run_stats: Option<&RegistryStats>, bump: fn(&RegistryStats)) {
    bump(&gate.stats);
    if let Some(run) = run_stats {
        bump(run);
    }
}

fn gate_id(gate: &RegistryGate) -> usize {
    gate as *const RegistryGate as usize
}

fn holds_slot(gate: &RegistryGate) -> bool {
    HOLDING
        .try_with(|h| h.contains(&gate_id(gate)))
        .unwrap_or(false)
}

/// Feeds one failed attempt to the breaker, the pacer, the window and the counters. Returns
/// the scope of a throttle (`None` for any other failure).
fn record(
    gate: &RegistryGate,
    run_stats: Option<&RegistryStats>,
    op: Operation,
    repository: Option<&str>,
    ticket: Ticket,
    failure: &Failure,
) -> Option<Scope> {
    match classify::breaker_verdict(failure) {
        Some(true) => gate.breaker.record_fault(match failure {
            f @ Failure::Transport { sent: Sent::No, .. } if classify::is_unresolved_failure(f) => {
                Fault::Unresolved
            }
            Failure::Transport { sent: Sent::No, .. } => Fault::Connect,
            _ => Fault::Answer,
        }),
        Some(false) => gate.breaker.record_success(),
        None => gate.breaker.record_nothing(),
    }
    let local = matches!(
        failure,
        Failure::Transport { local: true, .. } | Failure::Final(_) | Failure::Inner(_)
    );
    if let Some(repository) = repository {
        match failure {
            Failure::Status {
                status: 429,
                retry_after,
                ..
            } => {
                gate.breaker
                    .repositories
                    .throttled(repository, *retry_after);
            }
            Failure::Status { .. } | Failure::Lagging { .. } => {
                gate.breaker.repositories.answered(repository)
            }
            _ => {}
        }
    }
    let scope = if classify::is_throttle(failure) {
        count(gate, run_stats, RegistryStats::throttled);
        let scope = gate.pacer.on_throttle(repository, ticket);
        if scope == Scope::Registry {
            // Only registry-wide evidence narrows the registry's window.
            gate.window(op).on_throttle();
        }
        Some(scope)
    } else {
        if !local {
            gate.pacer.on_answer(repository, ticket);
        }
        None
    };
    match failure {
        Failure::Status { status, .. } if *status >= 500 => {
            count(gate, run_stats, RegistryStats::server_error)
        }
        // A failure on ferry's side (this machine's, or bytes that broke off before they
        // reached the registry) is not the registry's transport error.
        Failure::Transport { local: false, .. } => {
            count(gate, run_stats, RegistryStats::transport_error)
        }
        _ => {}
    }
    scope
}

#[cfg(test)]
mod tests;
