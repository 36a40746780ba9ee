//! The plan the prepare phase hands to the engine and to `--dry-run`: per mapping, the images
//! its filter selected, their source digests, and each target's state with the reason.

use std::time::Duration;

use ferry_distribution::Digest;
use ferry_distribution::error::Error;
use ferry_distribution::reference::Tag;

use ferry_config::Target;
use ferry_config::filter::Reason;
use ferry_config::platform::Platform;

/// Everything the prepare phase learned, in config order.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Every mapping of the config (or the shard), in config order.
    pub mappings: Vec<MappingPlan>,
    /// How long the prepare phase took.
    pub elapsed: Duration,
}

/// One mapping: resolved, or the error that stopped it (the others go on).
#[derive(Debug, Clone)]
pub struct MappingPlan {
    /// Position of the mapping in the config.
    pub index: usize,
    /// The source repository as the config names it (`docker.io/library/alpine`).
    pub source: String,
    /// What the prepare phase learned, or the error that stopped the mapping.
    pub outcome: Result<ResolvedMapping, Error>,
}

/// A mapping the prepare phase resolved: the images to consider and each target's state.
#[derive(Debug, Clone)]
pub struct ResolvedMapping {
    /// Where the source is read from.
    pub origin: ferry_config::Origin,
    /// The mapping's targets, in config order.
    pub targets: Vec<Target>,
    /// The images to consider: selected tags, pinned digests and referrers, each with its targets'
    /// states.
    pub images: Vec<ImagePlan>,
    /// Selected tags matching the mapping's `immutable` globs that every target's listing
    /// already names: up to date on every target, and never asked about (no manifest request
    /// to a target or the source, so no digest is known and no referrer is looked up).
    pub held_immutable: Vec<Tag>,
    /// Listed tags the filter left out, each with why.
    pub filtered_out: Vec<(Tag, Reason)>,
    /// `exact` tags the source does not have.
    pub missing_exact: Vec<String>,
    /// Listed names that are not valid tags: left out, each with why (they count as failures);
    /// past [`MAX_REJECTED_SHOWN`], the last entry counts the rest (`RejectedName::more`).
    pub rejected_names: Vec<RejectedName>,
    /// Tags the source listed whose manifest could not be fetched (a 404 after the listing:
    /// replica lag, a tag being re-pushed), each with the error: reported failed, never
    /// dropped, and they stop the mapping from pruning in this run.
    pub unfetched: Vec<UnfetchedTag>,
    /// Platforms to keep in an index (`os/arch[/variant]`); empty keeps every one.
    pub platforms: Vec<Platform>,
    /// Whether referrers are copied.
    pub referrers: bool,
    /// For a mapping with `prune` on: each target's tags as the prepare phase listed them (none
    /// for a repository or layout that does not exist). Empty otherwise; see `crate::prune`.
    pub target_tags: Vec<(Target, Vec<String>)>,
    /// For a whole-registry mapping's own entry: the repositories (`host/path`) its catalog
    /// expanded to, each resolved as a mapping of its own under the same index. `None` for
    /// every other mapping.
    pub expanded: Option<Vec<String>>,
    /// Images `signatures:` refused (no signature for their digest verified): failed on every
    /// target, nothing of them copied. Empty for a mapping without a policy.
    pub signature_refused: Vec<SignatureRefusal>,
    /// Images whose signature verified but is younger than `min_age`: held, not copied in this
    /// run, not failed.
    pub signature_held: Vec<HeldImage>,
    /// The mapping's own `concurrency:`: its images copied at once at most, inside the
    /// engine's window (`None`: the window alone bounds them).
    pub concurrency: Option<usize>,
}

pub use crate::prepare::signatures::{HeldImage, RefusalReason, SignatureRefusal};

/// A name a source listed that is not a valid tag (`x/../y`, `..`, a control character): it is
/// never put into a request or a path, and the run's exit code says something was left out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RejectedName {
    /// The name as listed, cut to `text::SHOWN_BYTES` (rendered escaped wherever it is printed).
    pub name: String,
    /// Why it is not a valid tag.
    pub reason: String,
    /// Where it was listed: a tag list, or a registry's catalog (a whole-registry mapping).
    pub listed_in: ListedIn,
    /// Names left out after this one that are not reported one by one: 0 except on the last
    /// entry of a listing that rejected more than [`MAX_REJECTED_SHOWN`] names.
    #[serde(skip_serializing_if = "is_zero")]
    pub more: usize,
}

/// Rejected names of one listing reported one by one; the rest are a count on the last one, so a
/// listing of a million bad names is not a million report lines.
pub(crate) const MAX_REJECTED_SHOWN: usize = 50;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Where a rejected name was listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ListedIn {
    /// A repository's tag list (or a layout's `index.json`): the name was to be a tag.
    TagList,
    /// A registry's catalog: the name was to be a repository of a whole-registry mapping.
    Catalog,
}

impl RejectedName {
    /// A rejection of `name`, which is cut (like `reason`) to `text::SHOWN_BYTES`.
    pub fn new(name: &str, reason: &str, listed_in: ListedIn) -> Self {
        use ferry_distribution::text::{SHOWN_BYTES, shorten};
        RejectedName {
            name: shorten(name, SHOWN_BYTES).into_owned(),
            reason: shorten(reason, SHOWN_BYTES).into_owned(),
            listed_in,
            more: 0,
        }
    }

