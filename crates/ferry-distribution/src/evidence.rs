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

/// A limit just hit looks like this: from the first throttle in the window on, at least half of
/// the answers are throttles (past a limit, nearly everything is refused).
const DENSE_SHARE_DENOMINATOR: usize = 2;

/// A limit exceeded by a little looks like this instead: at least one answer in eight is a
/// throttle, over at least [`SUSTAINED_ANSWERS`] answers. Scattered throttles among many
/// successes are noise, not a limit: at a steady 5% fault share, fewer answers than this cross
/// one in eight too often by chance (about one run in three at 25 answers).
const SUSTAINED_SHARE_DENOMINATOR: usize = 8;

/// The fewest answers in the window that can show a sustained share.
const SUSTAINED_ANSWERS: usize = 60;

/// Throttles of one repository in the window that make it a repository-wide verdict, when they
/// are dense: from its first throttle in the window on, half its answers (one in
/// [`DENSE_SHARE_DENOMINATOR`]). Two scattered throttles of one repository at a 5% fault share
/// are chance, not a repository that keeps drawing throttles.
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

fn tally<'a>(answers: impl Iterator<Item = &'a &'a Answer>) -> Tally {
    answers.fold(Tally::default(), |t, a| Tally {
        answers: t.answers + 1,
        throttles: t.throttles + usize::from(a.throttled),
    })
}

/// At least `least` throttles, making at least one in `denominator` of the answers.
fn significant(t: Tally, least: usize, denominator: usize) -> bool {
    t.throttles >= least && t.throttles * denominator >= t.answers
}

