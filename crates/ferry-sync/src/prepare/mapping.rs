//! Resolves one mapping: lists the source's tags (all pages, only when the filter or pruning
//! needs them) and each target's once, filters, resolves the chosen images (see `source`), finds
//! their referrers, and states every target.

use std::collections::HashSet;

use ferry_distribution::error::Error;
use ferry_distribution::reference::Tag;

use crate::plan::{ImagePlan, RejectedName, ResolvedMapping, TargetPlan, UnfetchedTag};
use crate::prepare::PrepareOptions;
use crate::prepare::referrers::{self, Listing};
use crate::prepare::signatures;
use crate::prepare::source::{Wanted, resolve_images};
use crate::registries::Registries;
use crate::source::Source;
use ferry_config::Mapping;

/// Resolves `mapping` against its source and targets.
pub(crate) async fn resolve_mapping(
    mapping: &Mapping,
    registries: &Registries,
    options: &PrepareOptions,
    waiting_on: &(dyn Fn(&str) + Send + Sync),
) -> Result<ResolvedMapping, Error> {
    if let Some(e) = options.refused.get(&mapping.index) {
        return Err(e.clone());
    }
    let source = Source::open(&mapping.origin, registries, &options.stores).await?;

    // Only `exact` tags and digests, and no pruning: each is resolved by its own HEAD/GET, and
    // the source is not listed (thousands of tags to learn about two; or a registry or token
    // that does not list at all). A missing exact tag is found missing by its own request.
    let listed = mapping.prune || !mapping.tags.names_its_tags();
    let (tags, rejected_names) = if listed {
        RejectedName::split(source.list_tags().await?)
    } else {
        (Vec::new(), Vec::new())
    };
    let mut selection = if listed {
        mapping.tags.select(&tags)
    } else {
        mapping.tags.select(mapping.tags.exact_tags())
    };
    if selection.selected.is_empty() && mapping.digests.is_empty() {
        tracing::warn!(mapping = mapping.index, source = %mapping.source, "the tag filter selected nothing");
    }

    // Each target is listed once, before the source is read: a tag that no target has needs
    // no HEAD on the source, its manifest is fetched whole (the engine needs it anyway).
    let mut listings = Vec::new();
    for target in &mapping.targets {
        waiting_on(&target.to_string());
        // An archive is not read back by a verify: it fails the mapping, saying so.
        if options.audit && matches!(target, ferry_config::Target::OciArchive { .. }) {
            return Err(Error::new(
                target.to_string(),
                None,
                ferry_distribution::Operation::TagList,
                ferry_distribution::ErrorKind::Local(
                    "ferry verify does not read oci-archive targets (ferry import checks a bundle as it reads it)".to_owned(),
                ),
            ));
        }
        listings.push(options.listing(target, registries, mapping.prune).await?);
    }
    // The source's manifests next.
    waiting_on(&mapping.source);
    let on_some_target = |tag: &str| listings.iter().any(|l| l.has_tag(tag));
    // A verify (`options.audit`) compares every tag by a HEAD: it never needs the bytes.
    let compare = |tag: &str| options.audit || on_some_target(tag);

    // Immutable tags (`mapping.immutable`) are never compared: one a target's listing names is
    // up to date there. One that every target names needs nothing from the source either: it
    // is set aside, unresolved (no digest is asked for), and its referrers are not looked up.
    // Referrer tags never count as immutable: cosign appends to a `.sig` tag.
    let immutable: HashSet<Tag> = selection
        .selected
        .iter()
        .filter(|t| mapping.immutable.matches(t) && !crate::prune::is_referrer_tag(t))
        .cloned()
        .collect();
    let (held_immutable, to_resolve): (Vec<Tag>, Vec<Tag>) = selection
        .selected
        .iter()
        .cloned()
        .partition(|t| immutable.contains(t) && listings.iter().all(|l| l.has_tag(t)));

    // What to copy: the selected tags, then the pinned digests. An immutable tag only some
    // targets hold is fetched whole: another target lacks it, so the engine needs its bytes.
    let mut wanted: Vec<Wanted> = to_resolve
        .into_iter()
        .map(|t| Wanted {
            compare: compare(&t) && (options.audit || !immutable.contains(&t)),
            reference: t.to_string(),
            tag: Some(t),
        })
        .collect();
    for d in &mapping.digests {
        wanted.push(Wanted {
            tag: None,
            reference: d.to_string(),
            compare: true,
        });
    }
    let platforms = mapping.platforms.as_slice();
    let keep_digest = mapping.platforms_keep_digest;
    let (mut images, mut unfetched) =
        resolve_images(&source, wanted, platforms, keep_digest, options).await?;
    if !listed {
        // Not listed: an exact tag the source lacks is missing (as with a listing), not a
        // listed tag that failed.
        selection.missing_exact = selection
            .selected
            .iter()
            .filter(|t| !images.iter().any(|i| i.tag.as_ref() == Some(*t)))
            .filter(|t| !held_immutable.contains(t))
            .map(|t| t.to_string())
            .collect();
        unfetched.clear();
    }
    // `ferry copy src:a dst:b`: the one image goes to the targets under the target's tag; the
    // source was read under its own (a digest pin gets the tag too).
    if let Some(to) = &mapping.retag {
        for image in &mut images {
            image.retagged_from = Some(image.name());
            image.tag = Some(to.clone());
        }
    }

    // `signatures:`: an image is copied only when a signature for its source digest verifies
    // (not in a verify, which reads the targets; `ferry verify --signatures` checks those).
    let mut gated = signatures::Gated::default();
    if let Some(policy) = mapping.signatures.as_ref().filter(|_| !options.audit) {
        let in_listing: HashSet<&str> = tags.iter().map(Tag::as_str).collect();
        let listing = Listing {
            listed,
            tags: &in_listing,
        };
        let now = signatures::now();
        let seen = options.first_seen.as_ref();
        gated = signatures::gate(policy, &source, &mut images, listing, now, seen).await?;
    }

    // Signatures, SBOMs and attestations: the referrers tag schema (`sha256-<hex>`, an index of
    // the referrers), cosign's `sha256-<hex>.sig/.att/.sbom`, and the referrers API. Tags are
    // found in the listing already fetched (no probe per image); without a listing, each
    // candidate tag is probed with a HEAD (HEADs are cheap and not metered by Docker Hub).
    // With a referrer filter, selected referrer tags travel only through it, with their image.
    let mut filtered_out = selection.filtered_out;
    let mut refused: Vec<UnfetchedTag> = Vec::new();
    if !mapping.referrer_filter.is_all() {
        images.retain(|i| {
            !i.tag
                .as_ref()
                .is_some_and(|t| crate::prune::is_referrer_tag(t))
        });
    }
    if mapping.referrers || !mapping.require_referrers.is_empty() {
        let in_listing: HashSet<&str> = tags.iter().map(Tag::as_str).collect();
        let subjects: Vec<ImagePlan> = images
            .iter()
            .filter(|i| {
                !i.tag
                    .as_ref()
                    .is_some_and(|t| crate::prune::is_referrer_tag(t))
            })
            .cloned()
            .collect();
        let listing = Listing {
            listed,
            tags: &in_listing,
        };
        // Vouched for on every target by the tag cache (never in a verify).
        let believed = |image: &ImagePlan| listings.iter().all(|l| l.believed(image, options));
        let found =
            referrers::find(mapping, &source, &subjects, listing, &compare, &believed).await?;
        // An image missing a required referrer is not copied, nor are its referrers.
        let failed: HashSet<_> = found.refused.iter().map(|(d, _)| d.clone()).collect();
        for (digest, error) in found.refused {
            for image in images.iter().filter(|i| i.source_digest == digest) {
                refused.push(UnfetchedTag {
                    tag: image.name(),
                    error: error.clone(),
                    targets: mapping.targets.clone(),
                });
            }
        }
        images.retain(|i| !failed.contains(&i.source_digest));
        let extra: Vec<Wanted> = found
            .by_tag
            .into_iter()
            .filter(|(subject, _)| !failed.contains(subject))
            .map(|(_, w)| w)
            .collect();
        filtered_out.retain(|(t, _)| !extra.iter().any(|w| w.tag.as_ref() == Some(t)));
        // A `.sig` manifest the signature check read is not read again.
        let (extra, read) = signatures::already_fetched(extra, &gated.fetched);
        images.extend(read);
        // Referrers keep their bytes: a platform filter never applies to them.
        let (by_tag, gone) = resolve_images(&source, extra, &[], false, options).await?;
        images.extend(by_tag);
        unfetched.extend(gone);
        images.extend(
            found
                .by_digest
                .into_iter()
                .filter(|r| !r.subject.as_ref().is_some_and(|s| failed.contains(s))),
        );
    }

    // The signatures that verified travel with their image even when the mapping copies no
    // referrers (`referrers: false`).
    if !mapping.referrers && !gated.verified.is_empty() {
        let (mut by_tag, by_digest) =
            signatures::carriers(std::mem::take(&mut gated.verified), &compare);
        by_tag.retain(|w| !images.iter().any(|i| i.tag == w.tag));
        let (by_tag, read) = signatures::already_fetched(by_tag, &gated.fetched);
        images.extend(read);
        let (found, gone) = resolve_images(&source, by_tag, &[], false, options).await?;
        images.extend(found);
        unfetched.extend(gone);
        images.extend(by_digest);
    }

    // Pruning (crate::prune) reuses each target's listing instead of listing again;
    // it is kept only for a mapping that prunes.
    let mut target_tags = Vec::new();
    for (target, listing) in mapping.targets.iter().zip(&listings) {
        let states = listing.states(&images, &immutable, options).await?;
        if mapping.prune || options.audit {
            target_tags.push((target.clone(), listing.listed_tags()));
        }
        for (image, state) in images.iter_mut().zip(states) {
            let state = match &options.repair {
                Some(repair) => repair.state(mapping.index, target, image, state),
                None => state,
            };
            image.targets.push(TargetPlan {
                target: target.clone(),
                state,
            });
        }
    }

    Ok(ResolvedMapping {
        origin: mapping.origin.clone(),
        targets: mapping.targets.clone(),
        images,
        held_immutable,
        filtered_out,
        missing_exact: selection.missing_exact,
        rejected_names,
        unfetched: unfetched
            .into_iter()
            .map(|(tag, error)| UnfetchedTag {
                tag: tag.to_string(),
                error,
                targets: mapping.targets.clone(),
            })
            .chain(refused)
            .collect(),
        platforms: mapping.platforms.clone(),
        referrers: mapping.referrers,
        target_tags,
        expanded: None,
        signature_refused: gated.refused,
        signature_held: gated.held,
        concurrency: mapping.concurrency,
    })
}
