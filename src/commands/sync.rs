//! `ferry sync`: prepare, then the engine (or the dry-run plan) and pruning, with progress, signal
//! handling (first SIGINT/SIGTERM stops new work, the second exits at once), report and exit code.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use ferry_config::Config;
use ferry_sync::engine::{EngineOptions, StopSignal};
use ferry_sync::plan::Plan;
use ferry_sync::prepare::{PrepareOptions, PrepareTracker};
use ferry_sync::progress::SyncProgress;
use ferry_sync::registries::{Breakers, Registries};
use ferry_sync::run;

use crate::cli::SyncArgs;
use crate::exit::{self, Exit};
use crate::progress::{Progress, Watch, print_stdout};

/// What to do with a loaded config.
pub struct RunOptions {
    pub dry_run: bool,
    pub json: bool,
    pub report: Option<PathBuf>,
    /// `ferry watch`'s metrics, given each real run's report and exit code.
    pub metrics: Option<Arc<crate::metrics::WatchMetrics>>,
    /// `ferry watch`'s stop for this run (set when the run passes its bound); else a fresh one.
    pub stop: Option<StopSignal>,
    /// `ferry watch`'s registry breakers, the same for every run; else this run's own.
    pub breakers: Option<Breakers>,
    /// `ferry watch`'s registry clients, kept for the process and shared by its runs (they
    /// carry its breakers and its upload journal); else this run builds its own.
    pub registries: Option<Registries>,
    /// `ferry copy`'s `SRC -> DST`, naming its one mapping in the report's text.
    pub copy: Option<String>,
    /// The state directory: uploads in flight are recorded there and resumed by the next run,
    /// and on a signal an upload stops after the PATCH in flight. `None`: neither.
    pub state_dir: Option<PathBuf>,
    /// Whether `state_dir` was named (`--state-dir`, `state_dir:`) rather than the default
    /// beside the lock file: only a named one that cannot be used is warned about.
    pub state_dir_named: bool,
}

pub async fn run(args: &SyncArgs, progress: &Progress) -> Exit {
    let shard = match super::scope::resolve_shard(&args.scope, &|name| std::env::var(name).ok()) {
        Ok(s) => s,
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Failed;
        }
    };
    let config = match super::load_config(args.config.path(), progress) {
        Ok(c) => super::scope::apply(c, shard, args.scope.prune, progress),
        Err(code) => return code,
    };
    // Held until this function returns: the whole run. A dry run writes nothing and takes none.
    let _lock = match args.dry_run {
        true => None,
        false => match super::scope::lock(args.config.path(), &args.scope, shard, progress) {
            Ok(lock) => lock,
            Err(code) => return code,
        },
    };
    let options = RunOptions {
        dry_run: args.dry_run,
        json: args.json,
        report: args.report.clone(),
        metrics: None,
        stop: None,
        breakers: None,
        registries: None,
        copy: None,
        state_dir: Some(super::scope::state_dir(
            args.config.path(),
            &args.scope,
            shard,
            config.state_dir.as_deref(),
        )),
        state_dir_named: args.scope.state_dir.is_some() || config.state_dir.is_some(),
    };
    run_config_then(&config, &options, progress, args.verify, Default::default()).await
}

/// Counters the signal handler prints when a second signal ends the run at once.
#[derive(Default)]
struct Known {
    tracker: OnceLock<Arc<PrepareTracker>>,
    sync: OnceLock<Arc<SyncProgress>>,
}

impl Known {
    fn describe(&self) -> String {
        let mut out = String::from("interrupted twice: exiting now");
        if let Some(t) = self.tracker.get() {
            let s = t.snapshot();
            out.push_str(&format!(
                "; prepare {}/{} mappings resolved",
                s.done, s.total
            ));
        }
        if let Some(p) = self.sync.get() {
            let s = p.snapshot();
            out.push_str(&format!(
                "; sync {}/{} images done",
                s.images_done, s.images_total
            ));
        }
        out
    }
}

/// Runs a whole sync (or dry run) of `config`: signals are watched from before the prepare
/// phase until the run's report is out.
pub async fn run_config(config: &Config, options: &RunOptions, progress: &Progress) -> Exit {
    run_config_then(config, options, progress, false, Default::default()).await
}

