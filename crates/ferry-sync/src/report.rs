//! The report of a run: per image and target, synced, up to date or failed (with registry,
//! operation, status and attempts), and totals; as JSON for machines and a summary for people.

use std::fmt::Write as _;
use std::time::Duration;

use ferry_distribution::error::Error;
use serde::Serialize;

use crate::error::SyncError;

/// Unix seconds as an RFC 3339 UTC time (`2026-12-07T10:00:00Z`).
pub fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| unix.to_string())
}

/// What happened to one image on one target.
#[derive(Debug, Clone)]
pub enum ImageStatus {
    /// The target now holds the image.
    Synced,
    /// The target already held it: nothing was written.
    UpToDate,
    /// The copy failed: the typed error, kept as it is and rendered by the report (JSON fields
    /// `registry`, `repository`, `operation`, `http_status`, `attempts` and `error`).
    Failed {
        /// What failed, and where.
        error: SyncError,
    },
    /// Not started: the run was interrupted.
    Interrupted,
    /// Not copied in this run: its signature verified but is younger than the mapping's
    /// `min_age` (not a failure).
    Held {
        /// When it was signed (Unix seconds).
        signed_at: i64,
        /// When it becomes mirrorable (Unix seconds).
        mirrorable_at: i64,
    },
}

impl ImageStatus {
    /// The failed status for a registry's `e`.
    pub fn failed(e: &Error) -> Self {
        ImageStatus::Failed {
            error: SyncError::Registry(e.clone()),
        }
    }

    /// The failed status for a sync-level failure (a registry's, a layout's or an archive's);
    /// an interruption stays [`ImageStatus::Interrupted`].
    pub(crate) fn failed_sync(e: &SyncError) -> Self {
        match e {
            SyncError::Interrupted => ImageStatus::Interrupted,
            other => ImageStatus::Failed {
                error: other.clone(),
            },
        }
    }

    /// The error of a failed status.
    pub fn error(&self) -> Option<&SyncError> {
        match self {
            ImageStatus::Failed { error } => Some(error),
            _ => None,
        }
    }
}

/// Two statuses are equal when they say the same: a failure by where, what and its message.
impl PartialEq for ImageStatus {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ImageStatus::Failed { error: a }, ImageStatus::Failed { error: b }) => {
                a.place() == b.place()
                    && a.operation() == b.operation()
                    && a.to_string() == b.to_string()
            }
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl Eq for ImageStatus {}

/// `{"status": "synced"}`; a failure adds where and what from its typed error.
impl Serialize for ImageStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let status = match self {
            ImageStatus::Synced => "synced",
            ImageStatus::UpToDate => "up_to_date",
            ImageStatus::Failed { .. } => "failed",
            ImageStatus::Interrupted => "interrupted",
            ImageStatus::Held { .. } => "held",
        };
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("status", status)?;
        if let ImageStatus::Failed { error } = self {
            m.serialize_entry("registry", &error.place())?;
            m.serialize_entry("repository", &error.repository())?;
            m.serialize_entry("operation", &error.operation())?;
            m.serialize_entry("http_status", &error.status())?;
            m.serialize_entry("attempts", &error.attempts())?;
            m.serialize_entry("error", &error.to_string())?;
            if let SyncError::Signature { refusal, .. } = error {
                m.serialize_entry("signature", refusal)?;
            }
        }
        if let ImageStatus::Held {
            signed_at,
            mirrorable_at,
        } = self
        {
            m.serialize_entry("signed_at", &rfc3339(*signed_at))?;
            m.serialize_entry("mirrorable_at", &rfc3339(*mirrorable_at))?;
        }
        m.end()
    }
}

