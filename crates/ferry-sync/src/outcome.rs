//! What a run returns: a writing run's outcome (plan, report, pruning, the verify that followed),
//! a dry run's, and which of the two a run's mode gave; each renders itself and names its verdict.

use serde::Serialize;

use crate::bundle_trust::Authenticity;
use crate::dryrun::DryRun;
use crate::plan::Plan;
use crate::prune::PruneReport;
use crate::report::{SyncReport, Verdict};
use crate::verify::{VerifyReport, VerifyVerdict};

/// A run's outcome by its mode: a real run's, or a dry run's.
#[derive(Debug)]
pub enum Outcome {
    /// The run wrote.
    Synced(Box<RunOutcome>),
    /// The run only measured.
    DryRun(Box<DryRunOutcome>),
}

/// Everything a run did: the plan it resolved, the sync report (with every registry's
/// capabilities as the run ended, pruning included) and, when a mapping prunes, the prune
/// report. What the CLI renders and maps to an exit code.
#[derive(Debug)]
pub struct RunOutcome {
    /// Every mapping as the prepare phase resolved it, in config order.
    pub plan: Plan,
    /// What the engine did; `registries` carry the capabilities learned by pruning too.
    pub report: SyncReport,
    /// What pruning did, when some mapping prunes (`None` otherwise).
    pub prune: Option<PruneReport>,
    /// The shallow verify that followed ([`Mode::WriteThenVerify`], not after a stop).
    pub verify: Option<VerifyReport>,
    /// An import's bundle: signed, only recorded, or not authenticated (`None` for any other run).
    pub authenticity: Option<Authenticity>,
}

/// A dry run's outcome: the plan, what a sync would copy and what pruning would delete.
#[derive(Debug)]
pub struct DryRunOutcome {
    /// Every mapping as the prepare phase resolved it, in config order.
    pub plan: Plan,
    /// What a sync would copy.
    pub dry: DryRun,
    /// What pruning would delete, when some mapping prunes (`None` otherwise).
    pub prune: Option<PruneReport>,
    /// An import's bundle: signed, only recorded, or not authenticated (`None` for any other run).
    pub authenticity: Option<Authenticity>,
}

/// The JSON of a report with an import's `authenticity` first and the prune report as its last
/// member (each absent when there is none).
#[derive(Serialize)]
struct WithPrune<'a, T: Serialize> {
    #[serde(skip_serializing_if = "Option::is_none")]
    authenticity: Option<&'a Authenticity>,
    #[serde(flatten)]
    report: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    prune: Option<&'a PruneReport>,
}

impl RunOutcome {
    /// How the run ended: the sync report's verdict, and a clean sync whose pruning left a tag
    /// that should have gone, or whose verify found something missing or drifted (or could not
    /// check it), is partial.
    pub fn verdict(&self) -> Verdict {
        let verified = self
            .verify
            .as_ref()
            .is_none_or(|v| v.verdict() == VerifyVerdict::Complete);
        match self.report.verdict() {
            Verdict::Clean
                if self.prune.as_ref().is_some_and(PruneReport::has_failures) || !verified =>
            {
                Verdict::Partial
            }
            v => v,
        }
    }

    /// Each registry the run talked to, with what it turned out to accept.
    pub fn capabilities(
        &self,
    ) -> impl Iterator<
        Item = (
            &str,
            &ferry_distribution::capabilities::CapabilitiesSnapshot,
        ),
    > {
        self.report
            .registries
            .iter()
            .map(|r| (r.registry.as_str(), &r.capabilities))
    }

    /// The JSON report: an import's `authenticity`, the sync report's members, then `prune`
    /// when pruning ran.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(&WithPrune {
            authenticity: self.authenticity.as_ref(),
            report: &self.report,
            prune: self.prune.as_ref(),
        })
    }

    /// The human summary: the sync report's, then pruning's (when it has anything to say).
    pub fn render_text(&self) -> String {
        let mut out = self.report.render_text();
        if let Some(text) = self.prune.as_ref().map(PruneReport::render_text) {
            let text = text.trim_end();
            if !text.is_empty() {
                out.push_str(text);
                out.push('\n');
            }
        }
        out
    }
}

impl DryRunOutcome {
    /// The JSON report: an import's `authenticity`, the dry run's members, then `prune` when
    /// some mapping prunes.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(&WithPrune {
            authenticity: self.authenticity.as_ref(),
            report: &self.dry,
            prune: self.prune.as_ref(),
        })
    }

    /// The human summary: the dry run's, then what pruning would delete.
    pub fn render_text(&self) -> String {
        let mut out = self.dry.render_text();
        if let Some(p) = &self.prune {
            out.push_str(&p.render_text());
        }
        out
    }
}
