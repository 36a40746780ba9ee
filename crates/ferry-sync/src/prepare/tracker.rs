//! Tracks the prepare phase while it runs: which mappings are in flight since when, how many are
//! done (a whole-registry mapping's expansions share its index), for the watch log, progress
//! bars and the window-floor test.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// One change of the tracker's state, recorded for tests that look at the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackerEvent {
    /// When it changed.
    pub at: Instant,
    /// Mappings being resolved then.
    pub in_flight: usize,
    /// Mappings not yet started.
    pub unstarted: usize,
    /// Mappings finished.
    pub done: usize,
}

#[derive(Debug)]
struct State {
    total: usize,
    started: usize,
    done: usize,
    /// Since when, and what it waits on now when that is not its source (a target's listing).
    in_flight: BTreeMap<(usize, String), (Instant, Option<String>)>,
    events: Vec<TrackerEvent>,
    durations: Vec<(usize, Duration)>,
}

/// What the prepare phase is doing now.
#[derive(Debug)]
pub struct PrepareTracker {
    start: Instant,
    state: Mutex<State>,
}

/// A moment's view, for the watch log and progress.
#[derive(Debug, Clone, PartialEq)]
pub struct PrepareSnapshot {
    /// Mappings in all.
    pub total: usize,
    /// Mappings finished.
    pub done: usize,
    /// Mappings being resolved now.
    pub in_flight: usize,
    /// The mapping in flight longest, named by what it waits on (its source, or the target
    /// being listed), with its seconds.
    pub slowest: Option<(String, Duration)>,
    /// Time since the prepare phase started.
    pub elapsed: Duration,
}

impl PrepareTracker {
    /// A tracker for `total` mappings, none started.
    pub fn new(total: usize) -> Self {
        PrepareTracker {
            start: Instant::now(),
            state: Mutex::new(State {
                total,
                started: 0,
                done: 0,
                in_flight: BTreeMap::new(),
                events: Vec::new(),
                durations: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(s: &mut State) {
        let e = TrackerEvent {
            at: Instant::now(),
            in_flight: s.in_flight.len(),
            unstarted: s.total - s.started,
            done: s.done,
        };
        s.events.push(e);
    }

    /// Records that mapping `index` (shown as `name`) started.
    pub fn started(&self, index: usize, name: &str) {
        let mut s = self.lock();
        s.started += 1;
        s.in_flight
            .insert((index, name.to_owned()), (Instant::now(), None));
        Self::record(&mut s);
    }

    /// Records that mapping `index` (shown as `name`) finished, with its duration.
    pub fn finished(&self, index: usize, name: &str) {
        let mut s = self.lock();
        s.done += 1;
        if let Some((since, _)) = s.in_flight.remove(&(index, name.to_owned())) {
            s.durations.push((index, since.elapsed()));
        }
        Self::record(&mut s);
    }

    /// Records that mapping `index` (shown as `name`) now waits on `what` (a target it lists),
    /// so the slowest mapping is shown by what holds it up, not always by its source.
    pub(crate) fn waiting_on(&self, index: usize, name: &str, what: &str) {
        let mut s = self.lock();
        if let Some((_, on)) = s.in_flight.get_mut(&(index, name.to_owned())) {
            *on = Some(what.to_owned());
        }
    }

    /// Adds `more` mappings to the total: a whole-registry mapping's expansions.
    pub(crate) fn grow(&self, more: usize) {
        let mut s = self.lock();
        s.total += more;
        Self::record(&mut s);
    }

    /// The state now.
    pub fn snapshot(&self) -> PrepareSnapshot {
        let s = self.lock();
        let now = Instant::now();
        PrepareSnapshot {
            total: s.total,
            done: s.done,
            in_flight: s.in_flight.len(),
            slowest: s.in_flight.iter().min_by_key(|(_, (since, _))| *since).map(
                |((_, name), (since, on))| {
                    (
                        on.clone().unwrap_or_else(|| name.clone()),
                        now.duration_since(*since),
                    )
                },
            ),
            elapsed: now.duration_since(self.start),
        }
    }

    /// How long each finished mapping took, by index.
    pub fn durations(&self) -> Vec<(usize, Duration)> {
        self.lock().durations.clone()
    }

    /// Every state change so far.
    pub fn events(&self) -> Vec<TrackerEvent> {
        self.lock().events.clone()
    }
}