/// What happened to one image on one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageReport {
    /// Position of the mapping in the config.
    pub mapping: usize,
    /// The mapping's source, as reports name it.
    pub source: String,
    /// The tag, or the digest of a pin.
    pub image: String,
    /// The digest the target was to hold; empty when it was never learned (a listed tag the
    /// source did not serve, an immutable tag every target already names).
    pub digest: String,
    /// The target, as reports name it.
    pub target: String,
    /// What happened.
    #[serde(flatten)]
    pub status: ImageStatus,
    /// A retag (`ferry copy src:3.21 dst:stable`): the tag the target holds it under, `image`
    /// being the source's. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushed_as: Option<String>,
    /// With `platforms_keep_digest`: the target refused the source's index, and holds the
    /// filtered one (`digest` names it). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_digest_refused: Option<KeptDigestRefused>,
    /// Bytes of the image's blobs that upload sessions an earlier (interrupted) run recorded
    /// already held on this target: the uploads went on from there. Absent when none was
    /// resumed.
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes_resumed: u64,
    /// An incremental export (`--since`): the base bundle that carries the image, which this
    /// bundle names in its record but does not carry (unchanged since the base). Absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_base: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A target refused the source's index (`platforms_keep_digest`) and got the filtered one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptDigestRefused {
    /// The digest the target holds instead: the filtered index's.
    pub pushed: String,
    /// What the target answered to the source's index.
    pub reason: String,
}

/// A mapping the prepare phase could not resolve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MappingFailure {
    /// Position of the mapping in the config.
    pub mapping: usize,
    /// The mapping's source.
    pub source: String,
    /// Always `Failed`, with the error that stopped the mapping.
    #[serde(flatten)]
    pub status: ImageStatus,
}

/// A name a mapping's source listed that is not a valid tag, left out (see
/// `plan::RejectedName`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedNameReport {
    /// Position of the mapping in the config.
    pub mapping: usize,
    /// The mapping's source.
    pub source: String,
    /// The name and why it was rejected.
    #[serde(flatten)]
    pub rejected: crate::plan::RejectedName,
}

/// A mapping whose selection came up short: `exact` tags the source does not have, or a tag
/// filter that selected nothing. Present in the report (as in the dry run's), not only a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SelectionReport {
    /// Position of the mapping in the config.
    pub mapping: usize,
    /// The mapping's source.
    pub source: String,
    /// `exact` tags the source does not have: each makes the run not clean (exit 1, or 2 when
    /// nothing was synced or up to date), as a missing pinned tag is for skopeo and regsync.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_exact: Vec<String>,
    /// The filter selected no tag and no digest is pinned: nothing to copy. A warning only: it
    /// leaves the exit code as it is.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub selected_nothing: bool,
}

/// What one whole-registry mapping (a source ending in `/*` or `/**`) expanded to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExpansionReport {
    /// Position of the mapping in the config.
    pub mapping: usize,
    /// The mapping's source as written (`registry.example.com/team/**`).
    pub source: String,
    /// The repositories its catalog matched (`host/path`), each copied as a mapping of its own.
    pub repositories: Vec<String>,
}

pub use ferry_store::archive::writer::ArchiveReport;

pub use crate::repair::Repaired;
pub use crate::totals::Totals;

/// One registry's counters and what it turned out to accept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegistryReport {
    /// The registry host.
    pub registry: String,
    /// Its request counters.
    #[serde(flatten)]
    pub stats: ferry_distribution::stats::StatsSnapshot,
    /// Times its window was halved for congestion.
    pub window_halvings: u64,
    /// Its circuit breaker at the end of the run: `closed`, `half_open` or `open`.
    pub breaker: String,
    /// What the registry turned out to accept: the upload flow it got, and each feature
    /// learned as works, refused or ignored (unknown when the run did not use it).
    pub capabilities: ferry_distribution::capabilities::CapabilitiesSnapshot,
    /// How its listings paged (page size, `Link` style) and the entries left out of them
    /// (manifest digests listed as tags, entries that were not strings).
    pub listing: ferry_distribution::ops::ListingSnapshot,
}

impl RegistryReport {
    /// `client`'s counters, window, breaker and capabilities now.
    pub fn of(client: &ferry_distribution::RegistryClient) -> RegistryReport {
        use ferry_distribution::breaker::BreakerState;
        let gate = client.gate();
        RegistryReport {
            registry: client.host().to_owned(),
            stats: client.stats(),
            window_halvings: gate
                .window(ferry_distribution::Operation::BlobGet)
                .snapshot()
                .halvings,
            breaker: match gate.breaker.state() {
                BreakerState::Closed => "closed",
                BreakerState::HalfOpen => "half_open",
                BreakerState::Open => "open",
            }
            .to_owned(),
            capabilities: client.capabilities().snapshot(),
            listing: client.listing_style().snapshot(),
        }
    }

