//! Request pacing for one registry: the configured requests-per-second, the quota the registry
//! announces in `ratelimit-*` headers, a rate learned from registry-wide throttles, and holds.
//!
//! Every signal is scoped to what it governs (docs/retry.md, "What a throttle governs"): a
//! `Retry-After` delays its own request, a repository that keeps drawing throttles holds only its
//! own requests, and only registry-wide evidence (announced headers, or throttles across the
//! registry judged by [`Evidence`]) slows the registry.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::evidence::{Evidence, Scope};
use crate::operation::Operation;

/// Registry-wide cuts closer together than this are one signal.
const EPOCH: Duration = Duration::from_secs(1);

/// No pacing wait is longer than this at a time (a hostile header cannot park a request for
/// years; the operation's deadline still bounds the total).
const LONGEST_WAIT: Duration = Duration::from_secs(3600);

/// Slowest rate any bucket keeps, so a wait is always finite.
const SLOWEST_RATE: f64 = 1e-4;

/// No pacing wait is shorter than this: tokio's timer resolution. A shortfall of a token that
/// rounds to no time at all would otherwise be waited for with a sleep that ends at once, and
/// on a clock that has not moved (tokio's paused clock, or two reads within one tick) the
/// bucket would never refill: `admit` would spin forever.
const SHORTEST_WAIT: Duration = Duration::from_millis(1);

/// An announced quota is spent at this share of its rate: our clock and the registry's never
/// refill in step.
const ANNOUNCED_SHARE: f64 = 0.95;

/// The window a quota is assumed to cover when the registry names none (`w=`).
const DEFAULT_QUOTA_WINDOW: Duration = Duration::from_secs(60);

/// Fewer accepted answers than this in the evidence window teach no rate.
const MIN_HISTORY: usize = 8;
/// Registry-wide throttles in the window needed to learn a rate from less than an [`EPOCH`] of
/// answers (the opening of a run). So early, three throttles among a dozen answers are as often
/// a fault share's chance as a limit (issue 42's S1: three of seventeen at a 5% share, paced at
/// 12.6/s for 2.9 s), while a limit just hit refuses everything past it, so two more cost a
/// real limit two throttles. The registry-wide verdict itself still comes at the third.
const OPENING_THROTTLES: usize = 5;
/// After a registry-wide throttle the learned rate is this share of what the registry accepted.
const LEARNED_SHARE: f64 = 0.9;
/// Each further registry-wide throttle (once per epoch) cuts the learned rate to this share.
const LEARNED_CUT: f64 = 0.8;
/// Recovery starts after this long without a registry-wide throttle.
const QUIET: Duration = Duration::from_secs(1);
/// Below the estimate of the registry's limit (times [`LEARNED_SHARE`]: sending right at a
/// limit draws a steady trickle of throttles), each success multiplies the rate by this: a
/// rate cut by a momentary storm comes back within a few dozen requests.
const RECOVERY_FACTOR: f64 = 1.05;
/// Probing past the estimate starts only after this long without a registry-wide throttle.
const LONG_QUIET: Duration = Duration::from_secs(5);
/// Past the estimate, each success multiplies the rate by this (probing for a higher limit;
/// the first throttle ends the probe, so an overshoot costs one throttle).
const PROBE_FACTOR: f64 = 1.02;
/// Throttles of requests admitted under a learned rate, at or below what the registry had
/// accepted, that refute it: pacing below a limit stops its throttles, so throttles that go on
/// at a scattered share were faults all along, and the learned rate is dropped.
const REFUTING_THROTTLES: u32 = 2;

/// A token bucket on the tokio clock.
#[derive(Debug, Clone)]
struct Bucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: f64, capacity: f64, tokens: f64, now: Instant) -> Self {
        let rate = sane(rate).max(SLOWEST_RATE);
        let capacity = sane(capacity).max(1.0);
        Bucket {
            rate,
            capacity,
            tokens: sane(tokens).clamp(0.0, capacity),
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        self.last = now;
    }