/// [`run_config`] with every target written into `archives`' bundle (`ferry export`).
pub async fn run_config_into(
    config: &Config,
    options: &RunOptions,
    progress: &Progress,
    archives: ferry_store::archive::writer::Archives,
) -> Exit {
    run_config_then(config, options, progress, false, archives).await
}

/// [`run_config`], and with `verify` (`ferry sync --verify`) a shallow verify of what the run
/// touched once it is done: anything missing or drifted fails the run (exit 1 at least).
async fn run_config_then(
    config: &Config,
    options: &RunOptions,
    progress: &Progress,
    verify: bool,
    archives: ferry_store::archive::writer::Archives,
) -> Exit {
    let stop = options.stop.clone().unwrap_or_default();
    let mut registries = match (&options.registries, &options.breakers) {
        (Some(given), _) => given.clone(),
        (None, Some(b)) => Registries::new(config).with_breakers(b.clone()),
        (None, None) => Registries::new(config),
    }
    .with_archives(archives);
    if let Some(journal) = state_dir(options, &stop, progress) {
        registries = registries.with_journal(journal);
    }
    let known = Arc::new(Known::default());
    // Registered before any work starts, so no signal falls back to the default action.
    // Aborted when this future ends or is dropped (`ferry watch` drops a run at its bound).
    let _signals = match Signals::new() {
        Ok(signals) => Some(AbortOnDrop(tokio::spawn(watch_signals(
            signals,
            stop.clone(),
            Arc::clone(&known),
            progress.clone(),
        )))),
        Err(e) => {
            tracing::warn!("cannot watch for SIGINT/SIGTERM: {e}");
            None
        }
    };

    let tracker = Arc::new(PrepareTracker::new(config.mappings.len()));
    let _ = known.tracker.set(Arc::clone(&tracker));
    let mut prepare = PrepareOptions::from_config(config);
    // The CLI draws its own progress (bars or plain lines) from the tracker.
    prepare.watch_interval = None;
    let prepared = Prepared {
        watch: progress.watch_prepare(Arc::clone(&tracker)),
        options: prepare,
        tracker,
    };
    if options.dry_run {
        dry_run(config, &registries, prepared, options, progress).await
    } else {
        sync(
            config,
            &registries,
            prepared,
            &stop,
            &known,
            options,
            progress,
            verify,
        )
        .await
    }
}

/// The run's state directory as the clients' upload journal (not for a dry run, which
/// uploads nothing); one that cannot be used is warned about and the run goes on without it.
fn state_dir(
    options: &RunOptions,
    stop: &StopSignal,
    progress: &Progress,
) -> Option<Arc<dyn ferry_distribution::ops::UploadJournal>> {
    let dir = options.state_dir.as_deref().filter(|_| !options.dry_run)?;
    open_state_dir(dir, options.state_dir_named, stop, progress)
}

/// The state directory `dir` as an upload journal that stops with `stop`; one that cannot be
/// used is warned about (`named`: `--state-dir` or `state_dir:`; the default only logged).
pub(crate) fn open_state_dir(
    dir: &std::path::Path,
    named: bool,
    stop: &StopSignal,
    progress: &Progress,
) -> Option<Arc<dyn ferry_distribution::ops::UploadJournal>> {
    match ferry_store::resume::StateDir::open(dir, stop.clone()) {
        Ok(state) => Some(Arc::new(state)),
        // The default beside a read-only config (a ConfigMap) is not worth a warning per run.
        Err(e) if !named => {
            tracing::info!(
                "{e}: uploads in flight will not be resumed by the next run (name a state directory with --state-dir DIR)"
            );
            None
        }
        Err(e) => {
            progress.eprint(&format!(
                "warning: {e}: uploads in flight will not be resumed by the next run (choose another with --state-dir DIR)"
            ));
            None
        }
    }
}

/// A task that ends with its owner.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The prepare phase, set up but not started: its options, its tracker and the display of it.
struct Prepared {
    options: PrepareOptions,
    tracker: Arc<PrepareTracker>,
    watch: Watch,
}

/// `--dry-run`: resolves every mapping, then measures what a sync would copy and what pruning
/// would delete; writes nothing.
async fn dry_run(
    config: &Config,
    registries: &Registries,
    prepared: Prepared,
    options: &RunOptions,
    progress: &Progress,
) -> Exit {
    let watch = prepared.watch;
    let outcome = run::dry_run(
        config,
        registries,
        &prepared.options,
        prepared.tracker,
        |plan| {
            log_prepared(plan);
            watch.finish()
        },
    )
    .await;
    emit(options, progress, outcome.to_json(), || {
        print_stdout(&outcome.render_text());
    });
    exit::for_dry_run(&outcome.plan, &outcome.dry)
}

