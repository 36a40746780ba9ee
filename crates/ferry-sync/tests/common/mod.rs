//! What ferry-sync's tests share: the test kit's registry pair and config builder, and one way
//! to run a sync, `run_sync`, through the binary's own door (`Run::sync`, state-directory
//! journal included: prepare and engine, then pruning).
#![allow(dead_code)]

pub mod layout;

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_config::{self as config, Config};
use ferry_store::resume::StateDir;
use ferry_sync::dryrun::DryRun;
use ferry_sync::plan::Plan;
use ferry_sync::progress::SyncProgress;
use ferry_sync::prune::PruneReport;
use ferry_sync::registries::Registries;
use ferry_sync::report::SyncReport;
use ferry_sync::run::{Outcome, RunContext, RunObserver, RunProgress};
use ferry_sync::{PrepareTracker, StopSignal};
use ferry_testkit::fixtures::{MirrorYaml, Served};
use ferry_testkit::registry::TestRegistry;

#[allow(unused_imports)]
pub use ferry_testkit::fixtures::{
    ALL_TAGS, QUICK_RETRY, mapping, pair, pair_with, real_pair, registry_entry, started,
};

/// A config written as YAML piece by piece (the test kit's `MirrorYaml`: top-level settings,
/// registries each served over plain HTTP at its URL, mappings), parsed (with no environment)
/// by `build`.
#[derive(Debug, Clone, Default)]
pub struct ConfigBuilder(MirrorYaml);

/// An empty config: `version: 1` and nothing else until the builder adds it.
pub fn config() -> ConfigBuilder {
    ConfigBuilder::default()
}

/// The engine tests' shape: four mappings resolving at once, and each of `regs` with 16
/// connections and five attempts 100 ms to 2 s apart.
pub fn engine_config(regs: &[&TestRegistry]) -> ConfigBuilder {
    config().setting("concurrency: 4").registries(
        regs,
        &[
            "max_concurrent: 16",
            "retry: { attempts: 5, base: 100ms, cap: 2s }",
        ],
    )
}

impl ConfigBuilder {
    /// A top-level line, e.g. `concurrency: 4` or `engine: { images_in_flight: 2 }`.
    pub fn setting(self, line: &str) -> Self {
        ConfigBuilder(self.0.setting(line))
    }

    /// `engine: { fields }`.
    pub fn engine(self, fields: &str) -> Self {
        ConfigBuilder(self.0.engine(fields))
    }

    /// The registry `reg` under its own host, with `fields` (`key: value` each).
    pub fn registry(self, reg: &impl Served, fields: &[&str]) -> Self {
        ConfigBuilder(self.0.registry(reg, fields))
    }

    /// Each of `regs` with the same `fields`.
    pub fn registries(self, regs: &[&TestRegistry], fields: &[&str]) -> Self {
        ConfigBuilder(self.0.registries(regs, fields))
    }

    /// A registry entry for `host` served at `url`, with `fields` (`key: value` each).
    pub fn entry(self, host: &str, url: &str, fields: &[&str]) -> Self {
        ConfigBuilder(self.0.entry(host, url, fields))
    }

    /// Mapping entries as YAML (see `mapping`), appended in order.
    pub fn mappings(self, yaml: &str) -> Self {
        ConfigBuilder(self.0.mappings(yaml))
    }

    /// `source` to `targets` with `fields` (see `mapping`).
    pub fn mapping(self, source: impl Display, targets: &[String], fields: &[&str]) -> Self {
        ConfigBuilder(self.0.mapping(source, targets, fields))
    }

    /// The YAML `build` parses.
    pub fn text(&self) -> String {
        self.0.text()
    }

    /// The parsed config; a config that does not parse fails the test with its errors.
    pub fn build(&self) -> Config {
        parse(&self.text())
    }
}

/// `text` parsed as `test.yaml` with no environment.
pub fn parse(text: &str) -> Config {
    config::parse(text, Path::new("test.yaml"), &|_| None).expect("test config parses")
}