    /// How long until a token is there (`None`: one is there now).
    fn wait(&mut self, now: Instant) -> Option<Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            None
        } else {
            let secs = (1.0 - self.tokens) / self.rate;
            let wait =
                Duration::try_from_secs_f64(secs).map_or(LONGEST_WAIT, |d| d.min(LONGEST_WAIT));
            Some(wait.max(SHORTEST_WAIT))
        }
    }

    fn take(&mut self) {
        self.tokens -= 1.0;
    }
}

/// A finite, non-negative number (hostile input arrives here as huge or odd floats).
fn sane(x: f64) -> f64 {
    if x.is_finite() { x.max(0.0) } else { 0.0 }
}

/// Half a second's worth: a registry's own bucket and ours never refill in step, and a full
/// second's burst on top of a full rate lands right at its limit.
fn configured_burst(rate: f64) -> f64 {
    (rate / 2.0).max(1.0)
}

/// What a registry announced about its quota (`ratelimit-limit: 100;w=21600`,
/// `ratelimit-remaining: 76;w=21600`, as Docker Hub sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Requests the window allows in all.
    pub limit: u64,
    /// Requests still allowed in the current window.
    pub remaining: u64,
    /// How long the quota's window lasts (`w=` seconds).
    pub window: Duration,
}

#[derive(Debug)]
struct Announced {
    bucket: Bucket,
    /// Operations whose answers came without the headers: the quota does not meter them
    /// (Docker Hub's blob requests). Every other operation draws from it, from the first
    /// announcement on, before its own first answer.
    unmetered: BTreeSet<Operation>,
}

#[derive(Debug)]
struct Learned {
    bucket: Bucket,
    /// What the registry accepted when it last throttled registry-wide: its limit, as seen.
    estimate: f64,
    last_cut: Instant,
    /// Admissions before the last cut: a throttle of a later one was sent under this rate.
    cut_admission: u64,
    /// Scattered throttles of requests sent under this rate (see [`REFUTING_THROTTLES`]).
    throttled_since_cut: u32,
}

#[derive(Debug)]
struct State {
    configured: Option<Bucket>,
    announced: Option<Announced>,
    learned: Option<Learned>,
    evidence: Evidence,
    /// Repositories held until an instant: each kept drawing throttles with a `Retry-After`.
    holds: HashMap<String, Instant>,
    /// Metered requests admitted so far: a quota report is corrected by those admitted after
    /// the request it answers.
    metered_admitted: u64,
    /// Requests admitted so far.
    admitted: u64,
}

/// Paces the requests to one registry. See the module doc for which signal governs what.
#[derive(Debug)]
pub struct Pacer {
    registry: String,
    state: Mutex<State>,
}

/// What [`Pacer::admit`] hands an attempt: its place in the order of metered admissions, for
/// the quota report its answer may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// The operation admitted: decides whether a quota report on its answer applies to it.
    pub operation: Operation,
    metered_admitted: u64,
    /// Its place among every admission (a ticket that rides on another's slot shares the count).
    admission: u64,
}

