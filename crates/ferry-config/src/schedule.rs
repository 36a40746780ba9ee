//! A mapping's own watch schedule, as regsync writes it: `interval: 15m`, or `schedule:` a cron
//! expression in UTC (`"0 3 * * *"`). `ferry watch` syncs a mapping when it is due; `ferry sync` runs them all.

use std::fmt;
use std::str::FromStr as _;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use croner::Cron;

use super::units::parse_duration;

/// When `ferry watch` syncs a mapping again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Every so long, counted from the start of the run that synced it last.
    Every(Duration),
    /// At the times a cron expression names (minute hour day-of-month month day-of-week, with
    /// an optional leading seconds field), in UTC.
    Cron(Box<Cron>),
}

impl Schedule {
    /// `interval:` as written (`15m`, `1h30m`); at least one second.
    pub fn interval(text: &str) -> Result<Schedule, String> {
        let every = parse_duration(text)?;
        if every < Duration::from_secs(1) {
            return Err(format!(
                "interval \"{text}\" is shorter than a second; write e.g. \"30s\" or \"15m\""
            ));
        }
        Ok(Schedule::Every(every))
    }

    /// `schedule:` as written: a cron expression (`"*/15 * * * *"`, `"0 3 * * 1-5"`), read in UTC.
    pub fn cron(text: &str) -> Result<Schedule, String> {
        let cron = Cron::from_str(text.trim()).map_err(|e| {
            format!(
                "\"{text}\" is not a cron expression ({e}); write five fields, minute hour \
                 day-of-month month day-of-week, e.g. \"0 3 * * *\" for 03:00 UTC daily"
            )
        })?;
        // A pattern that never fires (30 February) would silently never sync.
        if cron
            .find_next_occurrence(&DateTime::<Utc>::from(SystemTime::UNIX_EPOCH), false)
            .is_err()
        {
            return Err(format!("the cron expression \"{text}\" never fires"));
        }
        Ok(Schedule::Cron(Box::new(cron)))
    }

    /// When a mapping synced by a run that started at `started` is due again, as seen at `now`
    /// (after that run ended): an interval counts from the start, and a run longer than the
    /// interval makes the next one due at once (never a burst to catch up); a cron expression
    /// names its first time after `now`.
    pub fn next_due(&self, started: SystemTime, now: SystemTime) -> SystemTime {
        match self {
            Schedule::Every(every) => started.checked_add(*every).map_or(now, |due| due.max(now)),
            Schedule::Cron(cron) => {
                let after = DateTime::<Utc>::from(now);
                match cron.find_next_occurrence(&after, false) {
                    Ok(next) => SystemTime::from(next),
                    // Checked when the config was read; past the end of the calendar it waits a day.
                    Err(_) => now + Duration::from_secs(86_400),
                }
            }
        }
    }

    /// The longest time between two syncs of the mapping from `now` on: the interval, or the
    /// gap between the cron expression's next two times.
    pub fn period(&self, now: SystemTime) -> Duration {
        match self {
            Schedule::Every(every) => *every,
            Schedule::Cron(_) => {
                let first = self.next_due(now, now);
                let second = self.next_due(first, first);
                second.duration_since(first).unwrap_or(Duration::ZERO)
            }
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Every(every) => write!(f, "every {}s", every.as_secs_f64()),
            Schedule::Cron(cron) => write!(f, "cron \"{}\" (UTC)", cron.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn an_interval_counts_from_the_start_of_the_last_run() {
        let every = Schedule::interval("15m").unwrap();
        assert_eq!(every.next_due(at(1000), at(1010)), at(1900));
        // A run longer than the interval: due as soon as it ends, not once per missed tick.
        assert_eq!(every.next_due(at(1000), at(5000)), at(5000));
        assert_eq!(every.period(at(0)), Duration::from_secs(900));
    }

    #[test]
    fn intervals_shorter_than_a_second_or_unitless_are_refused() {
        assert!(
            Schedule::interval("500ms")
                .unwrap_err()
                .contains("shorter than a second")
        );
        assert!(Schedule::interval("15").is_err());
        assert!(Schedule::interval("").is_err());
        // Past the calendar's end: due when the run ends, never a panic.
        let huge = Schedule::interval(&format!("{}h", u64::MAX / 3600)).unwrap();
        assert_eq!(huge.next_due(at(10), at(20)), at(20));
    }

    #[test]
    fn a_cron_expression_names_its_next_time_in_utc() {
        // 1970-01-01 was a Thursday; 03:00 daily.
        let daily = Schedule::cron("0 3 * * *").unwrap();
        assert_eq!(daily.next_due(at(0), at(0)), at(3 * 3600));
        assert_eq!(daily.next_due(at(0), at(3 * 3600)), at(27 * 3600));
        assert_eq!(daily.period(at(0)), Duration::from_secs(86_400));
        let quarter = Schedule::cron("*/15 * * * *").unwrap();
        assert_eq!(quarter.next_due(at(0), at(61)), at(900));
        assert_eq!(quarter.period(at(61)), Duration::from_secs(900));
    }

    #[test]
    fn a_cron_expression_that_is_wrong_or_never_fires_is_refused() {
        for bad in [
            "",
            "61 * * * *",
            "* * *",
            "0 3 * * * * * *",
            "\u{7}",
            "0 0 30 2 *",
        ] {
            let error = Schedule::cron(bad).unwrap_err();
            assert!(
                error.contains("cron expression"),
                "{bad:?} refused with a message naming it: {error}"
            );
        }
    }
}