/// What a run did: the plan, the sync report (capabilities refreshed after pruning, as the
/// binary reports them), the prune report when a mapping prunes, the registries it used and
/// its state directory.
pub struct Run {
    pub plan: Plan,
    pub report: SyncReport,
    pub pruned: Option<PruneReport>,
    pub registries: Registries,
    /// The state directory the run journalled its uploads in.
    pub state_dir: PathBuf,
    /// The run's own state directory (removed with the `Run`) when the test named none.
    _own_state: Option<tempfile::TempDir>,
    /// The prepare phase's tracker, read after the run.
    pub tracker: Arc<PrepareTracker>,
}

/// A test's look at the plan once every mapping is resolved (while the engine goes on); the
/// run goes on to pruning only once what it returns is done.
pub type OnPrepared = Box<dyn FnOnce(&Plan) -> futures::future::BoxFuture<'static, ()> + Send>;

/// What a test may change about a run; the default is the binary's own `ferry sync`.
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Registries to use (kept across runs, or with the ECR API); by default new ones. Either
    /// way the run's state directory is their upload journal.
    pub registries: Option<Registries>,
    /// The run's stop signal (a test stops it before or during the run).
    pub stop: Option<StopSignal>,
    /// The engine's progress counters, to read after the run.
    pub progress: Option<Arc<SyncProgress>>,
    /// Called once every mapping is resolved, while the engine goes on.
    pub on_prepared: Option<OnPrepared>,
    /// The state directory to journal uploads in (shared by runs that resume each other); by
    /// default one of the run's own.
    pub state_dir: Option<&'a Path>,
    /// The upload journal in place of the state directory's (a test that counts its calls).
    pub journal: Option<Arc<dyn ferry_distribution::ops::UploadJournal>>,
    /// The tag cache the run believes and writes (`engine.tag_cache_ttl`); none by default.
    pub tag_cache: Option<Arc<ferry_store::resume::TagCache>>,
}

/// `ferry sync` over `config`, as the binary runs it.
pub async fn run_sync(config: &Config) -> Run {
    run_sync_with(config, RunOptions::default()).await
}

/// Tells a test the plan (while the engine goes on) and keeps the prepare phase's tracker.
struct Observer {
    on_prepared: std::sync::Mutex<Option<OnPrepared>>,
    tracker: std::sync::Mutex<Option<Arc<PrepareTracker>>>,
}

impl RunObserver for Observer {
    fn preparing(&self, tracker: &Arc<PrepareTracker>) {
        *self.tracker.lock().unwrap() = Some(Arc::clone(tracker));
    }

    fn prepared(&self, plan: &Plan) -> futures::future::BoxFuture<'static, ()> {
        match self.on_prepared.lock().unwrap().take() {
            Some(hook) => hook(plan),
            None => Box::pin(async {}),
        }
    }
}

/// `ferry sync` over `config`, as src/commands/sync.rs runs it: through the front door
/// (`Run::sync`) with the uploads journalled in a state directory, prepare and engine
/// overlapped, then pruning (unless stopped), then the report's capabilities refreshed. The one
/// place that knows the entry point's signature.
pub async fn run_sync_with(config: &Config, options: RunOptions<'_>) -> Run {
    let stop = options.stop.unwrap_or_default();
    // The run's state directory as the upload journal, as src/commands/sync.rs wires it
    // (opened on the run's stop signal): the test's, or a directory of the run's own.
    let own_state = match options.state_dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().expect("state directory")),
    };
    let state_dir = options
        .state_dir
        .map(Path::to_path_buf)
        .or_else(|| own_state.as_ref().map(|d| d.path().to_path_buf()))
        .expect("a state directory");
    let journal = StateDir::open(&state_dir, stop.clone()).expect("state directory opens");
    let registries = options
        .registries
        .unwrap_or_else(|| Registries::new(config));
    let observer = Arc::new(Observer {
        on_prepared: std::sync::Mutex::new(options.on_prepared),
        tracker: std::sync::Mutex::new(None),
    });
    let mut ctx = RunContext::new(config);
    ctx.registries = registries.clone();
    ctx.journal = Some(options.journal.unwrap_or_else(|| Arc::new(journal)));
    ctx.first_seen = Some(ferry_store::resume::FirstSeen::new(&state_dir, true));
    ctx.tag_cache = options.tag_cache;
    ctx.stop = stop;
    ctx.progress = RunProgress {
        sync: options.progress.unwrap_or_default(),
        observer: Some(observer.clone()),
    };
    let outcome = match ferry_sync::run::Run::new(config.clone(), ctx).sync().await {
        Outcome::Synced(outcome) => *outcome,
        Outcome::DryRun(_) => unreachable!("a writing run"),
    };
    let tracker = observer
        .tracker
        .lock()
        .unwrap()
        .take()
        .expect("the run reported its prepare phase");
    let ferry_sync::run::RunOutcome {
        plan,
        report,
        prune: pruned,
        verify: _,
        authenticity: _,
    } = outcome;
    Run {
        plan,
        report,
        pruned,
        registries,
        state_dir,
        _own_state: own_state,
        tracker,
    }
}

