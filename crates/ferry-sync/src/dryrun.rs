//! `--dry-run`: what a sync would do, built from the prepare phase's plan (tags to copy with
//! each target's reason, up to date, filtered out and why, failures) and the bytes it would move.
//!
//! Measuring bytes reads only: the manifest graph of each stale image (GET) and a blob HEAD on
//! targets whose repository exists. A dry run never sends a write request.

// A `Destination` holds a client with interior mutability, but hashes and orders by what it
// names alone (host and repository, or the store's place), which never changes.
#![allow(clippy::mutable_key_type)]

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;

use futures::StreamExt;
use serde::Serialize;

use ferry_distribution::Digest;
use ferry_distribution::error::Error;

use crate::engine::destination::{Destination, repository_to_create};
use crate::engine::graph::{BlobRef, fetch_graph};
use crate::plan::{ImagePlan, Plan, TargetState};
use crate::registries::Registries;
use crate::report::human_bytes;
use crate::source::Source;
use ferry_config::Origin;
use ferry_config::platform::Platform;

/// Stale images measured at once.
const IMAGES_AT_ONCE: usize = 8;
/// Blob HEADs in flight for one image on one target.
const HEADS_AT_ONCE: usize = 8;

/// What a sync would do, per mapping, with totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DryRun {
    /// Every mapping, in config order.
    pub mappings: Vec<MappingDryRun>,
    /// Sums over the mappings.
    pub totals: DryRunTotals,
    /// Missing target repositories a sync would create first (ECR's `create_repositories`), as
    /// `host/repository`; present only when there are some (filled by [`DryRun::measure`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repositories_to_create: Vec<String>,
}

/// One mapping of the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MappingDryRun {
    /// Position of the mapping in the config.
    pub index: usize,
    /// The source as the config names it.
    pub source: String,
    /// Why the prepare phase could not resolve it (nothing else is known then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Images a sync would write, with the targets that need them.
    pub to_copy: Vec<ImageToCopy>,
    /// Images every target already holds.
    pub up_to_date: Vec<ImageUpToDate>,
    /// Listed tags the filter left out, each with why.
    pub filtered_out: Vec<FilteredTag>,
    /// `exact` tags the source does not have.
    pub missing_exact: Vec<String>,
    /// Listed names that are not valid tags, left out; present only when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejected_names: Vec<crate::plan::RejectedName>,
    /// Listed tags whose manifest the source did not serve: a sync reports them failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unfetched: Vec<FilteredTag>,
    /// Images `signatures:` refuses: a sync reports them failed and copies nothing of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signature_refused: Vec<crate::plan::SignatureRefusal>,
    /// Images held by `min_age`, with when each becomes mirrorable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signature_held: Vec<crate::plan::HeldImage>,
    /// A whole-registry mapping's own entry: the repositories (`host/path`) its catalog
    /// matched, each shown as a mapping of its own with the same index. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expanded: Option<Vec<String>>,
}

/// An image stale on at least one target.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImageToCopy {
    /// The tag, or the digest of a pin.
    pub image: String,
    /// The digest the targets would hold.
    pub digest: String,
    /// The targets that need it.
    pub targets: Vec<TargetChange>,
    /// Why its size could not be measured (the manifest graph could not be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measure_error: Option<String>,
}

/// One stale target of one image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TargetChange {
    /// The target as reports name it.
    pub target: String,
    /// Why it needs a copy (`TargetState::reason`).
    pub reason: String,
    /// Blobs of this image the target lacks, and their bytes (`None`: not measured).
    pub blobs_missing: Option<u64>,
    /// Bytes of those blobs.
    pub bytes_missing: Option<u64>,
}

/// An image already identical on some targets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImageUpToDate {
    /// The tag, or the digest of a pin.
    pub image: String,
    /// Its digest; empty for an immutable tag every target names (never asked for).
    pub digest: String,
    /// The targets that hold it already.
    pub targets: Vec<String>,
}

/// A listed tag the filter left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FilteredTag {
    /// The tag as listed.
    pub tag: String,
    /// Why it was left out.
    pub reason: String,
}

