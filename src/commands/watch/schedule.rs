//! Which mappings a `ferry watch` run syncs: each mapping is due on its own schedule
//! (`interval:` or `schedule:` in the config) or else every `--interval`; a run takes the due ones.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use ferry_config::{Config, Schedule};

/// When each mapping (by its position in the config) is due next.
#[derive(Debug)]
pub struct Due {
    /// `--interval`: the schedule of a mapping without one of its own.
    default: Duration,
    next: HashMap<usize, SystemTime>,
}

impl Due {
    pub fn new(default: Duration) -> Due {
        Due {
            default,
            next: HashMap::new(),
        }
    }

    fn schedule(&self, schedule: &Option<Schedule>) -> Schedule {
        schedule.clone().unwrap_or(Schedule::Every(self.default))
    }

    /// When mapping `index` is due; one never synced (new, or the first run) is due at once.
    fn due_at(&self, index: usize) -> SystemTime {
        self.next
            .get(&index)
            .copied()
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// `config` narrowed to the mappings due at `now`.
    pub fn take_due(&self, mut config: Config, now: SystemTime) -> Config {
        config.mappings.retain(|m| self.due_at(m.index) <= now);
        config
    }

    /// Records that `ran`'s mappings were synced by a run that started at `started` and ended
    /// at `now` (or were skipped at `now`).
    pub fn ran(&mut self, ran: &Config, started: SystemTime, now: SystemTime) {
        for m in &ran.mappings {
            let next = self.schedule(&m.schedule).next_due(started, now);
            self.next.insert(m.index, next);
        }
    }

    /// When the first of `config`'s mappings is due (`now` or earlier when one is due already).
    pub fn next_wake(&self, config: &Config, now: SystemTime) -> SystemTime {
        config
            .mappings
            .iter()
            .map(|m| self.due_at(m.index))
            .min()
            .unwrap_or_else(|| now + self.default)
    }

    /// The longest a healthy watch goes between two runs: the shortest schedule among
    /// `config`'s mappings (its mapping runs at least that often); `--interval` for none.
    pub fn expected_gap(&self, config: &Config, now: SystemTime) -> Duration {
        config
            .mappings
            .iter()
            .map(|m| self.schedule(&m.schedule).period(now))
            .min()
            .unwrap_or(self.default)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// A config of one mapping per entry, each with the entry's extra lines (`interval: 1h`).
    fn config(extra: &[&str]) -> Config {
        let mut yaml = String::from("version: 1\nmappings:\n");
        for (i, lines) in extra.iter().enumerate() {
            yaml.push_str(&format!(
                "  - source: src.example/app{i}\n    targets: [dst.example/app{i}]\n{lines}"
            ));
        }
        if extra.is_empty() {
            yaml.push_str("  - source: src.example/app\n    targets: [dst.example/app]\n");
        }
        let mut config = ferry_config::parse(&yaml, Path::new("watch.yaml"), &|_| None)
            .expect("the test config parses");
        if extra.is_empty() {
            config.mappings.clear();
        }
        config
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn indices(config: &Config) -> Vec<usize> {
        config.mappings.iter().map(|m| m.index).collect()
    }

    #[test]
    fn each_mapping_runs_on_its_own_schedule_and_the_rest_every_interval() {
        let all = config(&["", "    interval: 1h\n", "    schedule: \"0 3 * * *\"\n"]);
        let mut due = Due::new(Duration::from_secs(60));
        // The first run syncs everything.
        let first = due.take_due(all.clone(), at(0));
        assert_eq!(indices(&first), [0, 1, 2]);
        due.ran(&first, at(0), at(10));
        assert_eq!(due.next_wake(&all, at(10)), at(60));
        // A minute later only the mapping on --interval is due.
        let second = due.take_due(all.clone(), at(60));
        assert_eq!(indices(&second), [0]);
        due.ran(&second, at(60), at(70));
        // At the hour the hourly one joins; at 03:00 UTC the nightly one.
        assert_eq!(indices(&due.take_due(all.clone(), at(3600))), [0, 1]);
        assert_eq!(indices(&due.take_due(all.clone(), at(3 * 3600))), [0, 1, 2]);
        assert_eq!(due.expected_gap(&all, at(0)), Duration::from_secs(60));
    }

    #[test]
    fn a_mapping_added_by_an_edit_is_due_at_once_and_a_skipped_run_waits_its_turn() {
        let mut due = Due::new(Duration::from_secs(600));
        let one = config(&[""]);
        due.ran(&due.take_due(one, at(0)), at(0), at(0));
        let two = config(&["", "    interval: 1h\n"]);
        assert_eq!(due.next_wake(&two, at(5)), SystemTime::UNIX_EPOCH);
        assert_eq!(indices(&due.take_due(two.clone(), at(5))), [1]);
        // Only mappings on long schedules: /readyz waits for the shortest of them.
        let slow = config(&["    interval: 6h\n", "    interval: 1h\n"]);
        assert_eq!(due.expected_gap(&slow, at(0)), Duration::from_secs(3600));
        assert_eq!(
            due.expected_gap(&config(&[]), at(0)),
            Duration::from_secs(600)
        );
    }
}
