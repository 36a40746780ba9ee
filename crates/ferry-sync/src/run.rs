//! A whole run, ferry-sync's one front door: [`Run`] over a config and its [`RunContext`], with
//! `sync`, `dry_run`, `verify`, `export` and `import`, each returning its outcome.

use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::dryrun::DryRun;
use crate::engine::{EngineOptions, StopSignal, sync_as_resolved};
use crate::import::{ImportError, Imported};
pub use crate::outcome::{DryRunOutcome, Outcome, RunOutcome};
use crate::plan::Plan;
use crate::prepare::{PrepareOptions, PrepareTracker, resolve_all, resolve_each};
use crate::progress::SyncProgress;
use crate::prune;
use crate::registries::Registries;
use crate::report::SyncReport;
use crate::verify::{VerifyOptions, VerifyReport};
use ferry_config::Config;
use ferry_distribution::ops::UploadJournal;
use ferry_store::archive::Stores;
use ferry_store::archive::writer::{ArchiveWriter, BundleSpec, Naming, Output};

/// Whether a run writes, and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Copy what is stale, then prune.
    #[default]
    Write,
    /// [`Mode::Write`], then a shallow verify of what the run touched (`ferry sync --verify`):
    /// anything missing or drifted makes the run partial.
    WriteThenVerify,
    /// Resolve and measure; write nothing.
    DryRun,
    /// `ferry sync --repair`: a deep verify first (every blob of every selected image on every
    /// target), then [`Mode::Write`] with every image it found a blob or child manifest missing
    /// or wrong under written again; the report lists what was put back.
    Repair,
}

/// What watches a run as its phases end (a display); every method does nothing by default.
pub trait RunObserver: Send + Sync {
    /// The prepare phase starts; `tracker` counts its mappings.
    fn preparing(&self, tracker: &Arc<PrepareTracker>) {
        let _ = tracker;
    }
    /// Every mapping is resolved (the engine goes on), with the plan in config order.
    fn prepared(&self, plan: &Plan) -> BoxFuture<'static, ()> {
        let _ = plan;
        Box::pin(async {})
    }
    /// The engine is done, before pruning.
    fn synced(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// How a run reports while it goes: the engine's counters and an observer of its phases.
#[derive(Clone, Default)]
pub struct RunProgress {
    /// Counters the engine keeps as it copies (what a progress line reads).
    pub sync: Arc<SyncProgress>,
    /// Told as each phase ends; with one, the prepare phase writes no log line of its own.
    pub observer: Option<Arc<dyn RunObserver>>,
}

impl std::fmt::Debug for RunProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunProgress")
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

/// Everything a run uses besides its config, made by the caller: the registry clients, the
/// archives it reads and writes, the upload journal, the mode, the stop and the progress.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// One client per registry host (`Registries::new(&config)`, or one kept across runs).
    pub registries: Registries,
    /// The archives the run reads (each indexed once) and writes.
    pub stores: Stores,
    /// Where uploads in flight are recorded for the next run (the state directory), if anywhere.
    pub journal: Option<Arc<dyn UploadJournal>>,
    /// Whether the run writes, and what follows.
    pub mode: Mode,
    /// Set to stop starting work (a signal, a bound).
    pub stop: StopSignal,
    /// Counters and an observer of the phases.
    pub progress: RunProgress,
    /// The state directory's first-seen records (`signatures: {min_age, tlog: skip}`), if any.
    pub first_seen: Option<ferry_store::resume::FirstSeen>,
    /// The state directory's tag cache (`engine.tag_cache_ttl`), loaded for the run; a
    /// writing run records what it confirmed there. `None`: every listed tag gets a HEAD.
    pub tag_cache: Option<Arc<ferry_store::resume::TagCache>>,
}

impl RunContext {
    /// A context for `config`: its own clients and archives, no journal, writing, not stopped,
    /// unobserved.
    pub fn new(config: &Config) -> Self {
        RunContext {
            registries: Registries::new(config),
            stores: Stores::default(),
            journal: None,
            mode: Mode::Write,
            stop: StopSignal::default(),
            progress: RunProgress::default(),
            first_seen: None,
            tag_cache: None,
        }
    }
}

