//! What each target of a mapping already holds: one tag listing per registry target (or the
//! layout's `index.json`), then a HEAD only for a tag the target has (and is not immutable).

use std::collections::HashSet;
use std::path::Path;

use ferry_distribution::RegistryClient;
use ferry_distribution::error::Error;
use ferry_distribution::reference::Tag;

use crate::plan::{ImagePlan, TargetState};
use crate::prepare::PrepareOptions;
use crate::registries::Registries;
use ferry_config::Target;

/// One target's listing, taken once and used for every image of the mapping.
#[derive(Debug, Clone)]
pub(crate) enum TargetListing {
    /// A registry repository: its tags, or `None` when it does not exist yet.
    Registry {
        /// A client for the target's registry.
        client: RegistryClient,
        /// The target registry, as the config names it (the tag cache's key).
        registry: String,
        /// The target repository.
        repository: String,
        /// The tags listed; `None` when the repository does not exist yet.
        tags: Option<Vec<String>>,
    },
    /// A registry repository that may not be listed (the registry or the token refuses tag
    /// listing, learned once): every image is compared with a HEAD of its own.
    Unlisted {
        /// A client for the target's registry.
        client: RegistryClient,
        /// The target repository.
        repository: String,
    },
    /// An archive (`oci-archive:`, or every target of `ferry export`): written whole each run,
    /// it holds nothing beforehand.
    Archive,
    /// An image-layout directory.
    Layout {
        /// The layout's directory.
        path: std::path::PathBuf,
    },
}

/// A listing the registry answered, but with something that cannot be read as one.
fn unreadable(e: &Error) -> bool {
    use ferry_distribution::ErrorKind;
    matches!(
        e.kind,
        ErrorKind::InvalidResponse(_) | ErrorKind::Refused(_)
    )
}

impl TargetListing {
    /// Lists `target` once. A listing the registry answered with something unreadable (not
    /// JSON, a `Link` to nowhere or off the origin, a loop) is, for a mapping that does not
    /// prune, no listing: every image is compared with a HEAD of its own, as for a registry
    /// that refuses listing. A pruning mapping needs the whole listing, and fails.
    pub(crate) async fn take(
        target: &Target,
        registries: &Registries,
        stores: &ferry_store::archive::Stores,
        prunes: bool,
    ) -> Result<Self, Error> {
        // An export writes a bundle: the (disconnected) target registry is never asked.
        if stores.export().is_some() {
            return Ok(TargetListing::Archive);
        }
        let (registry, repository) = match target {
            Target::Registry {
                registry,
                repository,
            } => (registry, repository),
            Target::OciLayout { path } => return Ok(TargetListing::Layout { path: path.clone() }),
            Target::OciArchive { .. } => return Ok(TargetListing::Archive),
            Target::DockerArchive { .. } => {
                return Err(target.archive_not_yet(ferry_distribution::Operation::TagList));
            }
        };
        let client = registries.client(registry).await?;
        let refused = |e: &Error| {
            e.status()
                .is_some_and(ferry_distribution::capabilities::refuses_tag_list)
        };
        let tags = match client.list_tags(repository).await {
            Ok(tags) => Some(tags),
            Err(e) if e.is_not_found() => None,
            Err(e) if refused(&e) => {
                return Ok(TargetListing::Unlisted {
                    client,
                    repository: repository.clone(),
                });
            }
            Err(e) if !prunes && unreadable(&e) => {
                tracing::warn!(target = %target, error = %e, "the target's tag list could not be read: each image is compared with a HEAD of its own");
                return Ok(TargetListing::Unlisted {
                    client,
                    repository: repository.clone(),
                });
            }
            Err(e) => return Err(e),
        };
        Ok(TargetListing::Registry {
            client,
            registry: registry.clone(),
            repository: repository.clone(),
            tags,
        })
    }

    /// Whether the target holds something under `tag`, so a digest must be compared.
    pub(crate) fn has_tag(&self, tag: &str) -> bool {
        match self {
            TargetListing::Registry { tags, .. } => {
                tags.as_ref().is_some_and(|t| t.iter().any(|x| x == tag))
            }
            // Not known: the source's manifest is fetched whole (the engine reads it anyway
            // if the target turns out to lack it).
            TargetListing::Unlisted { .. } | TargetListing::Archive => false,
            TargetListing::Layout { path } => ferry_store::layout::read_tags(path)
                .iter()
                .any(|(t, _)| t.as_deref() == Some(tag)),
        }
    }

    /// The target's tags: a registry repository's listing (empty for an absent repository),
    /// or the tags a layout's `index.json` names.
    pub(crate) fn listed_tags(&self) -> Vec<String> {
        match self {
            TargetListing::Registry { tags, .. } => tags.clone().unwrap_or_default(),
            TargetListing::Unlisted { .. } | TargetListing::Archive => Vec::new(),
            TargetListing::Layout { path } => {
                let mut tags: Vec<String> = ferry_store::layout::read_tags(path)
                    .into_iter()
                    .filter_map(|(t, _)| t)
                    .collect();
                tags.sort();
                tags.dedup();
                tags
            }
        }
    }

