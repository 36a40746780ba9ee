//! What ferry-sync's tests share: a registry pair, a config builder, and one way to run a sync,
//! `run_sync`, through the binary's own door (`Run::sync`: prepare and engine, then pruning).
#![allow(dead_code)]

pub mod layout;

use std::fmt::Display;
use std::path::Path;
use std::sync::Arc;

use ferry_config::{self as config, Config};
use ferry_sync::dryrun::DryRun;
use ferry_sync::plan::Plan;
use ferry_sync::progress::SyncProgress;
use ferry_sync::prune::PruneReport;
use ferry_sync::registries::Registries;
use ferry_sync::report::SyncReport;
use ferry_sync::run::{Outcome, RunContext, RunObserver, RunProgress};
use ferry_sync::{PrepareTracker, StopSignal};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::registry::{TestRegistry, TestRegistryBuilder};

/// The retry policy most tests give a registry: two quick attempts.
pub const QUICK_RETRY: &str = "retry: { attempts: 2, base: 10ms, cap: 50ms }";

/// A source and a target test-kit registry with no personality, no latency and no faults.
pub async fn pair() -> (TestRegistry, TestRegistry) {
    (started().await, started().await)
}

/// A source and a target test-kit registry, each built by `build` (a personality, latency, the
/// referrers API) from `TestRegistry::builder()`.
pub async fn pair_with(
    build: impl Fn(TestRegistryBuilder) -> TestRegistryBuilder,
) -> (TestRegistry, TestRegistry) {
    let start =
        |b: TestRegistryBuilder| async move { b.start().await.expect("test registry starts") };
    (
        start(build(TestRegistry::builder())).await,
        start(build(TestRegistry::builder())).await,
    )
}

/// One plain test-kit registry.
pub async fn started() -> TestRegistry {
    TestRegistry::builder()
        .start()
        .await
        .expect("test registry starts")
}

/// Two real distribution registries (a source and a target); `None` where the harness skips
/// them (`FERRY_SKIP_REAL_REGISTRY`, local runs only), so the test returns.
pub async fn real_pair() -> Option<(RealRegistry, RealRegistry)> {
    let src = RealRegistry::start_for_test()
        .await
        .expect("source registry")?;
    let dst = RealRegistry::start_for_test()
        .await
        .expect("target registry")?;
    Some((src, dst))
}