/// `ferry export`'s bundle: where it goes and its record.
#[derive(Debug)]
pub struct ExportSpec {
    /// The file (or standard output).
    pub output: Output,
    /// The record (`ferry-bundle.json`): mappings, bases, creation time.
    pub bundle: BundleSpec,
}

/// One run of a config: the front door every command goes through.
#[derive(Debug)]
pub struct Run {
    /// Shared with the caller, not copied: a config of thousands of mappings is megabytes
    /// (issue 42's memory). Export and import change their own copy.
    config: Arc<Config>,
    ctx: RunContext,
    label: Option<String>,
}

impl Run {
    /// A run of `config` with `ctx`'s clients, archives, journal, mode, stop and progress.
    pub fn new(config: impl Into<Arc<Config>>, mut ctx: RunContext) -> Self {
        // The run sees the clients through its own view: its counters and its journal (a dry run
        // uploads nothing), whatever else shares them (`ferry watch`'s event syncs).
        let journal = ctx.journal.clone().filter(|_| ctx.mode != Mode::DryRun);
        ctx.registries = ctx.registries.for_run(journal);
        Run {
            config: config.into(),
            ctx,
            label: None,
        }
    }

    /// Opens `origin` for reading with the run's clients and archives: what `ferry inspect` and
    /// `ferry tags` read through (a registry repository, a layout or an archive).
    pub async fn source(
        &self,
        origin: &ferry_config::Origin,
    ) -> Result<crate::Source, ferry_distribution::Error> {
        crate::source::Source::open(origin, &self.ctx.registries, &self.ctx.stores).await
    }

    /// Names the run's one mapping in the report's text (`ferry copy`'s `SRC -> DST`).
    pub fn labelled(mut self, label: String) -> Self {
        self.label = Some(label);
        self
    }

    /// The registry clients the run uses (what a display counts requests on).
    pub fn registries(&self) -> &Registries {
        &self.ctx.registries
    }

    /// Resolves every mapping and returns the plan, reading only: the first phase of a sync
    /// on its own (what a test or a tool inspects before anything is copied).
    pub async fn plan(self) -> Plan {
        let prepare = self.prepare_options();
        let tracker = self.tracker();
        resolve_all(&self.config, &self.ctx.registries, &prepare, tracker).await
    }

    /// Copies what `plan` (resolved earlier by [`Run::plan`]) says is stale, with no prepare
    /// phase and no pruning: the engine's own requests alone.
    pub async fn copy(self, plan: &Plan) -> SyncReport {
        let mut engine = EngineOptions::from_settings(&self.config.engine);
        engine.progress = Arc::clone(&self.ctx.progress.sync);
        engine.stores = self.ctx.stores.clone();
        crate::engine::sync(plan, &self.ctx.registries, &engine, &self.ctx.stop).await
    }

    /// Syncs (or, in [`Mode::DryRun`], measures) every mapping of the config.
    pub async fn sync(self) -> Outcome {
        let prepare = self.prepare_options();
        self.go(prepare).await
    }

    /// Resolves every mapping, then measures what a sync would copy and what pruning would
    /// delete; writes nothing, whatever the mode.
    pub async fn dry_run(self) -> DryRunOutcome {
        let prepare = self.prepare_options();
        self.measure(prepare).await
    }

    /// `ferry verify`: every target audited against its source, read-only; `deep` checks every
    /// blob the manifests reference too.
    pub async fn verify(self, deep: bool) -> VerifyReport {
        self.verify_with(VerifyOptions {
            deep,
            signatures: false,
        })
        .await
    }

    /// `ferry verify` with its options (`--deep`, `--signatures`).
    pub async fn verify_with(self, options: VerifyOptions) -> VerifyReport {
        let prepare = self.prepare_options();
        let tracker = self.tracker();
        crate::verify::run(
            &self.config,
            &self.ctx.registries,
            &prepare,
            tracker,
            options,
        )
        .await
    }

    /// `ferry verify --bundle`: whether the site holds every image the bundle (and each
    /// `--since` base) describes, read-only; the report and verdict are verify's.
    pub async fn verify_bundle(
        self,
        spec: &crate::verify::bundle::BundleVerify,
    ) -> Result<VerifyReport, ImportError> {
        crate::verify::bundle::run(spec, &self.ctx.registries, &self.ctx.stores).await
    }

