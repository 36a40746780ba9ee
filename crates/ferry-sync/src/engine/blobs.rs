//! The BlobScheduler: every blob of the run once, by digest. It knows every destination a blob
//! must reach, skips what is there, uploads once per registry (one source read for all), mounts
//! the rest.
//!
//! Destinations can be added while transfers run (mappings reach the engine as they resolve). A
//! destination added after its blob's transfer started goes into a new generation of that
//! blob, which runs after the earlier ones and mounts from any registry repository they reached.

// A `Destination` holds a client with interior mutability, but hashes and orders by what it
// names alone (host and repository, or the layout's directory), which never changes.
#![allow(clippy::mutable_key_type)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{OnceCell, Semaphore};

use ferry_distribution::Digest;
use ferry_distribution::capabilities::{Feature, Support};
use ferry_distribution::ops::MountOutcome;

use super::destination::Destination;
use super::graph::BlobRef;
use super::transfer::{UploadShape, transfer};
use crate::error::SyncError;
use crate::source::Source;

/// What the scheduler did, for the report.
#[derive(Debug, Default)]
pub struct BlobCounters {
    /// Blob copies streamed from the source, one per place written.
    pub copied: AtomicU64,
    /// Registry places that got a blob by a cross-repository mount, without a byte sent.
    pub mounted: AtomicU64,
    /// Places that already held the blob.
    pub skipped: AtomicU64,
    /// Blob bytes streamed to targets, counted once per place written.
    pub bytes_copied: AtomicU64,
    /// Uploads that went on from a session an earlier process recorded.
    pub resumed: AtomicU64,
    /// The bytes those sessions already held when resumed (not read or sent again).
    pub bytes_resumed: AtomicU64,
}

/// One blob's transfer as planned: what to read, and every place it must reach.
#[derive(Debug, Clone)]
struct Job {
    blob: BlobRef,
    source: Source,
    /// Every destination (sorted, each once), and whether it is a repository that did not
    /// exist before this run. A sorted vector rather than a map: most blobs go to one place,
    /// and a run plans one job per blob (issue 42's memory at 5,000 images).
    places: Vec<(Destination, bool)>,
}

impl Job {
    /// Where `place` is in `places`, or where it would go.
    fn find(&self, place: &Destination) -> Result<usize, usize> {
        self.places.binary_search_by(|(p, _)| p.cmp(place))
    }
}

/// Per place of the job, in the job's order: the bytes a recorded upload session held when the
/// place's upload went on from it (0 when none was resumed), or the failure (boxed: a run
/// keeps one per place to the end, and nearly all are not failures).
type Outcome = Box<[Result<u64, Arc<SyncError>>]>;

/// One generation of one blob's work: pending until a caller of [`BlobScheduler::ensure`] runs
/// it to the end, then done with a result for every place it was planned for. The job stays in
/// the cell, so a run that is dropped part way leaves the cell pending, never done with a
/// partial outcome. Places join the job until its run starts; from then on it is shared, never
/// copied.
#[derive(Debug)]
struct Cell {
    planned: std::sync::Mutex<Planned>,
    /// The blob's earlier generations, which run first.
    earlier: Vec<Arc<Cell>>,
    done: OnceCell<Outcome>,
}

#[derive(Debug)]
struct Planned {
    job: Arc<Job>,
    started: bool,
}

impl Cell {
    fn planned(&self) -> std::sync::MutexGuard<'_, Planned> {
        self.planned.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Schedules every blob transfer of a run: a blob that several images and targets need is read
/// from the source once for all the places known when its transfer starts.
#[derive(Debug)]
pub struct BlobScheduler {
    cells: std::sync::Mutex<HashMap<Digest, Vec<Arc<Cell>>>>,
    limit: Arc<Semaphore>,
    shape: UploadShape,
    /// What the scheduler did so far; the engine's report reads it when the run ends.
    pub counters: Arc<BlobCounters>,
    progress: Arc<crate::progress::SyncProgress>,
}

impl BlobScheduler {
    /// An empty scheduler moving at most `blobs_in_flight` blobs at once; places are added with
    /// [`BlobScheduler::need`].
    pub(crate) fn new(
        blobs_in_flight: usize,
        shape: UploadShape,
        progress: Arc<crate::progress::SyncProgress>,
    ) -> Self {
        BlobScheduler {
            cells: std::sync::Mutex::default(),
            limit: Arc::new(Semaphore::new(blobs_in_flight.max(1))),
            shape,
            counters: Arc::new(BlobCounters::default()),
            progress,
        }
    }

