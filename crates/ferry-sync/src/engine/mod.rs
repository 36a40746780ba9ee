//! The sync engine: takes the plan, fetches each stale image's manifest graph, schedules every
//! blob once for the whole run, and pushes manifests only once all they reference is present.

pub mod blobs;
pub mod graph;
pub mod manifests;
pub mod referrers;
pub mod transfer;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use tokio::time::Instant;

use ferry_distribution::error::Error;
use ferry_distribution::{Digest, RegistryClient};

use crate::config::{EngineSettings, Target};
use crate::plan::{ImagePlan, Plan, TargetState};
use crate::registries::Registries;
use crate::report::{
    ImageReport, ImageStatus, MappingFailure, RegistryReport, RejectedNameReport, SyncReport,
    Totals,
};
use crate::source::Source;

use blobs::{BlobScheduler, Place};
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
}

impl EngineOptions {
    /// The options the config's `engine` section sets, each at least 1.
    pub fn from_settings(s: &EngineSettings) -> Self {
        EngineOptions {
            images_in_flight: s.images_in_flight.max(1),
            blobs_in_flight: s.blobs_in_flight.max(1),
            shape: UploadShape {
                chunk_size: s.chunk_size.max(1),
                monolithic_limit: s.monolithic_limit,
            },
            progress: Arc::default(),
        }
    }
}

/// Set to stop starting new work (SIGINT/SIGTERM); work in flight finishes.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    /// Stops new work from starting; work in flight finishes.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Whether [`StopSignal::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// One image to bring to its stale targets.
struct Work<'a> {
    mapping: usize,
    source_name: &'a str,
    source: Source,
    image: &'a ImagePlan,
    platforms: &'a [String],
    targets: Vec<(Target, TargetState)>,
}

