//! Whole-registry mappings expanded in the prepare phase: each one's registry catalog listed
//! (through the prepare window, under the one retry shape; ECR's `DescribeRepositories` where
//! the host is ECR), its names checked, one mapping made per match.
//!
//! Catalog names come from outside: each is validated as a repository name (`RepositoryName`)
//! and matched by path components against the prefix; a name under the prefix that is not a
//! valid name, or whose target another mapping already writes (the same place however spelled,
//! or a layout inside or above another mapping's layout: `app/blobs/sha256/<hex>`,
//! `x/index.json`), or that is itself a mirror target, is left out and reported like a rejected
//! tag. Names elsewhere in the registry are
//! not the mapping's and are passed over silently.

use std::collections::HashMap;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::operation::Operation;

use crate::in_window::in_window;
use crate::plan::{MappingPlan, RejectedName, ResolvedMapping};
use crate::prepare::{PrepareOptions, PrepareTracker};
use crate::registries::Registries;
use ferry_config::glob::Match;
use ferry_config::overlap::Writers;
use ferry_config::{Config, Mapping, Origin, RepositoryGlob};

/// No catalog is believed to list more repositories than this (the pager's bound).
pub(crate) const MAX_CATALOG: usize = 100_000;

/// The config's mappings with every whole-registry mapping expanded: one entry per glob (its
/// expansion, or the error that stopped it) and the mappings to resolve, in config order.
#[derive(Debug, Default)]
pub(crate) struct Expanded {
    /// One plan entry per whole-registry mapping: the repositories it expanded to and the
    /// names it left out, or why its catalog could not be read.
    pub globs: Vec<MappingPlan>,
    /// The ordinary mappings and each glob's expansions, ready to resolve.
    pub mappings: Vec<Mapping>,
}

/// One glob's catalog: matched repositories (with their remainders) and rejected names.
struct Listed {
    matched: Vec<(String, String)>,
    rejected: Vec<RejectedName>,
}

/// Expands every whole-registry mapping of `config`; the others pass through unchanged.
pub(crate) async fn expand_all(
    config: &Config,
    registries: &Registries,
    options: &PrepareOptions,
    tracker: &PrepareTracker,
) -> Expanded {
    let globs: Vec<(&Mapping, &RepositoryGlob)> = config
        .mappings
        .iter()
        .filter_map(|m| m.repositories.as_ref().map(|g| (m, g)))
        .collect();
    if globs.is_empty() {
        return Expanded {
            globs: Vec::new(),
            mappings: config.mappings.clone(),
        };
    }
    let listings = in_window(
        globs.iter().copied(),
        options.concurrency,
        |(m, g)| async move {
            tracker.started(m.index, &m.source);
            let listed = list(g, registries).await;
            tracker.finished(m.index, &m.source);
            listed
        },
    )
    .await;

    // Who writes each target: the ordinary mappings first, then each glob's matches in config
    // order (the first to claim a target keeps it).
    // Compared as places: a layout inside or above a claimed one clashes as much as the same
    // directory spelled otherwise (`oci:./mirror/x` and `oci:mirror/x`).
    let mut writers = Writers::new();
    for m in config.mappings.iter().filter(|m| m.repositories.is_none()) {
        for t in &m.targets {
            if writers.clash(t).is_none() {
                writers.claim(t, m.index, &m.source);
            }
        }
    }
    let mut candidates: Vec<(usize, Vec<Mapping>)> = Vec::new();
    let mut out = Expanded::default();
    let mut rejected_by_glob: HashMap<usize, Vec<RejectedName>> = HashMap::new();
    for ((m, g), listed) in globs.iter().zip(listings) {
        let listed = match listed {
            Ok(l) => l,
            Err(e) => {
                out.globs.push(glob_plan(m, Err(e)));
                continue;
            }
        };
        if listed.matched.len() > g.max_repositories {
            let e = Error::new(
                &g.registry,
                None,
                Operation::Catalog,
                ErrorKind::Refused(format!(
                    "{} matches {} repositories, more than max_repositories ({}); raise \
                     max_repositories or narrow the source",
                    m.source,
                    listed.matched.len(),
                    g.max_repositories
                )),
            );
            out.globs.push(glob_plan(m, Err(e)));
            continue;
        }
        let rejected = rejected_by_glob.entry(m.index).or_default();
        rejected.extend(listed.rejected);
        let mut mine = Vec::new();
        for (repository, remainder) in listed.matched {
            let targets = match g.targets_for(&repository, &remainder) {
                Ok(t) => t,
                Err(reason) => {
                    rejected.push(catalog_rejection(repository, reason));
                    continue;
                }
            };
            if let Some(prefix) = g.own_target_holding(&repository) {
                rejected.push(catalog_rejection(
                    repository,
                    format!("it is a mirror target itself (under this mapping's target {prefix})"),
                ));
                continue;
            }
            let source = format!("{}/{repository}", g.registry);
            if let Some(reason) = targets
                .iter()
                .find_map(|t| writers.clash(t).map(|c| c.describe(t)))
            {
                rejected.push(catalog_rejection(repository, reason));
                continue;
            }
            for t in &targets {
                writers.claim(t, m.index, &source);
            }
            let mapping = Mapping {
                source,
                origin: Origin::Registry {
                    registry: g.registry.clone(),
                    repository,
                },
                targets,
                repositories: None,
                digests: Vec::new(),
                ..(*m).clone()
            };
            mine.push(mapping);
        }
        candidates.push((m.index, mine));
    }
    // A repository that is itself some mapping's target is a mirror, not a source: copying it
    // would mirror the mirror on the next run.
    for (index, mine) in candidates {
        let Some((m, _)) = globs.iter().find(|(m, _)| m.index == index) else {
            continue;
        };
        let rejected = rejected_by_glob.entry(index).or_default();
        let mut repositories = Vec::new();
        for mapping in mine {
            if let Some(clash) = writers.clash(&mapping.origin) {
                let repository = match &mapping.origin {
                    Origin::Registry { repository, .. } => repository.clone(),
                    Origin::OciLayout { .. }
                    | Origin::OciArchive { .. }
                    | Origin::DockerArchive { .. } => mapping.source.clone(),
                };
                let w = clash.writer();
                rejected.push(catalog_rejection(
                    repository,
                    format!(
                        "it is a mirror target itself (of mappings[{}], source {})",
                        w.index, w.source
                    ),
                ));
                continue;
            }
            repositories.push(mapping.source.clone());
            out.mappings.push(mapping);
        }
        if repositories.is_empty() {
            tracing::warn!(mapping = index, source = %m.source, "the catalog matched no repository");
        }
        let rejected = std::mem::take(rejected);
        out.globs.push(glob_plan(m, Ok((repositories, rejected))));
    }
    out.mappings.extend(
        config
            .mappings
            .iter()
            .filter(|m| m.repositories.is_none())
            .cloned(),
    );
    out.mappings
        .sort_by(|a, b| (a.index, &a.source).cmp(&(b.index, &b.source)));
    tracker.grow(out.mappings.len() + out.globs.len() - config.mappings.len());
    out
}

