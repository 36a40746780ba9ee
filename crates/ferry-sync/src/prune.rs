//! Pruning, a step after the engine: deletes target tags that the source no longer has and the
//! mapping's filter selects; tags outside the filter, and referrer tags, are never touched.
//!
//! Candidates come from the plan alone ([`candidates`]: the target listings the prepare phase
//! kept for pruning mappings), so `--dry-run` shows them without a request. A tag is deleted
//! with a tag DELETE, never by digest: deleting the manifest would remove every tag pointing at
//! it. In a layout target the tag leaves `index.json`, then the blobs nothing else reaches are
//! deleted (see `ferry_store::layout::prune`). A registry that cannot delete tags (distribution 2.x
//! answers 405 UNSUPPORTED, or 400 DIGEST_INVALID with deletes enabled; see
//! docs/registries.md) is reported as such once, and is sent no further deletes in the run.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;

use serde::Serialize;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::reference::Tag;

use crate::engine::StopSignal;
use crate::plan::{Plan, ResolvedMapping};
use crate::registries::Registries;
use crate::report::{ImageStatus, SyncReport};
use ferry_config::{Config, Mapping, Target};

/// One target tag that pruning would delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneCandidate {
    /// Position of the mapping in the config.
    pub mapping: usize,
    /// The mapping's source, as reports name it.
    pub source: String,
    /// The target the tag is on.
    pub target: Target,
    /// The tag to delete.
    pub tag: String,
}

/// What became of one candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PruneStatus {
    /// The tag was deleted (or was already gone).
    Deleted,
    /// A dry run: the tag would be deleted.
    WouldDelete,
    /// The registry does not delete tags; nothing was deleted (and not by digest either).
    Unsupported {
        /// The registry that refused.
        registry: String,
        /// The status it answered with, when it answered.
        http_status: Option<u16>,
        /// The error, as a message.
        error: String,
    },
    /// The deletion failed for another reason.
    Failed {
        /// The registry, or the layout (`oci:<directory>`).
        registry: String,
        /// The status the registry answered with, when it answered.
        http_status: Option<u16>,
        /// The error, as a message.
        error: String,
    },
    /// Not attempted: the run was interrupted.
    Interrupted,
}

/// One candidate's outcome, as the report lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrunedTag {
    /// Position of the mapping in the config.
    pub mapping: usize,
    /// The mapping's source.
    pub source: String,
    /// The target, as reports name it.
    pub target: String,
    /// The tag.
    pub tag: String,
    /// What became of it.
    #[serde(flatten)]
    pub status: PruneStatus,
}

/// A mapping with `prune` on that deletes nothing in this run, and why: pruning deletes only
/// what a complete, faultless reading of the source shows is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PruneSkipped {
    /// Position of the mapping in the config.
    pub mapping: usize,
    /// The mapping's source.
    pub source: String,
    /// Why nothing is deleted for it.
    pub reason: String,
}

/// What pruning will do: the tags to delete, and the pruning mappings that delete nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PruneDecision {
    /// Target tags to delete.
    pub candidates: Vec<PruneCandidate>,
    /// Pruning mappings that delete nothing this run.
    pub skipped: Vec<PruneSkipped>,
}

/// Everything pruning did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Every candidate with its outcome.
    pub tags: Vec<PrunedTag>,
    /// Pruning mappings left untouched this run, each with the reason.
    pub skipped: Vec<PruneSkipped>,
    /// Tags deleted.
    pub deleted: u64,
    /// Tags a dry run would delete.
    pub would_delete: u64,
    /// Tags on registries that do not delete tags.
    pub unsupported: u64,
    /// Deletions that failed.
    pub failed: u64,
    /// Candidates not attempted because the run was interrupted.
    pub interrupted: u64,
    /// Blobs deleted from layout targets because no remaining tag reaches them, and their bytes.
    pub layout_blobs_removed: u64,
    /// Bytes of those blobs.
    pub layout_bytes_freed: u64,
}