    fn cells(&self) -> std::sync::MutexGuard<'_, HashMap<Digest, Vec<Arc<Cell>>>> {
        self.cells.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `blob` (read from `source`) must be at `place`. Returns the bytes this adds
    /// to what the run will read from sources: the blob's size when it starts a new generation.
    pub(crate) fn need(
        &self,
        blob: &BlobRef,
        source: &Source,
        place: Destination,
        new_repository: bool,
    ) -> u64 {
        let mut cells = self.cells();
        let generations = cells.entry(blob.digest.clone()).or_default();
        // Already on its way there (or already there) in a generation that started: checked
        // before joining the pending one, or that one would plan the place again and, holding
        // it from the earlier generation, mount the blob into the repository from itself (an
        // extra upload POST; the flake of import_roundtrip's request count, issue 39).
        if generations.iter().any(|c| {
            let planned = c.planned();
            planned.started && planned.job.find(&place).is_ok()
        }) {
            return 0;
        }
        if let Some(last) = generations.last() {
            let mut planned = last.planned();
            if !planned.started {
                // Not started: no one else holds the job, so this changes it in place.
                let job = Arc::make_mut(&mut planned.job);
                match job.find(&place) {
                    Ok(i) => job.places[i].1 &= new_repository,
                    Err(i) => job.places.insert(i, (place, new_repository)),
                }
                return 0;
            }
        }
        let job = Job {
            blob: blob.clone(),
            source: source.clone(),
            places: vec![(place, new_repository)],
        };
        let cell = Arc::new(Cell {
            planned: std::sync::Mutex::new(Planned {
                job: Arc::new(job),
                started: false,
            }),
            earlier: generations.clone(),
            done: OnceCell::new(),
        });
        generations.push(cell);
        blob.size
    }

    /// Waits until `digest` is at `place`, running the blob's transfer (to every place planned
    /// for it) if no other caller is running it; `Ok` holds the bytes a recorded upload session
    /// held when the place's upload resumed it (0: none was). Asking for a blob or a place that was never
    /// planned is an error, never a success: the scheduler only vouches for work it did.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way (a timeout, a stop) never records an outcome: the blob stays
    /// pending, and the next caller runs its transfer again from the start (the skip check finds
    /// what already landed). Callers waiting on another caller's run wait on; if that run is
    /// dropped, one of them takes it over.
    pub(crate) async fn ensure(
        &self,
        digest: &Digest,
        place: &Destination,
    ) -> Result<u64, SyncError> {
        let unplanned = |what: &'static str| {
            Err(SyncError::Unplanned {
                destination: place.name(),
                digest: digest.to_string(),
                what,
            })
        };
        let found = {
            let cells = self.cells();
            let Some(generations) = cells.get(digest) else {
                return unplanned("was never scheduled");
            };
            generations.iter().find_map(|c| {
                let at = c.planned().job.find(place).ok()?;
                Some((Arc::clone(c), at))
            })
        };
        let Some((cell, at)) = found else {
            return unplanned("was never scheduled for this place");
        };
        match self.outcome(&cell).await.get(at) {
            Some(r) => r.clone().map_err(|e| SyncError::clone(&e)),
            None => unplanned("was never scheduled for this place"),
        }
    }

    /// Runs `cell` (after its earlier generations) unless it is done or being run.
    fn outcome<'a>(
        &'a self,
        cell: &'a Cell,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = &'a Outcome> + Send + 'a>> {
        Box::pin(cell.done.get_or_init(|| async {
            // Earlier generations first (each takes its own slot): the destinations they
            // reached are `held`, and a registry repository of the same host mounts from one
            // rather than the source being read again.
            let mut held = Vec::new();
            for earlier in &cell.earlier {
                let outcome = self.outcome(earlier).await;
                let reached = Arc::clone(&earlier.planned().job);
                held.extend(
                    reached
                        .places
                        .iter()
                        .zip(outcome.iter())
                        .filter(|(_, r)| r.is_ok())
                        .map(|((p, _), _)| p.clone()),
                );
            }
            let job = {
                let mut planned = cell.planned();
                planned.started = true;
                Arc::clone(&planned.job)
            };
            let _permit = self.limit.acquire().await;
            let mut outcome =
                run_job(&job, &held, self.shape, &self.counters, &self.progress).await;
            job.places
                .iter()
                .map(|(p, _)| match outcome.remove(p) {
                    Some(r) => r.map_err(Arc::new),
                    None => Err(Arc::new(SyncError::Unplanned {
                        destination: p.name(),
                        digest: job.blob.digest.to_string(),
                        what: "was planned but its transfer gave no outcome",
                    })),
                })
                .collect()
        }))
    }
}

/// What a job's run did, per place, while it runs (the cell keeps it in the job's order).
type RunOutcome = HashMap<Destination, Result<u64, SyncError>>;