/// Runs the sync for every stale (mapping, image, target) of `plan`.
pub async fn sync(
    plan: &Plan,
    registries: &Registries,
    options: &EngineOptions,
    stop: &StopSignal,
) -> SyncReport {
    let start = Instant::now();
    let mut images = Vec::new();
    let mut failed_mappings = Vec::new();
    let mut rejected_names = Vec::new();
    let mut work = Vec::new();

    for m in &plan.mappings {
        let resolved = match &m.outcome {
            Ok(r) => r,
            Err(e) => {
                failed_mappings.push(MappingFailure {
                    mapping: m.index,
                    source: m.source.clone(),
                    status: ImageStatus::failed(e),
                });
                continue;
            }
        };
        rejected_names.extend(resolved.rejected_names.iter().map(|r| RejectedNameReport {
            mapping: m.index,
            source: m.source.clone(),
            rejected: r.clone(),
        }));
        // A listed tag whose manifest could not be fetched: failed on every target, never
        // dropped (it also keeps the mapping from pruning; see `crate::prune`).
        for u in &resolved.unfetched {
            for t in &u.targets {
                images.push(ImageReport {
                    mapping: m.index,
                    source: m.source.clone(),
                    image: u.tag.clone(),
                    digest: String::new(),
                    target: t.to_string(),
                    status: ImageStatus::failed(&u.error),
                });
            }
        }
        for image in &resolved.images {
            let mut stale = Vec::new();
            for t in &image.targets {
                if t.state.needs_copy() {
                    stale.push((t.target.clone(), t.state.clone()));
                } else {
                    images.push(report(
                        m.index,
                        &m.source,
                        image,
                        &t.target,
                        ImageStatus::UpToDate,
                    ));
                }
            }
            if stale.is_empty() {
                continue;
            }
            match Source::open(&resolved.origin, registries).await {
                Ok(source) => work.push(Work {
                    mapping: m.index,
                    source_name: &m.source,
                    source,
                    image,
                    platforms: &resolved.platforms,
                    targets: stale,
                }),
                Err(e) => {
                    for (t, _) in stale {
                        images.push(report(
                            m.index,
                            &m.source,
                            image,
                            &t,
                            ImageStatus::failed(&e),
                        ));
                    }
                }
            }
        }
    }

    // Every layout this run writes is held (shared) from before its first blob until the
    // run's index entries are in, so no garbage collection removes a blob not yet indexed.
    let (_layout_locks, refused) = hold_layouts(&mut work).await;
    images.extend(refused);

    // Stage 1: every stale image's manifest graph (images sharing a digest share one fetch).
    let graphs = fetch_graphs(&work, options).await;

    // Stage 2: every place every blob must reach, known before any transfer starts.
    let mut scheduler = BlobScheduler::new(
        options.blobs_in_flight,
        options.shape,
        Arc::clone(&options.progress),
    );
    let mut clients: HashMap<String, Result<RegistryClient, Error>> = HashMap::new();
    for w in &work {
        let Some(Ok(graph)) = graphs.get(&graph_key(w)) else {
            continue;
        };
        for (target, state) in &w.targets {
            let (place, client) = match place_of(target, registries, &mut clients).await {
                Ok(p) => p,
                Err(_) => continue,
            };
            for blob in &graph.blobs {
                scheduler.need(
                    blob,
                    &w.source,
                    place.clone(),
                    *state == TargetState::NewRepository,
                    client.as_ref(),
                );
            }
        }
    }
    options.progress.expect_bytes(scheduler.planned_bytes());
    let scheduler = Arc::new(scheduler);
    let pusher = Arc::new(ManifestPusher::default());

    // Stage 3: images through a window that refills on completion; each target's manifests go
    // up once every blob they reference is there.
    let outcomes: Vec<Vec<ImageReport>> = futures::stream::iter(work.iter())
        .map(|w| {
            let scheduler = Arc::clone(&scheduler);
            let pusher = Arc::clone(&pusher);
            let graph = graphs.get(&graph_key(w));
            let clients = &clients;
            async move {
                if stop.is_stopped() {
                    return w
                        .targets
                        .iter()
                        .map(|(t, _)| {
                            report(
                                w.mapping,
                                w.source_name,
                                w.image,
                                t,
                                ImageStatus::Interrupted,
                            )
                        })
                        .collect();
                }
                let graph = match graph {
                    Some(Ok(g)) => g,
                    Some(Err(e)) => {
                        return w
                            .targets
                            .iter()
                            .map(|(t, _)| {
                                report(w.mapping, w.source_name, w.image, t, ImageStatus::failed(e))
                            })
                            .collect();
                    }
                    None => return Vec::new(),
                };
                let mut out = Vec::new();
                for (target, _) in &w.targets {
                    let status = match copy_to_target(
                        w, graph, target, &scheduler, &pusher, registries, clients,
                    )
                    .await
                    {
                        Ok(()) => ImageStatus::Synced,
                        Err(e) => ImageStatus::failed(&e),
                    };
                    out.push(report(w.mapping, w.source_name, w.image, target, status));
                }
                out
            }
        })
        .buffer_unordered(options.images_in_flight)
        .inspect(|done| options.progress.images_done(done.len() as u64))
        .collect()
        .await;
    images.extend(outcomes.into_iter().flatten());

    // Referrers found through the source's referrers API: a target without the API gets the
    // subject's tag-schema index, so they stay discoverable there.
    let pushed = referrers_to_index(&work, &graphs, &images, &clients);
    for (p, e) in referrers::write_fallback_indexes(pushed).await {
        let name = p.referrer.digest.to_string();
        for i in images.iter_mut().filter(|i| i.image == name) {
            i.status = ImageStatus::failed(&e);
        }
    }
    images.sort_by(|a, b| (a.mapping, &a.image, &a.target).cmp(&(b.mapping, &b.image, &b.target)));

    let mut totals = Totals::default();
    for i in &images {
        match i.status {
            ImageStatus::Synced => totals.images_synced += 1,
            ImageStatus::UpToDate => totals.images_up_to_date += 1,
            ImageStatus::Failed { .. } => totals.images_failed += 1,
            ImageStatus::Interrupted => totals.images_interrupted += 1,
        }
    }
    totals.mappings_failed = failed_mappings.len() as u64;
    let c = &scheduler.counters;
    totals.blobs_copied = c.copied.load(Ordering::Relaxed);
    totals.blobs_mounted = c.mounted.load(Ordering::Relaxed);
    totals.blobs_skipped = c.skipped.load(Ordering::Relaxed);
    totals.bytes_copied = c.bytes_copied.load(Ordering::Relaxed);
    totals.layout_bytes_written = c.layout_bytes_written.load(Ordering::Relaxed)
        + pusher.layout_bytes.load(Ordering::Relaxed);
    totals.bytes_written += totals.layout_bytes_written;
    let registries_report = registry_reports(registries);
    for r in &registries_report {
        totals.bytes_read += r.stats.bytes_read;
        totals.bytes_written += r.stats.bytes_written;
        totals.requests += r.stats.requests;
        totals.retries += r.stats.retries;
        totals.throttled += r.stats.throttled;
    }
    SyncReport {
        images,
        failed_mappings,
        rejected_names,
        registries: registries_report,
        totals,
        // The whole run: the prepare phase and the engine.
        elapsed: plan.elapsed + start.elapsed(),
        interrupted: stop.is_stopped(),
    }
}