impl PruneReport {
    fn push(&mut self, c: PruneCandidate, status: PruneStatus) {
        match &status {
            PruneStatus::Deleted => self.deleted += 1,
            PruneStatus::WouldDelete => self.would_delete += 1,
            PruneStatus::Unsupported { .. } => self.unsupported += 1,
            PruneStatus::Failed { .. } => self.failed += 1,
            PruneStatus::Interrupted => self.interrupted += 1,
        }
        self.tags.push(PrunedTag {
            mapping: c.mapping,
            source: c.source,
            target: c.target.to_string(),
            tag: c.tag,
            status,
        });
    }

    /// Some tag that should have gone is still there.
    pub fn has_failures(&self) -> bool {
        self.unsupported + self.failed + self.interrupted > 0
    }

    /// Records the mappings that prune nothing this run.
    pub(crate) fn add_skipped(&mut self, skipped: Vec<PruneSkipped>) {
        self.skipped.extend(skipped);
    }

    /// For people: one line per tag, then a summary (empty when there was nothing to prune).
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for s in &self.skipped {
            let _ = writeln!(
                out,
                "prune skipped  mapping {} ({}): {}",
                s.mapping, s.source, s.reason
            );
        }
        if self.tags.is_empty() {
            return out;
        }
        let mut unsupported_said: HashSet<&str> = HashSet::new();
        for t in &self.tags {
            let name = format!("{}:{}", t.target, t.tag);
            let _ = match &t.status {
                PruneStatus::Deleted => writeln!(out, "pruned  {name}"),
                PruneStatus::WouldDelete => writeln!(
                    out,
                    "would prune  {name} (the source no longer has it; the filter selects it)"
                ),
                PruneStatus::Unsupported {
                    registry, error, ..
                } => {
                    if unsupported_said.insert(registry) {
                        let _ = writeln!(
                            out,
                            "PRUNE UNSUPPORTED  {registry} does not delete tags ({error}); \
                             ferry does not delete by digest, which would remove every tag \
                             of that manifest: delete these tags with the registry's own tools"
                        );
                    }
                    writeln!(out, "not pruned  {name}")
                }
                PruneStatus::Failed { error, .. } => writeln!(out, "PRUNE FAILED  {name}: {error}"),
                PruneStatus::Interrupted => writeln!(out, "not pruned  {name} (interrupted)"),
            };
        }
        let freed = if self.layout_blobs_removed > 0 {
            format!(
                "; {} unreferenced layout blobs removed ({})",
                self.layout_blobs_removed,
                crate::report::human_bytes(self.layout_bytes_freed)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "prune: {} deleted, {} would be deleted, {} unsupported, {} failed, {} interrupted{freed}",
            self.deleted, self.would_delete, self.unsupported, self.failed, self.interrupted
        );
        out
    }
}

/// The tags to prune, in config order (see [`decide`]), without a run's outcome: what a dry
/// run shows.
pub fn candidates(plan: &Plan, config: &Config) -> Vec<PruneCandidate> {
    decide(plan, config, None).candidates
}

