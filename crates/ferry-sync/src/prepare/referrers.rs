//! Which referrers travel with a mapping's images (`referrers: {include, exclude}` by artifact
//! type), and `require_referrers`: an image whose source lacks a required kind fails here.
//!
//! A referrer's kind is its `artifactType`, as the referrers API or the tag-schema index
//! (`<alg>-<hex>`) lists it. cosign's legacy tags (`<alg>-<hex>.sig`, `.att`, `.sbom`) carry
//! none; they are named `cosign:sig`, `cosign:att` and `cosign:sbom` in filters.

use std::collections::{BTreeSet, HashSet};

use ferry_distribution::Digest;
use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::Referrer;
use ferry_distribution::reference::Tag;
use ferry_distribution::{Operation, media};

use crate::plan::ImagePlan;
use crate::prepare::source::Wanted;
use crate::source::Source;
use ferry_config::Mapping;

pub(crate) use ferry_config::COSIGN_TAGS;

/// What the lookup found for a mapping's images.
#[derive(Debug, Default)]
pub struct Referrers {
    /// Referrer tags to copy by tag (the tag-schema index unfiltered, cosign's tags), each
    /// with the subject it belongs to.
    pub by_tag: Vec<(Digest, Wanted)>,
    /// Referrers to copy by digest, each naming its subject (from the referrers API, or the
    /// entries of a tag-schema index a filter chose from).
    pub by_digest: Vec<ImagePlan>,
    /// Images that fail `require_referrers`, by source digest, with the error.
    pub refused: Vec<(Digest, Error)>,
}

/// Where the source's tags are known from.
#[derive(Clone, Copy)]
pub struct Listing<'a> {
    /// Whether the source was listed (otherwise each candidate tag is probed with a HEAD).
    pub listed: bool,
    /// The tags listed.
    pub tags: &'a HashSet<&'a str>,
}

