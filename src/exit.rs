//! Exit codes: 0 clean, 1 some failed, 2 all failed or fatal, 3 config, 4 auth, 5 lock held by
//! another run; derived from a sync report, a dry-run plan, or a single registry error.

use std::process::ExitCode;

use ferry_sync::dryrun::DryRun;
use ferry_sync::plan::Plan;
use ferry_sync::report::{SyncReport, Verdict};

pub const CLEAN: u8 = 0;
pub const PARTIAL: u8 = 1;
pub const FAILED: u8 = 2;
pub const CONFIG: u8 = 3;
pub const AUTH: u8 = 4;
pub const LOCKED: u8 = 5;

pub fn code(n: u8) -> ExitCode {
    ExitCode::from(n)
}

/// The code for a finished sync.
pub fn for_report(report: &SyncReport) -> u8 {
    match report.verdict() {
        Verdict::Clean => CLEAN,
        _ if report.all_failures_are_auth() => AUTH,
        Verdict::Partial => PARTIAL,
        Verdict::Failed => FAILED,
    }
}

/// The code for a dry run: only prepare-phase failures, names left out as invalid and listed
/// tags that could not be fetched count.
pub fn for_dry_run(plan: &Plan, dry: &DryRun) -> u8 {
    let failed: Vec<_> = plan.failed().collect();
    let rejected = plan.resolved().any(|(_, r)| !r.rejected_names.is_empty());
    let unfetched = dry.mappings.iter().any(|m| !m.unfetched.is_empty());
    if failed.is_empty() && (rejected || unfetched) {
        PARTIAL
    } else if failed.is_empty() {
        CLEAN
    } else if failed.iter().all(|(_, e)| e.is_auth()) {
        AUTH
    } else if dry.totals.mappings_failed == dry.totals.mappings {
        FAILED
    } else {
        PARTIAL
    }
}

/// The code for a single registry error outside a sync.
pub fn for_error(e: &ferry_distribution::Error) -> u8 {
    if e.is_auth() { AUTH } else { FAILED }
}
