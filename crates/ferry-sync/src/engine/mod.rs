//! The sync engine: takes the plan, fetches each stale image's manifest graph, schedules every
//! blob once for the whole run, and pushes manifests only once all they reference is present.

pub mod blobs;
mod caps;
pub mod destination;
pub(crate) mod feed;
mod gated;
pub mod graph;
mod log;
pub(crate) mod manifests;
pub(crate) mod referrers;
pub mod transfer;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::{FutureExt, StreamExt};
use tokio::time::Instant;

use ferry_distribution::Digest;
use ferry_distribution::error::Error;

use crate::error::SyncError;
use crate::plan::{ImagePlan, MappingPlan, Plan, TargetState};
use crate::registries::Registries;
use crate::report::{
    ImageReport, ImageStatus, MappingFailure, RegistryReport, RejectedNameReport, SyncReport,
    Totals,
};
use crate::source::Source;
use ferry_config::platform::Platform;
use ferry_config::{EngineSettings, Target};

use blobs::BlobScheduler;
use destination::{Destination, Put};
use graph::{ImageGraph, fetch_graph};
use manifests::ManifestPusher;
use transfer::UploadShape;

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Images copied at once.
    pub images_in_flight: usize,
    /// Blobs moving at once, over every image.
    pub blobs_in_flight: usize,
    /// Chunk size and the monolithic limit for uploads.
    pub shape: UploadShape,
    /// Counters the CLI's progress display reads.
    pub progress: Arc<crate::progress::SyncProgress>,
    /// The archives the run reads and writes (the run's own, from its context).
    pub(crate) stores: ferry_store::archive::Stores,
}

impl EngineOptions {
    /// The options the config's `engine` section sets, each at least 1.
    pub(crate) fn from_settings(s: &EngineSettings) -> Self {
        EngineOptions {
            images_in_flight: s.images_in_flight.max(1),
            blobs_in_flight: s.blobs_in_flight.max(1),
            shape: UploadShape {
                chunk_size: s.chunk_size.max(1),
                monolithic_limit: s.monolithic_limit,
            },
            progress: Arc::default(),
            stores: Default::default(),
        }
    }
}

pub use ferry_distribution::StopSignal;

/// One image to bring to its stale targets, with everything resolved that its run needs.
struct Work {
    mapping: usize,
    source_name: String,
    source: Source,
    image: ImagePlan,
    graph: Arc<Result<ImageGraph, Error>>,
    targets: Vec<ResolvedTarget>,
}

/// A stale target, opened once.
struct ResolvedTarget {
    target: Target,
    state: TargetState,
    /// Where its blobs and manifests go, or why it could not be opened.
    place: Result<Destination, Error>,
}

/// What the intake of mappings shares across the mappings it takes in at once.
#[derive(Default)]
struct Intake {
    /// Reports decided without copying (up to date, unfetched, refused layouts, no source).
    images: std::sync::Mutex<Vec<ImageReport>>,
    failed_mappings: std::sync::Mutex<Vec<MappingFailure>>,
    rejected_names: std::sync::Mutex<Vec<RejectedNameReport>>,
    /// Layout locks held until the run's index entries are in, and the layouts refused.
    layouts: tokio::sync::Mutex<LayoutHolds>,
    /// One fetch per source image, shared by every mapping that copies it.
    graphs: std::sync::Mutex<HashMap<GraphKey, Arc<tokio::sync::OnceCell<Arc<GraphResult>>>>>,
}

type GraphResult = Result<ImageGraph, Error>;

#[derive(Default)]
struct LayoutHolds {
    held: Vec<ferry_store::layout::lock::LayoutLock>,
    taken: std::collections::HashSet<std::path::PathBuf>,
    refused: HashMap<std::path::PathBuf, SyncError>,
}

fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the sync for every stale (mapping, image, target) of `plan`.
pub(crate) async fn sync(
    plan: &Plan,
    registries: &Registries,
    options: &EngineOptions,
    stop: &StopSignal,
) -> SyncReport {
    let start = Instant::now();
    let plans = futures::stream::iter(plan.mappings.iter().cloned());
    let mut report = sync_as_resolved(plans, registries, options, stop).await;
    report.note_expansions(plan);
    report.note_selections(plan);
    // The whole run: the prepare phase and the engine.
    report.elapsed = plan.elapsed + start.elapsed();
    report
}