/// Looks up the referrers of `images` (the selected images, not referrers themselves):
/// those to copy when `mapping.referrers`, after its filter, and the images that lack a kind
/// `mapping.require_referrers` names.
pub(crate) async fn find(
    mapping: &Mapping,
    source: &Source,
    images: &[ImagePlan],
    listing: Listing<'_>,
    on_some_target: &(dyn Fn(&str) -> bool + Sync),
    believed: &(dyn Fn(&ImagePlan) -> bool + Sync),
) -> Result<Referrers, Error> {
    let filter = &mapping.referrer_filter;
    let copying = mapping.referrers;
    let requiring = !mapping.require_referrers.is_empty();
    let mut out = Referrers::default();
    let chosen = |out: &Referrers, tag: &str| {
        images.iter().any(|i| i.tag.as_deref() == Some(tag))
            || out.by_tag.iter().any(|(_, w)| w.reference == tag)
    };
    let mut known: HashSet<Digest> = images.iter().map(|i| i.source_digest.clone()).collect();
    for image in images {
        let subject = &image.source_digest;
        let mut kinds: BTreeSet<String> = BTreeSet::new();
        let base = subject.fallback_tag();
        let exists = |tag: String| async move {
            if listing.listed {
                Ok::<_, Error>(listing.tags.contains(tag.as_str()).then_some(tag))
            } else {
                Ok(source.head_manifest(&tag).await?.map(|_| tag))
            }
        };
        // The tag-schema index: copied as a tag when nothing filters it, else read for its
        // entries' kinds (and, with a filter, its chosen entries copied by digest).
        if !chosen(&out, &base)
            && let Some(tag) = exists(base.clone()).await?
            && let Ok(tag) = Tag::parse(&tag)
        {
            if copying && filter.is_all() {
                out.by_tag.push((
                    subject.clone(),
                    Wanted {
                        compare: on_some_target(tag.as_str()),
                        reference: tag.to_string(),
                        tag: Some(tag.clone()),
                    },
                ));
            }
            if requiring || !filter.is_all() {
                for r in index_entries(source, tag.as_str()).await? {
                    if let Some(kind) = &r.artifact_type {
                        kinds.insert(kind.clone());
                    }
                    if copying && !filter.is_all() && filter.admits(r.artifact_type.as_deref()) {
                        take(&mut out, &mut known, image, r);
                    }
                }
            }
        }
        for (suffix, kind) in COSIGN_TAGS {
            let tag = format!("{base}{suffix}");
            if chosen(&out, &tag) {
                kinds.insert(kind.to_owned());
                continue;
            }
            // A tag the listing or a HEAD found is valid (a sha512 digest's tag is too long to
            // be, and is found by neither).
            let wanted = (copying && filter.admits(Some(kind))) || requiring;
            if wanted
                && let Some(tag) = exists(tag).await?
                && let Ok(tag) = Tag::parse(&tag)
            {
                kinds.insert(kind.to_owned());
                if copying && filter.admits(Some(kind)) {
                    out.by_tag.push((
                        subject.clone(),
                        Wanted {
                            compare: on_some_target(tag.as_str()),
                            reference: tag.to_string(),
                            tag: Some(tag),
                        },
                    ));
                }
            }
        }
        // The referrers API, where the source serves it (learned once per registry). An image
        // rewritten by a platform filter (or that may be, `platforms_keep_digest`) has no
        // referrers of its own to copy.
        let own = image.digest == image.source_digest && image.fallback_digest.is_none();
        // Not asked again for an image the tag cache vouches for on every target (its
        // referrers went with it when it was confirmed; a new one is found once the TTL is
        // over), unless a required kind must be checked.
        if (copying && own && !believed(image)) || requiring {
            for r in source.list_referrers(subject).await?.unwrap_or_default() {
                if let Some(kind) = &r.artifact_type {
                    kinds.insert(kind.clone());
                }
                if copying && own && filter.admits(r.artifact_type.as_deref()) {
                    take(&mut out, &mut known, image, r);
                }
            }
        }
        let lacking: Vec<&str> = mapping
            .require_referrers
            .iter()
            .filter(|k| !kinds.contains(*k))
            .map(String::as_str)
            .collect();
        if !lacking.is_empty() {
            let has = if kinds.is_empty() {
                "none".to_owned()
            } else {
                kinds.iter().cloned().collect::<Vec<_>>().join(", ")
            };
            let message = format!(
                "require_referrers: {} ({subject}) has no referrer of type {} on the source \
                 (it has: {has}); nothing is copied for it",
                image.name(),
                lacking.join(", ")
            );
            out.refused.push((
                subject.clone(),
                source.error(Operation::ReferrersList, ErrorKind::Refused(message)),
            ));
        }
    }
    Ok(out)
}

fn take(out: &mut Referrers, known: &mut HashSet<Digest>, image: &ImagePlan, r: Referrer) {
    if known.insert(r.digest.clone()) {
        out.by_digest.push(ImagePlan {
            tag: None,
            digest: r.digest.clone(),
            retagged_from: None,
            fallback_digest: None,
            source_digest: r.digest,
            subject: Some(image.source_digest.clone()),
            media_type: r.media_type,
            root: None,
            targets: Vec::new(),
        });
    }
}

/// The entries of the tag-schema index under `tag` (none when it is not an index).
pub(crate) async fn index_entries(source: &Source, tag: &str) -> Result<Vec<Referrer>, Error> {
    #[derive(serde::Deserialize)]
    struct Index {
        #[serde(default)]
        manifests: Vec<Referrer>,
    }
    let Some(index) = source.find_manifest(tag).await? else {
        return Ok(Vec::new());
    };
    if !media::is_index(&index.media_type) {
        return Ok(Vec::new());
    }
    serde_json::from_slice::<Index>(&index.bytes)
        .map(|i| i.manifests)
        .map_err(|e| {
            source.error(
                Operation::ManifestGet,
                ErrorKind::InvalidResponse(format!(
                    "the referrers index {tag} is not an index: {e}"
                )),
            )
        })
}