/// A config written as YAML piece by piece: top-level settings, registries (each served over
/// plain HTTP at its URL) and mappings, parsed (with no environment) by `build`.
#[derive(Debug, Clone, Default)]
pub struct ConfigBuilder {
    settings: String,
    registries: String,
    mappings: String,
}

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
    pub fn setting(mut self, line: &str) -> Self {
        self.settings.push_str(line);
        self.settings.push('\n');
        self
    }

    /// `engine: { fields }`.
    pub fn engine(self, fields: &str) -> Self {
        self.setting(&format!("engine: {{ {fields} }}"))
    }

    /// The test-kit registry `reg` under its own host, with `fields` (`key: value` each).
    pub fn registry(self, reg: &TestRegistry, fields: &[&str]) -> Self {
        self.entry(&reg.host(), &reg.url(), fields)
    }

    /// Each of `regs` with the same `fields`.
    pub fn registries(self, regs: &[&TestRegistry], fields: &[&str]) -> Self {
        regs.iter().fold(self, |b, r| b.registry(r, fields))
    }

    /// A registry entry for `host` served at `url`, with `fields` (`key: value` each).
    pub fn entry(mut self, host: &str, url: &str, fields: &[&str]) -> Self {
        self.registries.push_str(&registry_entry(host, url, fields));
        self
    }

    /// Mapping entries as YAML (see `mapping`), appended in order.
    pub fn mappings(mut self, yaml: &str) -> Self {
        self.mappings.push_str(yaml);
        self
    }

    /// `source` to `targets` with `fields` (see `mapping`).
    pub fn mapping(self, source: impl Display, targets: &[String], fields: &[&str]) -> Self {
        self.mappings(&mapping(source, targets, fields))
    }

    /// The YAML `build` parses.
    pub fn text(&self) -> String {
        let mut text = format!("version: 1\n{}", self.settings);
        if !self.registries.is_empty() {
            text.push_str("registries:\n");
            text.push_str(&self.registries);
        }
        text.push_str("mappings:\n");
        text.push_str(&self.mappings);
        text
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

/// One registry entry as YAML: `host` served over plain HTTP at `url`, then each of `fields`
/// (`key: value`) on its own line under it.
pub fn registry_entry(host: &str, url: &str, fields: &[&str]) -> String {
    let mut yaml = format!("  - host: \"{host}\"\n    url: \"{url}\"\n    insecure: true\n");
    for field in fields {
        yaml.push_str(&format!("    {field}\n"));
    }
    yaml
}

/// One mapping entry: `source` to `targets` (each quoted), then each of `fields` on its own
/// line under it (`tags: …`, `prune: true`, …).
pub fn mapping(source: impl Display, targets: &[String], fields: &[&str]) -> String {
    let targets: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
    let mut yaml = format!(
        "  - source: \"{source}\"\n    targets: [{}]\n",
        targets.join(", ")
    );
    for field in fields {
        yaml.push_str(&format!("    {field}\n"));
    }
    yaml
}

/// Every tag: `tags: { include: ["*"] }`.
pub const ALL_TAGS: &str = "tags: { include: [\"*\"] }";

/// What a run did: the plan, the sync report (capabilities refreshed after pruning, as the
/// binary reports them), the prune report when a mapping prunes, and the registries it used.
pub struct Run {
    pub plan: Plan,
    pub report: SyncReport,
    pub pruned: Option<PruneReport>,
    pub registries: Registries,
    /// The prepare phase's tracker, read after the run.
    pub tracker: Arc<PrepareTracker>,
}

/// A test's look at the plan once every mapping is resolved (while the engine goes on); the
/// run goes on to pruning only once what it returns is done.
pub type OnPrepared = Box<dyn FnOnce(&Plan) -> futures::future::BoxFuture<'static, ()> + Send>;

/// What a test may change about a run; the default is the binary's own `ferry sync`.
#[derive(Default)]
pub struct RunOptions {
    /// Registries to use (kept across runs, or with the ECR API); by default new ones.
    pub registries: Option<Registries>,
    /// The run's stop signal (a test stops it before or during the run).
    pub stop: Option<StopSignal>,
    /// The engine's progress counters, to read after the run.
    pub progress: Option<Arc<SyncProgress>>,
    /// Called once every mapping is resolved, while the engine goes on.
    pub on_prepared: Option<OnPrepared>,
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
/// (`Run::sync`), prepare and engine overlapped, then pruning (unless stopped), then the
/// report's capabilities refreshed. The one place that knows the entry point's signature.
pub async fn run_sync_with(config: &Config, options: RunOptions) -> Run {
    let registries = options
        .registries
        .unwrap_or_else(|| Registries::new(config));
    let observer = Arc::new(Observer {
        on_prepared: std::sync::Mutex::new(options.on_prepared),
        tracker: std::sync::Mutex::new(None),
    });
    let mut ctx = RunContext::new(config);
    ctx.registries = registries.clone();
    ctx.stop = options.stop.unwrap_or_default();
    ctx.progress = RunProgress {
        sync: options.progress.unwrap_or_default(),
        observer: Some(observer.clone()),
    };
    let outcome = match ferry_sync::run::Run::new(config, ctx).sync().await {
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
    } = outcome;
    Run {
        plan,
        report,
        pruned,
        registries,
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
    let outcome = ferry_sync::run::Run::new(config, ctx).dry_run().await;
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
    ferry_sync::run::Run::new(config, ctx).plan().await
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
    let plan = ferry_sync::run::Run::new(config, ctx).plan().await;
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
    ferry_sync::run::Run::new(config, ctx).copy(plan).await
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