/// The real run: the engine copies what is stale as mappings resolve, then pruning deletes
/// (unless a signal stopped the run); the outcome is rendered and mapped to an exit code. With
/// `verify`, a shallow verify of the plan's images follows (on stderr), and its findings fail
/// the run.
#[allow(clippy::too_many_arguments)]
async fn sync(
    config: &Config,
    registries: &Registries,
    prepared: Prepared,
    stop: &StopSignal,
    known: &Known,
    options: &RunOptions,
    progress: &Progress,
    verify: bool,
) -> Exit {
    let counters = Arc::new(progress.sync_counters());
    let _ = known.sync.set(Arc::clone(&counters));
    let mut engine_options = EngineOptions::from_settings(&config.engine);
    engine_options.progress = Arc::clone(&counters);
    // The engine starts on each mapping as soon as it is resolved, while slower mappings
    // (one waiting out throttles) still resolve; once all are, the display follows the engine.
    let watch = prepared.watch;
    let (mut outcome, ()) = run::run(
        config,
        registries,
        &prepared.options,
        prepared.tracker,
        &engine_options,
        stop,
        |plan| {
            log_prepared(plan);
            let (counters, registries) = (Arc::clone(&counters), registries.clone());
            async move {
                watch.finish().await;
                progress.watch_sync(counters, registries)
            }
        },
        // The copy phase's display ends with the engine, before pruning.
        Watch::finish,
    )
    .await;
    outcome.report.copy = options.copy.clone();
    progress.eprint_report(&outcome.render_text());
    emit(options, progress, outcome.to_json(), || {});
    let mut code = exit::for_outcome(&outcome);
    if verify && !stop.is_stopped() {
        let verified = ferry_sync::verify::after_sync(&outcome.plan, config, registries).await;
        progress.eprint_report(&verified.render_text());
        if verified.verdict() != ferry_sync::verify::VerifyVerdict::Complete {
            code = code.max(Exit::Partial);
        }
    }
    if let Some(metrics) = &options.metrics {
        metrics.record(Some(&outcome.report), code, std::time::SystemTime::now());
    }
    code
}

fn log_prepared(plan: &Plan) {
    tracing::debug!(
        mappings = plan.mappings.len(),
        failed = plan.failed().count(),
        elapsed_secs = plan.elapsed.as_secs_f64(),
        "prepare finished"
    );
}

/// JSON on stdout with `--json` (else `text`), and to the `--report` file.
fn emit(
    options: &RunOptions,
    progress: &Progress,
    json: serde_json::Result<String>,
    text: impl FnOnce(),
) {
    let json = match json {
        Ok(j) => j,
        Err(e) => {
            progress.eprint(&format!("error: cannot encode the report as JSON: {e}"));
            text();
            return;
        }
    };
    if options.json {
        println!("{json}");
    } else {
        text();
    }
    if let Some(path) = &options.report
        && let Err(e) = std::fs::write(path, format!("{json}\n"))
    {
        progress.eprint(&format!(
            "error: cannot write report {}: {e}",
            path.display()
        ));
    }
}

/// First SIGINT/SIGTERM: stop starting work. Second: print what is known and exit 2.
async fn watch_signals(
    mut signals: Signals,
    stop: StopSignal,
    known: Arc<Known>,
    progress: Progress,
) {
    signals.next().await;
    stop.stop();
    tracing::warn!(
        "signal received: starting no new work, ending each chunked upload after the PATCH in flight (recorded for the next run) and letting other transfers finish (signal again to exit now)"
    );
    signals.next().await;
    progress.eprint(&known.describe());
    std::process::exit(i32::from(Exit::Failed.code()));
}

/// SIGINT and SIGTERM, registered once for the whole run (and by `ferry watch` for its life).
#[cfg(unix)]
pub(crate) struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    pub(crate) fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    pub(crate) async fn next(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

#[cfg(not(unix))]
pub(crate) struct Signals;

#[cfg(not(unix))]
impl Signals {
    pub(crate) fn new() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    pub(crate) async fn next(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}
