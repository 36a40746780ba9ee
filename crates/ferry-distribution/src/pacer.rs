//! Request pacing for one registry: the configured requests-per-second bucket, a rate learned
//! from throttles when none is configured, and a registry-wide pause that honours `Retry-After`.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Throttles closer together than this are one signal.
const EPOCH: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Bucket {
    rate: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: f64, now: Instant) -> Self {
        Bucket {
            rate,
            tokens: burst(rate),
            last: now,
        }
    }

    /// Takes a token, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Option<Duration> {
        let refill = now.duration_since(self.last).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + refill).min(burst(self.rate));
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }
}

/// Half a second's worth: a registry's own bucket and ours never refill in step, and a full
/// second's burst on top of a full rate lands right at its limit.
fn burst(rate: f64) -> f64 {
    (rate / 2.0).max(1.0)
}

#[derive(Debug)]
struct State {
    bucket: Option<Bucket>,
    /// Successful requests in the last second, to learn a rate from.
    successes: VecDeque<Instant>,
    paused_until: Option<Instant>,
    last_cut: Option<Instant>,
}

/// Paces the requests to one registry. With `requests_per_second` configured it never sends
/// faster; without, it sends freely until the first throttle, then at the rate it saw accepted,
/// cut on each further throttle and regrown slowly on success.
#[derive(Debug)]
pub struct Pacer {
    registry: String,
    configured: bool,
    state: Mutex<State>,
}

/// Fewer successes than this in the last second teach no rate.
const MIN_HISTORY: f64 = 4.0;

/// The learned rate grows by this share of a request per second per success.
const REGROWTH: f64 = 0.2;

