//! What a writing run tells the tag cache: per target registry repository, the tags the run
//! selected and those it confirmed (pushed, or found up to date), from the plan and the report.

use std::collections::{HashMap, HashSet};

use ferry_config::Target;
use ferry_distribution::Digest;
use ferry_store::resume::Seen;

use crate::plan::{ImagePlan, Plan};
use crate::report::{ImageReport, ImageStatus, SyncReport};

/// The cache's view of the run: every registry target of every resolved mapping, its tagged
/// images as selected, and those whose report says the target holds them, with no referrer of
/// theirs failed or unfinished on that target (so a warm run may skip their referrers).
pub(crate) fn seen(plan: &Plan, report: &SyncReport) -> Vec<Seen> {
    let reports: HashMap<(usize, &str, &str, String), &ImageReport> = report
        .images
        .iter()
        .map(|r| {
            (
                (
                    r.mapping,
                    r.source.as_str(),
                    r.image.as_str(),
                    r.target.clone(),
                ),
                r,
            )
        })
        .collect();
    let done = |index: usize, source: &str, image: &ImagePlan, target: &str| {
        let name = image.retagged_from.clone().unwrap_or_else(|| image.name());
        reports
            .get(&(index, source, name.as_str(), target.to_owned()))
            .filter(|r| matches!(r.status, ImageStatus::Synced | ImageStatus::UpToDate))
            .and_then(|r| Digest::parse(&r.digest).ok())
    };
    let mut out: HashMap<(String, String), Seen> = HashMap::new();
    for (m, resolved) in plan.resolved() {
        for target in &resolved.targets {
            let Target::Registry {
                registry,
                repository,
            } = target
            else {
                continue;
            };
            let shown = target.to_string();
            let entry = out
                .entry((registry.clone(), repository.clone()))
                .or_insert_with(|| Seen {
                    registry: registry.clone(),
                    repository: repository.clone(),
                    selected: HashSet::new(),
                    confirmed: Vec::new(),
                });
            for image in &resolved.images {
                let Some(tag) = &image.tag else { continue };
                entry.selected.insert(tag.to_string());
                let Some(digest) = done(m.index, &m.source, image, &shown) else {
                    continue;
                };
                let referrers_done = resolved
                    .images
                    .iter()
                    .filter(|r| r.subject.as_ref() == Some(&image.source_digest))
                    .all(|r| done(m.index, &m.source, r, &shown).is_some());
                if referrers_done {
                    entry.confirmed.push((tag.to_string(), digest));
                }
            }
        }
    }
    out.into_values().collect()
}
