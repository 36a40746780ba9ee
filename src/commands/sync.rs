//! `ferry sync`: prepare, then the engine (or the dry-run plan) and pruning, with progress, signal
//! handling (first SIGINT/SIGTERM stops new work, the second exits at once), report and exit code.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use ferry_config::Config;
use ferry_store::archive::Stores;
use ferry_sync::PrepareTracker;
use ferry_sync::StopSignal;
use ferry_sync::import::ImportError;
use ferry_sync::plan::Plan;
use ferry_sync::progress::SyncProgress;
use ferry_sync::registries::Registries;
use ferry_sync::run::{ExportSpec, Mode, Outcome, Run, RunContext, RunObserver, RunProgress};
use futures::future::BoxFuture;

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
    /// `ferry watch`'s registry clients, kept for the process and shared by its runs (they
    /// carry its breakers; each run sees them with its own counters and journal); else this
    /// run builds its own.
    pub registries: Option<Registries>,
    /// `ferry copy`'s `SRC -> DST`, naming its one mapping in the report's text.
    pub copy: Option<String>,
    /// The state directory: uploads in flight are recorded there and resumed by the next run,
    /// and on a signal an upload stops after the PATCH in flight. `None`: neither.
    pub state_dir: Option<PathBuf>,
    /// Whether `state_dir` was named (`--state-dir`, `state_dir:`) rather than the default
    /// beside the lock file: only a named one that cannot be used is warned about.
    pub state_dir_named: bool,
    /// Applied to every registry's settings, listed or not: the command line's access flags.
    pub every_host: Option<ferry_sync::registries::EveryHost>,
    /// The command (`sync`, `copy`, …) whose flags the hints after a failure name.
    pub command: &'static str,
    /// `ferry copy --digestfile`: where the copied image's digest is written.
    pub digestfile: Option<PathBuf>,
    /// Whether the state directory's tag cache is believed (`ferry sync`, `ferry watch`'s
    /// periodic runs), only rewritten (`--no-cache`), or not used.
    pub tag_cache: TagCacheUse,
}

/// How a run uses the state directory's tag cache (`engine.tag_cache_ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagCacheUse {
    /// Not read, not written (a copy, an export, an import, an event sync).
    Off,
    /// A listed tag it vouches for gets no HEAD; what the run confirms is written back.
    Believe,
    /// `--no-cache`: nothing believed, every listed tag asked; the answers written back.
    Rewrite,
}

impl TagCacheUse {
    /// `ferry sync` and `ferry watch`: believed, unless `--no-cache`.
    pub fn of(no_cache: bool) -> Self {
        match no_cache {
            true => TagCacheUse::Rewrite,
            false => TagCacheUse::Believe,
        }
    }
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
    if args.preserve_digests {
        tracing::debug!("--preserve-digests: ferry always keeps the source's digests");
    }
    let access = match super::access::for_config(&config, &args.tls, &args.src, &args.dest) {
        Ok(a) => a,
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
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
        report: args.report.report.clone(),
        metrics: None,
        stop: None,
        registries: None,
        copy: None,
        state_dir: Some(super::scope::state_dir(
            args.config.path(),
            &args.scope,
            shard,
            config.state_dir.as_deref(),
        )),
        state_dir_named: args.scope.state_dir.is_some() || config.state_dir.is_some(),
        every_host: Some(access.every_host()),
        command: "sync",
        digestfile: None,
        tag_cache: TagCacheUse::of(args.scope.no_cache),
    };
    let door = match args.repair {
        true => Door::Repair,
        false => Door::Sync,
    };
    run_door(config.into(), &options, progress, args.verify, door).await
}

/// Counters the signal handler prints when a second signal ends the run at once.
#[derive(Default)]
pub struct Known {
    tracker: OnceLock<Arc<PrepareTracker>>,
    sync: OnceLock<Arc<SyncProgress>>,
    state: OnceLock<Arc<ferry_store::resume::StateDir>>,
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
        if let Some(line) = self.recorded(true) {
            out.push_str(&format!("; {line}"));
        }
        out
    }

    /// What the state directory holds of this run's unfinished uploads, for an interrupted
    /// run: `None` when nothing was recorded. `cut`: the second signal's exit, which cuts the
    /// PATCH in flight.
    fn recorded(&self, cut: bool) -> Option<String> {
        let state = self.state.get()?;
        let (uploads, bytes) = state.recorded();
        if uploads == 0 {
            return None;
        }
        let plural = if uploads == 1 { "" } else { "s" };
        let mut line = format!(
            "{uploads} upload{plural} in flight recorded in {} ({} sent): the next run resumes {}",
            state.dir().display(),
            ferry_sync::report::human_bytes(bytes),
            if uploads == 1 { "it" } else { "them" },
        );
        if cut {
            // docs/operations.md, "Resuming uploads": distribution refuses a session whose
            // PATCH was cut mid-body.
            line.push_str(
                " (a registry that refuses a session whose PATCH was cut, as distribution does, starts that blob over)",
            );
        }
        Some(line)
    }
}

