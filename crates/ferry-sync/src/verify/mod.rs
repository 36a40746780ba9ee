//! `ferry verify`: proves every target holds what a sync would leave there, read-only: each
//! selected tag with the digest the engine would push, its children, referrers and (deep) blobs.
//!
//! The source side is the prepare phase itself ([`crate::prepare`] with `audit` on): one tag
//! listing per repository per side, one HEAD per tag per side (a manifest GET only where a
//! platform filter must compute the digest), the same pacing, retry and breaker as a sync, and
//! the target digest from the one function the engine uses ([`ferry_config::platform`]'s
//! `target_root`). Below a tag a target holds, an index's children are HEADed on the target,
//! and with `--deep` every manifest is read from the target and each unique (repository, blob)
//! HEADed once ([`content`]). Nothing here writes.

pub mod bundle;
mod content;
pub mod report;
mod signed;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use ferry_distribution::reference::Tag;

use crate::plan::{ImagePlan, Plan, ResolvedMapping, TargetState};
use crate::prepare::{PrepareOptions, PrepareTracker, resolve_all};
use crate::registries::Registries;
use content::ContentChecker;
use ferry_config::{Config, Target};

pub use report::{
    Finding, MappingVerify, Missing, TargetVerify, VerifyReport, VerifyTotals, VerifyVerdict,
};

/// Images checked below their tag at once.
const IMAGES_AT_ONCE: usize = 8;

/// How a verify runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct VerifyOptions {
    /// Check every blob the manifests reference too (`--deep`).
    pub deep: bool,
    /// Check that every image on a target of a mapping with `signatures:` carries a signature
    /// verifying under it (`--signatures`).
    pub signatures: bool,
}

/// Verifies every mapping of `config` (already narrowed to a shard): the prepare phase with
/// `audit` on, then each target's findings. Sends only GET and HEAD requests.
pub(crate) async fn run(
    config: &Config,
    registries: &Registries,
    prepare: &PrepareOptions,
    tracker: Arc<PrepareTracker>,
    options: VerifyOptions,
) -> VerifyReport {
    let mut prepare = prepare.clone();
    prepare.audit = true;
    let plan = resolve_all(config, registries, &prepare, tracker).await;
    check(&plan, config, registries, options, Freshness::FromPlan).await
}

/// After a sync (`ferry sync --verify`): a shallow verify of what the run touched, each image
/// of `plan` HEADed again on every target (the plan's states are from before the copy). The
/// source is not read again, and no extra tags are looked for (that is pruning's business).
pub(crate) async fn after_sync(
    plan: &Plan,
    config: &Config,
    registries: &Registries,
) -> VerifyReport {
    check(
        plan,
        config,
        registries,
        VerifyOptions::default(),
        Freshness::AskAgain,
    )
    .await
}

/// Whether the plan's target states are current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freshness {
    /// Taken by this verify's own prepare phase.
    FromPlan,
    /// From before a sync wrote: every (image, target) is HEADed again.
    AskAgain,
}

/// One (image, target) to check, by position in the report.
struct Job<'a> {
    mapping: usize,
    target: usize,
    image: &'a ImagePlan,
    resolved: &'a ResolvedMapping,
    keep_digest: bool,
}