    /// What the registry's listings showed that is not the spec's plain paging, for people:
    /// an opaque or Link-less paging with its page size, repaired Links, entries left out.
    fn render_listing(&self) -> Vec<String> {
        use ferry_distribution::ops::Paging;
        let l = &self.listing;
        let size = l.page_size.map_or(String::new(), |n| format!(" of {n}"));
        let mut out = Vec::new();
        match l.paging {
            Paging::Opaque => out.push(format!("listing pages{size} linked by opaque tokens")),
            Paging::CutWithoutLink => out.push(format!(
                "listing pages{size} cut without a Link (read on with last=)"
            )),
            Paging::Last | Paging::Unknown => {}
        }
        if l.links_repaired > 0 {
            out.push(format!(
                "{} listing Links on the wrong path followed on the listing's own",
                l.links_repaired
            ));
        }
        if l.digest_entries_skipped > 0 {
            out.push(format!(
                "{} digest entries in tag lists left out",
                l.digest_entries_skipped
            ));
        }
        if l.malformed_entries_skipped > 0 {
            out.push(format!(
                "{} listing entries that were not strings left out",
                l.malformed_entries_skipped
            ));
        }
        out
    }

    /// `registry HOST: upload flow docker; mount ignored, tag listing refused` for people. The
    /// upload flow is named only for a registry the run sent bytes to; a registry only read
    /// (or never reached) gets a line only for what it refused or ignored, else none (empty).
    pub(crate) fn render_capabilities(&self) -> String {
        use ferry_distribution::capabilities::{Support, UploadFlow};
        let c = &self.capabilities;
        let flow = match c.upload_flow {
            UploadFlow::Monolithic => "monolithic",
            UploadFlow::Docker => "docker (POST, PATCH, empty PUT)",
        };
        let mut learned: Vec<String> = [
            ("cross-repository mount", c.mount),
            // A registry without the referrers API (distribution answers 404) is ordinary:
            // the tag schema stands in, logged at info when learned; named only when it worked
            // in part (ignored), never as a refusal.
            (
                "referrers API",
                match c.referrers_api {
                    Support::Refused => Support::Unknown,
                    s => s,
                },
            ),
            ("tag listing", c.tag_list),
            ("tag deletion", c.tag_delete),
            ("one-component names", c.one_component_names),
            ("chunked PATCH", c.chunked_patch),
            // Auth task (issue 31).
            ("tokens for several scopes", c.auth.multi_scope_tokens),
            ("tag overwrite (immutable)", c.auth.tag_overwrite),
        ]
        .iter()
        .filter_map(|(name, s)| match s {
            Support::Refused => Some(format!("{name} refused")),
            Support::Ignored => Some(format!("{name} ignored")),
            Support::Works | Support::Unknown => None,
        })
        .chain(self.render_listing())
        .collect();
        if c.auth.manifest_commit_lag {
            learned.push("manifest commit lag waited for".to_owned());
        }
        if let Some(limit) = c.max_patch {
            learned.push(format!("request body limit {limit} bytes"));
        }
        let written = self.stats.bytes_written > 0;
        match (written, learned.is_empty()) {
            (true, true) => format!("registry {}: upload flow {flow}", self.registry),
            (true, false) => format!(
                "registry {}: upload flow {flow}; {}",
                self.registry,
                learned.join(", ")
            ),
            (false, false) => format!("registry {}: {}", self.registry, learned.join(", ")),
            (false, true) => String::new(),
        }
    }
}

