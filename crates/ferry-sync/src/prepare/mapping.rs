//! Resolves one mapping: lists the source's tags (all pages), filters them, HEADs the chosen
//! manifests, and learns each target's state from one tag listing plus a HEAD per present tag.

use futures::StreamExt;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::operation::Operation;
use ferry_distribution::{Digest, Reference};

use crate::config::{Mapping, Target};
use crate::plan::{ImagePlan, ResolvedMapping, TargetPlan, TargetState};
use crate::prepare::PrepareOptions;
use crate::registries::Registries;

pub(crate) fn parse_repository(reference: &str) -> Result<Reference, Error> {
    Reference::parse(reference).map_err(|e| {
        Error::new(
            reference,
            None,
            Operation::TagList,
            ErrorKind::Local(format!("not a repository reference: {e}")),
        )
    })
}

/// Resolves `mapping` against its source and targets.
pub async fn resolve_mapping(
    mapping: &Mapping,
    registries: &Registries,
    options: &PrepareOptions,
) -> Result<ResolvedMapping, Error> {
    let source = parse_repository(&mapping.source)?;
    let client = registries.client(&source.registry).await?;
    let repo = source.repository.as_str();

    let tags = client.list_tags(repo).await?;
    let selection = mapping.tags.select(&tags);
    if selection.selected.is_empty() && mapping.digests.is_empty() {
        tracing::warn!(mapping = mapping.index, source = %mapping.source, "the tag filter selected nothing");
    }

    // What to copy: the selected tags, then the pinned digests.
    let mut wanted: Vec<(Option<String>, String)> = selection
        .selected
        .iter()
        .map(|t| (Some(t.clone()), t.clone()))
        .collect();
    for d in &mapping.digests {
        wanted.push((None, d.clone()));
    }

    let platforms = mapping.platforms.as_slice();
    let mut images = head_all(&client, repo, wanted, platforms, options).await?;

    // Signatures, SBOMs and attestations stored as tags: the referrers tag schema
    // (`sha256-<hex>`, an index of the referrers) and cosign's `sha256-<hex>.sig/.att/.sbom`.
    // They are found in the listing already fetched: no probe per image.
    let mut filtered_out = selection.filtered_out;
    if mapping.referrers {
        let listed: std::collections::HashSet<&str> = tags.iter().map(String::as_str).collect();
        let mut extra = Vec::new();
        for image in &images {
            let base = image.source_digest.fallback_tag();
            for suffix in ["", ".sig", ".att", ".sbom"] {
                let tag = format!("{base}{suffix}");
                let chosen = images
                    .iter()
                    .any(|i| i.tag.as_deref() == Some(tag.as_str()));
                if listed.contains(tag.as_str())
                    && !chosen
                    && !extra.iter().any(|(t, _)| t == &Some(tag.clone()))
                {
                    extra.push((Some(tag.clone()), tag));
                }
            }
        }
        filtered_out.retain(|(t, _)| !extra.iter().any(|(e, _)| e.as_deref() == Some(t.as_str())));
        // Referrers found through the referrers API, where the source serves it (learned once
        // per registry). An image rewritten by a platform filter has no referrers of its own.
        let mut found: Vec<ImagePlan> = Vec::new();
        for image in images.iter().filter(|i| i.digest == i.source_digest) {
            let Some(list) = client.list_referrers(repo, &image.source_digest).await? else {
                break;
            };
            for r in list {
                let known = images
                    .iter()
                    .chain(&found)
                    .any(|i| i.source_digest == r.digest);
                if !known {
                    found.push(ImagePlan {
                        tag: None,
                        digest: r.digest.clone(),
                        source_digest: r.digest,
                        subject: Some(image.source_digest.clone()),
                        media_type: r.media_type,
                        targets: Vec::new(),
                    });
                }
            }
        }
        // Referrers keep their bytes: a platform filter never applies to them.
        images.extend(head_all(&client, repo, extra, &[], options).await?);
        images.extend(found);
    }

    // Pruning (crate::prune) reuses each registry target's listing instead of listing again;
    // it is kept only for a mapping that prunes.
    let mut target_tags = Vec::new();
    for target in &mapping.targets {
        let (states, listed) = target_states(target, &images, registries, options).await?;
        if let (true, Some(listed)) = (mapping.prune, listed) {
            target_tags.push((target.clone(), listed));
        }
        for (image, state) in images.iter_mut().zip(states) {
            image.targets.push(TargetPlan {
                target: target.clone(),
                state,
            });
        }
    }

    Ok(ResolvedMapping {
        registry: source.registry.clone(),
        repository: source.repository.clone(),
        images,
        filtered_out,
        missing_exact: selection.missing_exact,
        platforms: mapping.platforms.clone(),
        referrers: mapping.referrers,
        target_tags,
    })
}