/// Runs the sync for every stale (mapping, image, target) of each mapping as `plans` yields it:
/// a mapping's images start as soon as it is resolved, while slower mappings (a repository
/// waiting out throttles) are still resolving. The report's `elapsed` is the engine's own time.
///
/// Stages, per mapping: take it in (its reports, its source), hold its layouts, resolve its
/// targets and fetch its images' manifest graphs, plan its blobs; then its images join one
/// window (`images_in_flight`) that refills on completion. Once every mapping is in and every
/// image done: referrer indexes, then the summary.
pub(crate) async fn sync_as_resolved<S>(
    plans: S,
    registries: &Registries,
    options: &EngineOptions,
    stop: &StopSignal,
) -> SyncReport
where
    S: futures::Stream<Item = MappingPlan>,
{
    let start = Instant::now();
    let intake = Intake::default();
    let scheduler = BlobScheduler::new(
        options.blobs_in_flight,
        options.shape,
        Arc::clone(&options.progress),
    );
    let pusher = ManifestPusher::new(Arc::clone(&options.progress));
    let (ready, queue) = futures::channel::mpsc::unbounded::<(Arc<Work>, caps::Slot)>();

    let (intake_ref, scheduler_ref) = (&intake, &scheduler);
    let caps = caps::Caps::default();
    let take_in = async move {
        let caps = &caps;
        // A mapping's images join the window as its `concurrency:` lets them (caps.rs).
        let mut admitted = std::pin::pin!(
            plans
                .map(|m| {
                    let (index, cap) = caps::of(&m);
                    take_in(m, registries, intake_ref, scheduler_ref, options)
                        .map(move |works| (index, cap, works))
                })
                .buffer_unordered(options.images_in_flight.max(1))
                .flat_map_unordered(None, |(index, cap, works)| caps.admit(index, cap, works))
        );
        while let Some(w) = admitted.next().await {
            // The queue's receiver lives until every sender is gone: a send cannot fail.
            let _ = ready.unbounded_send(w);
        }
        // Dropping the sender ends the queue once it drains.
        drop(ready);
    };
    let run = queue
        .map(|(w, slot)| {
            let (scheduler, pusher) = (&scheduler, &pusher);
            async move {
                let statuses = run_image(&w, scheduler, pusher, stop).await;
                drop(slot);
                (w, statuses)
            }
        })
        .buffer_unordered(options.images_in_flight.max(1))
        .inspect(|(w, done)| {
            options.progress.images_done(done.len() as u64);
            log::log_image(w, done);
        })
        .collect::<Vec<_>>();
    let ((), ran) = futures::join!(take_in, run);

    // What the run did to each (image, target) is settled before its report is written: the
    // put's outcome, unless the referrer's tag-schema index or the archive it went into failed
    // afterwards. A referrer that reached a registry target without the referrers API gets the
    // subject's tag-schema index (keyed by its work and target), so it stays discoverable.
    let mut to_index = Vec::new();
    for (wi, (w, outcomes)) in ran.iter().enumerate() {
        for (ti, (t, outcome)) in w.targets.iter().zip(outcomes).enumerate() {
            if outcome.is_ok()
                && let Some(p) = referrer_to_index(w, t, (wi, ti))
            {
                to_index.push(p);
            }
        }
    }
    let index_failed: Vec<((usize, usize), Error)> = referrers::write_fallback_indexes(to_index)
        .await
        .into_iter()
        .map(|(p, e)| (p.report, e))
        .collect();
    drop(intake.layouts.into_inner());
    // An export in which every image failed leaves no bundle (exit 2: nothing at BUNDLE).
    let none_written = !ran.iter().any(|(_, o)| o.iter().any(Result::is_ok));
    let some_failed = ran.iter().any(|(_, o)| o.iter().any(Result::is_err))
        || !locked(&intake.failed_mappings).is_empty()
        || locked(&intake.images)
            .iter()
            .any(|r| matches!(r.status, ImageStatus::Failed { .. }));
    if none_written
        && some_failed
        && let Some(bundle) = options.stores.export()
    {
        bundle.discard().await;
    }
    let (archives, archive_failed) = finish_archives(&options.stores).await;

    // Each image's work (its graph, its opened targets) is dropped as its report rows are
    // written, so the rows do not sit beside every image's work at the run's end (issue 42).
    drop(std::mem::take(&mut *locked(&intake.graphs)));
    let mut images = std::mem::take(&mut *locked(&intake.images));
    images.reserve_exact(ran.iter().map(|(w, _)| w.targets.len()).sum());
    for (wi, (w, outcomes)) in ran.into_iter().enumerate() {
        for (ti, (t, outcome)) in w.targets.iter().zip(&outcomes).enumerate() {
            let index_failure = index_failed.iter().find(|(k, _)| *k == (wi, ti));
            let archive_failure = t
                .place
                .as_ref()
                .ok()
                .and_then(Destination::archive_output)
                .and_then(|o| archive_failed.iter().find(|(f, _)| *f == o));
            let status = match (outcome, index_failure, archive_failure) {
                (Err(e), _, _) => ImageStatus::failed_sync(e),
                (Ok(_), Some((_, e)), _) => ImageStatus::failed(e),
                (Ok(_), None, Some((_, e))) => {
                    ImageStatus::failed_sync(&SyncError::Store(e.clone()))
                }
                (Ok(_), None, None) => ImageStatus::Synced,
            };
            let mut r = report(w.mapping, &w.source_name, &w.image, &t.target, status);
            if let Ok((_, resumed)) = outcome {
                r.bytes_resumed = *resumed;
            }
            if let Ok((Put::KeptDigestRefused(refused), _)) = outcome {
                r.digest = refused.pushed.clone();
                r.kept_digest_refused = Some(refused.clone());
            }
            images.push(r);
        }
    }
    let failed_mappings = intake
        .failed_mappings
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let rejected_names = intake
        .rejected_names
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let mut report = summarise(
        images,
        failed_mappings,
        rejected_names,
        &scheduler,
        &options.progress,
        registries,
        start,
        stop,
    );
    // An incremental bundle names the images its base carries without carrying them: their
    // lines say so rather than `synced`.
    for a in &archives {
        if a.roots_in_base.is_empty() {
            continue;
        }
        let base = a.bases.join(", ");
        for i in &mut report.images {
            if i.status == ImageStatus::Synced && a.roots_in_base.contains(&i.digest) {
                i.in_base = Some(base.clone());
            }
        }
    }
    report.archives = archives;
    report
}