async fn check(
    plan: &Plan,
    config: &Config,
    registries: &Registries,
    options: VerifyOptions,
    freshness: Freshness,
) -> VerifyReport {
    let mut report = VerifyReport {
        deep: options.deep,
        ..VerifyReport::default()
    };
    let mut jobs = Vec::new();
    for m in &plan.mappings {
        let mut entry = MappingVerify {
            index: m.index,
            source: m.source.clone(),
            ..MappingVerify::default()
        };
        let resolved = match &m.outcome {
            Ok(r) if r.expanded.is_some() => continue,
            Ok(r) => r,
            Err(e) => {
                entry
                    .findings
                    .push(Finding::unreadable("the mapping's listings", e));
                report.mappings.push(entry);
                continue;
            }
        };
        let mapping = config.mappings.iter().find(|c| c.index == m.index);
        for u in &resolved.unfetched {
            entry.findings.push(Finding::unreadable(
                format!("source tag {}", u.tag),
                &u.error,
            ));
        }
        for target in &resolved.targets {
            entry.targets.push(TargetVerify {
                target: target.to_string(),
                checked: resolved.held_immutable.len() as u64,
                findings: Vec::new(),
            });
        }
        let at = report.mappings.len();
        for image in &resolved.images {
            for ti in 0..resolved.targets.len() {
                jobs.push(Job {
                    mapping: at,
                    target: ti,
                    image,
                    resolved,
                    keep_digest: mapping.is_some_and(|c| c.platforms_keep_digest),
                });
            }
        }
        if freshness == Freshness::FromPlan
            && let Some(mapping) = mapping
        {
            for (target, tag) in crate::prune::extra_tags(mapping, resolved).unwrap_or_default() {
                if let Some(t) = position(resolved, target).and_then(|i| entry.targets.get_mut(i)) {
                    t.findings.push(Finding::Extra {
                        tag: tag.to_string(),
                    });
                }
            }
        }
        report.mappings.push(entry);
    }
    let checker = ContentChecker::new(registries, options.deep);
    let results = crate::in_window::in_window(jobs, IMAGES_AT_ONCE, |job| {
        let checker = &checker;
        async move {
            let findings = check_one(checker, &job, registries, freshness).await;
            (job.mapping, job.target, findings)
        }
    })
    .await;
    for (mi, ti, findings) in results {
        if let Some(t) = report
            .mappings
            .get_mut(mi)
            .and_then(|m| m.targets.get_mut(ti))
        {
            t.checked += 1;
            t.findings.extend(findings);
        }
    }
    // The extra tags (added first) go last on each target, after what is missing or drifted.
    for m in &mut report.mappings {
        for t in &mut m.targets {
            t.findings
                .sort_by_key(|f| matches!(f, Finding::Extra { .. }));
        }
    }
    let signatures_checked = match options.signatures && freshness == Freshness::FromPlan {
        true => signed::check(plan, config, registries, &mut report).await,
        false => 0,
    };
    report.signatures = options.signatures;
    report.count(checker.children_checked(), checker.blobs_checked());
    report.totals.signatures_checked = signatures_checked;
    report
}

/// Where `target` sits among the mapping's targets.
fn position(resolved: &ResolvedMapping, target: &Target) -> Option<usize> {
    resolved.targets.iter().position(|t| t == target)
}

/// The findings of one image on one target.
async fn check_one(
    checker: &ContentChecker<'_>,
    job: &Job<'_>,
    registries: &Registries,
    freshness: Freshness,
) -> Vec<Finding> {
    let Some(target) = job.resolved.targets.get(job.target) else {
        return Vec::new();
    };
    let image = job.image;
    let state = match freshness {
        Freshness::FromPlan => match image.targets.iter().find(|t| t.target == *target) {
            Some(t) => t.state.clone(),
            None => return Vec::new(),
        },
        Freshness::AskAgain => match state_now(target, image, registries).await {
            Ok(s) => s,
            Err(e) => return vec![Finding::unreadable(image.name(), &e)],
        },
    };
    match state {
        TargetState::Missing | TargetState::NewRepository => vec![Finding::Missing {
            kind: kind_of(image),
            name: image.name(),
            digest: image.digest.to_string(),
            of: image.subject.as_ref().map(ToString::to_string),
            detail: None,
        }],
        TargetState::Stale { current } => vec![Finding::Drifted {
            tag: image.name(),
            expected: image.digest.to_string(),
            found: current.to_string(),
        }],
        TargetState::UpToDate if checker.wants(image) => {
            let platforms = match image.subject.is_some() || is_referrer(image) {
                // Referrers keep their bytes: a platform filter never applies to them.
                true => &[][..],
                false => job.resolved.platforms.as_slice(),
            };
            checker
                .image(target, image, platforms, job.keep_digest)
                .await
        }
        TargetState::UpToDate => Vec::new(),
    }
}

/// The target's state for `image` now: a HEAD of its tag (or digest), judged as the prepare
/// phase judges it.
async fn state_now(
    target: &Target,
    image: &ImagePlan,
    registries: &Registries,
) -> Result<TargetState, ferry_distribution::Error> {
    let side = crate::source::Source::open(target, registries, &Default::default()).await?;
    let reference = match &image.tag {
        Some(tag) => tag.to_string(),
        None => image.digest.to_string(),
    };
    let info = side.head_manifest(&reference).await?;
    Ok(crate::prepare::targets::compare(info, image))
}

fn is_referrer(image: &ImagePlan) -> bool {
    image
        .tag
        .as_ref()
        .is_some_and(|t: &Tag| crate::prune::is_referrer_tag(t))
}

/// A referrer (by tag or through the referrers API), or a tag or pin.
fn kind_of(image: &ImagePlan) -> Missing {
    match is_referrer(image) || image.subject.is_some() {
        true => Missing::Referrer,
        false => Missing::Tag,
    }
}