/// Sums over every mapping of a dry run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DryRunTotals {
    /// Mappings in the config (or the shard).
    pub mappings: u64,
    /// Mappings the prepare phase could not resolve.
    pub mappings_failed: u64,
    /// (image, target) pairs a sync would write.
    pub copies: u64,
    /// (image, target) pairs already identical.
    pub up_to_date: u64,
    /// Tags the filters left out.
    pub tags_filtered_out: u64,
    /// `exact` tags the sources lack.
    pub missing_exact: u64,
    /// Blobs a sync would write from the source's bytes, each counted once per target: the
    /// first repository of a registry needing a blob, and every layout needing it.
    pub blobs_to_transfer: u64,
    /// Bytes of those blobs.
    pub bytes_to_transfer: u64,
    /// Blobs a registry target would get by a cross-repository mount from another of its
    /// repositories the run puts the blob in first (the engine's `BlobScheduler`): no bytes.
    pub blobs_to_mount: u64,
    /// Stale images whose size could not be measured.
    pub images_not_measured: u64,
}

/// Registry targets that do not exist yet on a registry that creates them (sorted, once each).
fn to_create(plan: &Plan, registries: &Registries) -> Vec<String> {
    let mut out = BTreeSet::new();
    for (_, resolved) in plan.resolved() {
        for image in &resolved.images {
            for t in &image.targets {
                // The engine's own rule (it creates them once an image for them is fetched).
                if repository_to_create(&t.target, &t.state, registries).is_some() {
                    out.insert(t.target.to_string());
                }
            }
        }
    }
    out.into_iter().collect()
}

impl DryRun {
    /// The report of `plan` without sizes (no request is sent).
    pub fn from_plan(plan: &Plan) -> DryRun {
        let mut out = DryRun::default();
        for m in &plan.mappings {
            let mut entry = MappingDryRun {
                index: m.index,
                source: m.source.clone(),
                ..MappingDryRun::default()
            };
            match &m.outcome {
                Err(e) => entry.error = Some(e.to_string()),
                Ok(resolved) => {
                    for image in &resolved.images {
                        let (stale, fresh): (Vec<_>, Vec<_>) =
                            image.targets.iter().partition(|t| t.state.needs_copy());
                        if !stale.is_empty() {
                            entry.to_copy.push(ImageToCopy {
                                image: image.name(),
                                digest: image.digest.to_string(),
                                targets: stale
                                    .iter()
                                    .map(|t| TargetChange {
                                        target: t.target.to_string(),
                                        reason: t.state.reason(),
                                        blobs_missing: None,
                                        bytes_missing: None,
                                    })
                                    .collect(),
                                measure_error: None,
                            });
                        }
                        if !fresh.is_empty() {
                            entry.up_to_date.push(ImageUpToDate {
                                image: image.name(),
                                digest: image.digest.to_string(),
                                targets: fresh.iter().map(|t| t.target.to_string()).collect(),
                            });
                        }
                    }
                    for tag in &resolved.held_immutable {
                        entry.up_to_date.push(ImageUpToDate {
                            image: tag.to_string(),
                            digest: String::new(),
                            targets: resolved.targets.iter().map(ToString::to_string).collect(),
                        });
                    }
                    entry.filtered_out = resolved
                        .filtered_out
                        .iter()
                        .map(|(tag, reason)| FilteredTag {
                            tag: tag.to_string(),
                            reason: reason.to_string(),
                        })
                        .collect();
                    entry.missing_exact = resolved.missing_exact.clone();
                    entry.expanded = resolved.expanded.clone();
                    entry.rejected_names = resolved.rejected_names.clone();
                    entry.unfetched = resolved
                        .unfetched
                        .iter()
                        .map(|u| FilteredTag {
                            tag: u.tag.clone(),
                            reason: u.error.to_string(),
                        })
                        .collect();
                    entry.signature_refused = resolved.signature_refused.clone();
                    entry.signature_held = resolved.signature_held.clone();
                }
            }
            out.mappings.push(entry);
        }
        out.count();
        out
    }