/// Runs a whole sync (or dry run) of `config`: signals are watched from before the prepare
/// phase until the run's report is out.
pub async fn run_config(config: &Config, options: &RunOptions, progress: &Progress) -> Exit {
    run_door(
        Arc::new(config.clone()),
        options,
        progress,
        false,
        Door::Sync,
    )
    .await
}

/// Which door of the run a command goes through.
pub enum Door {
    /// `ferry sync` (and `copy`, `watch`): the config's mappings.
    Sync,
    /// `ferry sync --repair`: a deep verify, then the sync writing again what it found lacking.
    Repair,
    /// `ferry export`: every target written into one bundle.
    Export(ExportSpec),
    /// `ferry import BUNDLE [--target-prefix P]`.
    Import {
        bundle: PathBuf,
        prefix: Option<String>,
        /// The keys the bundle must be signed under (none: not required).
        keys: Vec<ferry_sync::bundle_trust::PublicKey>,
        /// Where a compressed bundle, or one from standard input, is spooled.
        spool: ferry_store::archive::input::SpoolPlace,
    },
}

/// Builds the run's context (clients, journal, signals, display), goes through `door`, renders
/// the outcome and maps it to an exit code. With `verify` (`ferry sync --verify`) the run
/// verifies what it touched, and its findings fail the run (exit 1 at least).
pub async fn run_door(
    config: Arc<Config>,
    options: &RunOptions,
    progress: &Progress,
    verify: bool,
    door: Door,
) -> Exit {
    let stop = options.stop.clone().unwrap_or_default();
    let mut registries = match &options.registries {
        Some(given) => given.clone(),
        None => Registries::new(&config),
    };
    if let Some(adjust) = &options.every_host {
        registries = registries.with_every_host(Arc::clone(adjust));
    }
    let state = state_dir(options, &stop, progress);
    let known = Arc::new(Known::default());
    if let Some(state) = &state {
        let _ = known.state.set(Arc::clone(state));
    }
    // The tag cache lives in the state directory: the one this run opened, or for a dry run
    // (which opens none) the one it names, read only.
    let cache_dir = match &state {
        Some(s) => Some(s.dir().to_path_buf()),
        None if options.dry_run => options.state_dir.clone(),
        None => None,
    };
    let tag_cache = match (options.tag_cache, cache_dir) {
        (TagCacheUse::Off, _) | (_, None) => None,
        (usage, Some(dir)) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let ttl = config.engine.tag_cache_ttl;
            let ignore = usage == TagCacheUse::Rewrite;
            Some(Arc::new(
                ferry_store::resume::TagCache::load(&dir, ttl, now, ignore).await,
            ))
        }
    };
    let journal = state.map(|s| s as Arc<dyn ferry_distribution::ops::UploadJournal>);
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
    let counters = Arc::new(progress.sync_counters());
    let _ = known.sync.set(Arc::clone(&counters));
    let display = Arc::new(Display::new(
        progress,
        Some(Arc::clone(&known)),
        Some((Arc::clone(&counters), registries.clone())),
        options.dry_run,
    ));
    let mode = match (options.dry_run, verify) {
        _ if matches!(door, Door::Repair) => Mode::Repair,
        (true, _) => Mode::DryRun,
        (false, true) => Mode::WriteThenVerify,
        (false, false) => Mode::Write,
    };
    // A compressed archive (or standard input) is read from a spool: the import's own place,
    // else under the state directory.
    let spool = match &door {
        Door::Import { spool, .. } => spool.clone(),
        _ => ferry_store::archive::input::SpoolPlace {
            dir: match &options.state_dir {
                Some(state) => state.join("spool"),
                None => std::env::temp_dir(),
            },
            limit: ferry_store::archive::input::DEFAULT_SPOOL_LIMIT,
        },
    };
    let ctx = RunContext {
        registries,
        stores: Stores::spooling(spool),
        journal,
        mode,
        stop: stop.clone(),
        progress: RunProgress {
            sync: counters,
            observer: Some(display),
        },
        // A dry run reads the records but adds none.
        first_seen: options
            .state_dir
            .as_deref()
            .map(|d| ferry_store::resume::FirstSeen::new(d, !options.dry_run)),
        tag_cache,
    };
    let mut run = Run::new(config, ctx);
    if let Some(label) = &options.copy {
        run = run.labelled(label.clone());
    }
    let (outcome, floor) = match door {
        Door::Sync | Door::Repair => (run.sync().await, Exit::Clean),
        Door::Export(spec) => (run.export(spec).await, Exit::Clean),
        Door::Import {
            bundle,
            prefix,
            keys,
            ..
        } => {
            let shown = bundle.display();
            match run.import(&bundle, prefix.as_deref(), &keys).await {
                Ok(imported) => {
                    progress.eprint(&format!("import {shown}: {}", imported.authenticity));
                    for message in &imported.unplaced {
                        progress.eprint(&format!("error: import {shown}: {message}"));
                    }
                    if let Some(s) = &imported.spooled
                        && !s.stdin
                    {
                        progress.eprint(&format!(
                            "the bundle is {}-compressed: read as {} bytes of tar spooled under {} (removed)",
                            s.packing.name(),
                            s.bytes,
                            s.dir.display()
                        ));
                    }
                    if let Some((blobs, bytes)) = imported.streamed {
                        progress.eprint(&format!(
                            "the bundle was read from standard input in one pass, head first: \
                             nothing was spooled; {blobs} blob{} ({bytes} bytes) streamed to the \
                             target",
                            if blobs == 1 { "" } else { "s" }
                        ));
                    }
                    if imported.mounted > 0 {
                        progress.eprint(&format!(
                            "mounted {} blob{} the bundle leaves out from other repositories of the target",
                            imported.mounted,
                            if imported.mounted == 1 { "" } else { "s" }
                        ));
                    }
                    let floor = match imported.unplaced.is_empty() {
                        true => Exit::Clean,
                        false => Exit::Partial,
                    };
                    (imported.outcome, floor)
                }
                Err(ImportError::Untrusted(message)) => {
                    progress.eprint(&format!(
                        "error: import {shown}: refused, nothing was sent to any target: {message}"
                    ));
                    return Exit::Failed;
                }
                Err(ImportError::Prefix(message)) => {
                    progress.eprint(&format!("error: {message}"));
                    return Exit::Usage;
                }
                Err(ImportError::Nothing { unplaced }) => {
                    for message in &unplaced {
                        progress.eprint(&format!("error: import {shown}: {message}"));
                    }
                    progress.eprint(&format!(
                        "error: import {shown}: no image of the bundle can be imported"
                    ));
                    return Exit::Failed;
                }
                Err(e) => {
                    progress.eprint(&format!("error: import {shown}: {e}"));
                    return Exit::Failed;
                }
            }
        }
    };
    let code = match outcome {
        Outcome::DryRun(outcome) => {
            emit(options, progress, outcome.to_json(), || {
                print_stdout(&outcome.render_text());
            });
            let path = [options.command];
            let mut said = Vec::new();
            for (_, e) in outcome.plan.failed() {
                for hint in crate::hints::for_error(&path, e) {
                    if !said.contains(&hint) {
                        progress.eprint(&hint);
                        said.push(hint);
                    }
                }
            }
            exit::for_dry_run(&outcome.plan, &outcome.dry)
        }
        Outcome::Synced(outcome) => {
            progress.eprint_report(&outcome.render_text());
            // Only the flags this command takes: `copy` its two sides', `import` the login
            // file; sync, export and watch read credentials from the config and logins.
            if outcome.report.interrupted
                && let Some(line) = known.recorded(false)
            {
                progress.eprint(&format!("interrupted: {line}"));
            }
            emit(options, progress, outcome.to_json(), || {});
            if let Some(verified) = &outcome.verify {
                progress.eprint_report(&verified.render_text());
            }
            for hint in crate::hints::for_report(&[options.command], &outcome.report) {
                progress.eprint(&hint);
            }
            if let Some(file) = &options.digestfile
                && let Err(message) = write_digestfile(file, &outcome.report)
            {
                progress.eprint(&format!(
                    "error: --digestfile {}: {message}",
                    file.display()
                ));
                return Exit::Failed;
            }
            let code = exit::for_outcome(&outcome);
            if let Some(metrics) = &options.metrics {
                metrics.record(Some(&outcome.report), code, std::time::SystemTime::now());
            }
            code
        }
    };
    code.max(floor)
}