/// Runs `job`; a registry repository in `held` (what earlier generations of the blob reached)
/// is mounted from rather than the source read again.
async fn run_job(
    job: &Job,
    held: &[Destination],
    shape: UploadShape,
    counters: &BlobCounters,
    progress: &Arc<crate::progress::SyncProgress>,
) -> RunOutcome {
    let mut outcome: RunOutcome = HashMap::new();
    let digest = &job.blob.digest;

    // 1. Skip what is already there (never a HEAD in a repository that did not exist, unless
    //    the source is an archive that leaves the blob out: `ferry import` may have mounted it).
    let mut needed: Vec<&Destination> = Vec::new();
    for (place, new_repo) in &job.places {
        match place.holds_blob_from(&job.source, digest, *new_repo).await {
            Ok((true, _)) => {
                counters.skipped.fetch_add(1, Ordering::Relaxed);
                outcome.insert(place.clone(), Ok(0));
            }
            Ok((false, _)) => needed.push(place),
            Err(e) => {
                outcome.insert(place.clone(), Err(e.into()));
            }
        }
    }

    // 2. One upload per registry (the first repository needing it) plus every layout, all fed
    //    by one read of the source; the other repositories of a registry mount from it.
    //    A repository with a namespace goes first: a registry may refuse one-component names,
    //    and a refused primary must not take the mounts of the others down with it.
    needed.sort_by_key(|p| match p {
        Destination::Registry { repository, .. } => !repository.contains('/'),
        Destination::Store(_) => false,
    });
    let mut primaries: Vec<Destination> = Vec::new();
    let mut mounts: Vec<(Destination, Destination)> = Vec::new();
    // The source repository itself, when it is a repository of a target's registry: the run
    // reads it with that registry's one client (one set of credentials), so mounting from it
    // lends no access the run does not use already (issue 37's confused deputy), and the blob
    // goes over without a byte read or sent (issue 42).
    let source_repository = Destination::source_repository(&job.source);
    for place in needed {
        // A registry that refused or ignored a mount this run is uploaded to directly, from
        // the same source read; a layout always is.
        let primary = source_repository
            .iter()
            .filter(|s| *s != place)
            .chain(held.iter())
            .chain(&primaries)
            .find(|p| place.mounts_from(p))
            .cloned();
        match primary {
            Some(from) => mounts.push((place.clone(), from)),
            None => primaries.push(place.clone()),
        }
    }
    let results = copy_to(
        job,
        primaries.clone(),
        &HashMap::new(),
        shape,
        counters,
        progress,
    )
    .await;
    outcome.extend(results);

    // 3. Mount into the other repositories; a refused mount hands over an upload session.
    let mut sessions = HashMap::new();
    let mut fallbacks = Vec::new();
    for (place, from) in mounts {
        if let Some(Err(e)) = outcome.get(&from) {
            let e = e.clone();
            outcome.insert(place, Err(e));
            continue;
        }
        match place.mount(digest, &from).await {
            Ok(MountOutcome::Mounted) => {
                counters.mounted.fetch_add(1, Ordering::Relaxed);
                outcome.insert(place, Ok(0));
            }
            Ok(MountOutcome::Session(s)) => {
                // The blob was just uploaded to `from`: a registry that has never mounted and
                // does not mount it ignores mounts (learned; later blobs skip the request). A
                // mount from the source repository proves nothing: the source may list a blob
                // it does not serve from there.
                if source_repository.as_ref() != Some(&from)
                    && let Destination::Registry { client, .. } = &place
                    && client.capabilities().support(Feature::Mount) == Support::Unknown
                {
                    client
                        .capabilities()
                        .learn(Feature::Mount, Support::Ignored);
                }
                sessions.insert(place.clone(), s);
                fallbacks.push(place);
            }
            Err(e) => {
                outcome.insert(place, Err(e.into()));
            }
        }
    }
    if primaries.is_empty() && fallbacks.is_empty() {
        // Everything was there already, or mounted from where it is: no source read.
        progress.bytes_not_needed(job.blob.size);
    }
    if !fallbacks.is_empty() {
        let results = copy_to(job, fallbacks, &sessions, shape, counters, progress).await;
        outcome.extend(results);
    }
    outcome
}

/// Streams the blob to `places` from one source read.
async fn copy_to(
    job: &Job,
    places: Vec<Destination>,
    sessions: &HashMap<Destination, ferry_distribution::ops::UploadSession>,
    shape: UploadShape,
    counters: &BlobCounters,
    progress: &Arc<crate::progress::SyncProgress>,
) -> RunOutcome {
    let mut outcome = HashMap::new();
    if places.is_empty() {
        return outcome;
    }
    let to: Vec<_> = places
        .iter()
        .map(|p| (p.clone(), sessions.get(p).cloned()))
        .collect();
    let results = transfer(&job.source, &job.blob, to, shape, progress).await;
    for (place, result) in places.into_iter().zip(results) {
        if let Ok(resumed) = &result {
            if *resumed > 0 {
                counters.resumed.fetch_add(1, Ordering::Relaxed);
                counters
                    .bytes_resumed
                    .fetch_add(*resumed, Ordering::Relaxed);
            }
            counters.copied.fetch_add(1, Ordering::Relaxed);
            counters
                .bytes_copied
                .fetch_add(job.blob.size, Ordering::Relaxed);
            if matches!(place, Destination::Store(_)) {
                progress.layout_written(job.blob.size);
            }
        }
        outcome.insert(place, result);
    }
    outcome
}

#[cfg(test)]
#[path = "blobs_tests.rs"]
mod tests;