/// The glob's catalog, split into matches and rejected names.
async fn list(glob: &RepositoryGlob, registries: &Registries) -> Result<Listed, Error> {
    // ECR serves no catalog: its API lists the repositories instead, unless the config's own
    // `auth` for the host says it is not to be treated as ECR.
    let names = if registries.lists_with_ecr_api(&glob.registry) {
        registries
            .ecr_repositories(&glob.registry, MAX_CATALOG)
            .await?
    } else {
        let client = registries.client(&glob.registry).await?;
        client.list_repositories(MAX_CATALOG).await?
    };
    let mut listed = Listed {
        matched: Vec::new(),
        rejected: Vec::new(),
    };
    for name in names {
        match glob.classify(&name) {
            Match::Matched {
                repository,
                remainder,
            } => listed
                .matched
                .push((repository.as_str().to_owned(), remainder)),
            Match::Outside => {}
            Match::Invalid(reason) => listed.rejected.push(catalog_rejection(name, reason)),
        }
    }
    listed.matched.sort();
    listed.matched.dedup();
    Ok(listed)
}

fn catalog_rejection(name: String, reason: String) -> RejectedName {
    RejectedName::new(&name, &reason, crate::plan::ListedIn::Catalog)
}

/// The glob's own plan entry: what it expanded to, or why it could not.
fn glob_plan(m: &Mapping, outcome: Result<(Vec<String>, Vec<RejectedName>), Error>) -> MappingPlan {
    MappingPlan {
        index: m.index,
        source: m.source.clone(),
        outcome: outcome.map(|(expanded, rejected_names)| ResolvedMapping {
            origin: m.origin.clone(),
            targets: Vec::new(),
            images: Vec::new(),
            held_immutable: Vec::new(),
            filtered_out: Vec::new(),
            missing_exact: Vec::new(),
            rejected_names: RejectedName::bounded(rejected_names),
            unfetched: Vec::new(),
            signature_refused: Vec::new(),
            signature_held: Vec::new(),
            concurrency: m.concurrency,
            platforms: m.platforms.clone(),
            referrers: m.referrers,
            target_tags: Vec::new(),
            expanded: Some(expanded),
        }),
    }
}