/// Finishes every archive the run wrote (`oci-layout`, `index.json`, the bundle record, the
/// rename): the reports of those that finished, and each one that failed with why (every image
/// that went into it fails with that error).
async fn finish_archives(
    stores: &ferry_store::archive::Stores,
) -> (
    Vec<crate::report::ArchiveReport>,
    Vec<(
        ferry_store::archive::writer::Output,
        ferry_store::StoreError,
    )>,
) {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for writer in stores.take_writers() {
        match writer.finish().await {
            Ok(r) => done.push(r),
            Err(e) => failed.push((writer.output().clone(), e)),
        }
    }
    done.sort_by(|a, b| a.archive.cmp(&b.archive));
    (done, failed)
}

/// Takes one resolved mapping in: reports what needs no copy, opens its source, holds its
/// layouts, resolves its targets, fetches its images' graphs and plans their blobs. Returns the
/// images to run.
async fn take_in(
    m: MappingPlan,
    registries: &Registries,
    intake: &Intake,
    scheduler: &BlobScheduler,
    options: &EngineOptions,
) -> Vec<Arc<Work>> {
    let resolved = match m.outcome {
        Ok(r) => r,
        Err(e) => {
            locked(&intake.failed_mappings).push(MappingFailure {
                mapping: m.index,
                source: m.source.clone(),
                status: ImageStatus::failed(&e),
            });
            return Vec::new();
        }
    };
    locked(&intake.rejected_names).extend(resolved.rejected_names.iter().map(|r| {
        RejectedNameReport {
            mapping: m.index,
            source: m.source.clone(),
            rejected: r.clone(),
        }
    }));
    let mut reports = Vec::new();
    // A listed tag whose manifest could not be fetched: failed on every target, never
    // dropped (it also keeps the mapping from pruning; see `crate::prune`).
    for u in &resolved.unfetched {
        for t in &u.targets {
            reports.push(ImageReport {
                mapping: m.index,
                source: m.source.clone(),
                image: u.tag.clone(),
                digest: String::new(),
                target: t.to_string(),
                status: ImageStatus::failed(&u.error),
                pushed_as: None,
                kept_digest_refused: None,
                bytes_resumed: 0,
                in_base: None,
            });
        }
    }
    // `signatures:`: refused and held images, reported on every target (sent nowhere).
    reports.extend(gated::reports(m.index, &m.source, &resolved));
    // Immutable tags every target already names: up to date, not asked about (no digest).
    for tag in &resolved.held_immutable {
        for t in &resolved.targets {
            reports.push(ImageReport {
                mapping: m.index,
                source: m.source.clone(),
                image: tag.to_string(),
                digest: String::new(),
                target: t.to_string(),
                status: ImageStatus::UpToDate,
                pushed_as: None,
                kept_digest_refused: None,
                bytes_resumed: 0,
                in_base: None,
            });
        }
    }
    let mut stale_images = Vec::new();
    for mut image in resolved.images {
        let mut stale = Vec::new();
        // The image's targets move into its stale list (the work keeps no second copy).
        for t in std::mem::take(&mut image.targets) {
            if t.state.needs_copy() {
                stale.push((t.target, t.state));
            } else {
                reports.push(report(
                    m.index,
                    &m.source,
                    &image,
                    &t.target,
                    ImageStatus::UpToDate,
                ));
            }
        }
        if !stale.is_empty() {
            stale_images.push((image, stale));
        }
    }
    let source = match stale_images.is_empty() {
        true => None,
        false => Some(Source::open(&resolved.origin, registries, &options.stores).await),
    };
    let source = match source {
        None => {
            locked(&intake.images).extend(reports);
            return Vec::new();
        }
        Some(Ok(source)) => source,
        Some(Err(e)) => {
            for (image, stale) in &stale_images {
                for (t, _) in stale {
                    reports.push(report(
                        m.index,
                        &m.source,
                        image,
                        t,
                        ImageStatus::failed(&e),
                    ));
                }
            }
            locked(&intake.images).extend(reports);
            return Vec::new();
        }
    };

    // Every layout this run writes is held (shared) from before its first blob until the
    // run's index entries are in, so no garbage collection removes a blob not yet indexed.
    let refused = hold_layouts(&stale_images, &intake.layouts).await;
    let mut works = Vec::new();
    for (image, stale) in stale_images {
        let mut targets = Vec::new();
        for (target, state) in stale {
            if let Target::OciLayout { path } = &target
                && let Some(e) = refused.get(path)
            {
                reports.push(report(
                    m.index,
                    &m.source,
                    &image,
                    &target,
                    ImageStatus::failed_sync(e),
                ));
                continue;
            }
            targets.push((target, state));
        }
        if targets.is_empty() {
            continue;
        }
        works.push((image, targets));
    }
    locked(&intake.images).extend(reports);

    // Each image's manifest graph (images sharing a digest share one fetch, across mappings).
    let platforms = &resolved.platforms;
    let source = &source;
    let name = &m.source;
    let works: Vec<Work> = futures::stream::iter(works)
        .map(|(mut image, targets)| async move {
            let graph = graph_of(intake, source, &image, platforms).await;
            // The root the prepare phase fetched is in the graph now.
            image.root = None;
            // Sized exactly: one per image of the run, kept to the end (issue 42's memory).
            let mut resolved = Vec::with_capacity(targets.len());
            for (target, state) in targets {
                let place =
                    open_target(&target, &state, graph.is_ok(), registries, &options.stores).await;
                resolved.push(ResolvedTarget {
                    target,
                    state,
                    place,
                });
            }
            Work {
                mapping: m.index,
                source_name: name.clone(),
                source: source.clone(),
                image,
                graph,
                targets: resolved,
            }
        })
        .buffer_unordered(caps::window(resolved.concurrency, options.images_in_flight))
        .collect()
        .await;

    // Every place every blob of this mapping must reach, known before its images start.
    for w in &works {
        // Every (image, target) the window will report done, failed graphs included.
        options.progress.expect_images(w.targets.len() as u64);
        let Ok(graph) = &*w.graph else {
            continue;
        };
        for t in &w.targets {
            let Ok(place) = &t.place else {
                continue;
            };
            for blob in &graph.blobs {
                let bytes = scheduler.need(
                    blob,
                    &w.source,
                    place.clone(),
                    t.state == TargetState::NewRepository,
                );
                options.progress.expect_bytes(bytes);
            }
        }
    }
    works.into_iter().map(Arc::new).collect()
}