    /// Whether the run's tag cache vouches for `image` here: a listed registry repository
    /// whose listing names the tag, which ferry gave (or saw holding) the image's digest less
    /// than the TTL ago. Never in a verify, which looks at the target itself.
    pub(crate) fn believed(&self, image: &ImagePlan, options: &PrepareOptions) -> bool {
        let (Some(cache), Some(tag)) = (options.tag_cache.as_ref(), image.tag.as_ref()) else {
            return false;
        };
        match self {
            TargetListing::Registry {
                registry,
                repository,
                tags: Some(tags),
                ..
            } if !options.audit && tags.iter().any(|t| t == tag.as_str()) => cache.holds(
                registry,
                repository,
                tag.as_str(),
                &image.digest,
                image.fallback_digest.as_ref(),
            ),
            _ => false,
        }
    }

    /// The state of every image on this target: a HEAD for each tag the target has (and each
    /// pinned digest in a repository that exists), nothing for the rest. A tag in `immutable`
    /// that the listing names is up to date without a HEAD: it never changes once pushed.
    pub(crate) async fn states(
        &self,
        images: &[ImagePlan],
        immutable: &HashSet<Tag>,
        options: &PrepareOptions,
    ) -> Result<Vec<TargetState>, Error> {
        let (client, repo, present) = match self {
            TargetListing::Archive => return Ok(vec![TargetState::Missing; images.len()]),
            TargetListing::Layout { path } => {
                let listed = self.listed_tags();
                let held = |image: &ImagePlan| {
                    image.tag.as_ref().is_some_and(|t| {
                        immutable.contains(t) && listed.iter().any(|l| l == t.as_str())
                    })
                };
                let states = layout_target_states(path, images);
                return Ok(images
                    .iter()
                    .zip(states)
                    .map(|(image, state)| match held(image) {
                        true => TargetState::UpToDate,
                        false => state,
                    })
                    .collect());
            }
            TargetListing::Registry { tags: None, .. } => {
                return Ok(vec![TargetState::NewRepository; images.len()]);
            }
            TargetListing::Registry {
                client,
                repository,
                tags: Some(tags),
                ..
            } => (
                client,
                repository.as_str(),
                Some(tags.iter().map(String::as_str).collect::<HashSet<&str>>()),
            ),
            TargetListing::Unlisted { client, repository } => (client, repository.as_str(), None),
        };
        let states: Vec<Result<TargetState, Error>> =
            crate::in_window::in_window(images, options.heads_per_mapping, |image| {
                let present = &present;
                async move {
                    let reference = match &image.tag {
                        Some(tag)
                            if present.as_ref().is_some_and(|p| !p.contains(tag.as_str())) =>
                        {
                            return Ok(TargetState::Missing);
                        }
                        // Listed, and immutable: what it names is what the source has.
                        Some(tag) if present.is_some() && immutable.contains(tag) => {
                            return Ok(TargetState::UpToDate);
                        }
                        // Listed, and the tag cache says ferry gave it this digest within
                        // the TTL: no HEAD (`engine.tag_cache_ttl`).
                        Some(_) if self.believed(image, options) => {
                            return Ok(TargetState::UpToDate);
                        }
                        Some(tag) => tag.to_string(),
                        None => image.digest.to_string(),
                    };
                    Ok(compare(
                        client.head_manifest(repo, &reference).await?,
                        image,
                    ))
                }
            })
            .await;
        states.into_iter().collect()
    }
}

/// The target's state from its HEAD: up to date when it holds the image's digest, or the
/// filtered index a target that refused the kept digest got instead.
pub(crate) fn compare(
    info: Option<ferry_distribution::ops::ManifestInfo>,
    image: &ImagePlan,
) -> TargetState {
    match info {
        None => TargetState::Missing,
        Some(i) if i.digest == image.digest => TargetState::UpToDate,
        Some(i) if image.fallback_digest.as_ref() == Some(&i.digest) => TargetState::UpToDate,
        Some(i) => TargetState::Stale { current: i.digest },
    }
}

/// The state of each image in the layout at `dir`.
pub(crate) fn layout_target_states(dir: &Path, images: &[ImagePlan]) -> Vec<TargetState> {
    if !dir.join("index.json").exists() {
        return vec![TargetState::NewRepository; images.len()];
    }
    let held = ferry_store::layout::read_tags(dir);
    images
        .iter()
        .map(|image| {
            let found = held.iter().find(|(tag, digest)| match &image.tag {
                Some(t) => tag.as_deref() == Some(t.as_str()),
                None => *digest == image.digest,
            });
            match found {
                None => TargetState::Missing,
                Some((_, d))
                    if *d == image.digest && ferry_store::layout::writer::holds_blob(dir, d) =>
                {
                    TargetState::UpToDate
                }
                Some((_, d)) if *d == image.digest => TargetState::Missing,
                Some((_, d)) => TargetState::Stale { current: d.clone() },
            }
        })
        .collect()
}
