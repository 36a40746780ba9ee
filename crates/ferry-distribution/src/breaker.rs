//! The breaker for one registry: after repeated faults it opens and answers at once without a
//! request, lets one probe through after a cool-down, and closes when the probe succeeds.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Settings for a [`Breaker`].
#[derive(Debug, Clone, Copy)]
pub struct BreakerSettings {
    /// Consecutive faults that open the breaker.
    pub threshold: u32,
    /// How long it stays open before one probe is let through.
    pub cooldown: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            threshold: 5,
            cooldown: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed { faults: u32 },
    Open { until: Instant },
    HalfOpen { probing: bool },
}

/// The breaker's public state, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

#[derive(Debug)]
pub struct Breaker {
    registry: String,
    settings: BreakerSettings,
    state: Mutex<State>,
}

/// The breaker refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerOpen;

impl Breaker {
    pub fn new(registry: impl Into<String>, settings: BreakerSettings) -> Self {
        Breaker {
            registry: registry.into(),
            settings,
            state: Mutex::new(State::Closed { faults: 0 }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// May a request go out now? In the half-open state only one probe at a time is admitted.
    pub fn admit(&self) -> Result<(), BreakerOpen> {
        let mut s = self.lock();
        match *s {
            State::Closed { .. } => Ok(()),
            State::Open { until } => {
                if Instant::now() >= until {
                    *s = State::HalfOpen { probing: true };
                    tracing::info!(registry = %self.registry, "breaker half-open: probing");
                    Ok(())
                } else {
                    Err(BreakerOpen)
                }
            }
            State::HalfOpen { probing: true } => Err(BreakerOpen),
            State::HalfOpen { probing: false } => {
                *s = State::HalfOpen { probing: true };
                Ok(())
            }
        }
    }

    /// The registry answered (any answer that is not a fault).
    pub fn record_success(&self) {
        let mut s = self.lock();
        if !matches!(*s, State::Closed { faults: 0 }) {
            if !matches!(*s, State::Closed { .. }) {
                tracing::info!(registry = %self.registry, "breaker closed");
            }
            *s = State::Closed { faults: 0 };
        }
    }

    /// The registry failed (5xx, connection refused or lost).
    pub fn record_fault(&self) {
        let mut s = self.lock();
        let open = match *s {
            State::Closed { faults } => {
                let faults = faults + 1;
                if faults >= self.settings.threshold {
                    true
                } else {
                    *s = State::Closed { faults };
                    false
                }
            }
            State::HalfOpen { .. } => true,
            State::Open { .. } => false,
        };
        if open {
            *s = State::Open {
                until: Instant::now() + self.settings.cooldown,
            };
            tracing::warn!(
                registry = %self.registry,
                cooldown_secs = self.settings.cooldown.as_secs(),
                "breaker open after repeated failures"
            );
        }
    }

    /// An attempt that was admitted ended without saying anything about the registry (a local
    /// failure, our own cancellation): a half-open probe slot is handed back.
    pub fn record_nothing(&self) {
        let mut s = self.lock();
        if let State::HalfOpen { probing: true } = *s {
            *s = State::HalfOpen { probing: false };
        }
    }

    /// Opens the breaker at once (a registry whose ping failed outright).
    pub fn trip(&self) {
        let mut s = self.lock();
        *s = State::Open {
            until: Instant::now() + self.settings.cooldown,
        };
        tracing::warn!(registry = %self.registry, "breaker open: registry unreachable");
    }

    pub fn state(&self) -> BreakerState {
        match *self.lock() {
            State::Closed { .. } => BreakerState::Closed,
            State::Open { .. } => BreakerState::Open,
            State::HalfOpen { .. } => BreakerState::HalfOpen,
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
                threshold: 3,
                cooldown: Duration::from_secs(10),
            },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_consecutive_faults_fails_fast_and_recovers_through_a_probe() {
        let b = breaker();
        b.record_fault();
        b.record_fault();
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.admit().is_ok());
        b.record_fault();
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.admit(), Err(BreakerOpen));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(b.admit().is_ok(), "one probe after the cool-down");
        assert_eq!(b.admit(), Err(BreakerOpen), "only one probe at a time");
        b.record_success();
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.admit().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_reopens() {
        let b = breaker();
        b.trip();
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(b.admit().is_ok());
        b.record_fault();
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.admit(), Err(BreakerOpen));
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_resets_the_count() {
        let b = breaker();
        b.record_fault();
        b.record_fault();
        b.record_success();
        b.record_fault();
        b.record_fault();
        assert_eq!(b.state(), BreakerState::Closed);
    }
}
