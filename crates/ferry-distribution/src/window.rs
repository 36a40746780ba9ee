//! The AIMD concurrency window for one registry: how many requests may be in flight. It opens
//! fast from a small start, grows by one per window of successes, and halves on a throttle.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Settings for an [`AimdWindow`].
#[derive(Debug, Clone, Copy)]
pub struct WindowSettings {
    /// The window never exceeds this (the registry's `max_concurrent`).
    pub ceiling: usize,
    /// Where the window starts. Small, so a registry that is already busy is not hit by a burst.
    pub initial: usize,
    /// Throttles closer together than this are one congestion signal, not several.
    pub epoch: Duration,
}

impl WindowSettings {
    /// Settings for a window that may open to `ceiling` requests (at least 1).
    pub fn new(ceiling: usize) -> Self {
        let ceiling = ceiling.max(1);
        WindowSettings {
            ceiling,
            initial: 2.min(ceiling),
            epoch: Duration::from_secs(1),
        }
    }
}

#[derive(Debug)]
struct State {
    limit: f64,
    in_flight: usize,
    /// Before the first throttle, each success adds a whole slot (the window doubles per round).
    slow_start: bool,
    last_decrease: Option<Instant>,
    peak_in_flight: usize,
    halvings: u64,
}

/// An additive-increase, multiplicative-decrease window. Shrinking never forgets requests
/// already in flight: they finish, and new ones wait until the count is under the new limit.
#[derive(Debug)]
pub struct AimdWindow {
    name: String,
    settings: WindowSettings,
    state: Mutex<State>,
    freed: Notify,
}

/// A slot in the window, returned when dropped.
#[derive(Debug)]
pub struct Permit {
    window: Arc<AimdWindow>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut s = self.window.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        drop(s);
        self.window.freed.notify_waiters();
    }
}

/// A moment's view of a window, for logs, progress and tests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowSnapshot {
    /// Requests allowed in flight now.
    pub limit: usize,
    /// Requests in flight now.
    pub in_flight: usize,
    /// The most in flight at once so far.
    pub peak_in_flight: usize,
    /// Times the limit was halved for congestion.
    pub halvings: u64,
}

