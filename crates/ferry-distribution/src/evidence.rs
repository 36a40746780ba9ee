//! What a throttle governs: the last few seconds of answers from one registry, by repository,
//! and the verdict on each new throttle (that request, its repository, or the whole registry).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

/// How far back the evidence reaches. Long enough to see three throttles of one request that
/// honours `Retry-After: 1`, short enough that an old burst does not judge today's traffic.
pub const EVIDENCE_WINDOW: Duration = Duration::from_secs(3);

/// Fewer throttles than this in the window never make a registry-wide verdict.
const MIN_REGISTRY_THROTTLES: usize = 3;

/// A registry-wide verdict needs throttles to be at least this share of the answers (1 in 10):
/// isolated throttles among many successes are noise, not a limit.
const REGISTRY_SHARE_DENOMINATOR: usize = 10;

/// Throttles of one repository in the window (and a tenth of its answers) that make it a
/// repository-wide verdict.
const REPOSITORY_THROTTLES: usize = 2;

/// What one throttle says about its scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only the throttled request waits (its own `Retry-After` or backoff).
    Request,
    /// The repository keeps drawing throttles while others do not: its requests wait.
    Repository,
    /// Throttles across the registry: the registry-wide pace and window answer it.
    Registry,
}

#[derive(Debug)]
struct Answer {
    at: Instant,
    /// `None` for requests that name no repository (ping, catalog).
    repository: Option<String>,
    throttled: bool,
}

/// The recent answers of one registry.
#[derive(Debug, Default)]
pub struct Evidence {
    answers: VecDeque<Answer>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    answers: usize,
    throttles: usize,
}

impl Evidence {
    fn prune(&mut self, now: Instant) {
        while self
            .answers
            .front()
            .is_some_and(|a| now.saturating_duration_since(a.at) > EVIDENCE_WINDOW)
        {
            self.answers.pop_front();
        }
    }

    /// Records an answer that was not a throttle (a success, or a failure of another kind).
    pub fn record_answer(&mut self, repository: Option<&str>, now: Instant) {
        self.push(repository, false, now);
    }

    /// Records a throttle and judges its scope against the window.
    ///
    /// Registry-wide needs at least three throttles making a tenth of all answers, and the same
    /// still true once the most-throttled repository is set aside (unless nothing else was
    /// asked): one repository that stays throttled must not slow the others.
    pub fn record_throttle(&mut self, repository: Option<&str>, now: Instant) -> Scope {
        self.push(repository, true, now);
        let mut by_repository: BTreeMap<Option<&str>, Tally> = BTreeMap::new();
        let mut total = Tally::default();
        for answer in &self.answers {
            let tally = by_repository
                .entry(answer.repository.as_deref())
                .or_default();
            tally.answers += 1;
            total.answers += 1;
            if answer.throttled {
                tally.throttles += 1;
                total.throttles += 1;
            }
        }
        let worst = by_repository
            .values()
            .copied()
            .max_by_key(|t| (t.throttles, t.answers))
            .unwrap_or_default();
        let others = Tally {
            answers: total.answers - worst.answers,
            throttles: total.throttles - worst.throttles,
        };
        let significant = |t: Tally, least: usize| {
            t.throttles >= least && t.throttles * REGISTRY_SHARE_DENOMINATOR >= t.answers
        };
        let beyond_one_repository =
            others.answers == 0 || significant(others, MIN_REGISTRY_THROTTLES - 1);
        if significant(total, MIN_REGISTRY_THROTTLES) && beyond_one_repository {
            return Scope::Registry;
        }
        let own = by_repository.get(&repository).copied().unwrap_or_default();
        if repository.is_some() && significant(own, REPOSITORY_THROTTLES) {
            Scope::Repository
        } else {
            Scope::Request
        }
    }

    fn push(&mut self, repository: Option<&str>, throttled: bool, now: Instant) {
        self.prune(now);
        self.answers.push_back(Answer {
            at: now,
            repository: repository.map(str::to_owned),
            throttled,
        });
    }

