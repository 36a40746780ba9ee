//! `ferry sync`: prepare, then the engine (or the dry-run plan), with progress, signal handling
//! (first SIGINT/SIGTERM stops new work, the second exits at once), report output and exit code.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use ferry_sync::config::Config;
use ferry_sync::dryrun::DryRun;
use ferry_sync::engine::{self, EngineOptions, StopSignal};
use ferry_sync::prepare::{PrepareOptions, PrepareTracker, resolve_all};
use ferry_sync::progress::SyncProgress;
use ferry_sync::registries::Registries;

use crate::cli::SyncArgs;
use crate::exit;
use crate::progress::Progress;

/// What to do with a loaded config.
pub struct RunOptions {
    pub dry_run: bool,
    pub json: bool,
    pub report: Option<PathBuf>,
}

pub async fn run(args: &SyncArgs, progress: &Progress) -> u8 {
    let config = match super::load_config(&args.config.config, progress) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let options = RunOptions {
        dry_run: args.dry_run,
        json: args.json,
        report: args.report.clone(),
    };
    run_config(&config, &options, progress).await
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

/// Runs a whole sync (or dry run) of `config`.
pub async fn run_config(config: &Config, options: &RunOptions, progress: &Progress) -> u8 {
    let registries = Registries::new(config);
    let stop = StopSignal::default();
    let known = Arc::new(Known::default());
    // Registered before any work starts, so no signal falls back to the default action.
    let signals = match Signals::new() {
        Ok(signals) => Some(tokio::spawn(watch_signals(
            signals,
            stop.clone(),
            Arc::clone(&known),
            progress.clone(),
        ))),
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
    let watch = progress.watch_prepare(Arc::clone(&tracker));
    let plan = resolve_all(config, &registries, &prepare, tracker).await;
    watch.finish().await;
    tracing::debug!(
        mappings = plan.mappings.len(),
        failed = plan.failed().count(),
        elapsed_secs = plan.elapsed.as_secs_f64(),
        "prepare finished"
    );

    let code = if options.dry_run {
        let dry = DryRun::measure(&plan, &registries).await;
        let json = serde_json::to_string_pretty(&dry);
        emit(options, progress, json, || print!("{}", dry.render_text()));
        exit::for_dry_run(&plan, &dry)
    } else {
        let counters = Arc::new(SyncProgress::for_plan(&plan));
        let _ = known.sync.set(Arc::clone(&counters));
        let mut engine_options = EngineOptions::from_settings(&config.engine);
        engine_options.progress = Arc::clone(&counters);
        let watch = progress.watch_sync(Arc::clone(&counters), registries.clone());
        let report = engine::sync(&plan, &registries, &engine_options, &stop).await;
        watch.finish().await;
        progress.eprint(&report.render_text());
        let json = serde_json::to_string_pretty(&report);
        emit(options, progress, json, || {});
        exit::for_report(&report)
    };
    if let Some(task) = signals {
        task.abort();
    }
    code
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
        "signal received: starting no new work, letting transfers in flight finish (signal again to exit now)"
    );
    signals.next().await;
    progress.eprint(&known.describe());
    std::process::exit(i32::from(exit::FAILED));
}

/// SIGINT and SIGTERM, registered once for the whole run.
#[cfg(unix)]
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn new() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    async fn next(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}
