//! The breaker's part for one repository that keeps answering 429: after as many throttles in a
//! row as one operation may retry, its requests are refused unsent for a rest, then one probe.

// Politeness (issue 31): a repository throttled on its own (a policy on it, a hot repository)
// used to cost every one of its operations a full retry budget, 24 requests for three tags
// against one throttled repository. The registry's own breaker is not involved: the other
// repositories keep going, and a throttle is never a fault (docs/retry.md, "A throttled
// repository").

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How long a repository that gave up stays refused before one request may probe it again.
pub const REPOSITORY_REST: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy)]
struct Strikes {
    in_a_row: u32,
    last: Instant,
    retry_after: Option<Duration>,
}

/// Throttles in a row per repository of one registry.
#[derive(Debug, Default)]
pub(crate) struct RepositoryThrottles {
    strikes: Mutex<HashMap<String, Strikes>>,
}

impl RepositoryThrottles {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Strikes>> {
        self.strikes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Some(wait)` when `repository` has drawn `limit` throttles in a row and its rest is not
    /// over: nothing is to be sent to it. `wait` is the last `Retry-After` it sent (1 s without).
    pub(crate) fn refusal(&self, repository: &str, limit: u32) -> Option<Duration> {
        let strikes = self.lock();
        let s = strikes.get(repository)?;
        (s.in_a_row >= limit.max(1)
            && Instant::now().saturating_duration_since(s.last) < REPOSITORY_REST)
            .then(|| s.retry_after.unwrap_or(Duration::from_secs(1)))
    }

    /// `repository` answered with a throttle.
    pub(crate) fn throttled(&self, repository: &str, retry_after: Option<Duration>) -> u32 {
        let mut strikes = self.lock();
        let s = strikes.entry(repository.to_owned()).or_insert(Strikes {
            in_a_row: 0,
            last: Instant::now(),
            retry_after: None,
        });
        s.in_a_row = s.in_a_row.saturating_add(1);
        s.last = Instant::now();
        s.retry_after = retry_after.or(s.retry_after);
        s.in_a_row
    }

    /// `repository` answered something other than a throttle: it is not stuck.
    pub(crate) fn answered(&self, repository: &str) {
        let mut strikes = self.lock();
        if !strikes.is_empty() {
            strikes.remove(repository);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_repository_is_refused_after_the_limit_until_an_answer_or_its_rest() {
        let t = RepositoryThrottles::default();
        for n in 1..=3 {
            assert_eq!(t.refusal("a", 3), None, "before throttle {n}");
            t.throttled("a", Some(Duration::from_secs(2)));
        }
        assert_eq!(t.refusal("a", 3), Some(Duration::from_secs(2)));
        assert_eq!(t.refusal("b", 3), None, "other repositories go on");
        tokio::time::advance(REPOSITORY_REST).await;
        assert_eq!(t.refusal("a", 3), None, "one probe after the rest");
        t.throttled("a", None);
        assert!(t.refusal("a", 3).is_some(), "a throttled probe rests again");
        t.answered("a");
        assert_eq!(t.refusal("a", 3), None);
    }
}