/// What pruning does, in config order. For each mapping with `prune` on and each target the
/// prepare phase listed, the candidates are the tags that the mapping's filter selects from
/// that listing and that the source's listing does not name. Referrer tags (`sha256-<hex>
/// [.sig|.att|.sbom]`) are never candidates: they follow their image, and ferry writes some
/// itself.
///
/// A mapping deletes nothing (it is `skipped`, with the reason) unless the source was read
/// completely and without a fault in this run: its listing read in full (every page, none
/// repeated: a listing that fails or loops fails the mapping), every listed tag's manifest
/// fetched, and, given `run`, no image of the mapping failed or was interrupted. A source that
/// listed no tags at all prunes nothing either (an empty listing is more likely a registry
/// fault than an intent to delete everything).
pub(crate) fn decide(plan: &Plan, config: &Config, run: Option<&SyncReport>) -> PruneDecision {
    let mut out = PruneDecision::default();
    for m in &plan.mappings {
        let Some(mapping) = config.mappings.iter().find(|c| c.index == m.index) else {
            continue;
        };
        if !mapping.prune {
            continue;
        }
        let skip = |reason: String| PruneSkipped {
            mapping: m.index,
            source: m.source.clone(),
            reason,
        };
        let resolved = match &m.outcome {
            Ok(r) => r,
            Err(e) => {
                out.skipped.push(skip(format!(
                    "the source was not read in full ({e}), so what it dropped is unknown"
                )));
                continue;
            }
        };
        if let Some(u) = resolved.unfetched.first() {
            out.skipped.push(skip(format!(
                "{} listed tag(s) could not be fetched (first: {}: {})",
                resolved.unfetched.len(),
                u.tag,
                u.error
            )));
            continue;
        }
        if let Some(run) = run {
            let failed = run
                .images
                .iter()
                .filter(|i| i.mapping == m.index && i.source == m.source)
                .filter(|i| {
                    matches!(
                        i.status,
                        ImageStatus::Failed { .. } | ImageStatus::Interrupted
                    )
                })
                .count();
            if failed > 0 {
                out.skipped.push(skip(format!(
                    "{failed} image(s) of this mapping failed or were interrupted in this run"
                )));
                continue;
            }
        }
        if resolved.target_tags.is_empty() {
            continue;
        }
        let Some(extra) = extra_tags(mapping, resolved) else {
            out.skipped.push(skip(
                "the source lists no tags (more likely a registry fault than an intent to \
                 delete everything)"
                    .into(),
            ));
            continue;
        };
        for (target, tag) in extra {
            out.candidates.push(PruneCandidate {
                mapping: m.index,
                source: m.source.clone(),
                target: target.clone(),
                tag,
            });
        }
    }
    out
}

/// The tags of each listed target (`resolved.target_tags`) that `mapping`'s filter selects and
/// the source's listing does not name, referrer tags never among them: what pruning deletes,
/// and what `ferry verify` reports as extra. `None` when the source listed no tags at all.
pub(crate) fn extra_tags<'a>(
    mapping: &Mapping,
    resolved: &'a ResolvedMapping,
) -> Option<Vec<(&'a Target, String)>> {
    // Every tag the source listed: selected (now images) or left out by the filter.
    let source_tags: HashSet<&str> = resolved
        .images
        .iter()
        .filter_map(|i| i.tag.as_deref())
        .chain(resolved.held_immutable.iter().map(Tag::as_str))
        .chain(resolved.filtered_out.iter().map(|(t, _)| t.as_str()))
        .collect();
    if source_tags.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for (target, listed) in &resolved.target_tags {
        for tag in mapping.tags.select(listed).selected {
            if source_tags.contains(tag.as_str()) || is_referrer_tag(&tag) {
                continue;
            }
            out.push((target, tag));
        }
    }
    Some(out)
}