impl Pacer {
    pub fn new(registry: &str, requests_per_second: Option<f64>) -> Self {
        let now = Instant::now();
        let configured = requests_per_second.filter(|r| *r > 0.0);
        Pacer {
            registry: registry.to_owned(),
            configured: configured.is_some(),
            state: Mutex::new(State {
                bucket: configured.map(|r| Bucket::new(r, now)),
                successes: VecDeque::new(),
                paused_until: None,
                last_cut: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until a request may go out.
    pub async fn admit(&self) {
        loop {
            let wait = {
                let mut s = self.lock();
                let now = Instant::now();
                let paused = s
                    .paused_until
                    .filter(|until| *until > now)
                    .map(|until| until - now);
                match paused {
                    Some(p) => Some(p),
                    None => s.bucket.as_mut().and_then(|b| b.take(now)),
                }
            };
            match wait {
                None => return,
                Some(w) => tokio::time::sleep(w).await,
            }
        }
    }

    pub fn on_success(&self) {
        let mut s = self.lock();
        let now = Instant::now();
        s.successes.push_back(now);
        while s
            .successes
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(1))
        {
            s.successes.pop_front();
        }
        if !self.configured
            && let Some(b) = s.bucket.as_mut()
        {
            b.rate += REGROWTH / b.rate.max(1.0);
        }
    }

    /// Holds every request to the registry for `wait`: the registry named the time with a
    /// `Retry-After`, and an operation is about to honour it. (A wait no operation honours, one
    /// beyond its deadline, pauses nothing: that operation gives up at once instead.)
    pub fn pause(&self, wait: Duration) {
        let mut s = self.lock();
        let until = Instant::now() + wait;
        if s.paused_until.is_none_or(|p| p < until) {
            s.paused_until = Some(until);
        }
    }

    /// The registry asked for fewer requests: unless a rate is configured, learn or cut the rate
    /// (once per epoch).
    pub fn on_throttle(&self) {
        let mut s = self.lock();
        let now = Instant::now();
        if self.configured || s.last_cut.is_some_and(|t| now.duration_since(t) < EPOCH) {
            return;
        }
        s.last_cut = Some(now);
        let seen = s
            .successes
            .iter()
            .filter(|t| now.duration_since(**t) <= Duration::from_secs(1))
            .count() as f64;
        let rate = match s.bucket.as_ref() {
            // Too little history to learn from (a throttle on the first requests): the pause
            // alone answers it.
            None if seen < MIN_HISTORY => return,
            None => (seen * 0.9).max(1.0),
            Some(b) => (b.rate * 0.7).max(1.0),
        };
        let start = s.paused_until.unwrap_or(now).max(now);
        s.bucket = Some(Bucket {
            rate,
            tokens: 0.0,
            last: start,
        });
        tracing::debug!(registry = %self.registry, rate, "pacing after a throttle");
    }

    /// A quota the registry reported (`ratelimit-remaining: 12;w=21600` with
    /// `ratelimit-limit: 100;w=21600`, as Docker Hub sends). Below a tenth of the quota, requests
    /// are paced so the rest is not spent in one burst: slowing down before the 429, not after.
    pub fn observe_quota(&self, remaining: u64, limit: u64) {
        if self.configured || limit == 0 || remaining * 10 >= limit {
            return;
        }
        let rate = (remaining as f64 / 10.0).max(0.5);
        let mut s = self.lock();
        let slower = s.bucket.as_ref().is_none_or(|b| b.rate > rate);
        if slower {
            tracing::info!(registry = %self.registry, remaining, limit, rate, "quota running low: pacing");
            s.bucket = Some(Bucket::new(rate, Instant::now()));
        }
    }

    /// The rate in force, if any.
    pub fn rate(&self) -> Option<f64> {
        self.lock().bucket.as_ref().map(|b| b.rate)
    }
}

/// Reads `ratelimit-remaining` and `ratelimit-limit` (`<n>;w=<seconds>`), when both are there.
pub fn quota_headers(headers: &reqwest::header::HeaderMap) -> Option<(u64, u64)> {
    let read = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .split(';')
            .next()?
            .trim()
            .parse::<u64>()
            .ok()
    };
    Some((read("ratelimit-remaining")?, read("ratelimit-limit")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_docker_hub_quota_headers() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("ratelimit-limit", "100;w=21600".parse().unwrap());
        h.insert("ratelimit-remaining", "7;w=21600".parse().unwrap());
        assert_eq!(quota_headers(&h), Some((7, 100)));
        h.insert("ratelimit-remaining", "junk".parse().unwrap());
        assert_eq!(quota_headers(&h), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_low_quota_slows_requests_before_any_429() {
        let p = Pacer::new("r", None);
        p.observe_quota(50, 100);
        assert_eq!(p.rate(), None, "plenty left: no pacing");
        p.observe_quota(8, 100);
        assert_eq!(p.rate(), Some(0.8));
        let start = Instant::now();
        for _ in 0..3 {
            p.admit().await;
        }
        assert!(
            start.elapsed() >= Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_configured_rate_spaces_requests_after_the_burst() {
        let p = Pacer::new("r", Some(10.0));
        let start = Instant::now();
        for _ in 0..30 {
            p.admit().await;
        }
        // 5 from the burst, then 25 at 10 per second.
        let elapsed = start.elapsed();
        assert!(elapsed >= Duration::from_millis(2490), "{elapsed:?}");
        assert!(elapsed < Duration::from_millis(2600), "{elapsed:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_pauses_every_request() {
        let p = Pacer::new("r", None);
        p.pause(Duration::from_secs(3));
        let start = Instant::now();
        p.admit().await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        p.admit().await;
        assert_eq!(start.elapsed(), Duration::from_secs(3), "only once");
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_configured_rate_it_learns_the_accepted_rate_and_cuts_it_on_throttles() {
        let p = Pacer::new("r", None);
        assert_eq!(p.rate(), None, "free until the first throttle");
        for _ in 0..20 {
            p.on_success();
        }
        p.on_throttle();
        assert_eq!(p.rate(), Some(18.0));
        // A burst of throttles is one signal.
        p.on_throttle();
        assert_eq!(p.rate(), Some(18.0));
        tokio::time::advance(Duration::from_millis(1100)).await;
        p.on_throttle();
        let cut = p.rate().unwrap();
        assert!((cut - 12.6).abs() < 1e-9, "{cut}");
        for _ in 0..100 {
            p.on_success();
        }
        assert!(p.rate().unwrap() > cut, "regrows on success");
    }
}