    /// The one point where names a source lists (a registry's tag list, a layout's `ref.name`)
    /// become tags: the valid ones, in order, and the others with why (at most
    /// [`MAX_REJECTED_SHOWN`] of them one by one, see [`RejectedName::bounded`]).
    pub fn split(names: Vec<String>) -> (Vec<Tag>, Vec<RejectedName>) {
        let mut tags = Vec::with_capacity(names.len());
        let mut rejected = Vec::new();
        let mut more = 0;
        for name in names {
            match Tag::parse(&name) {
                Ok(tag) => tags.push(tag),
                Err(_) if rejected.len() == MAX_REJECTED_SHOWN => more += 1,
                Err(e) => rejected.push(RejectedName::new(
                    &name,
                    &e.problem.to_string(),
                    ListedIn::TagList,
                )),
            }
        }
        if let Some(last) = rejected.last_mut() {
            last.more += more;
        }
        (tags, rejected)
    }

    /// `rejected` with at most [`MAX_REJECTED_SHOWN`] entries: the count of the ones dropped
    /// (and of those they stood for) goes onto the last one kept.
    pub fn bounded(mut rejected: Vec<RejectedName>) -> Vec<RejectedName> {
        if rejected.len() > MAX_REJECTED_SHOWN {
            let dropped: usize = rejected
                .drain(MAX_REJECTED_SHOWN..)
                .map(|r| 1 + r.more)
                .sum();
            if let Some(last) = rejected.last_mut() {
                last.more += dropped;
            }
        }
        rejected
    }

    /// How many names `rejected` stands for: each entry and the ones counted on it.
    pub fn count(rejected: &[RejectedName]) -> usize {
        rejected.iter().map(|r| 1 + r.more).sum()
    }

    /// The line that follows the last entry shown when more were left out, or `None`.
    pub fn more_line(&self) -> Option<String> {
        (self.more > 0).then(|| {
            format!(
                "and {} more names left out, not reported one by one",
                self.more
            )
        })
    }
}

/// A listed tag whose manifest the source did not serve.
#[derive(Debug, Clone)]
pub struct UnfetchedTag {
    /// The tag as listed.
    pub tag: String,
    /// What the source answered for its manifest.
    pub error: Error,
    /// The mapping's targets, on each of which the tag is reported failed.
    pub targets: Vec<Target>,
}

/// One image to mirror: a selected tag or a pinned digest.
#[derive(Debug, Clone)]
pub struct ImagePlan {
    /// `None` for a digest pin.
    pub tag: Option<Tag>,
    /// A retag (`ferry copy src:a dst:b`): the source's image as shown before it (its tag `a`,
    /// or a pin's digest), `tag` being the target's. `None` otherwise.
    pub retagged_from: Option<String>,
    /// What the target must hold: the source's digest, or the filtered index's when a platform
    /// filter rewrites it.
    pub digest: Digest,
    /// With `platforms_keep_digest`, where a platform filter drops children: the filtered
    /// index's digest, pushed to a target that refuses the source's index (whose children are
    /// not all there); a target holding it is up to date too.
    pub fallback_digest: Option<Digest>,
    /// What is read from the source.
    pub source_digest: Digest,
    /// For a referrer found through the referrers API: the manifest it refers to.
    pub subject: Option<Digest>,
    /// The source's root manifest, when the prepare phase already fetched it (a tag no target
    /// had): the engine does not fetch it again.
    pub root: Option<ferry_distribution::ops::Manifest>,
    /// The root manifest's media type.
    pub media_type: String,
    /// Each target of the mapping, with its state.
    pub targets: Vec<TargetPlan>,
}

impl ImagePlan {
    /// The name shown for it: the tag, or the digest for a pin.
    pub fn name(&self) -> String {
        match &self.tag {
            Some(tag) => tag.to_string(),
            None => self.digest.to_string(),
        }
    }

    /// Whether some target needs the image written.
    pub(crate) fn is_stale_anywhere(&self) -> bool {
        self.targets.iter().any(|t| t.state.needs_copy())
    }
}

/// One target of one image.
#[derive(Debug, Clone)]
pub struct TargetPlan {
    /// The target.
    pub target: Target,
    /// What it holds under the image's tag or digest.
    pub state: TargetState,
}

/// What the target holds under the image's tag (or digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetState {
    /// The target's manifest digest equals the source's: nothing to write.
    UpToDate,
    /// The target repository does not exist yet.
    NewRepository,
    /// The target lacks the tag (or the pinned digest).
    Missing,
    /// The tag points at other content on the target.
    Stale {
        /// The digest the target's tag names now.
        current: Digest,
    },
}

impl TargetState {
    /// Whether the target needs the image written (anything but up to date).
    pub(crate) fn needs_copy(&self) -> bool {
        !matches!(self, TargetState::UpToDate)
    }

    /// Why, in words, for `--dry-run`.
    pub fn reason(&self) -> String {
        match self {
            TargetState::UpToDate => "up to date (same digest)".into(),
            TargetState::NewRepository => "target repository does not exist yet".into(),
            TargetState::Missing => "target lacks it".into(),
            TargetState::Stale { current } => format!("target has {current}"),
        }
    }
}

impl Plan {
    /// The mappings that resolved, each with what it resolved to.
    pub fn resolved(&self) -> impl Iterator<Item = (&MappingPlan, &ResolvedMapping)> {
        self.mappings
            .iter()
            .filter_map(|m| m.outcome.as_ref().ok().map(|r| (m, r)))
    }

    /// The mappings that failed, each with its error.
    pub fn failed(&self) -> impl Iterator<Item = (&MappingPlan, &Error)> {
        self.mappings
            .iter()
            .filter_map(|m| m.outcome.as_ref().err().map(|e| (m, e)))
    }
}
