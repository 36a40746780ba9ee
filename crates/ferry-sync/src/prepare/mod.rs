//! The prepare phase: [`resolve_all`] resolves every mapping through a window that refills as
//! each one completes, then returns the plan in config order; one failed mapping stops no other.

pub(crate) mod expand;
pub(crate) mod mapping;
pub(crate) mod referrers;
pub(crate) mod signatures;
pub(crate) mod source;
pub(crate) mod targets;
pub mod tracker;

use std::collections::HashMap;
use std::sync::Arc;

use ferry_distribution::Error;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;

use crate::plan::{MappingPlan, Plan};
use crate::registries::Registries;
use ferry_config::Config;
use targets::TargetListing;

pub use tracker::PrepareTracker;

/// How the prepare phase runs.
#[derive(Debug, Clone)]
pub struct PrepareOptions {
    /// Mappings resolved at once.
    pub concurrency: usize,
    /// How often the watch log line is written while it runs (`None`: never).
    pub watch_interval: Option<Duration>,
    /// Requests in flight for one mapping's manifest HEADs.
    pub heads_per_mapping: usize,
    /// For `ferry verify` (`crate::verify`): every selected tag's source digest is asked with a
    /// HEAD (a GET only where a platform filter must compute the digest), and each target's
    /// listing is kept in `target_tags` for every mapping (for the extra tags).
    pub audit: bool,
    /// The archives the run reads and writes (the run's own, from its context).
    pub(crate) stores: ferry_store::archive::Stores,
    /// Mappings failed before they are resolved, by index, with why (`ferry import`'s base
    /// check refused the image): nothing of them is read or pushed.
    pub(crate) refused: Arc<HashMap<usize, Error>>,
    /// Each target listed once for every mapping, where mappings share targets and none
    /// prunes (`ferry import`'s one-image mappings); `None`: each mapping lists its own.
    pub(crate) shared_listings: Option<Arc<SharedListings>>,
    /// Where `signatures: {min_age}` finds when a digest was first seen (the state directory's
    /// records), for signatures no log entry dates; `None`: every such digest is new.
    pub(crate) first_seen: Option<ferry_store::resume::FirstSeen>,
    /// `ferry sync --repair`: what a deep verify found missing under held tags; those images
    /// are planned stale on those targets (written again) instead of up to date.
    pub(crate) repair: Option<Arc<crate::repair::Repairs>>,
    /// The state directory's tag cache (`engine.tag_cache_ttl`): a listed target tag it vouches
    /// for is up to date without a HEAD, and its image's referrers are not asked again.
    pub(crate) tag_cache: Option<Arc<ferry_store::resume::TagCache>>,
}

/// Target listings by target, each taken once for the run.
pub(crate) type SharedListings =
    std::sync::Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Result<TargetListing, Error>>>>>;

impl PrepareOptions {
    /// `target` listed for a mapping (once for the run where listings are shared).
    pub(crate) async fn listing(
        &self,
        target: &ferry_config::Target,
        registries: &Registries,
        prunes: bool,
    ) -> Result<TargetListing, Error> {
        let Some(shared) = &self.shared_listings else {
            return TargetListing::take(target, registries, &self.stores, prunes).await;
        };
        let cell = Arc::clone(
            shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(target.to_string())
                .or_default(),
        );
        cell.get_or_init(|| TargetListing::take(target, registries, &self.stores, prunes))
            .await
            .clone()
    }
}

impl PrepareOptions {
    /// The options the config sets: `concurrency` mappings at once, a watch line every 5 s.
    pub(crate) fn from_config(config: &Config) -> Self {
        PrepareOptions {
            concurrency: config.concurrency.max(1),
            watch_interval: Some(Duration::from_secs(5)),
            heads_per_mapping: 8,
            audit: false,
            stores: Default::default(),
            refused: Arc::default(),
            shared_listings: None,
            first_seen: None,
            repair: None,
            tag_cache: None,
        }
    }
}

/// Resolves every mapping of `config`. Mappings run through `buffer_unordered`, so a deep,
/// slow repository holds one slot and no more: each finished mapping frees its slot at once.
/// Outcomes carry their index and are sorted once all are in, so the plan is in config order.
pub(crate) async fn resolve_all(
    config: &Config,
    registries: &Registries,
    options: &PrepareOptions,
    tracker: Arc<PrepareTracker>,
) -> Plan {
    let start = Instant::now();
    let watch = options
        .watch_interval
        .map(|every| tokio::spawn(watch_log(Arc::clone(&tracker), every)));
    let mut outcomes: Vec<MappingPlan> = resolve_each(config, registries, options, tracker)
        .collect()
        .await;
    outcomes.sort_by(|a, b| (a.index, &a.source).cmp(&(b.index, &b.source)));
    if let Some(w) = watch {
        w.abort();
    }
    Plan {
        mappings: outcomes,
        elapsed: start.elapsed(),
    }
}

/// Every mapping of `config` resolved, each yielded the moment it is done (completion order,
/// through the same refilling window as [`resolve_all`]), so the engine can start on it while
/// slower mappings still resolve. Whole-registry mappings are expanded first
/// ([`expand::expand_all`]): each yields its own entry (what it expanded to) and one per
/// repository, all under its index.
pub(crate) fn resolve_each<'a>(
    config: &'a Config,
    registries: &'a Registries,
    options: &'a PrepareOptions,
    tracker: Arc<PrepareTracker>,
) -> impl futures::Stream<Item = MappingPlan> + 'a {
    let expanded = {
        let tracker = Arc::clone(&tracker);
        async move { expand::expand_all(config, registries, options, &tracker).await }
    };
    futures::stream::once(expanded).flat_map(move |expanded| {
        let tracker = Arc::clone(&tracker);
        let resolved = futures::stream::iter(expanded.mappings)
            .map(move |m| {
                let tracker = Arc::clone(&tracker);
                async move {
                    tracker.started(m.index, &m.source);
                    let at = |what: &str| tracker.waiting_on(m.index, &m.source, what);
                    let outcome = mapping::resolve_mapping(&m, registries, options, &at).await;
                    tracker.finished(m.index, &m.source);
                    MappingPlan {
                        index: m.index,
                        source: m.source.clone(),
                        outcome,
                    }
                }
            })
            .buffer_unordered(options.concurrency.max(1));
        futures::stream::iter(expanded.globs).chain(resolved)
    })
}

/// Writes one line every `every` while the phase runs: done/total, in flight, the slowest
/// mapping and its seconds, elapsed.
async fn watch_log(tracker: Arc<PrepareTracker>, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let s = tracker.snapshot();
        let (slowest, slowest_secs) = s
            .slowest
            .map_or((String::new(), 0), |(n, d)| (n, d.as_secs()));
        tracing::info!(
            done = s.done,
            total = s.total,
            in_flight = s.in_flight,
            slowest = %slowest,
            slowest_secs,
            elapsed_secs = s.elapsed.as_secs(),
            "prepare"
        );
    }
}