impl AimdWindow {
    /// A window named `name` (for logs) starting at `settings.initial`.
    pub fn new(name: impl Into<String>, settings: WindowSettings) -> Arc<Self> {
        Arc::new(AimdWindow {
            name: name.into(),
            state: Mutex::new(State {
                limit: settings.initial.clamp(1, settings.ceiling) as f64,
                in_flight: 0,
                slow_start: true,
                last_decrease: None,
                peak_in_flight: 0,
                halvings: 0,
            }),
            settings,
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked mid-update of plain numbers.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a slot.
    pub async fn acquire(self: &Arc<Self>) -> Permit {
        loop {
            let notified = self.freed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.lock();
                if s.in_flight < Self::slots(&s) {
                    s.in_flight += 1;
                    s.peak_in_flight = s.peak_in_flight.max(s.in_flight);
                    return Permit {
                        window: Arc::clone(self),
                    };
                }
            }
            notified.await;
        }
    }

    fn slots(s: &State) -> usize {
        (s.limit.floor() as usize).max(1)
    }

    /// A request finished well: grow the window.
    pub fn on_success(&self) {
        let mut s = self.lock();
        let before = Self::slots(&s);
        let step = if s.slow_start { 1.0 } else { 1.0 / s.limit };
        s.limit = (s.limit + step).min(self.settings.ceiling as f64);
        let after = Self::slots(&s);
        drop(s);
        if after > before {
            tracing::trace!(registry = %self.name, window = after, "window grew");
            self.freed.notify_waiters();
        }
    }

    /// The registry asked for fewer requests: halve the window, at most once per epoch, so a
    /// burst of throttles answering one burst of requests is one signal. Returns whether it halved.
    pub fn on_throttle(&self) -> bool {
        let now = Instant::now();
        let mut s = self.lock();
        s.slow_start = false;
        if let Some(last) = s.last_decrease
            && now.duration_since(last) < self.settings.epoch
        {
            return false;
        }
        let before = Self::slots(&s);
        s.limit = (s.limit / 2.0).max(1.0);
        s.last_decrease = Some(now);
        s.halvings += 1;
        let after = Self::slots(&s);
        drop(s);
        tracing::debug!(registry = %self.name, from = before, to = after, "window halved after a throttle");
        true
    }

    /// The window now.
    pub fn snapshot(&self) -> WindowSnapshot {
        let s = self.lock();
        WindowSnapshot {
            limit: Self::slots(&s),
            in_flight: s.in_flight,
            peak_in_flight: s.peak_in_flight,
            halvings: s.halvings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(ceiling: usize) -> Arc<AimdWindow> {
        AimdWindow::new("test", WindowSettings::new(ceiling))
    }

    #[tokio::test(start_paused = true)]
    async fn starts_small_and_opens_fast_to_the_ceiling() {
        let w = window(16);
        assert_eq!(w.snapshot().limit, 2);
        for _ in 0..14 {
            w.on_success();
        }
        assert_eq!(w.snapshot().limit, 16);
        for _ in 0..100 {
            w.on_success();
        }
        assert_eq!(w.snapshot().limit, 16, "never above the ceiling");
    }

    #[tokio::test(start_paused = true)]
    async fn halves_once_per_epoch_and_regrows_additively() {
        let w = window(16);
        for _ in 0..14 {
            w.on_success();
        }
        assert!(w.on_throttle());
        assert_eq!(w.snapshot().limit, 8);
        // A burst of throttles inside the same epoch is one signal.
        assert!(!w.on_throttle());
        assert!(!w.on_throttle());
        assert_eq!(w.snapshot().limit, 8);
        tokio::time::advance(Duration::from_millis(1100)).await;
        assert!(w.on_throttle());
        assert_eq!(w.snapshot().limit, 4);
        // Additive increase: about one slot per window's worth of successes.
        for _ in 0..4 {
            w.on_success();
        }
        assert_eq!(
            w.snapshot().limit,
            4,
            "four successes are not yet a whole window"
        );
        w.on_success();
        assert_eq!(w.snapshot().limit, 5);
        for _ in 0..5 {
            w.on_success();
        }
        assert_eq!(w.snapshot().limit, 6);
    }

    #[tokio::test(start_paused = true)]
    async fn never_below_one() {
        let w = window(4);
        for _ in 0..10 {
            tokio::time::advance(Duration::from_secs(2)).await;
            w.on_throttle();
        }
        assert_eq!(w.snapshot().limit, 1);
        let _p = w.acquire().await;
    }

    #[tokio::test(start_paused = true)]
    async fn shrinking_keeps_requests_in_flight_and_admits_new_ones_only_below_the_limit() {
        let w = window(8);
        for _ in 0..6 {
            w.on_success();
        }
        let mut permits = Vec::new();
        for _ in 0..8 {
            permits.push(w.acquire().await);
        }
        assert_eq!(w.snapshot().in_flight, 8);
        w.on_throttle(); // limit 4, 8 still in flight
        assert_eq!(w.snapshot().in_flight, 8);
        let w2 = Arc::clone(&w);
        let waiter = tokio::spawn(async move { w2.acquire().await });
        tokio::task::yield_now().await;
        // Four releases bring in_flight to 4 = limit: still no room.
        for _ in 0..4 {
            permits.pop();
        }
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        permits.pop();
        let p = waiter.await.unwrap();
        assert_eq!(w.snapshot().in_flight, 4);
        drop(p);
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_that_grows_wakes_a_waiter_without_any_release() {
        let w = window(4);
        let _held = [w.acquire().await, w.acquire().await];
        let w2 = Arc::clone(&w);
        let waiter = tokio::spawn(async move { w2.acquire().await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "the window of two is full");
        w.on_success();
        let _third = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("the growth woke the waiter")
            .unwrap();
        assert_eq!(w.snapshot().in_flight, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_exactly_one_epoch_after_a_halving_halves_again() {
        let w = window(16);
        for _ in 0..14 {
            w.on_success();
        }
        assert!(w.on_throttle());
        tokio::time::advance(WindowSettings::new(16).epoch).await;
        assert!(w.on_throttle(), "an epoch later is a new signal");
        assert_eq!(w.snapshot().limit, 4);
        assert_eq!(w.snapshot().halvings, 2);
    }
}