impl Pacer {
    /// A pacer for `registry`, with a configured bucket when `requests_per_second` is a positive
    /// number.
    pub fn new(registry: &str, requests_per_second: Option<f64>) -> Self {
        let now = Instant::now();
        let configured = requests_per_second
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(|r| Bucket::new(r, configured_burst(r), configured_burst(r), now));
        Pacer {
            registry: registry.to_owned(),
            state: Mutex::new(State {
                configured,
                announced: None,
                learned: None,
                evidence: Evidence::default(),
                holds: HashMap::new(),
                metered_admitted: 0,
                admitted: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits while `repository` is held. Called before a window slot is taken, so a held
    /// repository never sits on a slot the others could use.
    pub async fn wait_for_hold(&self, repository: Option<&str>) {
        let Some(repository) = repository else {
            return;
        };
        loop {
            let until = {
                let mut s = self.lock();
                let now = Instant::now();
                match s.holds.get(repository) {
                    Some(until) if *until > now => Some(*until),
                    Some(_) => {
                        s.holds.remove(repository);
                        None
                    }
                    None => None,
                }
            };
            match until {
                Some(until) => tokio::time::sleep_until(until).await,
                None => return,
            }
        }
    }

    /// Waits until every bucket in force has a token for `operation`, then takes them.
    pub async fn admit(&self, operation: Operation) -> Ticket {
        loop {
            let wait = {
                let mut s = self.lock();
                let now = Instant::now();
                let metered = s
                    .announced
                    .as_ref()
                    .is_some_and(|a| !a.unmetered.contains(&operation));
                let State {
                    configured,
                    announced,
                    learned,
                    ..
                } = &mut *s;
                let waits = [
                    configured.as_mut().and_then(|b| b.wait(now)),
                    announced
                        .as_mut()
                        .filter(|_| metered)
                        .and_then(|a| a.bucket.wait(now)),
                    learned.as_mut().and_then(|l| l.bucket.wait(now)),
                ];
                let wait = waits.into_iter().flatten().max();
                if wait.is_none() {
                    if let Some(b) = configured.as_mut() {
                        b.take();
                    }
                    if let Some(a) = announced.as_mut().filter(|_| metered) {
                        a.bucket.take();
                    }
                    if let Some(l) = learned.as_mut() {
                        l.bucket.take();
                    }
                    if metered {
                        s.metered_admitted = s.metered_admitted.saturating_add(1);
                    }
                    s.admitted = s.admitted.saturating_add(1);
                    return Ticket {
                        operation,
                        metered_admitted: s.metered_admitted,
                        admission: s.admitted,
                    };
                }
                wait
            };
            if let Some(w) = wait {
                tokio::time::sleep(w).await;
            }
        }
    }

    /// A ticket for a request that rides on another attempt's slot (no admission of its own).
    pub fn ticket(&self, operation: Operation) -> Ticket {
        let s = self.lock();
        Ticket {
            operation,
            metered_admitted: s.metered_admitted,
            admission: s.admitted,
        }
    }

    /// The registry answered a request admitted with `ticket` without throttling it (a success,
    /// or a failure of another kind).
    ///
    /// An answer to a request sent before the last cut completes the count the cut was made
    /// from: the cut comes at the third throttle, while requests the registry accepted are still
    /// on their way back, so for one epoch each of their answers raises the learned rate to what
    /// the registry is now seen to have accepted.
    pub fn on_answer(&self, repository: Option<&str>, ticket: Ticket) {
        let mut s = self.lock();
        let now = Instant::now();
        s.evidence.record_answer(repository, now);
        let late = s.learned.as_ref().is_some_and(|l| {
            ticket.admission <= l.cut_admission && now.saturating_duration_since(l.last_cut) < EPOCH
        });
        let accepted = if late {
            s.evidence.accepted(now).1
        } else {
            0.0
        };
        if let Some(l) = s.learned.as_mut() {
            let quiet = now.saturating_duration_since(l.last_cut);
            let rate = if late {
                l.estimate = l.estimate.max(accepted);
                l.bucket.rate.max(accepted * LEARNED_SHARE)
            } else if quiet < QUIET {
                l.bucket.rate
            } else if l.bucket.rate < l.estimate * LEARNED_SHARE {
                (l.bucket.rate * RECOVERY_FACTOR).min(l.estimate * LEARNED_SHARE)
            } else if quiet >= LONG_QUIET {
                l.bucket.rate * PROBE_FACTOR
            } else {
                l.bucket.rate
            };
            l.bucket.refill(now);
            l.bucket.rate = sane(rate).max(SLOWEST_RATE);
            l.bucket.capacity = configured_burst(l.bucket.rate);
        }
    }

    /// The registry throttled a request to `repository`, admitted with `ticket`. Judges the
    /// scope; for a registry-wide throttle without a configured or announced rate, learns or
    /// cuts the rate (once per epoch); scattered throttles that go on under a learned rate
    /// refute it.
    pub fn on_throttle(&self, repository: Option<&str>, ticket: Ticket) -> Scope {
        let mut s = self.lock();
        let now = Instant::now();
        let scope = s.evidence.record_throttle(repository, now);
        if s.configured.is_some() || s.announced.is_some() {
            return scope;
        }
        if scope != Scope::Registry
            && let Some(l) = s.learned.as_mut()
            && l.bucket.rate <= l.estimate * LEARNED_SHARE
            && ticket.admission > l.cut_admission
        {
            l.throttled_since_cut += 1;
            if l.throttled_since_cut >= REFUTING_THROTTLES {
                tracing::debug!(registry = %self.registry, rate = l.bucket.rate, "throttles go on, scattered, under the learned rate: faults, not a limit; pacing dropped");
                s.learned = None;
            }
            return scope;
        }
        if scope == Scope::Request
            && s.learned
                .as_ref()
                .is_some_and(|l| l.bucket.rate > l.estimate * LEARNED_SHARE)
        {
            // A probe past the known limit drew a throttle: the probe ends, and what the
            // registry accepted meanwhile is the new estimate of its limit.
            let (_, accepted) = s.evidence.accepted(now);
            if let Some(l) = s.learned.as_mut() {
                l.estimate = l.estimate.max(accepted);
                l.bucket.refill(now);
                l.bucket.rate = (l.estimate * LEARNED_SHARE).max(1.0);
                l.last_cut = now;
            }
            return scope;
        }
        if scope != Scope::Registry {
            return scope;
        }
        let (count, accepted) = s.evidence.accepted(now);
        // The opening: too few throttles yet to tell a limit from chance.
        let opening = s.evidence.span(now) < EPOCH && s.evidence.throttles(now) < OPENING_THROTTLES;
        let rate = match s.learned.as_ref() {
            Some(l) if now.saturating_duration_since(l.last_cut) < EPOCH => return scope,
            // Too little accepted to learn a rate from: the window and each request's own wait
            // answer it.
            None if count < MIN_HISTORY => return scope,
            None if opening => return scope,
            Some(l) => (l.bucket.rate * LEARNED_CUT).min(accepted * LEARNED_SHARE),
            None => accepted * LEARNED_SHARE,
        }
        .max(1.0);
        // The estimate remembers a limit seen before, fading with each cut: a registry whose
        // limit really dropped is believed after a few cuts, a momentary storm is not.
        let estimate = s
            .learned
            .as_ref()
            .map_or(0.0, |l| l.estimate * LEARNED_CUT)
            .max(accepted)
            .max(rate);
        s.learned = Some(Learned {
            bucket: Bucket::new(rate, configured_burst(rate), 0.0, now),
            estimate,
            last_cut: now,
            cut_admission: s.admitted,
            throttled_since_cut: 0,
        });
        tracing::debug!(registry = %self.registry, rate, accepted, "pacing after registry-wide throttles");
        scope
    }

    /// Holds `repository` for `wait`: it keeps drawing throttles and the registry named a time.
    pub fn hold(&self, repository: &str, wait: Duration) {
        let mut s = self.lock();
        let until = Instant::now() + wait.min(LONGEST_WAIT);
        let entry = s.holds.entry(repository.to_owned()).or_insert(until);
        if *entry < until {
            *entry = until;
        }
        tracing::debug!(registry = %self.registry, repository, wait_ms = wait.as_millis() as u64, "repository held after repeated throttles");
    }

    /// A quota the registry announced on the answer to a request admitted with `ticket`. The
    /// pace is set from the first such answer: tokens are what remains, less the metered
    /// requests admitted after this one (the registry had not counted them yet), refilled at
    /// the quota over its window.
    pub fn observe_quota(&self, quota: Quota, ticket: Ticket) {
        if quota.limit == 0 {
            return;
        }
        let mut s = self.lock();
        let now = Instant::now();
        let after = s.metered_admitted.saturating_sub(ticket.metered_admitted);
        let window = quota.window.max(Duration::from_millis(1)).as_secs_f64();
        let rate = quota.limit as f64 / window * ANNOUNCED_SHARE;
        let tokens = quota.remaining.saturating_sub(after) as f64;
        let first = s.announced.is_none();
        let announced = s.announced.get_or_insert_with(|| Announced {
            bucket: Bucket::new(rate, quota.limit as f64, tokens, now),
            unmetered: BTreeSet::new(),
        });
        announced.unmetered.remove(&ticket.operation);
        announced.bucket.refill(now);
        announced.bucket.rate = sane(rate).max(SLOWEST_RATE);
        announced.bucket.capacity = (quota.limit as f64).max(1.0);
        announced.bucket.tokens = tokens.min(announced.bucket.capacity);
        if first {
            tracing::info!(registry = %self.registry, limit = quota.limit, remaining = quota.remaining, window_secs = quota.window.as_secs(), "pacing to the quota the registry announced");
        }
    }

    /// An answer to a request admitted with `ticket` carried no quota headers: once the registry
    /// has announced a quota, that operation is not metered by it.
    pub fn observe_no_quota(&self, ticket: Ticket) {
        let mut s = self.lock();
        if let Some(a) = s.announced.as_mut()
            && a.unmetered.insert(ticket.operation)
        {
            tracing::debug!(registry = %self.registry, operation = ticket.operation.name(), "operation not metered by the announced quota");
        }
    }

    /// The slowest rate in force (configured, announced or learned), if any.
    pub fn rate(&self) -> Option<f64> {
        let s = self.lock();
        [
            s.configured.as_ref().map(|b| b.rate),
            s.announced.as_ref().map(|a| a.bucket.rate),
            s.learned.as_ref().map(|l| l.bucket.rate),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::min)
    }

    /// The rate learned from registry-wide throttles, if one was.
    pub fn learned_rate(&self) -> Option<f64> {
        self.lock().learned.as_ref().map(|l| l.bucket.rate)
    }

    /// Whether `repository` is held now.
    pub fn is_held(&self, repository: &str) -> bool {
        self.lock()
            .holds
            .get(repository)
            .is_some_and(|until| *until > Instant::now())
    }
}

/// Reads `ratelimit-limit` and `ratelimit-remaining` (`<n>;w=<seconds>`), when both are there.
/// Numbers too large for a `u64` saturate; anything else unreadable means no quota.
pub fn quota_headers(headers: &reqwest::header::HeaderMap) -> Option<Quota> {
    let (limit, limit_window) = read_quota_value(headers.get("ratelimit-limit")?.to_str().ok()?)?;
    let (remaining, remaining_window) =
        read_quota_value(headers.get("ratelimit-remaining")?.to_str().ok()?)?;
    let window = limit_window
        .or(remaining_window)
        .filter(|w| *w > 0)
        .map_or(DEFAULT_QUOTA_WINDOW, Duration::from_secs);
    Some(Quota {
        limit,
        remaining,
        window,
    })
}

/// `<n>` or `<n>;w=<seconds>` (other parameters ignored).
fn read_quota_value(value: &str) -> Option<(u64, Option<u64>)> {
    let mut parts = value.split(';');
    let count = saturating_number(parts.next()?.trim())?;
    let window = parts.find_map(|p| {
        let (key, v) = p.split_once('=')?;
        (key.trim().eq_ignore_ascii_case("w"))
            .then(|| saturating_number(v.trim()))
            .flatten()
    });
    Some((count, window))
}

/// A run of ASCII digits as a `u64`, saturating at `u64::MAX`.
fn saturating_number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

#[cfg(test)]
mod tests;