/// What `ferry sync --dry-run` found: the plan, the measure of what a sync would copy, and
/// what pruning would delete when a mapping prunes.
pub struct DryRunOutcome {
    pub plan: Plan,
    pub dry: DryRun,
    pub pruned: Option<PruneReport>,
}

/// `ferry sync --dry-run` over `config` (with `registries`, else new ones), as the binary runs
/// it: the prepare phase, then the measure and the prune decision from the plan alone.
pub async fn dry_run(config: &Config, registries: Option<Registries>) -> DryRunOutcome {
    let mut ctx = quiet(config);
    if let Some(r) = registries {
        ctx.registries = r;
    }
    let outcome = ferry_sync::run::Run::new(config.clone(), ctx)
        .dry_run()
        .await;
    DryRunOutcome {
        plan: outcome.plan,
        dry: outcome.dry,
        pruned: outcome.prune,
    }
}

/// The prepare phase alone, with the binary's options: for tests whose point is the plan (or
/// the engine over a finished plan), and for the dry run.
pub async fn prepare_only(config: &Config, registries: &Registries) -> Plan {
    let mut ctx = quiet(config);
    ctx.registries = registries.clone();
    ferry_sync::run::Run::new(config.clone(), ctx).plan().await
}

/// `prepare_only`, and the tracker that counted it.
pub async fn prepare_tracked(
    config: &Config,
    registries: &Registries,
) -> (Plan, Arc<PrepareTracker>) {
    let observer = Arc::new(Observer {
        on_prepared: std::sync::Mutex::new(None),
        tracker: std::sync::Mutex::new(None),
    });
    let mut ctx = quiet(config);
    ctx.registries = registries.clone();
    ctx.progress.observer = Some(observer.clone());
    let plan = ferry_sync::run::Run::new(config.clone(), ctx).plan().await;
    let tracker = observer
        .tracker
        .lock()
        .unwrap()
        .take()
        .expect("the run reported its prepare phase");
    (plan, tracker)
}

/// The engine alone over a finished `plan`, with the binary's engine options: for tests whose
/// point is the engine's own windows, measured with no prepare request beside them.
pub async fn engine_only(config: &Config, registries: &Registries, plan: &Plan) -> SyncReport {
    let mut ctx = quiet(config);
    ctx.registries = registries.clone();
    ferry_sync::run::Run::new(config.clone(), ctx)
        .copy(plan)
        .await
}

/// Draws nothing; with it the prepare phase writes no watch line (as the CLI's display).
struct Quiet;

impl RunObserver for Quiet {}

/// The context the binary builds, with no display: the config's options, no watch line.
fn quiet(config: &Config) -> RunContext {
    let mut ctx = RunContext::new(config);
    ctx.progress.observer = Some(Arc::new(Quiet));
    ctx
}

/// Whether any mapping prunes.
fn prunes(config: &Config) -> bool {
    config.mappings.iter().any(|m| m.prune)
}
