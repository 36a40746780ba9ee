//! The breaker for one registry: it opens on evidence the registry is down (a failure rate over a
//! window with a minimum of requests, consecutive connect failures, a failed ping), answers at once
//! without a request while open, lets one probe through after a cool-down, and closes on success.

pub(crate) mod repository;

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Settings for a [`Breaker`].
#[derive(Debug, Clone, Copy)]
pub struct BreakerSettings {
    /// Answers older than this leave the failure-rate window.
    pub window: Duration,
    /// The failure rate is taken over the last this-many answers (inside `window`); fewer
    /// never open the breaker on the failure rate.
    pub min_requests: u32,
    /// The share of faults among those answers (0..=1) that opens it.
    pub failure_rate: f64,
    /// Consecutive connect failures (nothing reached the registry) that open it.
    pub connect_failures: u32,
    /// How long it stays open before one probe is let through.
    pub cooldown: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            window: Duration::from_secs(30),
            min_requests: 20,
            failure_rate: 0.8,
            connect_failures: 5,
            cooldown: Duration::from_secs(30),
        }
    }
}

/// What one failed attempt says about the registry's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A connection could not be opened: nothing reached the registry.
    Connect,
    /// The registry's host name did not resolve: nothing was sent (counted as a connect fault,
    /// named apart in the log).
    Unresolved,
    /// A 5xx, or a connection lost after the request went out.
    Answer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen { probing: bool },
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// The window's answers: when, and whether each was a fault.
    answers: VecDeque<(Instant, bool)>,
    connect_streak: u32,
    /// Whether the breaker last opened because the registry's host name did not resolve: what
    /// an operation it refuses then says (a DNS failure, naming the host).
    unresolved: bool,
}

/// The breaker's public state, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Requests go through; failures are being counted.
    Closed,
    /// Requests are refused without being sent until the cooldown ends.
    Open,
    /// The cooldown ended: requests go through again, and the next answers decide.
    HalfOpen,
}

/// Stops sending to one registry after repeated faults, so a dead registry fails fast instead of
/// costing every operation its attempts.
#[derive(Debug)]
pub struct Breaker {
    registry: String,
    settings: BreakerSettings,
    state: Mutex<State>,
    /// Repositories that keep answering 429 (politeness, issue 31): refused apart from the rest.
    pub(crate) repositories: repository::RepositoryThrottles,
}

/// The breaker refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerOpen;