/// Whether `recent` (the window's answers from some point on) shows registry-wide throttling at
/// one in `denominator`: enough throttles in all, and still so once the repository most
/// throttled in the whole `window` is set aside, unless the window holds no other repository's
/// answers (one busy repository can show a registry's limit).
fn registry_wide(recent: &[&Answer], window: &[&Answer], denominator: usize) -> bool {
    let mut by_repository: BTreeMap<Option<&str>, Tally> = BTreeMap::new();
    for answer in window {
        let t = by_repository
            .entry(answer.repository.as_deref())
            .or_default();
        t.answers += 1;
        t.throttles += usize::from(answer.throttled);
    }
    let worst = by_repository
        .iter()
        .max_by_key(|(_, t)| (t.throttles, t.answers))
        .map(|(repository, _)| *repository);
    let alone = by_repository.len() <= 1;
    let others = tally(
        recent
            .iter()
            .filter(|a| Some(a.repository.as_deref()) != worst),
    );
    significant(tally(recent.iter()), MIN_REGISTRY_THROTTLES, denominator)
        && (alone || significant(others, MIN_REGISTRY_THROTTLES - 1, denominator))
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
    /// Registry-wide needs at least three throttles that look like a limit: dense (from the
    /// first throttle in the window on, half the answers are throttles) or sustained (one in
    /// eight of at least sixty answers). The same must hold once the most-throttled repository
    /// is set aside (unless nothing else was asked): one repository that stays throttled must
    /// not slow the others. A repository's own verdict needs two dense throttles of its own.
    pub fn record_throttle(&mut self, repository: Option<&str>, now: Instant) -> Scope {
        self.push(repository, true, now);
        let answers: Vec<&Answer> = self.answers.iter().collect();
        let first_throttle = answers.iter().position(|a| a.throttled).unwrap_or(0);
        let dense = registry_wide(
            &answers[first_throttle..],
            &answers,
            DENSE_SHARE_DENOMINATOR,
        );
        let sustained = answers.len() >= SUSTAINED_ANSWERS
            && registry_wide(&answers, &answers, SUSTAINED_SHARE_DENOMINATOR);
        if dense || sustained {
            return Scope::Registry;
        }
        let own: Vec<&Answer> = answers
            .iter()
            .copied()
            .filter(|a| a.repository.as_deref() == repository)
            .skip_while(|a| !a.throttled)
            .collect();
        if repository.is_some()
            && significant(
                tally(own.iter()),
                REPOSITORY_THROTTLES,
                DENSE_SHARE_DENOMINATOR,
            )
        {
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

    /// How long the window's answers cover (from the oldest to `now`).
    pub fn span(&mut self, now: Instant) -> Duration {
        self.prune(now);
        self.answers
            .front()
            .map_or(Duration::ZERO, |a| now.saturating_duration_since(a.at))
    }

    /// The throttles in the window.
    pub fn throttles(&mut self, now: Instant) -> usize {
        self.prune(now);
        self.answers.iter().filter(|a| a.throttled).count()
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
    fn three_scattered_throttles_in_an_opening_are_noise() {
        // The first 25 answers of a run with a 5% fault share, throttles landing on three
        // repositories by chance: over a tenth, yet no limit.
        let mut e = Evidence::default();
        let t0 = Instant::now();
        let mut verdicts = Vec::new();
        for i in 0..25u64 {
            let repo = ["a", "b", "c", "d"][(i % 4) as usize];
            if [2, 9, 23].contains(&i) {
                verdicts.push(e.record_throttle(Some(repo), t0 + ms(i)));
            } else {
                e.record_answer(Some(repo), t0 + ms(i));
            }
        }
        assert_eq!(verdicts, [Scope::Request; 3]);
    }

    #[test]
    fn one_repository_throttled_three_times_running_is_not_the_registrys() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        for i in 0..10u64 {
            e.record_answer(Some(["b", "c"][(i % 2) as usize]), t0 + ms(i));
        }
        let verdicts = [0, 1, 2].map(|i| e.record_throttle(Some("a"), t0 + ms(20 + i)));
        assert_eq!(
            verdicts,
            [Scope::Request, Scope::Repository, Scope::Repository]
        );
    }

    /// Answers from `repos` in turn, one in `every` of them a throttle (its verdict kept).
    fn steady(e: &mut Evidence, answers: u64, every: u64, repos: &[&str]) -> Vec<Scope> {
        let t0 = Instant::now();
        let mut verdicts = Vec::new();
        for i in 0..answers {
            let repo = repos[(i % repos.len() as u64) as usize];
            let at = t0 + ms(i * 10);
            if i % every == every - 1 {
                verdicts.push(e.record_throttle(Some(repo), at));
            } else {
                e.record_answer(Some(repo), at);
            }
        }
        verdicts
    }

    #[test]
    fn a_sustained_share_over_sixty_answers_is_the_registrys_and_not_before() {
        let mut e = Evidence::default();
        let repos = ["a", "b", "c", "d", "e"];
        let verdicts = steady(&mut e, 60, 6, &repos);
        // One in six, two throttles on each repository: the throttles at answers 6 to 54 find
        // fewer than sixty answers; the one at 60 does.
        assert!(
            verdicts[..9].iter().all(|v| *v != Scope::Registry),
            "{verdicts:?}"
        );
        assert_eq!(verdicts[9], Scope::Registry, "{verdicts:?}");
        // One in nine stays under an eighth however long it goes on.
        let mut e = Evidence::default();
        let verdicts = steady(&mut e, 270, 9, &repos);
        assert!(
            verdicts.iter().all(|v| *v != Scope::Registry),
            "{verdicts:?}"
        );
    }

    #[test]
    fn the_others_throttles_are_the_window_less_the_worst_repositorys() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        // 56 answers with a throttle every eighth, spread over b and c: an eighth of the others.
        let _ = steady(&mut e, 56, 8, &["b", "c"]);
        // a: four throttles in a row (its own trouble) among four more answers elsewhere.
        for i in 0..4u64 {
            e.record_answer(Some("c"), t0 + ms(600 + i));
        }
        let a = [0, 1, 2].map(|i| e.record_throttle(Some("a"), t0 + ms(610 + i)));
        assert_ne!(
            a[2],
            Scope::Registry,
            "a's run does not make the registry's case"
        );
        // Setting a aside leaves 7 throttles in 60 answers, under an eighth; one more makes it.
        assert_eq!(e.record_throttle(Some("b"), t0 + ms(620)), Scope::Registry);
    }

    #[test]
    fn two_scattered_throttles_of_one_repository_are_chance() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        // a's ten answers before its first throttle do not dilute what follows it.
        for i in 0..40u64 {
            let repo = if i % 4 == 0 { "a" } else { "busy" };
            e.record_answer(Some(repo), t0 + ms(i));
        }
        assert_eq!(e.record_throttle(Some("a"), t0 + ms(50)), Scope::Request);
        for i in 0..5u64 {
            e.record_answer(Some("a"), t0 + ms(60 + i));
        }
        // Two throttles in seven answers since the first: under half.
        assert_eq!(e.record_throttle(Some("a"), t0 + ms(70)), Scope::Request);
        // More right after: three in eight, four in nine are under half; five in ten is half.
        let more = [71, 72, 73].map(|t| e.record_throttle(Some("a"), t0 + ms(t)));
        assert_eq!(more, [Scope::Request, Scope::Request, Scope::Repository]);
    }

    #[test]
    fn of_two_repositories_throttled_alike_the_busier_is_set_aside() {
        let mut e = Evidence::default();
        let t0 = Instant::now();
        for i in 0..10u64 {
            e.record_answer(Some("a"), t0 + ms(i));
        }
        for (i, repo) in ["a", "b", "a"].iter().enumerate() {
            e.record_throttle(Some(repo), t0 + ms(20 + i as u64));
        }
        for i in 0..3u64 {
            e.record_answer(Some("a"), t0 + ms(30 + i));
        }
        // a: 2 throttles in 15 answers, b: 2 in 2. Setting a aside leaves b's two of two: the
        // throttles reach beyond the busier repository. (Setting b aside instead would leave
        // a's two of five, under half, and no verdict.)
        assert_eq!(e.record_throttle(Some("b"), t0 + ms(40)), Scope::Registry);
    }
}