    fn count(&mut self) {
        let bytes = (
            self.totals.blobs_to_transfer,
            self.totals.bytes_to_transfer,
            self.totals.images_not_measured,
            self.totals.blobs_to_mount,
        );
        let mut t = DryRunTotals {
            blobs_to_transfer: bytes.0,
            bytes_to_transfer: bytes.1,
            images_not_measured: bytes.2,
            blobs_to_mount: bytes.3,
            ..DryRunTotals::default()
        };
        for m in &self.mappings {
            t.mappings += 1;
            t.mappings_failed += u64::from(m.error.is_some());
            t.copies += m
                .to_copy
                .iter()
                .map(|i| i.targets.len() as u64)
                .sum::<u64>();
            t.up_to_date += m
                .up_to_date
                .iter()
                .map(|i| i.targets.len() as u64)
                .sum::<u64>();
            t.tags_filtered_out += m.filtered_out.len() as u64;
            t.missing_exact += m.missing_exact.len() as u64;
        }
        self.totals = t;
    }

    /// The report with sizes: for each stale image, its manifest graph and which of its blobs
    /// each stale target lacks. Sends only GET and HEAD requests.
    pub async fn measure(plan: &Plan, registries: &Registries) -> DryRun {
        DryRun::measure_in(plan, registries, &Default::default()).await
    }