impl Breaker {
    /// A closed breaker for `registry`.
    pub fn new(registry: impl Into<String>, settings: BreakerSettings) -> Self {
        Breaker {
            registry: registry.into(),
            settings,
            state: Mutex::new(State {
                phase: Phase::Closed,
                answers: VecDeque::new(),
                connect_streak: 0,
                unresolved: false,
            }),
            repositories: repository::RepositoryThrottles::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// May a new operation start now? In the half-open state only one probe at a time is
    /// admitted. Operations already admitted finish their own retries without asking again.
    pub fn admit(&self) -> Result<(), BreakerOpen> {
        let mut s = self.lock();
        match s.phase {
            Phase::Closed => Ok(()),
            Phase::Open { until } => {
                if Instant::now() >= until {
                    s.phase = Phase::HalfOpen { probing: true };
                    tracing::info!(registry = %self.registry, "breaker half-open: probing");
                    Ok(())
                } else {
                    Err(BreakerOpen)
                }
            }
            Phase::HalfOpen { probing: true } => Err(BreakerOpen),
            Phase::HalfOpen { probing: false } => {
                s.phase = Phase::HalfOpen { probing: true };
                Ok(())
            }
        }
    }

    fn push(&self, s: &mut State, fault: bool) {
        let now = Instant::now();
        while s
            .answers
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > self.settings.window)
        {
            s.answers.pop_front();
        }
        s.answers.push_back((now, fault));
        while s.answers.len() > self.settings.min_requests.max(1) as usize {
            s.answers.pop_front();
        }
    }

    /// The registry answered (any answer that is not a fault).
    pub(crate) fn record_success(&self) {
        let mut s = self.lock();
        self.push(&mut s, false);
        s.connect_streak = 0;
        if !matches!(s.phase, Phase::Closed) {
            tracing::info!(registry = %self.registry, "breaker closed");
            s.phase = Phase::Closed;
            s.answers.clear();
        }
    }

    /// The registry failed (5xx, connection refused or lost).
    pub(crate) fn record_fault(&self, fault: Fault) {
        let mut s = self.lock();
        self.push(&mut s, true);
        s.connect_streak = match fault {
            Fault::Connect | Fault::Unresolved => s.connect_streak.saturating_add(1),
            Fault::Answer => 0,
        };
        let reason = match s.phase {
            Phase::Open { .. } => return,
            Phase::HalfOpen { .. } => "the probe failed",
            Phase::Closed => {
                let total = s.answers.len();
                let faults = s.answers.iter().filter(|(_, f)| *f).count();
                if s.connect_streak >= self.settings.connect_failures.max(1) {
                    if fault == Fault::Unresolved {
                        "the host name did not resolve, in a row"
                    } else {
                        "connections failed in a row"
                    }
                } else if total >= self.settings.min_requests.max(1) as usize
                    && faults as f64 >= self.settings.failure_rate * total as f64
                {
                    "failure rate over the window"
                } else {
                    return;
                }
            }
        };
        s.phase = Phase::Open {
            until: Instant::now() + self.settings.cooldown,
        };
        s.unresolved = fault == Fault::Unresolved && s.connect_streak > 0;
        tracing::warn!(
            registry = %self.registry,
            cooldown_secs = self.settings.cooldown.as_secs(),
            reason,
            "breaker open: the registry looks down"
        );
    }

    /// An attempt that was admitted ended without saying anything about the registry (a local
    /// failure, our own cancellation): a half-open probe slot is handed back.
    pub(crate) fn record_nothing(&self) {
        let mut s = self.lock();
        if let Phase::HalfOpen { probing: true } = s.phase {
            s.phase = Phase::HalfOpen { probing: false };
        }
    }

    /// Whether the registry's faults look scattered: the breaker is closed and, of its last
    /// `min_requests` answers inside the window (a full window: a run's first few answers never
    /// count), fewer than half were faults. A registry that answers most requests is alive, so
    /// the retry loop waits briefly after an unknown outcome (`retry::SCATTERED_FAULT_CAP`);
    /// one failing most of them (a backend restarting) keeps the longer schedule.
    pub(crate) fn faults_scattered(&self) -> bool {
        let s = self.lock();
        if !matches!(s.phase, Phase::Closed) {
            return false;
        }
        let now = Instant::now();
        let (answers, faults) = s
            .answers
            .iter()
            .filter(|(at, _)| now.saturating_duration_since(*at) <= self.settings.window)
            .fold((0usize, 0usize), |(n, f), (_, fault)| {
                (n + 1, f + usize::from(*fault))
            });
        answers >= self.settings.min_requests.max(1) as usize && faults * 2 < answers
    }

    /// Opens the breaker at once (a registry whose ping failed outright).
    pub fn trip(&self) {
        self.trip_for(false);
    }

    /// Opens the breaker at once; `unresolved`: because the host name did not resolve (what
    /// the operations it then refuses say).
    pub(crate) fn trip_for(&self, unresolved: bool) {
        let mut s = self.lock();
        s.phase = Phase::Open {
            until: Instant::now() + self.settings.cooldown,
        };
        s.unresolved = unresolved;
        tracing::warn!(registry = %self.registry, "breaker open: registry unreachable");
    }

    /// Whether the breaker is open because the registry's host name did not resolve.
    pub(crate) fn opened_unresolved(&self) -> bool {
        let s = self.lock();
        s.unresolved && !matches!(s.phase, Phase::Closed)
    }

    /// The state now, for logs and tests.
    pub fn state(&self) -> BreakerState {
        match self.lock().phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(
            "r",
            BreakerSettings {
                min_requests: 3,
                failure_rate: 0.8,
                connect_failures: 3,
                cooldown: Duration::from_secs(10),
                ..BreakerSettings::default()
            },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn opens_on_the_failure_rate_fails_fast_and_recovers_through_a_probe() {
        let b = breaker();
        b.record_fault(Fault::Answer);
        b.record_fault(Fault::Answer);
        assert_eq!(
            b.state(),
            BreakerState::Closed,
            "below the minimum of requests"
        );
        assert!(b.admit().is_ok());
        b.record_fault(Fault::Answer);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.admit(), Err(BreakerOpen));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(b.admit().is_ok(), "one probe after the cool-down");
        assert_eq!(b.admit(), Err(BreakerOpen), "only one probe at a time");
        b.record_success();
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.admit().is_ok());
    }

    /// Scattered takes a full window (min_requests answers inside it), fewer than half of them
    /// faults, and a closed breaker; answers older than the window do not count.
    #[tokio::test(start_paused = true)]
    async fn faults_are_scattered_only_with_a_full_window_of_mostly_answers() {
        let b = Breaker::new(
            "r",
            BreakerSettings {
                min_requests: 4,
                ..BreakerSettings::default()
            },
        );
        b.record_success();
        b.record_success();
        b.record_fault(Fault::Answer);
        assert!(!b.faults_scattered(), "three answers: not a full window");
        b.record_success();
        assert!(b.faults_scattered(), "one fault in four");
        b.record_fault(Fault::Answer);
        assert!(!b.faults_scattered(), "two faults in the last four: half");
        b.record_success();
        b.record_success();
        assert!(b.faults_scattered(), "one fault in the last four");
        tokio::time::advance(Duration::from_secs(31)).await;
        assert!(
            !b.faults_scattered(),
            "the window's answers have all aged out"
        );
        b.trip();
        // The success that closes it clears the window; four more fill it again.
        for _ in 0..5 {
            b.record_success();
        }
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.faults_scattered());
        b.trip();
        assert!(
            !b.faults_scattered(),
            "open: not scattered whatever the window"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_reopens() {
        let b = breaker();
        b.trip();
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(b.admit().is_ok());
        b.record_fault(Fault::Answer);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.admit(), Err(BreakerOpen));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fault_rate_of_a_fifth_never_opens_it_however_the_faults_bunch() {
        let b = Breaker::new("r", BreakerSettings::default());
        // 1000 answers, one in five a fault, in streaks of up to ten in a row.
        for i in 0..1000u32 {
            if i % 50 < 10 {
                b.record_fault(Fault::Answer);
            } else {
                b.record_success();
            }
            tokio::time::advance(Duration::from_millis(10)).await;
            assert_eq!(b.state(), BreakerState::Closed, "opened at answer {i}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn refused_connections_in_a_row_open_it_and_an_answer_breaks_the_streak() {
        let b = Breaker::new(
            "r",
            BreakerSettings {
                min_requests: 100,
                connect_failures: 3,
                ..BreakerSettings::default()
            },
        );
        b.record_fault(Fault::Connect);
        b.record_fault(Fault::Connect);
        b.record_success();
        b.record_fault(Fault::Connect);
        b.record_fault(Fault::Connect);
        assert_eq!(b.state(), BreakerState::Closed);
        b.record_fault(Fault::Connect);
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn old_answers_leave_the_window() {
        let b = breaker();
        b.record_fault(Fault::Answer);
        b.record_fault(Fault::Answer);
        tokio::time::advance(Duration::from_secs(31)).await;
        b.record_fault(Fault::Answer);
        assert_eq!(b.state(), BreakerState::Closed, "two of three are stale");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_exactly_one_window_old_still_counts() {
        let b = breaker();
        b.record_fault(Fault::Answer);
        b.record_fault(Fault::Answer);
        tokio::time::advance(BreakerSettings::default().window).await;
        b.record_fault(Fault::Answer);
        assert_eq!(
            b.state(),
            BreakerState::Open,
            "answers leave the window only once they are older than it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_said_nothing_hands_the_probe_slot_back() {
        let b = breaker();
        b.trip();
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(b.admit().is_ok(), "the probe");
        assert_eq!(b.admit(), Err(BreakerOpen), "only one probe at a time");
        b.record_nothing();
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert!(b.admit().is_ok(), "the slot was handed back");
        assert_eq!(b.admit(), Err(BreakerOpen), "and taken again");
    }
}
