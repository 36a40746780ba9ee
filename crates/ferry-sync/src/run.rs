//! A whole run, ferry-sync's one entry point for it: prepare and engine overlapped (each mapping
//! goes to the engine as it resolves), then pruning, returned as one [`RunOutcome`].

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use serde::Serialize;
use tokio::time::Instant;

use crate::dryrun::DryRun;
use crate::engine::{EngineOptions, StopSignal, sync_as_resolved};
use crate::plan::Plan;
use crate::prepare::{PrepareOptions, PrepareTracker, resolve_all, resolve_each};
use crate::prune::{self, PruneReport};
use crate::registries::Registries;
use crate::report::{SyncReport, Verdict};
use ferry_config::Config;

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
}

/// The JSON of a report with the prune report as its last member (absent when none ran).
#[derive(Serialize)]
struct WithPrune<'a, T: Serialize> {
    #[serde(flatten)]
    report: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    prune: Option<&'a PruneReport>,
}

impl RunOutcome {
    /// How the run ended: the sync report's verdict, and a clean sync whose pruning left a tag
    /// that should have gone is partial.
    pub fn verdict(&self) -> Verdict {
        match self.report.verdict() {
            Verdict::Clean if self.prune.as_ref().is_some_and(PruneReport::has_failures) => {
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

    /// The JSON report: the sync report's members, then `prune` when pruning ran.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(&WithPrune {
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
    /// The JSON report: the dry run's members, then `prune` when some mapping prunes.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(&WithPrune {
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

/// Whether any mapping of `config` prunes.
fn prunes(config: &Config) -> bool {
    config.mappings.iter().any(|m| m.prune)
}

/// A whole run of `config`: resolves every mapping and syncs each as soon as it is resolved,
/// then prunes (every candidate reported interrupted once `stop` is set). `on_prepared` runs
/// once the last mapping is resolved (while the engine goes on), with the plan in config
/// order; `on_synced` gets what it returned once the engine is done, before pruning (a display
/// of the copy phase ends there, on the report's figures); what that returns comes back beside
/// the outcome. The report's `elapsed` is the prepare phase and the engine (pruning not
/// included).
#[allow(clippy::too_many_arguments)]
pub async fn run<F, Fut, G, Gut>(
    config: &Config,
    registries: &Registries,
    prepare: &PrepareOptions,
    tracker: Arc<PrepareTracker>,
    engine: &EngineOptions,
    stop: &StopSignal,
    on_prepared: F,
    on_synced: G,
) -> (RunOutcome, Gut::Output)
where
    F: FnOnce(&Plan) -> Fut,
    Fut: Future,
    G: FnOnce(Fut::Output) -> Gut,
    Gut: Future,
{
    let (plan, output, mut report) = prepare_and_sync(
        config,
        registries,
        prepare,
        tracker,
        engine,
        stop,
        on_prepared,
    )
    .await;
    let output = on_synced(output).await;
    let prune = match prunes(config) {
        true => {
            let decision = prune::decide(&plan, config, Some(&report));
            let mut pruned = prune::execute(decision.candidates, registries, stop).await;
            pruned.add_skipped(decision.skipped);
            Some(pruned)
        }
        false => None,
    };
    report.refresh_capabilities(registries);
    let outcome = RunOutcome {
        plan,
        report,
        prune,
    };
    (outcome, output)
}

/// A dry run of `config`: resolves every mapping, then measures what a sync would copy and what
/// pruning would delete; writes nothing. `on_prepared` runs once the plan is in.
pub async fn dry_run<F, Fut>(
    config: &Config,
    registries: &Registries,
    prepare: &PrepareOptions,
    tracker: Arc<PrepareTracker>,
    on_prepared: F,
) -> DryRunOutcome
where
    F: FnOnce(&Plan) -> Fut,
    Fut: Future<Output = ()>,
{
    let plan = resolve_all(config, registries, prepare, tracker).await;
    on_prepared(&plan).await;
    let dry = DryRun::measure(&plan, registries).await;
    let prune = prunes(config).then(|| {
        let decision = prune::decide(&plan, config, None);
        let mut report = prune::dry_run(decision.candidates);
        report.add_skipped(decision.skipped);
        report
    });
    DryRunOutcome { plan, dry, prune }
}

/// Resolves every mapping of `config` and syncs each as soon as it is resolved, without
/// pruning: the two overlapped phases of [`run`]. `on_prepared` runs once the last mapping is
/// resolved (while the engine goes on), with the plan in config order; what it returns comes
/// back with the plan and the report. The report's `elapsed` is the whole run.
pub async fn prepare_and_sync<F, Fut>(
    config: &Config,
    registries: &Registries,
    prepare: &PrepareOptions,
    tracker: Arc<PrepareTracker>,
    engine: &EngineOptions,
    stop: &StopSignal,
    on_prepared: F,
) -> (Plan, Fut::Output, SyncReport)
where
    F: FnOnce(&Plan) -> Fut,
    Fut: Future,
{
    let start = Instant::now();
    let (resolved, to_engine) = futures::channel::mpsc::unbounded();
    let prepared = async {
        let mut each = std::pin::pin!(resolve_each(config, registries, prepare, tracker));
        let mut mappings = Vec::new();
        while let Some(m) = each.next().await {
            // The engine holds the receiver until this sender is dropped: a send cannot fail.
            let _ = resolved.unbounded_send(m.clone());
            mappings.push(m);
        }
        drop(resolved);
        mappings.sort_by(|a, b| (a.index, &a.source).cmp(&(b.index, &b.source)));
        let plan = Plan {
            mappings,
            elapsed: start.elapsed(),
        };
        let output = on_prepared(&plan).await;
        (plan, output)
    };
    let synced = sync_as_resolved(to_engine, registries, engine, stop);
    let ((plan, output), mut report) = futures::join!(prepared, synced);
    report.note_expansions(&plan);
    report.note_selections(&plan);
    report.elapsed = start.elapsed();
    (plan, output, report)
}