    /// [`DryRun::measure`], reading and writing archives through the run's `stores` (an
    /// export's dry run asks its bundle what it would carry).
    pub(crate) async fn measure_in(
        plan: &Plan,
        registries: &Registries,
        stores: &ferry_store::archive::Stores,
    ) -> DryRun {
        let mut out = DryRun::from_plan(plan);
        out.repositories_to_create = to_create(plan, registries);
        let checker = BlobChecker::new(registries, stores);
        type Job<'a> = (usize, usize, &'a Origin, &'a [Platform], &'a ImagePlan);
        let jobs: Vec<Job<'_>> = plan
            .mappings
            .iter()
            .enumerate()
            .filter_map(|(mi, m)| m.outcome.as_ref().ok().map(|r| (mi, r)))
            .flat_map(|(mi, r)| {
                r.images
                    .iter()
                    .filter(|i| i.is_stale_anywhere())
                    .enumerate()
                    .map(move |(ii, image)| {
                        let platforms = r.platforms.as_slice();
                        (mi, ii, &r.origin, platforms, image)
                    })
            })
            .collect();
        let measured: Vec<(usize, usize, Result<Vec<TargetSize>, Error>)> =
            futures::stream::iter(jobs)
                .map(|(mi, ii, origin, platforms, image)| {
                    let checker = &checker;
                    async move {
                        let sizes = checker.measure_image(origin, platforms, image).await;
                        (mi, ii, sizes)
                    }
                })
                .buffer_unordered(IMAGES_AT_ONCE)
                .collect()
                .await;
        // Measured in config order, as the engine takes mappings in (a mount's choice of the
        // repository it comes from does not change what is counted).
        let mut measured = measured;
        measured.sort_by_key(|(mi, ii, _)| (*mi, *ii));
        let mut unique: BTreeSet<(Destination, Digest)> = BTreeSet::new();
        // Where each blob lands first: the engine's `BlobScheduler` mounts into a destination
        // that `mounts_from` one of them instead of reading the source again.
        let mut reached: HashMap<Digest, Vec<Destination>> = HashMap::new();
        let mut mounted = 0u64;
        let mut bytes = 0u64;
        let mut not_measured = 0u64;
        for (mi, ii, result) in measured {
            let Some(entry) = out.mappings.get_mut(mi).and_then(|m| m.to_copy.get_mut(ii)) else {
                continue;
            };
            match result {
                Err(e) => {
                    entry.measure_error = Some(e.to_string());
                    not_measured += 1;
                }
                Ok(sizes) => {
                    for size in sizes {
                        // The n-th stale target of the image, as `from_plan` listed them.
                        let Some(change) = entry.targets.get_mut(size.target) else {
                            continue;
                        };
                        change.blobs_missing = Some(size.missing.len() as u64);
                        // Sizes come from the source's manifests: they saturate, never overflow.
                        change.bytes_missing = Some(
                            size.missing
                                .iter()
                                .fold(0u64, |sum, b| sum.saturating_add(b.size)),
                        );
                        for blob in size.missing {
                            if !unique.insert((size.destination.clone(), blob.digest.clone())) {
                                continue;
                            }
                            let places = reached.entry(blob.digest).or_default();
                            // The engine's own question (`Destination::mounts_from`): a
                            // registry that refused or ignored mounts this run is uploaded to.
                            let mounts = size
                                .source
                                .iter()
                                .filter(|s| **s != size.destination)
                                .chain(places.iter())
                                .any(|p| size.destination.mounts_from(p));
                            places.push(size.destination.clone());
                            match mounts {
                                false => bytes = bytes.saturating_add(blob.size),
                                true => mounted += 1,
                            }
                        }
                    }
                }
            }
        }
        out.totals.blobs_to_transfer = unique.len() as u64 - mounted;
        out.totals.blobs_to_mount = mounted;
        out.totals.bytes_to_transfer = bytes;
        out.totals.images_not_measured = not_measured;
        out
    }

    /// A short text for people: one block per mapping, aligned columns, totals last.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for m in &self.mappings {
            let _ = writeln!(out, "mapping {} {}", m.index, m.source);
            if let Some(e) = &m.error {
                let _ = writeln!(out, "  FAILED  {e}");
                continue;
            }
            if let Some(expanded) = &m.expanded {
                let _ = writeln!(out, "  expands to {} repositories", expanded.len());
                for r in expanded {
                    let _ = writeln!(out, "  repo    {r}");
                }
            }
            let rows: Vec<(String, String, String, String)> = m
                .to_copy
                .iter()
                .flat_map(|i| {
                    i.targets.iter().map(move |t| {
                        let size = match (&i.measure_error, t.bytes_missing) {
                            (Some(_), _) => "size unknown".to_owned(),
                            (None, Some(b)) => human_bytes(b),
                            (None, None) => String::new(),
                        };
                        (i.image.clone(), t.target.clone(), t.reason.clone(), size)
                    })
                })
                .collect();
            let tag_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
            let target_width = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
            let reason_width = rows.iter().map(|r| r.2.len()).max().unwrap_or(0);
            for (tag, target, reason, size) in &rows {
                let line = format!(
                    "  copy    {tag:<tag_width$}  -> {target:<target_width$}  {reason:<reason_width$}  {size}"
                );
                let _ = writeln!(out, "{}", line.trim_end());
            }
            for i in &m.to_copy {
                if let Some(e) = &i.measure_error {
                    let _ = writeln!(out, "  note    {}: size unknown: {e}", i.image);
                }
            }
            if !m.up_to_date.is_empty() {
                let names: Vec<&str> = m.up_to_date.iter().map(|i| i.image.as_str()).collect();
                let _ = writeln!(out, "  current {}", names.join(", "));
            }
            let skip_width = m
                .filtered_out
                .iter()
                .map(|f| f.tag.len())
                .max()
                .unwrap_or(0);
            for f in &m.filtered_out {
                let _ = writeln!(out, "  skip    {:<skip_width$}  {}", f.tag, f.reason);
            }
            for tag in &m.missing_exact {
                let _ = writeln!(out, "  missing {tag}  (exact tag not in the source)");
            }
            for r in &m.rejected_names {
                let _ = writeln!(out, "  invalid {:?}  left out: {}", r.name, r.reason);
                if let Some(more) = r.more_line() {
                    let _ = writeln!(out, "  invalid {more}");
                }
            }
            for u in &m.unfetched {
                let _ = writeln!(
                    out,
                    "  FAILED  {}  listed, but not fetched: {}",
                    u.tag, u.reason
                );
            }
            for r in &m.signature_refused {
                let _ = writeln!(out, "  FAILED  {}  {r}", r.image);
            }
            for h in &m.signature_held {
                let _ = writeln!(
                    out,
                    "  held    {}  signed {}, mirrorable at {} (min_age)",
                    h.image,
                    crate::report::rfc3339(h.signed_at),
                    crate::report::rfc3339(h.mirrorable_at)
                );
            }
        }
        for r in &self.repositories_to_create {
            let _ = writeln!(out, "create  repository {r}  (create_repositories)");
        }
        let t = &self.totals;
        let failed = match t.mappings_failed {
            0 => String::new(),
            1 => ", 1 mapping failed".to_owned(),
            n => format!(", {n} mappings failed"),
        };
        let unmeasured = if t.images_not_measured > 0 {
            format!(" ({} images not measured)", t.images_not_measured)
        } else {
            String::new()
        };
        let mounts = match t.blobs_to_mount {
            0 => String::new(),
            n => format!(", and mount {n} from another repository of the same registry"),
        };
        let _ = writeln!(
            out,
            "dry run: {} to copy, {} up to date, {} filtered out, {} missing{failed}; would transfer {} blobs, {}{mounts}{unmeasured}",
            t.copies,
            t.up_to_date,
            t.tags_filtered_out,
            t.missing_exact,
            t.blobs_to_transfer,
            human_bytes(t.bytes_to_transfer),
        );
        out
    }
}