/// What a sync did: every image on every target, failed mappings, registries and totals.
#[derive(Debug, Clone, Serialize)]
pub struct SyncReport {
    /// Every (image, target) pair considered.
    pub images: Vec<ImageReport>,
    /// Mappings the prepare phase could not resolve.
    pub failed_mappings: Vec<MappingFailure>,
    /// Listed names left out as invalid; present in the JSON only when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejected_names: Vec<RejectedNameReport>,
    /// What each whole-registry mapping expanded to; present in the JSON only when there are
    /// some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expansions: Vec<ExpansionReport>,
    /// Mappings with `exact` tags missing from the source or a filter that selected nothing;
    /// present in the JSON only when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selections: Vec<SelectionReport>,
    /// Repositories this run created (ECR's `create_repositories`), as `host/repository`;
    /// present in the JSON only when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repositories_created: Vec<String>,
    /// Every registry the run talked to.
    pub registries: Vec<RegistryReport>,
    /// Sums over the run.
    pub totals: Totals,
    /// How long the run took (seconds in the JSON).
    #[serde(serialize_with = "secs")]
    pub elapsed: Duration,
    /// Whether a signal stopped the run before everything was done.
    pub interrupted: bool,
    /// The `oci-archive:` files and `ferry export` bundles written; present in the JSON only
    /// when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub archives: Vec<ArchiveReport>,
    /// `ferry sync --repair`: each image written again on a target because a deep verify found
    /// a blob or child manifest under its tag missing there, with what was put back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<Repaired>,
    /// `ferry copy`'s `SRC -> DST` (firsthour, issue 29): the run is one copy, not a config,
    /// so the text names its mapping by it. Not in the JSON (`images` names source and target).
    #[serde(skip)]
    pub copy: Option<String>,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// How the run ended, as the CLI's exit code sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Everything synced or up to date.
    Clean,
    /// Some images failed.
    Partial,
    /// Everything that was attempted failed.
    Failed,
}

impl SyncReport {
    /// How the run ended, for the exit code: anything failed, interrupted or left out is not clean.
    pub fn verdict(&self) -> Verdict {
        let t = &self.totals;
        let bad = t.images_failed
            + t.mappings_failed
            + t.images_interrupted
            + self.rejected_names.len() as u64
            + self
                .selections
                .iter()
                .map(|n| n.missing_exact.len() as u64)
                .sum::<u64>();
        let good = t.images_synced + t.images_up_to_date;
        if bad == 0 && !self.interrupted {
            Verdict::Clean
        } else if good == 0 {
            Verdict::Failed
        } else {
            Verdict::Partial
        }
    }

    /// Every failure carries an authentication error (exit code 4).
    pub fn all_failures_are_auth(&self) -> bool {
        let mut any = false;
        let statuses = self
            .images
            .iter()
            .map(|i| &i.status)
            .chain(self.failed_mappings.iter().map(|m| &m.status));
        for s in statuses {
            if let ImageStatus::Failed { error } = s {
                any = true;
                if !error.is_auth() {
                    return false;
                }
            }
        }
        any
    }

    /// Brings each registry's `capabilities` up to date with what was learned after the engine
    /// ran (pruning learns whether tags can be deleted); its counters stay the engine's.
    pub(crate) fn refresh_capabilities(&mut self, built: &[ferry_distribution::RegistryClient]) {
        for c in built {
            if let Some(r) = self.registries.iter_mut().find(|r| r.registry == c.host()) {
                r.capabilities = c.capabilities().snapshot();
                r.listing = c.listing_style().snapshot();
            }
        }
    }

    /// Records what each whole-registry mapping of `plan` expanded to.
    pub(crate) fn note_expansions(&mut self, plan: &crate::plan::Plan) {
        self.expansions = plan
            .resolved()
            .filter_map(|(m, r)| {
                Some(ExpansionReport {
                    mapping: m.index,
                    source: m.source.clone(),
                    repositories: r.expanded.clone()?,
                })
            })
            .collect();
    }