/// The run's state directory as the clients' upload journal (not for a dry run, which
/// uploads nothing); one that cannot be used is warned about and the run goes on without it.
fn state_dir(
    options: &RunOptions,
    stop: &StopSignal,
    progress: &Progress,
) -> Option<Arc<ferry_store::resume::StateDir>> {
    let dir = options.state_dir.as_deref().filter(|_| !options.dry_run)?;
    open_state_dir(dir, options.state_dir_named, stop, progress)
}

/// The state directory `dir` as an upload journal that stops with `stop`; one that cannot be
/// used is warned about (`named`: `--state-dir` or `state_dir:`; the default only logged).
fn open_state_dir(
    dir: &std::path::Path,
    named: bool,
    stop: &StopSignal,
    progress: &Progress,
) -> Option<Arc<ferry_store::resume::StateDir>> {
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

/// The CLI's display of a run: the prepare phase's bars or lines, then the copy's.
pub struct Display {
    progress: Progress,
    known: Option<Arc<Known>>,
    /// The copy's counters and the clients whose requests it shows (none: no copy display).
    copy: Option<(Arc<SyncProgress>, Registries)>,
    dry_run: bool,
    watch: Arc<Mutex<Option<Watch>>>,
}

impl Display {
    pub fn new(
        progress: &Progress,
        known: Option<Arc<Known>>,
        copy: Option<(Arc<SyncProgress>, Registries)>,
        dry_run: bool,
    ) -> Self {
        Display {
            progress: progress.clone(),
            known,
            copy,
            dry_run,
            watch: Arc::default(),
        }
    }

    fn take(&self) -> Option<Watch> {
        self.watch.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Draws the last state of whatever is shown and stops.
    pub async fn finish(&self) {
        if let Some(w) = self.take() {
            w.finish().await;
        }
    }
}

impl RunObserver for Display {
    fn preparing(&self, tracker: &Arc<PrepareTracker>) {
        if let Some(known) = &self.known {
            let _ = known.tracker.set(Arc::clone(tracker));
        }
        let watch = self.progress.watch_prepare(Arc::clone(tracker));
        *self.watch.lock().unwrap_or_else(|p| p.into_inner()) = Some(watch);
    }

    fn prepared(&self, plan: &Plan) -> BoxFuture<'static, ()> {
        log_prepared(plan);
        let prepare = self.take();
        // The engine goes on while slower mappings resolve; once all are, the display follows it.
        let next = match self.dry_run {
            true => None,
            false => self.copy.clone(),
        };
        let (progress, slot) = (self.progress.clone(), Arc::clone(&self.watch));
        Box::pin(async move {
            if let Some(w) = prepare {
                w.finish().await;
            }
            if let Some((counters, registries)) = next {
                let watch = progress.watch_sync(counters, registries);
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(watch);
            }
        })
    }

    // The copy phase's display ends with the engine, before pruning.
    fn synced(&self) -> BoxFuture<'static, ()> {
        let watch = self.take();
        Box::pin(async move {
            if let Some(w) = watch {
                w.finish().await;
            }
        })
    }
}

fn log_prepared(plan: &Plan) {
    tracing::debug!(
        mappings = plan.mappings.len(),
        failed = plan.failed().count(),
        elapsed_secs = plan.elapsed.as_secs_f64(),
        "prepare finished"
    );
}

/// `--digestfile FILE`: the digest of the manifest the copy left on its target (as skopeo
/// writes it: the digest alone, no newline), once the one image synced or was up to date.
fn write_digestfile(file: &std::path::Path, report: &ferry_sync::SyncReport) -> Result<(), String> {
    use ferry_sync::report::ImageStatus;
    let done = report
        .images
        .iter()
        .find(|i| matches!(i.status, ImageStatus::Synced | ImageStatus::UpToDate));
    match done {
        Some(image) if !image.digest.is_empty() => {
            std::fs::write(file, &image.digest).map_err(|e| format!("cannot write it: {e}"))
        }
        _ => Ok(()),
    }
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
        crate::progress::println_stdout(&json);
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