/// The blobs of one image one target lacks.
struct TargetSize {
    /// Which of the image's stale targets (in plan order).
    target: usize,
    /// The target, opened as the engine opens it.
    destination: Destination,
    /// The source's repository, which a target of its registry mounts from (the engine's
    /// `BlobScheduler` does).
    source: Option<Destination>,
    missing: Vec<BlobRef>,
}

/// Answers "does this target hold this blob", asking each (repository, blob) once.
struct BlobChecker<'a> {
    registries: &'a Registries,
    stores: &'a ferry_store::archive::Stores,
    held: Mutex<HashMap<(Destination, Digest), bool>>,
}

impl<'a> BlobChecker<'a> {
    fn new(registries: &'a Registries, stores: &'a ferry_store::archive::Stores) -> Self {
        BlobChecker {
            registries,
            stores,
            held: Mutex::new(HashMap::new()),
        }
    }

    async fn measure_image(
        &self,
        origin: &Origin,
        platforms: &[Platform],
        image: &ImagePlan,
    ) -> Result<Vec<TargetSize>, Error> {
        let source = Source::open(origin, self.registries, self.stores).await?;
        let fetched = image.root.as_ref();
        let graph = fetch_graph(&source, &image.source_digest, platforms, false, fetched).await?;
        let mut out = Vec::new();
        let stale = image.targets.iter().filter(|t| t.state.needs_copy());
        for (n, t) in stale.enumerate() {
            // The engine's questions, asked of the same destination: a repository that does not
            // exist holds nothing, a layout holds a blob only as a regular file.
            let destination = Destination::open(&t.target, self.registries, self.stores).await?;
            let new_repository = t.state == TargetState::NewRepository;
            let missing = self
                .missing(&source, &destination, new_repository, &graph.blobs)
                .await?;
            out.push(TargetSize {
                target: n,
                destination,
                source: Destination::source_repository(&source),
                missing,
            });
        }
        Ok(out)
    }

    /// The blobs `destination` lacks, each (destination, blob) asked once.
    async fn missing(
        &self,
        source: &Source,
        destination: &Destination,
        new_repository: bool,
        blobs: &[BlobRef],
    ) -> Result<Vec<BlobRef>, Error> {
        let key = |b: &BlobRef| (destination.clone(), b.digest.clone());
        let results: Vec<Result<Option<BlobRef>, Error>> =
            crate::in_window::in_window(blobs, HEADS_AT_ONCE, |b| async move {
                let known = self.lock().get(&key(b)).copied();
                let held = match known {
                    Some(held) => held,
                    None => {
                        // The engine's skip rule, the same function (`holds_blob_from`).
                        let (held, asked) = destination
                            .holds_blob_from(source, &b.digest, new_repository)
                            .await?;
                        if asked {
                            self.lock().insert(key(b), held);
                        }
                        held
                    }
                };
                Ok((!held).then(|| b.clone()))
            })
            .await;
        results.into_iter().filter_map(Result::transpose).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Destination, Digest), bool>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}
