//! Exit codes (0 clean, 1 some failed, 2 all failed or fatal, 3 config, 4 auth, 5 lock held,
//! 64 usage), derived from a sync report, a dry-run plan, or a single registry error.

use std::fmt;
use std::process::ExitCode;

use ferry_sync::dryrun::DryRun;
use ferry_sync::plan::Plan;
use ferry_sync::report::{SyncReport, Verdict};

/// How a command ended. The number of each is the documented exit code (README, `ferry --help`);
/// variants are declared in that order, so the worse of two outcomes is the larger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// Everything synced, or was already up to date.
    Clean = 0,
    /// Some images or mappings failed, or something was left out; the rest went through.
    Partial = 1,
    /// Everything attempted failed, or the command could not run at all.
    Failed = 2,
    /// The config is invalid or unreadable.
    Config = 3,
    /// Every failure was an authentication failure.
    Auth = 4,
    /// Another ferry run of the same config holds the lock.
    Locked = 5,
    /// The command line could not be read (sysexits' EX_USAGE); nothing was done.
    Usage = 64,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// The number, as logs and `/readyz` print it.
impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// The code for a finished sync.
pub fn for_report(report: &SyncReport) -> Exit {
    match report.verdict() {
        Verdict::Clean => Exit::Clean,
        _ if report.all_failures_are_auth() => Exit::Auth,
        Verdict::Partial => Exit::Partial,
        Verdict::Failed => Exit::Failed,
    }
}

/// The code for a whole run: its sync report's, and a clean sync whose pruning left a tag that
/// should have gone is partial.
pub fn for_outcome(outcome: &ferry_sync::run::RunOutcome) -> Exit {
    match (for_report(&outcome.report), outcome.verdict()) {
        (Exit::Clean, Verdict::Partial) => Exit::Partial,
        (code, _) => code,
    }
}

/// The code for a dry run: only prepare-phase failures, names left out as invalid and listed
/// tags that could not be fetched count.
pub fn for_dry_run(plan: &Plan, dry: &DryRun) -> Exit {
    let failed: Vec<_> = plan.failed().collect();
    let rejected = plan.resolved().any(|(_, r)| !r.rejected_names.is_empty());
    let unfetched = dry
        .mappings
        .iter()
        .any(|m| !m.unfetched.is_empty() || !m.signature_refused.is_empty());
    // A pinned (`exact`) tag the source lacks is a failure, as in the real run.
    let missing = dry.totals.missing_exact > 0;
    if failed.is_empty() && (rejected || unfetched || missing) {
        Exit::Partial
    } else if failed.is_empty() {
        Exit::Clean
    } else if failed.iter().all(|(_, e)| e.is_auth()) {
        Exit::Auth
    } else if dry.totals.mappings_failed == dry.totals.mappings {
        Exit::Failed
    } else {
        Exit::Partial
    }
}

/// The code for a single registry error outside a sync.
pub fn for_error(e: &ferry_distribution::Error) -> Exit {
    if e.is_auth() {
        Exit::Auth
    } else {
        Exit::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_exit_is_its_documented_number_and_worse_is_larger() {
        let all = [
            (Exit::Clean, 0),
            (Exit::Partial, 1),
            (Exit::Failed, 2),
            (Exit::Config, 3),
            (Exit::Auth, 4),
            (Exit::Locked, 5),
            (Exit::Usage, 64),
        ];
        for (exit, n) in all {
            assert_eq!(exit.code(), n);
            assert_eq!(exit.to_string(), n.to_string());
        }
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(Exit::Partial.max(Exit::Auth), Exit::Auth);
    }
}