    /// `ferry export`: every image the config selects written into one bundle (its every
    /// target, named there by the target's reference; the target registries never asked);
    /// nothing pruned.
    pub async fn export(mut self, spec: ExportSpec) -> Outcome {
        for m in &mut Arc::make_mut(&mut self.config).mappings {
            m.prune = false;
        }
        let bundle = ArchiveWriter::new(spec.output, Naming::FullReference, Some(spec.bundle));
        self.ctx.stores = self.ctx.stores.exporting_to(bundle);
        self.sync().await
    }

    /// `ferry import`: every image of the archive at `bundle` pushed where its `ref.name` says
    /// (or under `prefix`), as one-image mappings; the base an incremental bundle leaves out
    /// is checked on the target first, with the run's own clients. With `keys`, a bundle not
    /// signed by one of them is refused before any request (`ImportError::Untrusted`).
    pub async fn import(
        mut self,
        bundle: &Path,
        prefix: Option<&str>,
        keys: &[ferry_trust::PublicKey],
    ) -> Result<Imported, ImportError> {
        // The repositories the site config names: blobs may be mounted from them.
        let site = self
            .config
            .mappings
            .iter()
            .flat_map(|m| m.targets.iter())
            .filter_map(|t| match t {
                ferry_config::Target::Registry {
                    registry,
                    repository,
                } => Some((registry.clone(), repository.clone())),
                _ => None,
            })
            .collect();
        let planned = crate::import::plan(
            bundle,
            prefix,
            &self.ctx.registries,
            &self.ctx.stores,
            keys,
            &site,
            self.ctx.mode == Mode::DryRun,
        )
        .await?;
        let mut refused = planned.refused;
        let mut streamed = None;
        if self.ctx.mode != Mode::DryRun {
            // A bundle read from a pipe head first: its body streamed to the targets now, once;
            // an image a blob failed is refused before anything of it is tagged.
            let shape = EngineOptions::from_settings(&self.config.engine).shape;
            let skip = refused.keys().copied().collect();
            let images = &planned.images;
            let registries = &self.ctx.registries;
            let (failed, counts) = crate::import_stream::stream_body(
                &planned.reader,
                images,
                &skip,
                registries,
                shape,
                &self.ctx.stop,
            )
            .await;
            streamed = counts;
            for (n, e) in failed {
                refused.entry(n).or_insert(e);
            }
        }
        Arc::make_mut(&mut self.config).mappings = planned.mappings;
        let mut prepare = self.prepare_options();
        prepare.refused = Arc::new(refused);
        // One-image mappings share their targets: each target is listed once for the run.
        prepare.shared_listings = Some(Arc::default());
        let mut outcome = self.go(prepare).await;
        match &mut outcome {
            Outcome::Synced(o) => o.authenticity = Some(planned.authenticity.clone()),
            Outcome::DryRun(o) => o.authenticity = Some(planned.authenticity.clone()),
        }
        Ok(Imported {
            unplaced: planned.unplaced,
            mounted: planned.mounted,
            authenticity: planned.authenticity,
            outcome,
            spooled: planned.spooled,
            streamed,
        })
    }

    fn prepare_options(&self) -> PrepareOptions {
        let mut prepare = PrepareOptions::from_config(&self.config);
        prepare.stores = self.ctx.stores.clone();
        prepare.first_seen = self.ctx.first_seen.clone();
        prepare.tag_cache = self.ctx.tag_cache.clone();
        if self.ctx.progress.observer.is_some() {
            prepare.watch_interval = None;
        }
        prepare
    }

    fn tracker(&self) -> Arc<PrepareTracker> {
        let tracker = Arc::new(PrepareTracker::new(self.config.mappings.len()));
        if let Some(o) = &self.ctx.progress.observer {
            o.preparing(&tracker);
        }
        tracker
    }

