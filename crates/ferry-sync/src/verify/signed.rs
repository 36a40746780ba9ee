//! `ferry verify --signatures`: every image a mapping with `signatures:` left on its targets
//! carries a signature that verifies under the mapping's policy, read from the target itself the
//! way a sync reads the source (`prepare::signatures`), through the same bounded reads.

use std::collections::HashSet;

use ferry_config::Config;

use crate::plan::{Plan, TargetState};
use crate::prepare::referrers::Listing;
use crate::prepare::signatures::{Decision, decide, find_and_verify, now};
use crate::registries::Registries;
use crate::source::Source;

use super::report::{Finding, VerifyReport};

/// Checks the signatures of every image each target holds (per the plan's states) and adds an
/// `unsigned` finding for each that has none verifying; returns the (image, target) pairs read.
pub(super) async fn check(
    plan: &Plan,
    config: &Config,
    registries: &Registries,
    report: &mut VerifyReport,
) -> u64 {
    let mut read = 0;
    let at = now();
    for m in &plan.mappings {
        let Ok(resolved) = &m.outcome else { continue };
        let Some(entry) = report
            .mappings
            .iter_mut()
            .find(|e| e.index == m.index && e.source == m.source)
        else {
            continue;
        };
        let Some(policy) = config
            .mappings
            .iter()
            .find(|c| c.index == m.index)
            .and_then(|c| c.signatures.as_ref())
        else {
            continue;
        };
        for (ti, target) in resolved.targets.iter().enumerate() {
            let Some(findings) = entry.targets.get_mut(ti).map(|t| &mut t.findings) else {
                continue;
            };
            let tags: Vec<String> = resolved
                .target_tags
                .iter()
                .find(|(t, _)| t == target)
                .map(|(_, tags)| tags.clone())
                .unwrap_or_default();
            let tags: HashSet<&str> = tags.iter().map(String::as_str).collect();
            let listing = Listing {
                listed: true,
                tags: &tags,
            };
            let side = match Source::open(target, registries, &Default::default()).await {
                Ok(s) => s,
                Err(e) => {
                    findings.push(Finding::unreadable("the target's signatures", &e));
                    continue;
                }
            };
            for image in &resolved.images {
                let referrer = image.subject.is_some()
                    || image
                        .tag
                        .as_ref()
                        .is_some_and(|t| crate::prune::is_referrer_tag(t));
                let held = image
                    .targets
                    .iter()
                    .any(|t| t.target == *target && matches!(t.state, TargetState::UpToDate));
                if referrer || !held {
                    continue;
                }
                read += 1;
                let checked = match find_and_verify(policy, &side, &image.digest, listing).await {
                    Ok(c) => c,
                    Err(e) => {
                        findings.push(Finding::unreadable(
                            format!("signatures of {}", image.name()),
                            &e,
                        ));
                        continue;
                    }
                };
                // A cooldown is the source's business: on the target, verifying is enough.
                if let Decision::Refused(reason, detail) = decide(policy, &checked, at, None) {
                    findings.push(Finding::Unsigned {
                        name: image.name(),
                        digest: image.digest.to_string(),
                        reason,
                        detail,
                    });
                }
            }
        }
    }
    read
}