/// `sha256-<64 hex>` or `sha512-<128 hex>`, optionally with `.sig`, `.att` or `.sbom`.
pub(crate) fn is_referrer_tag(tag: &str) -> bool {
    let base = [".sig", ".att", ".sbom"]
        .iter()
        .find_map(|s| tag.strip_suffix(s))
        .unwrap_or(tag);
    let hex_of = |prefix: &str, len: usize| {
        base.strip_prefix(prefix).is_some_and(|h| {
            h.len() == len
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
    };
    hex_of("sha256-", 64) || hex_of("sha512-", 128)
}

/// The dry-run report: every candidate as `would_delete`.
pub fn dry_run(candidates: Vec<PruneCandidate>) -> PruneReport {
    let mut report = PruneReport::default();
    for c in candidates {
        report.push(c, PruneStatus::WouldDelete);
    }
    report
}

/// Deletes every candidate's tag, one at a time. After a registry shows it cannot delete tags,
/// its remaining candidates are reported unsupported without a request; after `stop`, the rest
/// are reported interrupted.
pub async fn execute(
    candidates: Vec<PruneCandidate>,
    registries: &Registries,
    stop: &StopSignal,
) -> PruneReport {
    let mut report = PruneReport::default();
    // Registry host -> why it cannot delete tags.
    let mut unsupported: BTreeMap<String, PruneStatus> = BTreeMap::new();
    let mut pruned_layouts: BTreeSet<std::path::PathBuf> = BTreeSet::new();
    for c in candidates {
        if stop.is_stopped() {
            report.push(c, PruneStatus::Interrupted);
            continue;
        }
        let (registry, repository) = match &c.target {
            Target::Registry {
                registry,
                repository,
            } => (registry, repository),
            Target::OciLayout { path } => {
                let status = match ferry_store::layout::prune::remove_tag(path, &c.tag).await {
                    Ok(_) => {
                        pruned_layouts.insert(path.clone());
                        PruneStatus::Deleted
                    }
                    Err(e) => PruneStatus::Failed {
                        registry: c.target.to_string(),
                        http_status: None,
                        error: e,
                    },
                };
                report.push(c, status);
                continue;
            }
            // An archive is written whole by each run (its listing is empty, so no candidate
            // names one): there is nothing in it to delete, and nothing is.
            Target::OciArchive { .. } | Target::DockerArchive { .. } => {
                let status = PruneStatus::Failed {
                    registry: c.target.to_string(),
                    http_status: None,
                    error: format!(
                        "{}: an archive is written whole by each run and never pruned",
                        c.target
                    ),
                };
                report.push(c, status);
                continue;
            }
        };
        let status = match unsupported.get(registry) {
            Some(known) => known.clone(),
            None => match delete_tag(registries, registry, repository, &c.tag).await {
                Ok(()) => PruneStatus::Deleted,
                Err(e) if cannot_delete_tags(&e) => {
                    let status = PruneStatus::Unsupported {
                        registry: registry.clone(),
                        http_status: e.status(),
                        error: e.to_string(),
                    };
                    unsupported.insert(registry.clone(), status.clone());
                    status
                }
                Err(e) => failed(&e),
            },
        };
        report.push(c, status);
    }
    // Blobs only the pruned tags reached go once every tag of the layout is out of its index.
    for dir in pruned_layouts {
        let wait = ferry_store::layout::lock::LOCK_WAIT;
        match ferry_store::layout::prune::collect_garbage(&dir, wait).await {
            Ok(collected) => {
                report.layout_blobs_removed += collected.blobs;
                report.layout_bytes_freed += collected.bytes;
            }
            Err(e) => tracing::warn!(
                layout = %dir.display(),
                "unreferenced blobs left in place: {e}"
            ),
        }
    }
    report
}

async fn delete_tag(
    registries: &Registries,
    host: &str,
    repository: &str,
    tag: &str,
) -> Result<(), Error> {
    use ferry_distribution::capabilities::{Feature, Support};
    let client = registries.client(host).await?;
    let result = client.delete_manifest(repository, tag).await;
    // Learned for the report's `capabilities` (the run's own skip is `unsupported` above).
    match &result {
        Ok(()) => client
            .capabilities()
            .learn(Feature::TagDelete, Support::Works),
        Err(e) if cannot_delete_tags(e) => client
            .capabilities()
            .learn(Feature::TagDelete, Support::Refused),
        Err(_) => {}
    }
    result
}

fn failed(e: &Error) -> PruneStatus {
    PruneStatus::Failed {
        registry: e.registry.clone(),
        http_status: e.status(),
        error: e.to_string(),
    }
}

/// A registry's answer to a tag DELETE that means "tags cannot be deleted here": 405 (the
/// OCI distribution spec's answer for an unsupported delete; distribution 2.x with deletes
/// off says UNSUPPORTED), or 400 DIGEST_INVALID / UNSUPPORTED (distribution 2.x with deletes on
/// reads the tag as a digest). Measured 2026-11-30 against docker-registry 2.8.2.
fn cannot_delete_tags(e: &Error) -> bool {
    match &e.kind {
        ErrorKind::Status { status: 405, .. } => true,
        ErrorKind::Status {
            status: 400,
            code: Some(code),
            ..
        } => code == "DIGEST_INVALID" || code == "UNSUPPORTED",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_distribution::operation::Operation;

    fn status_error(status: u16, code: Option<&str>) -> Error {
        Error::new(
            "r.example",
            Some("a/b"),
            Operation::TagDelete,
            ErrorKind::Status {
                status,
                code: code.map(str::to_owned),
                message: None,
            },
        )
    }

    #[test]
    fn referrer_tags_are_recognised_and_nothing_else() {
        let hex = "a".repeat(64);
        for t in [
            format!("sha256-{hex}"),
            format!("sha256-{hex}.sig"),
            format!("sha256-{hex}.att"),
            format!("sha256-{hex}.sbom"),
            format!("sha512-{}", "0".repeat(128)),
        ] {
            assert!(is_referrer_tag(&t), "{t}");
        }
        for t in [
            "latest".to_string(),
            format!("sha256-{}", "a".repeat(63)),
            format!("sha256-{}", "A".repeat(64)),
            format!("sha256-{hex}.foo"),
            format!("sha1-{hex}"),
        ] {
            assert!(!is_referrer_tag(&t), "{t}");
        }
    }

    #[test]
    fn only_405_and_distributions_400_codes_mean_tags_cannot_be_deleted() {
        assert!(cannot_delete_tags(&status_error(405, Some("UNSUPPORTED"))));
        assert!(cannot_delete_tags(&status_error(405, None)));
        assert!(cannot_delete_tags(&status_error(
            400,
            Some("DIGEST_INVALID")
        )));
        assert!(!cannot_delete_tags(&status_error(
            400,
            Some("NAME_INVALID")
        )));
        assert!(!cannot_delete_tags(&status_error(403, None)));
        assert!(!cannot_delete_tags(&status_error(500, None)));
    }

    fn candidate(tag: &str) -> PruneCandidate {
        PruneCandidate {
            mapping: 0,
            source: "src.example/lib/app".into(),
            target: Target::Registry {
                registry: "dst.example".into(),
                repository: "mirror/app".into(),
            },
            tag: tag.into(),
        }
    }

    #[test]
    fn each_outcome_is_counted_and_only_a_tag_left_in_place_is_a_failure() {
        let unsupported = PruneStatus::Unsupported {
            registry: "dst.example".into(),
            http_status: Some(405),
            error: "unsupported".into(),
        };
        let failed = PruneStatus::Failed {
            registry: "dst.example".into(),
            http_status: Some(500),
            error: "boom".into(),
        };
        let cases = [
            (PruneStatus::Deleted, [2, 0, 0, 0, 0], false),
            (PruneStatus::WouldDelete, [0, 2, 0, 0, 0], false),
            (unsupported, [0, 0, 2, 0, 0], true),
            (failed, [0, 0, 0, 2, 0], true),
            (PruneStatus::Interrupted, [0, 0, 0, 0, 2], true),
        ];
        for (status, counts, failure) in cases {
            let mut r = PruneReport::default();
            r.push(candidate("v0"), status.clone());
            r.push(candidate("v1"), status.clone());
            let got = [
                r.deleted,
                r.would_delete,
                r.unsupported,
                r.failed,
                r.interrupted,
            ];
            assert_eq!(got, counts, "{status:?}");
            assert_eq!(r.has_failures(), failure, "{status:?}");
            assert_eq!(r.tags.len(), 2);
            assert_eq!(r.tags[1].target, "dst.example/mirror/app");
        }
    }

    #[test]
    fn the_summary_names_freed_layout_blobs_only_when_there_were_some() {
        let mut r = PruneReport::default();
        r.push(candidate("v0"), PruneStatus::Deleted);
        let text = r.render_text();
        assert!(text.contains("prune: 1 deleted"), "{text}");
        assert!(!text.contains("layout blobs"), "{text}");
        r.layout_blobs_removed = 2;
        r.layout_bytes_freed = 2048;
        let text = r.render_text();
        assert!(
            text.contains("; 2 unreferenced layout blobs removed ("),
            "{text}"
        );
    }
}