/// HEADs every wanted reference (a tag or a digest pin); a tag deleted since the listing is
/// skipped. With a platform filter, an index is fetched to learn the digest of its rewrite.
async fn head_all(
    client: &ferry_distribution::RegistryClient,
    repo: &str,
    wanted: Vec<(Option<String>, String)>,
    platforms: &[String],
    options: &PrepareOptions,
) -> Result<Vec<ImagePlan>, Error> {
    let heads: Vec<Result<Option<ImagePlan>, Error>> = futures::stream::iter(wanted)
        .map(|(tag, reference)| {
            let client = client.clone();
            async move {
                let Some(info) = client.head_manifest(repo, &reference).await? else {
                    return Ok(None);
                };
                // A platform filter rewrites an index: the target must hold the rewritten one.
                let mut digest = info.digest.clone();
                if !platforms.is_empty() && ferry_distribution::media::is_index(&info.media_type) {
                    let index = client.get_manifest(repo, &info.digest.to_string()).await?;
                    let filtered =
                        crate::platform::filter_index(&index, platforms).map_err(|e| {
                            Error::new(
                                client.host(),
                                Some(repo),
                                Operation::ManifestGet,
                                ErrorKind::InvalidResponse(e),
                            )
                        })?;
                    if let Some(f) = filtered {
                        digest = f.digest;
                    }
                }
                Ok(Some(ImagePlan {
                    tag,
                    digest,
                    source_digest: info.digest,
                    subject: None,
                    media_type: info.media_type,
                    targets: Vec::new(),
                }))
            }
        })
        .buffered(options.heads_per_mapping.max(1))
        .collect()
        .await;
    let mut images = Vec::new();
    for h in heads {
        // None: a tag deleted between the listing and the HEAD, nothing to copy.
        if let Some(image) = h? {
            images.push(image);
        }
    }
    Ok(images)
}

/// The state of every image on one target, from one tag listing and a HEAD per tag the target
/// already has (a tag it lacks needs no HEAD; a repository it lacks needs nothing more).
/// Also returns a registry target's tag listing (empty for an absent repository; `None` for a
/// layout), which pruning reuses.
async fn target_states(
    target: &Target,
    images: &[ImagePlan],
    registries: &Registries,
    options: &PrepareOptions,
) -> Result<(Vec<TargetState>, Option<Vec<String>>), Error> {
    let reference = match target {
        Target::Registry { reference } => parse_repository(reference)?,
        Target::OciLayout { path } => {
            return Ok((crate::layout::target_states(path, images), None));
        }
    };
    let client = registries.client(&reference.registry).await?;
    let repo = reference.repository.as_str();
    let listing = match client.list_tags(repo).await {
        Ok(tags) => Some(tags),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    let Some(listed) = listing else {
        return Ok((
            vec![TargetState::NewRepository; images.len()],
            Some(Vec::new()),
        ));
    };
    let present: std::collections::HashSet<&str> = listed.iter().map(String::as_str).collect();
    let states: Vec<Result<TargetState, Error>> = futures::stream::iter(images)
        .map(|image| {
            let client = client.clone();
            let present = &present;
            async move {
                match &image.tag {
                    Some(tag) if !present.contains(tag.as_str()) => Ok(TargetState::Missing),
                    Some(tag) => Ok(compare(
                        client.head_manifest(repo, tag).await?,
                        &image.digest,
                    )),
                    None => Ok(compare(
                        client
                            .head_manifest(repo, &image.digest.to_string())
                            .await?,
                        &image.digest,
                    )),
                }
            }
        })
        .buffered(options.heads_per_mapping.max(1))
        .collect()
        .await;
    let states = states.into_iter().collect::<Result<Vec<_>, Error>>()?;
    Ok((states, Some(listed)))
}

fn compare(info: Option<ferry_distribution::ops::ManifestInfo>, source: &Digest) -> TargetState {
    match info {
        None => TargetState::Missing,
        Some(i) if i.digest == *source => TargetState::UpToDate,
        Some(i) => TargetState::Stale { current: i.digest },
    }
}