/// The image's manifest graph, fetched once per (source, digest) for the whole run.
async fn graph_of(
    intake: &Intake,
    source: &Source,
    image: &ImagePlan,
    platforms: &[Platform],
) -> Arc<GraphResult> {
    let cell = {
        let mut graphs = locked(&intake.graphs);
        Arc::clone(
            graphs
                .entry((
                    source.name(),
                    image.digest.clone(),
                    image.fallback_digest.clone(),
                ))
                .or_default(),
        )
    };
    let graph = cell
        .get_or_init(|| async {
            let fetched = image.root.as_ref();
            let keep = image.fallback_digest.is_some();
            Arc::new(fetch_graph(source, &image.source_digest, platforms, keep, fetched).await)
        })
        .await;
    Arc::clone(graph)
}

/// What one image did on one target: what its manifests' put returned with the bytes of its
/// blobs recorded upload sessions held when resumed (0: none), or why it failed.
type TargetOutcome = Result<(Put, u64), SyncError>;

/// Brings one image to each of its targets; an outcome per target, in order.
async fn run_image(
    w: &Work,
    scheduler: &BlobScheduler,
    pusher: &ManifestPusher,
    stop: &StopSignal,
) -> Vec<TargetOutcome> {
    if stop.is_stopped() {
        return vec![Err(SyncError::Interrupted); w.targets.len()];
    }
    let graph = match &*w.graph {
        Ok(g) => g,
        Err(e) => return vec![Err(SyncError::Registry(e.clone())); w.targets.len()],
    };
    let mut out = Vec::with_capacity(w.targets.len());
    for t in &w.targets {
        let outcome = copy_to_target(w, graph, t, scheduler, pusher).await;
        // An upload the stop ended at a chunk boundary (recorded for the next run) is an
        // interruption, not a failure of the target.
        let outcome = match outcome {
            Err(SyncError::Registry(e))
                if e.kind == ferry_distribution::ErrorKind::Cancelled && stop.is_stopped() =>
            {
                Err(SyncError::Interrupted)
            }
            other => other,
        };
        out.push(outcome);
    }
    out
}