    /// The observer told the plan is in; the future it returned, to await.
    fn prepared(&self, plan: &Plan) -> BoxFuture<'static, ()> {
        match &self.ctx.progress.observer {
            Some(o) => o.prepared(plan),
            None => Box::pin(async {}),
        }
    }

    async fn go(self, prepare: PrepareOptions) -> Outcome {
        match self.ctx.mode {
            Mode::DryRun => Outcome::DryRun(Box::new(self.measure(prepare).await)),
            Mode::Write | Mode::WriteThenVerify => {
                Outcome::Synced(Box::new(self.write(prepare).await))
            }
            Mode::Repair => Outcome::Synced(Box::new(self.repair(prepare).await)),
        }
    }

    /// The real run: prepare and engine overlapped, then pruning (every candidate reported
    /// interrupted once stopped), then, for [`Mode::WriteThenVerify`], the shallow verify.
    async fn write(self, prepare: PrepareOptions) -> RunOutcome {
        let tracker = self.tracker();
        let mut engine = EngineOptions::from_settings(&self.config.engine);
        engine.progress = Arc::clone(&self.ctx.progress.sync);
        engine.stores = self.ctx.stores.clone();
        let (config, registries, stop) = (&self.config, &self.ctx.registries, &self.ctx.stop);
        let (plan, (), mut report) = prepare_and_sync(
            config,
            registries,
            &prepare,
            tracker,
            &engine,
            stop,
            |plan| self.prepared(plan),
        )
        .await;
        if let Some(o) = &self.ctx.progress.observer {
            o.synced().await;
        }
        if let Some(cache) = &self.ctx.tag_cache {
            Arc::clone(cache)
                .store(crate::tag_cache::seen(&plan, &report))
                .await;
        }
        let prune = match prunes(config) {
            true => {
                let decision = prune::decide(&plan, config, Some(&report));
                let mut pruned = prune::execute(decision.candidates, registries, stop).await;
                pruned.add_skipped(decision.skipped);
                Some(pruned)
            }
            false => None,
        };
        report.refresh_capabilities(&registries.built());
        report.copy = self.label.clone();
        let verify = match self.ctx.mode == Mode::WriteThenVerify && !stop.is_stopped() {
            true => Some(crate::verify::after_sync(&plan, config, registries).await),
            false => None,
        };
        RunOutcome {
            plan,
            report,
            prune,
            verify,
            authenticity: None,
        }
    }

    /// `ferry sync --repair`: the deep verify (read-only, its own prepare phase), then the
    /// write with what it found planned stale, and the report's list of what was put back.
    async fn repair(self, mut prepare: PrepareOptions) -> RunOutcome {
        let checked = crate::verify::run(
            &self.config,
            &self.ctx.registries,
            &prepare,
            Arc::new(PrepareTracker::new(self.config.mappings.len())),
            VerifyOptions {
                deep: true,
                signatures: false,
            },
        )
        .await;
        let repairs = Arc::new(crate::repair::Repairs::of(&checked));
        if !repairs.is_empty() {
            prepare.repair = Some(Arc::clone(&repairs));
        }
        let mut outcome = self.write(prepare).await;
        outcome.report.repaired = repairs.repaired(&outcome.report);
        outcome.report.totals.images_repaired = outcome.report.repaired.len() as u64;
        outcome
    }

    /// The dry run: resolve, then measure what a sync would copy and pruning would delete.
    async fn measure(self, prepare: PrepareOptions) -> DryRunOutcome {
        let tracker = self.tracker();
        let (config, registries) = (&self.config, &self.ctx.registries);
        let plan = resolve_all(config, registries, &prepare, tracker).await;
        self.prepared(&plan).await;
        let dry = DryRun::measure_in(&plan, registries, &self.ctx.stores).await;
        let prune = prunes(config).then(|| {
            let decision = prune::decide(&plan, config, None);
            let mut report = prune::dry_run(decision.candidates);
            report.add_skipped(decision.skipped);
            report
        });
        DryRunOutcome {
            plan,
            dry,
            prune,
            authenticity: None,
        }
    }
}

/// Whether any mapping of `config` prunes.
fn prunes(config: &Config) -> bool {
    config.mappings.iter().any(|m| m.prune)
}

/// Resolves every mapping of `config` and syncs each as soon as it is resolved, without
/// pruning: the two overlapped phases of [`Run::sync`]. `on_prepared` runs once the last mapping is
/// resolved (while the engine goes on), with the plan in config order; what it returns comes
/// back with the plan and the report. The report's `elapsed` is the whole run.
pub(crate) async fn prepare_and_sync<F, Fut>(
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
    Fut: std::future::Future,
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
