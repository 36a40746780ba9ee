//! Unit tests of the retry shape with scripted failures and tokio's paused clock. The same rules
//! are tested against the fault-injecting registry in tests/retry_against_testkit.rs.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::breaker::BreakerSettings;
use crate::gate::GateSettings;

fn gate_with(policy: RetryPolicy) -> RegistryGate {
    RegistryGate::new(
        "reg.test",
        GateSettings {
            retry: policy,
            breaker: BreakerSettings {
                min_requests: 1000,
                cooldown: Duration::from_secs(30),
                ..BreakerSettings::default()
            },
            ..GateSettings::default()
        },
    )
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        attempts: 4,
        base: Duration::from_millis(100),
        cap: Duration::from_secs(5),
        retry_after_cap: Duration::from_secs(60),
        deadline: Duration::from_secs(600),
        ..RetryPolicy::default()
    }
    .with_seed(7)
}

fn status(code: u16, retry_after: Option<u64>) -> Failure {
    Failure::Status {
        status: code,
        retry_after: retry_after.map(Duration::from_secs),
        code: None,
        message: None,
    }
}

/// Runs `with_retry` with a script of answers (None = success) and returns the result, the
/// number of attempts made and the virtual time it took.
async fn run(
    gate: &RegistryGate,
    op: Operation,
    script: Vec<Option<Failure>>,
) -> (Result<u32, Error>, u32, Duration) {
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let budget = gate.policy.budget();
    let result = with_retry(gate, Call::new(op, Some("repo")), &budget, |a| {
        let n = calls.fetch_add(1, Ordering::SeqCst) as usize;
        let answer = script
            .get(n)
            .cloned()
            .unwrap_or_else(|| script.last().cloned().flatten());
        async move {
            match answer {
                None => Ok(a.number),
                Some(f) => Err(f),
            }
        }
    })
    .await;
    (result, calls.load(Ordering::SeqCst), start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_429_then_success_is_retried() {
    let gate = gate_with(policy());
    let (r, calls, _) = run(
        &gate,
        Operation::ManifestGet,
        vec![Some(status(429, None)), None],
    )
    .await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(calls, 2);
    assert_eq!(gate.stats.snapshot().retries, 1);
}

#[tokio::test(start_paused = true)]
async fn a_persistent_429_gives_up_after_exactly_the_policy_attempts() {
    let gate = gate_with(policy());
    let (r, calls, _) = run(&gate, Operation::TagList, vec![Some(status(429, None))]).await;
    let e = r.unwrap_err();
    assert_eq!(calls, 4);
    assert_eq!(e.attempts, 4);
    assert_eq!(e.status(), Some(429));
}

#[tokio::test(start_paused = true)]
async fn a_persistent_throttle_with_retry_after_ends_as_throttled() {
    let gate = gate_with(policy());
    let (r, calls, _) = run(&gate, Operation::TagList, vec![Some(status(429, Some(2)))]).await;
    assert_eq!(calls, 4);
    assert_eq!(r.unwrap_err().kind, ErrorKind::Throttled { seconds: 2 });
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_no_retry_sooner() {
    let gate = gate_with(policy());
    let (r, _, elapsed) = run(
        &gate,
        Operation::BlobGet,
        vec![Some(status(503, Some(7))), None],
    )
    .await;
    assert!(r.is_ok());
    assert!(elapsed >= Duration::from_secs(7), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(8), "{elapsed:?}");
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_beyond_the_cap_ends_throttled_and_is_never_cut_short() {
    let mut p = policy();
    p.retry_after_cap = Duration::from_secs(10);
    let gate = gate_with(p);
    let (r, calls, elapsed) = run(
        &gate,
        Operation::BlobGet,
        vec![Some(status(429, Some(30))), None],
    )
    .await;
    // 30 s would fit the deadline: the cap alone ends it.
    assert_eq!(r.unwrap_err().kind, ErrorKind::Throttled { seconds: 30 });
    assert_eq!(calls, 1, "no retry sooner than the registry asked");
    assert_eq!(elapsed, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_floored_at_the_backoff() {
    let mut p = policy();
    p.base = Duration::from_secs(2);
    p.cap = Duration::from_secs(2);
    let gate = gate_with(p);
    let (r, _, elapsed) = run(
        &gate,
        Operation::BlobGet,
        vec![Some(status(429, Some(0))), None],
    )
    .await;
    assert!(r.is_ok());
    assert!(elapsed >= Duration::from_secs(2), "{elapsed:?}");
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_the_deadline_returns_throttled_at_once() {
    let mut p = policy();
    p.deadline = Duration::from_secs(30);
    p.retry_after_cap = Duration::from_secs(120);
    let gate = gate_with(p);
    let (r, calls, elapsed) = run(
        &gate,
        Operation::ManifestPutByTag,
        vec![Some(status(429, Some(90))), None],
    )
    .await;
    assert_eq!(calls, 1);
    assert_eq!(elapsed, Duration::ZERO, "nothing slept");
    assert_eq!(r.unwrap_err().kind, ErrorKind::Throttled { seconds: 90 });
}

#[tokio::test(start_paused = true)]
async fn an_unknown_outcome_is_replayed_only_for_a_safe_operation() {
    let gate = gate_with(policy());
    let (r, calls, _) = run(
        &gate,
        Operation::TagDelete,
        vec![Some(status(502, None)), None],
    )
    .await;
    assert_eq!(
        calls, 1,
        "an unsafe operation is not sent again after a 502"
    );
    assert_eq!(r.unwrap_err().status(), Some(502));

    let (r, calls, _) = run(
        &gate,
        Operation::ManifestPutByTag,
        vec![Some(status(502, None)), None],
    )
    .await;
    assert_eq!(calls, 2, "a safe operation is");
    assert!(r.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_throttle_is_replayed_even_for_an_unsafe_operation() {
    let gate = gate_with(policy());
    let (r, calls, _) = run(
        &gate,
        Operation::TagDelete,
        vec![Some(status(429, Some(1))), None],
    )
    .await;
    assert_eq!(calls, 2);
    assert!(r.is_ok());
}

#[tokio::test(start_paused = true)]
async fn permanent_answers_are_returned_at_once() {
    let gate = gate_with(policy());
    for code in [400, 401, 403, 404, 405, 409, 416] {
        let (r, calls, _) = run(&gate, Operation::BlobGet, vec![Some(status(code, None))]).await;
        assert_eq!(calls, 1, "{code}");
        assert_eq!(r.unwrap_err().status(), Some(code));
    }
}

#[tokio::test(start_paused = true)]
async fn an_inner_operations_error_is_not_retried_again() {
    let gate = gate_with(policy());
    let inner = Error::new(
        "reg.test",
        None,
        Operation::TokenExchange,
        ErrorKind::Throttled { seconds: 5 },
    )
    .with_attempts(4);
    let (r, calls, _) = run(
        &gate,
        Operation::ManifestGet,
        vec![Some(Failure::Inner(Box::new(inner.clone())))],
    )
    .await;
    assert_eq!(calls, 1);
    assert_eq!(r.unwrap_err(), inner);
}

#[tokio::test(start_paused = true)]
async fn a_walk_shares_one_budget_across_its_pages() {
    let gate = gate_with(policy());
    let budget = RetryBudget::new(3);
    let calls = AtomicU32::new(0);
    // Three pages, each failing once before it succeeds: the third page finds the budget spent
    // after its own failure only if the budget is shared.
    let mut results = Vec::new();
    for _page in 0..4 {
        let first = AtomicU32::new(0);
        let r = with_retry(&gate, Call::new(Operation::TagList, None), &budget, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            let n = first.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    Err(status(502, None))
                } else {
                    Ok(())
                }
            }
        })
        .await;
        results.push(r.is_ok());
    }
    assert_eq!(results, vec![true, true, true, false]);
    assert_eq!(calls.load(Ordering::SeqCst), 7);
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_fails_fast_and_recovers() {
    let gate = RegistryGate::new(
        "reg.test",
        GateSettings {
            retry: policy(),
            breaker: BreakerSettings {
                min_requests: 3,
                cooldown: Duration::from_secs(10),
                ..BreakerSettings::default()
            },
            ..GateSettings::default()
        },
    );
    let (r, calls, _) = run(&gate, Operation::BlobGet, vec![Some(status(502, None))]).await;
    // Three faults open it; the operation it admitted still finishes its own attempts.
    assert_eq!(calls, 4);
    assert!(matches!(
        r.unwrap_err().kind,
        ErrorKind::Status { status: 502, .. }
    ));
    assert_eq!(gate.breaker.state(), crate::breaker::BreakerState::Open);
    let (r, calls, elapsed) = run(&gate, Operation::BlobGet, vec![None]).await;
    assert_eq!(calls, 0, "no request while open");
    assert_eq!(elapsed, Duration::ZERO);
    assert_eq!(r.unwrap_err().kind, ErrorKind::BreakerOpen);
    tokio::time::advance(Duration::from_secs(10)).await;
    let (r, calls, _) = run(&gate, Operation::BlobGet, vec![None]).await;
    assert_eq!((r.is_ok(), calls), (true, 1), "a probe closes it");
    assert_eq!(gate.breaker.state(), crate::breaker::BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_shed_does_not_open_the_breaker() {
    let gate = RegistryGate::new(
        "reg.test",
        GateSettings {
            retry: RetryPolicy {
                attempts: 10,
                ..policy()
            },
            breaker: BreakerSettings {
                min_requests: 2,
                cooldown: Duration::from_secs(10),
                ..BreakerSettings::default()
            },
            ..GateSettings::default()
        },
    );
    let mut script = vec![Some(status(503, Some(1))); 6];
    script.push(None);
    let (r, calls, _) = run(&gate, Operation::BlobGet, script).await;
    assert!(r.is_ok());
    assert_eq!(calls, 7);
}

#[tokio::test(start_paused = true)]
async fn registry_wide_throttles_halve_the_window_and_one_does_not() {
    let gate = gate_with(RetryPolicy {
        attempts: 4,
        ..policy()
    });
    for _ in 0..14 {
        gate.window(Operation::BlobGet).on_success();
    }
    assert_eq!(gate.window(Operation::BlobGet).snapshot().limit, 16);
    let _ = run(
        &gate,
        Operation::BlobGet,
        vec![Some(status(429, None)), None],
    )
    .await;
    assert_eq!(
        gate.window(Operation::BlobGet).snapshot().limit,
        16,
        "one throttle is that request's"
    );
    let _ = run(
        &gate,
        Operation::BlobGet,
        vec![Some(status(429, None)), Some(status(429, None)), None],
    )
    .await;
    assert_eq!(gate.window(Operation::BlobGet).snapshot().limit, 8);
}

#[test]
fn backoff_is_jittered_grows_and_is_capped() {
    let p = RetryPolicy {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(2),
        ..RetryPolicy::default()
    }
    .with_seed(42);
    // Many clients throttled together: their first backoffs must spread, not coincide.
    let firsts: Vec<u128> = (0..1000)
        .map(|_| p.next_backoff(None).as_millis())
        .collect();
    let distinct: std::collections::BTreeSet<_> = firsts.iter().collect();
    assert!(
        distinct.len() > 150,
        "only {} distinct delays",
        distinct.len()
    );
    let min = *firsts.iter().min().unwrap();
    let max = *firsts.iter().max().unwrap();
    assert!(min >= 100 && max <= 300, "{min}..{max}");
    // Spread across the interval: no bucket of a tenth holds more than a fifth of the draws.
    let mut buckets = [0u32; 10];
    for f in &firsts {
        buckets[(((f - 100) * 10 / 201) as usize).min(9)] += 1;
    }
    assert!(buckets.iter().all(|b| *b < 200), "{buckets:?}");
    // Growth on average, never past the cap nor under the base.
    let mut sums = [0u128; 8];
    for _ in 0..500 {
        let mut prev = None;
        for sum in sums.iter_mut() {
            let d = p.next_backoff(prev);
            prev = Some(d);
            assert!(d <= Duration::from_secs(2));
            assert!(d >= Duration::from_millis(100));
            *sum += d.as_millis();
        }
    }
    assert!(sums[3] > 3 * sums[0], "{sums:?}");
    assert!(
        sums[7] / 500 > 600,
        "late retries grow toward the cap: {sums:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_at_the_type_limit_under_an_unbounded_cap_ends_throttled_without_panicking() {
    let mut p = policy();
    p.retry_after_cap = Duration::MAX;
    let gate = gate_with(p);
    let (r, calls, elapsed) = run(
        &gate,
        Operation::ManifestGet,
        vec![Some(status(429, Some(u64::MAX))), None],
    )
    .await;
    assert_eq!(
        r.unwrap_err().kind,
        ErrorKind::Throttled { seconds: u64::MAX }
    );
    assert_eq!((calls, elapsed), (1, Duration::ZERO));
}