/// Totals and per-registry counters: the report of the run.
#[allow(clippy::too_many_arguments)]
fn summarise(
    mut images: Vec<ImageReport>,
    failed_mappings: Vec<MappingFailure>,
    rejected_names: Vec<RejectedNameReport>,
    scheduler: &BlobScheduler,
    progress: &crate::progress::SyncProgress,
    registries: &Registries,
    start: Instant,
    stop: &StopSignal,
) -> SyncReport {
    images.sort_by(|a, b| (a.mapping, &a.image, &a.target).cmp(&(b.mapping, &b.image, &b.target)));
    let mut totals = Totals::default();
    for i in &images {
        match i.status {
            ImageStatus::Synced => totals.images_synced += 1,
            ImageStatus::UpToDate => totals.images_up_to_date += 1,
            ImageStatus::Failed { .. } => totals.images_failed += 1,
            ImageStatus::Interrupted => totals.images_interrupted += 1,
            ImageStatus::Held { .. } => totals.images_held += 1,
        }
    }
    totals.mappings_failed = failed_mappings.len() as u64;
    let c = &scheduler.counters;
    totals.blobs_copied = c.copied.load(Ordering::Relaxed);
    totals.blobs_mounted = c.mounted.load(Ordering::Relaxed);
    totals.blobs_skipped = c.skipped.load(Ordering::Relaxed);
    totals.bytes_copied = c.bytes_copied.load(Ordering::Relaxed);
    totals.blobs_resumed = c.resumed.load(Ordering::Relaxed);
    totals.bytes_resumed = c.bytes_resumed.load(Ordering::Relaxed);
    let registries_report: Vec<RegistryReport> =
        registries.built().iter().map(RegistryReport::of).collect();
    // Bytes and requests: the layouts' share and every registry's, one meaning each.
    totals += progress.totals();
    totals += registries_report.iter().map(|r| Totals::of(&r.stats)).sum();
    let mut failed_mappings = failed_mappings;
    failed_mappings.sort_by_key(|f| f.mapping);
    let mut rejected_names = rejected_names;
    rejected_names.sort_by_key(|r| r.mapping);
    // Stopped with something left undone; a stop after the last image started is not.
    let interrupted = stop.is_stopped() && totals.images_interrupted > 0;
    SyncReport {
        images,
        failed_mappings,
        rejected_names,
        expansions: Vec::new(),
        selections: Vec::new(),
        repositories_created: registries.created_repositories(),
        registries: registries_report,
        totals,
        elapsed: start.elapsed(),
        interrupted,
        archives: Vec::new(),
        repaired: Vec::new(),
        copy: None,
    }
}