    /// Answers that were not throttles in the window, and how many there were per second of
    /// the window actually covered (at least one second): the rate the registry accepted.
    pub fn accepted(&mut self, now: Instant) -> (usize, f64) {
        self.prune(now);
        let accepted = self.answers.iter().filter(|a| !a.throttled).count();
        let span = self
            .answers
            .front()
            .map_or(Duration::ZERO, |a| now.saturating_duration_since(a.at))
            .max(Duration::from_secs(1));
        (accepted, accepted as f64 / span.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn an_isolated_throttle_among_many_successes_is_noise() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        let repos = ["a", "b", "c", "d", "e"];
        let mut verdicts = Vec::new();
        for i in 0..200u64 {
            let repo = repos[(i % 5) as usize];
            let at = t0 + ms(i * 10);
            // One in twenty answers is a throttle, spread over every repository in turn.
            if i % 20 == 7 {
                let throttled = repos[((i / 20) % 5) as usize];
                verdicts.push(e.record_throttle(Some(throttled), at));
            } else {
                e.record_answer(Some(repo), at);
            }
        }
        assert!(
            verdicts.iter().all(|v| *v == Scope::Request),
            "{verdicts:?}"
        );
    }

    #[test]
    fn one_repository_throttled_over_and_over_is_its_own_scope() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        let mut verdicts = Vec::new();
        for i in 0..60u64 {
            let at = t0 + ms(i * 20);
            e.record_answer(Some(["b", "c", "d"][(i % 3) as usize]), at);
            if i % 4 == 0 {
                verdicts.push(e.record_throttle(Some("a"), at));
            }
        }
        assert_eq!(
            verdicts[0],
            Scope::Request,
            "one throttle is that request's"
        );
        assert!(
            verdicts[1..].iter().all(|v| *v == Scope::Repository),
            "{verdicts:?}"
        );
    }

    #[test]
    fn throttles_across_repositories_are_the_registrys() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        for i in 0..10u64 {
            e.record_answer(Some(["a", "b"][(i % 2) as usize]), t0 + ms(i));
        }
        assert_eq!(e.record_throttle(Some("a"), t0 + ms(20)), Scope::Request);
        assert_eq!(e.record_throttle(Some("b"), t0 + ms(21)), Scope::Request);
        assert_eq!(e.record_throttle(Some("c"), t0 + ms(22)), Scope::Registry);
    }

    #[test]
    fn a_single_busy_repository_can_show_a_registry_limit() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        for i in 0..20u64 {
            e.record_answer(Some("only"), t0 + ms(i));
        }
        e.record_throttle(Some("only"), t0 + ms(30));
        e.record_throttle(Some("only"), t0 + ms(31));
        assert_eq!(
            e.record_throttle(Some("only"), t0 + ms(32)),
            Scope::Registry
        );
    }

    #[test]
    fn old_answers_leave_the_window() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        e.record_throttle(Some("a"), t0);
        assert_eq!(
            e.record_throttle(Some("a"), t0 + EVIDENCE_WINDOW + ms(1)),
            Scope::Request
        );
        assert_eq!(e.accepted(t0 + ms(10_000)).0, 0);
    }

    #[test]
    fn an_answer_exactly_one_window_old_still_counts() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        e.record_throttle(Some("a"), t0);
        assert_eq!(
            e.record_throttle(Some("a"), t0 + EVIDENCE_WINDOW),
            Scope::Repository,
            "answers leave the window only once they are older than it"
        );
    }

    #[test]
    fn the_others_throttles_are_the_total_less_the_worst_repositorys() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        for i in 0..22u64 {
            e.record_answer(Some(["b", "c"][(i % 2) as usize]), t0 + ms(i));
        }
        for repo in ["a", "a", "a", "b", "b"] {
            e.record_throttle(Some(repo), t0 + ms(30));
        }
        // Setting "a" (3 throttles) aside leaves 3 throttles in 25 answers: still over a tenth.
        assert_eq!(e.record_throttle(Some("c"), t0 + ms(31)), Scope::Registry);
    }
}
