//! A whole sync with its two phases overlapped: each mapping goes to the engine the moment the
//! prepare phase resolves it, and the whole plan is collected for pruning and the report.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use tokio::time::Instant;

use crate::config::Config;
use crate::engine::{EngineOptions, StopSignal, sync_as_resolved};
use crate::plan::Plan;
use crate::prepare::{PrepareOptions, PrepareTracker, resolve_each};
use crate::registries::Registries;
use crate::report::SyncReport;

/// Resolves every mapping of `config` and syncs each as soon as it is resolved. `on_prepared`
/// runs once the last mapping is resolved (while the engine goes on), with the plan in config
/// order; what it returns comes back with the plan and the report. The report's `elapsed` is
/// the whole run.
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
    report.elapsed = start.elapsed();
    (plan, output, report)
}