    /// Records each resolved mapping of `plan` whose `exact` tags the source lacks or whose
    /// filter selected nothing (a whole-registry mapping's own entry is its expansion, not a
    /// selection).
    pub(crate) fn note_selections(&mut self, plan: &crate::plan::Plan) {
        self.selections = plan
            .resolved()
            .filter(|(_, r)| r.expanded.is_none())
            .filter_map(|(m, r)| {
                let selected_nothing = r.images.is_empty()
                    && r.held_immutable.is_empty()
                    && r.missing_exact.is_empty()
                    && r.unfetched.is_empty();
                (selected_nothing || !r.missing_exact.is_empty()).then(|| SelectionReport {
                    mapping: m.index,
                    source: m.source.clone(),
                    missing_exact: r.missing_exact.clone(),
                    selected_nothing,
                })
            })
            .collect();
    }

    /// How the text names a mapping: `mapping N (source)`, or `copy SRC -> DST` for a copy.
    fn mapping_name(&self, index: usize, source: &str) -> String {
        match &self.copy {
            Some(copy) => format!("copy {copy}"),
            None => format!("mapping {index} ({source})"),
        }
    }

    /// The human summary: failures first, then totals.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for m in &self.failed_mappings {
            if let ImageStatus::Failed { error, .. } = &m.status {
                let name = self.mapping_name(m.mapping, &m.source);
                let _ = writeln!(out, "FAILED  {name}: {error}");
            }
        }
        for e in &self.expansions {
            let _ = writeln!(
                out,
                "expanded  mapping {} ({}): {} repositories{}{}",
                e.mapping,
                e.source,
                e.repositories.len(),
                if e.repositories.is_empty() { "" } else { ": " },
                e.repositories.join(", ")
            );
        }
        for r in &self.repositories_created {
            let _ = writeln!(out, "created  repository {r}");
        }
        for a in &self.archives {
            let _ = writeln!(
                out,
                "wrote  {}: {} bytes, {} images in index.json, {} blobs and manifests carried, {} left out (in a base){}",
                a.archive,
                a.bytes,
                a.images_indexed,
                a.entries_carried,
                a.digests_left_out,
                a.bundle_digest
                    .as_deref()
                    .map(|d| format!(", bundle {d}"))
                    .unwrap_or_default()
            );
        }
        for r in &self.rejected_names {
            let name = self.mapping_name(r.mapping, &r.source);
            let _ = match r.rejected.listed_in {
                crate::plan::ListedIn::TagList => writeln!(
                    out,
                    "LEFT OUT  {name}: name {:?} is not a valid tag: {}",
                    r.rejected.name, r.rejected.reason
                ),
                crate::plan::ListedIn::Catalog => writeln!(
                    out,
                    "LEFT OUT  {name}: repository {:?} from the catalog: {}",
                    r.rejected.name, r.rejected.reason
                ),
            };
            if let Some(more) = r.rejected.more_line() {
                let _ = writeln!(out, "LEFT OUT  {name}: {more}");
            }
        }
        for n in &self.selections {
            let name = self.mapping_name(n.mapping, &n.source);
            for tag in &n.missing_exact {
                let _ = writeln!(out, "MISSING  {name}: exact tag {tag} is not in the source");
            }
            if n.selected_nothing {
                let _ = writeln!(out, "WARNING  {name}: the tag filter selected nothing");
            }
        }
        for i in &self.images {
            match &i.status {
                ImageStatus::Failed { error, .. } => {
                    let _ = writeln!(
                        out,
                        "FAILED  {} -> {}: {error}",
                        image_ref(&i.source, &i.image),
                        target_ref(&i.target, i.pushed_as.as_deref())
                    );
                }
                ImageStatus::Synced if i.in_base.is_some() => {
                    let _ = writeln!(
                        out,
                        "unchanged  {} -> {}: in base {}, not carried",
                        image_ref(&i.source, &i.image),
                        target_ref(&i.target, i.pushed_as.as_deref()),
                        i.in_base.as_deref().unwrap_or_default()
                    );
                }
                ImageStatus::Synced => {
                    let resumed = match i.bytes_resumed {
                        0 => String::new(),
                        n => format!(" (resumed at {})", human_bytes(n)),
                    };
                    let _ = writeln!(
                        out,
                        "synced  {} -> {}{resumed}",
                        image_ref(&i.source, &i.image),
                        target_ref(&i.target, i.pushed_as.as_deref())
                    );
                    if let Some(r) = &i.kept_digest_refused {
                        let _ = writeln!(
                            out,
                            "        platforms_keep_digest: {} refused the source's index; it holds the filtered index {} instead ({})",
                            i.target, r.pushed, r.reason
                        );
                    }
                }
                ImageStatus::Held { mirrorable_at, .. } => {
                    let _ = writeln!(
                        out,
                        "HELD  {} -> {}: signed too recently (min_age); mirrorable at {}",
                        image_ref(&i.source, &i.image),
                        target_ref(&i.target, i.pushed_as.as_deref()),
                        rfc3339(*mirrorable_at)
                    );
                }
                _ => {}
            }
        }
        for r in &self.repaired {
            let _ = writeln!(
                out,
                "repaired  {} -> {}: put back {}",
                image_ref(&r.source, &r.image),
                r.target,
                r.put_back.join(", ")
            );
        }
        for r in &self.registries {
            let line = r.render_capabilities();
            if !line.is_empty() {
                let _ = writeln!(out, "{line}");
            }
        }
        let t = &self.totals;
        let in_base = self.images.iter().filter(|i| i.in_base.is_some()).count();
        let _ = writeln!(
            out,
            "{} synced{}, {} up to date, {} failed{}{}{}; blobs {} copied{}, {} mounted, {} skipped; {} read, {} written; {} requests, {} retries, {} throttled; {:.1}s",
            t.images_synced,
            match in_base {
                0 => String::new(),
                n => format!(" ({n} of them in a base bundle, not carried)"),
            },
            t.images_up_to_date,
            // A copy's one mapping is its image: a source it could not read is that image
            // failed, not a mapping beside it.
            match &self.copy {
                Some(_) => t.images_failed + t.mappings_failed,
                None => t.images_failed,
            },
            match (t.mappings_failed, &self.copy) {
                (0, _) | (_, Some(_)) => String::new(),
                (1, None) => ", 1 mapping failed".to_owned(),
                (n, None) => format!(", {n} mappings failed"),
            },
            if t.images_interrupted > 0 {
                format!(", {} interrupted", t.images_interrupted)
            } else {
                String::new()
            },
            match (t.images_held, t.images_repaired) {
                (0, 0) => String::new(),
                (held, 0) => format!(", {held} held"),
                (0, repaired) => format!(", {repaired} repaired"),
                (held, repaired) => format!(", {held} held, {repaired} repaired"),
            },
            t.blobs_copied,
            match t.blobs_resumed {
                0 => String::new(),
                n => format!(
                    " ({n} resumed: {} an interrupted run had uploaded)",
                    human_bytes(t.bytes_resumed)
                ),
            },
            t.blobs_mounted,
            t.blobs_skipped,
            human_bytes(t.bytes_read),
            human_bytes(t.bytes_written),
            t.requests,
            t.retries,
            t.throttled,
            self.elapsed.as_secs_f64(),
        );
        out
    }
}

/// `n` bytes for people: `512 B`, `1.5 MiB` (binary units, one decimal).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The source image as a reference: `repo:tag`, or `repo@digest` for an image copied by digest
/// (a tag never holds a `:`, a digest always does). An archive source that names its one image
/// already (`oci-archive:bundle.tar:host/app:v2`, `ferry import`'s one-image mappings) is that
/// image's reference as it is.
fn image_ref(source: &str, image: &str) -> String {
    let named = source.strip_prefix("oci-archive:").is_some_and(|rest| {
        rest.ends_with(&format!(":{image}")) || rest.ends_with(&format!("@{image}"))
    });
    if named {
        source.to_owned()
    } else if image.contains(':') {
        format!("{source}@{image}")
    } else {
        format!("{source}:{image}")
    }
}

/// The target of a retag with its new tag (`host/repo:stable`, `oci:./dir:stable`), else as is.
fn target_ref(target: &str, pushed_as: Option<&str>) -> String {
    match pushed_as {
        Some(tag) => format!("{target}:{tag}"),
        None => target.to_owned(),
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