/// Takes the writing lock of every layout some work targets; a layout whose lock cannot be
/// taken is dropped from the work, each of its images reported failed with the reason.
async fn hold_layouts(
    work: &mut [Work<'_>],
) -> (Vec<crate::layout::lock::LayoutLock>, Vec<ImageReport>) {
    use crate::layout::lock::{self, LockKind};
    let mut held = Vec::new();
    let mut refused: HashMap<std::path::PathBuf, Error> = HashMap::new();
    let mut taken: std::collections::HashSet<std::path::PathBuf> = Default::default();
    for w in work.iter() {
        for (t, _) in &w.targets {
            let Target::OciLayout { path } = t else {
                continue;
            };
            if taken.contains(path) || refused.contains_key(path) {
                continue;
            }
            match lock::acquire(path, LockKind::Writing, lock::LOCK_WAIT).await {
                Ok(l) => {
                    held.push(l);
                    taken.insert(path.clone());
                }
                Err(e) => {
                    let error = Error::new(
                        format!("oci:{}", path.display()),
                        None,
                        ferry_distribution::Operation::ManifestPutByTag,
                        ferry_distribution::error::ErrorKind::Local(e.to_string()),
                    );
                    refused.insert(path.clone(), error);
                }
            }
        }
    }
    let mut failed = Vec::new();
    for w in work.iter_mut() {
        w.targets.retain(|(t, _)| {
            let Target::OciLayout { path } = t else {
                return true;
            };
            match refused.get(path) {
                Some(e) => {
                    failed.push(report(
                        w.mapping,
                        w.source_name,
                        w.image,
                        t,
                        ImageStatus::failed(e),
                    ));
                    false
                }
                None => true,
            }
        });
    }
    (held, failed)
}

/// The referrers (with a subject) that reached a registry target in this run.
fn referrers_to_index(
    work: &[Work<'_>],
    graphs: &HashMap<GraphKey, Result<ImageGraph, Error>>,
    images: &[ImageReport],
    clients: &HashMap<String, Result<RegistryClient, Error>>,
) -> Vec<referrers::Pushed> {
    let mut pushed = Vec::new();
    for w in work {
        let Some(subject) = &w.image.subject else {
            continue;
        };
        let Some(Ok(graph)) = graphs.get(&graph_key(w)) else {
            continue;
        };
        for (target, _) in &w.targets {
            let Target::Registry {
                registry,
                repository,
            } = target
            else {
                continue;
            };
            let synced = images.iter().any(|i| {
                i.mapping == w.mapping
                    && i.digest == w.image.digest.to_string()
                    && i.target == target.to_string()
                    && i.status == ImageStatus::Synced
            });
            let Some(Ok(client)) = clients.get(registry) else {
                continue;
            };
            if synced {
                pushed.push(referrers::Pushed {
                    client: client.clone(),
                    repository: repository.clone(),
                    subject: subject.clone(),
                    referrer: graph.root().clone(),
                });
            }
        }
    }
    pushed
}

/// Per-registry counters of every client the run used.
pub fn registry_reports(registries: &Registries) -> Vec<RegistryReport> {
    registries
        .built()
        .iter()
        .map(|c| RegistryReport {
            registry: c.host().to_owned(),
            stats: c.gate().stats.snapshot(),
            window_halvings: c
                .gate()
                .window(ferry_distribution::Operation::BlobGet)
                .snapshot()
                .halvings,
            capabilities: c.capabilities().snapshot(),
        })
        .collect()
}

/// Brings the report's `capabilities` up to date with what was learned after the engine ran
/// (pruning learns whether tags can be deleted).
pub fn refresh_capabilities(report: &mut SyncReport, registries: &Registries) {
    for c in registries.built() {
        if let Some(r) = report
            .registries
            .iter_mut()
            .find(|r| r.registry == c.host())
        {
            r.capabilities = c.capabilities().snapshot();
        }
    }
}

fn report(
    mapping: usize,
    source: &str,
    image: &ImagePlan,
    target: &Target,
    status: ImageStatus,
) -> ImageReport {
    ImageReport {
        mapping,
        source: source.to_owned(),
        image: image.name(),
        digest: image.digest.to_string(),
        target: target.to_string(),
        status,
    }
}

type GraphKey = (String, Digest);

fn graph_key(w: &Work<'_>) -> GraphKey {
    (w.source.name(), w.image.digest.clone())
}

async fn fetch_graphs(
    work: &[Work<'_>],
    options: &EngineOptions,
) -> HashMap<GraphKey, Result<ImageGraph, Error>> {
    let mut unique: HashMap<GraphKey, &Work<'_>> = HashMap::new();
    for w in work {
        unique.entry(graph_key(w)).or_insert(w);
    }
    futures::stream::iter(unique)
        .map(|(key, w)| async move {
            let i = w.image;
            let fetched = i.root.as_ref();
            let g = fetch_graph(&w.source, &i.source_digest, w.platforms, fetched);
            (key, g.await)
        })
        .buffer_unordered(options.images_in_flight)
        .collect()
        .await
}

async fn place_of(
    target: &Target,
    registries: &Registries,
    clients: &mut HashMap<String, Result<RegistryClient, Error>>,
) -> Result<(Place, Option<RegistryClient>), Error> {
    match target {
        Target::OciLayout { path } => Ok((Place::Layout(path.clone()), None)),
        Target::Registry {
            registry,
            repository,
        } => {
            if !clients.contains_key(registry) {
                let c = registries.client(registry).await;
                clients.insert(registry.clone(), c);
            }
            let client = clients[registry].clone()?;
            Ok((
                Place::Registry {
                    host: registry.clone(),
                    repository: repository.clone(),
                },
                Some(client),
            ))
        }
    }
}

async fn copy_to_target(
    w: &Work<'_>,
    graph: &ImageGraph,
    target: &Target,
    scheduler: &BlobScheduler,
    pusher: &ManifestPusher,
    registries: &Registries,
    clients: &HashMap<String, Result<RegistryClient, Error>>,
) -> Result<(), Error> {
    let (place, client) = match target {
        Target::OciLayout { path } => (Place::Layout(path.clone()), None),
        Target::Registry {
            registry,
            repository,
        } => {
            let client = match clients.get(registry) {
                Some(c) => c.clone()?,
                None => registries.client(registry).await?,
            };
            (
                Place::Registry {
                    host: registry.clone(),
                    repository: repository.clone(),
                },
                Some(client),
            )
        }
    };
    // Every blob first; the first failure fails this target (nothing gets tagged).
    let results = futures::future::join_all(
        graph
            .blobs
            .iter()
            .map(|b| scheduler.ensure(&b.digest, &place)),
    )
    .await;
    for r in results {
        r?;
    }
    let tag = w.image.tag.as_deref();
    match (&place, client) {
        (Place::Registry { repository, .. }, Some(client)) => {
            pusher.push_registry(&client, repository, graph, tag).await
        }
        (Place::Layout(dir), _) => pusher.push_layout(dir, graph, tag).await,
        _ => Ok(()),
    }
}