/// Takes the writing lock of every layout these images target that the run does not hold yet.
/// Returns the layouts whose lock could not be taken, each with the reason (their images fail).
async fn hold_layouts(
    images: &[(ImagePlan, Vec<(Target, TargetState)>)],
    holds: &tokio::sync::Mutex<LayoutHolds>,
) -> HashMap<std::path::PathBuf, SyncError> {
    use ferry_store::layout::lock::{self, LockKind};
    let mut holds = holds.lock().await;
    for (_, targets) in images {
        for (t, _) in targets {
            let Target::OciLayout { path } = t else {
                continue;
            };
            if holds.taken.contains(path) || holds.refused.contains_key(path) {
                continue;
            }
            match lock::acquire(path, LockKind::Writing, lock::LOCK_WAIT).await {
                Ok(l) => {
                    holds.held.push(l);
                    holds.taken.insert(path.clone());
                }
                Err(e) => {
                    let error = SyncError::lock(path.clone(), e);
                    holds.refused.insert(path.clone(), error);
                }
            }
        }
    }
    holds.refused.clone()
}

/// The referrer `w` as it reached the registry target `t` (with its report at `report`), to
/// be listed under its subject's tag there; `None` for an image that is not a referrer, or a
/// layout target.
fn referrer_to_index(
    w: &Work,
    t: &ResolvedTarget,
    report: (usize, usize),
) -> Option<referrers::Pushed> {
    let subject = w.image.subject.as_ref()?;
    let Ok(graph) = &*w.graph else {
        return None;
    };
    let Ok(Destination::Registry { client, repository }) = &t.place else {
        return None;
    };
    Some(referrers::Pushed {
        client: client.clone(),
        repository: repository.to_string(),
        subject: subject.clone(),
        referrer: graph.root().clone(),
        report,
    })
}

fn report(
    mapping: usize,
    source: &str,
    image: &ImagePlan,
    target: &Target,
    status: ImageStatus,
) -> ImageReport {
    // A retag reads the source under its own tag and writes the target's: the report names both.
    let (name, pushed_as) = match &image.retagged_from {
        Some(from) => (from.clone(), image.tag.as_ref().map(|t| t.to_string())),
        None => (image.name(), None),
    };
    ImageReport {
        mapping,
        source: source.to_owned(),
        image: name,
        digest: image.digest.to_string(),
        target: target.to_string(),
        status,
        pushed_as,
        kept_digest_refused: None,
        bytes_resumed: 0,
        in_base: None,
    }
}

/// Source, the digest the targets hold, and the fallback of a kept digest (which names the
/// platform filter, so two filters of one index are two graphs).
type GraphKey = (String, Digest, Option<Digest>);

/// Opens `target` once for the run. A missing repository on a registry that needs it made
/// (ECR's `create_repositories`, see [`destination::repository_to_create`]) is created here,
/// once per run, and only for an image whose graph was fetched and verified (`fetched`): a
/// hostile source cannot have a repository made for an image it never serves.
async fn open_target(
    target: &Target,
    state: &TargetState,
    fetched: bool,
    registries: &Registries,
    stores: &ferry_store::archive::Stores,
) -> Result<Destination, Error> {
    if fetched
        && let Some((registry, repository)) =
            destination::repository_to_create(target, state, registries)
        && let Some(Err(e)) = registries.ensure_repository(registry, repository).await
    {
        return Err(e);
    }
    Destination::open(target, registries, stores).await
}

async fn copy_to_target(
    w: &Work,
    graph: &ImageGraph,
    target: &ResolvedTarget,
    scheduler: &BlobScheduler,
    pusher: &ManifestPusher,
) -> TargetOutcome {
    let place = target.place.as_ref().map_err(|e| e.clone())?;
    // Every blob first; the first failure fails this target (nothing gets tagged).
    let results = futures::future::join_all(
        graph
            .blobs
            .iter()
            .map(|b| scheduler.ensure(&b.digest, place)),
    )
    .await;
    let mut resumed = 0;
    for r in results {
        resumed += r?;
    }
    let from = destination::ImageFrom {
        mapping: w.mapping,
        source: match &w.image.tag {
            _ if w.image.retagged_from.is_some() => source_ref(
                &w.source_name,
                w.image.retagged_from.as_deref().unwrap_or(""),
            ),
            Some(tag) => format!("{}:{tag}", w.source_name),
            None => format!("{}@{}", w.source_name, w.image.digest),
        },
    };
    let put = place
        .put_graph(pusher, graph, w.image.tag.as_deref(), &from)
        .await?;
    Ok((put, resumed))
}

/// `source:tag`, or `source@digest` for a digest.
fn source_ref(source: &str, name: &str) -> String {
    match name.contains(':') {
        true => format!("{source}@{name}"),
        false => format!("{source}:{name}"),
    }
}
