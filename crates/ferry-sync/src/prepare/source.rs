//! What a mapping copies from its source: each wanted tag or pin resolved to a digest. A tag some
//! target already has is HEADed (to compare digests, and HEADs are cheap); a tag no target has is
//! fetched whole at once, since the engine needs its bytes anyway.

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::Manifest;
use ferry_distribution::reference::Tag;
use ferry_distribution::{Operation, media};

use crate::in_window::in_window;
use crate::plan::ImagePlan;
use crate::prepare::PrepareOptions;
use crate::source::Source;
use ferry_config::platform::Platform;

/// A tag (or digest pin) to resolve, and whether its digest only is needed.
#[derive(Debug, Clone)]
pub struct Wanted {
    /// The tag the image is taken under; `None` for a pinned digest.
    pub tag: Option<Tag>,
    /// What to ask the source for: the tag, or the digest.
    pub reference: String,
    /// Some target holds this tag: a HEAD tells whether it is up to date.
    pub compare: bool,
}

/// Resolves every wanted reference. A listed tag whose manifest is not found comes back in the
/// second list with a 404 error (never dropped: the listing named it, so the source is not
/// settled on it); a pinned digest the source lacks is skipped. With `keep_digest`, an index a
/// platform filter rewrites keeps its own digest as the target's, the filtered one as fallback.
pub(crate) async fn resolve_images(
    source: &Source,
    wanted: Vec<Wanted>,
    platforms: &[Platform],
    keep_digest: bool,
    options: &PrepareOptions,
) -> Result<(Vec<ImagePlan>, Vec<(Tag, Error)>), Error> {
    let resolved: Vec<Result<Resolved, Error>> =
        in_window(wanted, options.heads_per_mapping, |w| {
            resolve_one(source, w, platforms, keep_digest)
        })
        .await;
    let mut images = Vec::with_capacity(resolved.len());
    let mut unfetched = Vec::new();
    for r in resolved {
        match r? {
            Resolved::Image(image) => images.push(*image),
            Resolved::Missing { tag: Some(tag), op } => {
                let kind = match source {
                    Source::Registry { .. } => ErrorKind::Status {
                        status: 404,
                        code: Some("MANIFEST_UNKNOWN".into()),
                        message: Some(format!(
                            "the tag list names {tag}, but its manifest is not found"
                        )),
                    },
                    Source::Store(_) => ErrorKind::Local(format!(
                        "index.json names {tag}, but its manifest is not found"
                    )),
                };
                unfetched.push((tag, source.error(op, kind)));
            }
            Resolved::Missing { tag: None, .. } => {}
        }
    }
    Ok((images, unfetched))
}

enum Resolved {
    Image(Box<ImagePlan>),
    /// The source has nothing under the reference (found by `op`).
    Missing {
        tag: Option<Tag>,
        op: Operation,
    },
}

async fn resolve_one(
    source: &Source,
    w: Wanted,
    platforms: &[Platform],
    keep_digest: bool,
) -> Result<Resolved, Error> {
    let filtering = !platforms.is_empty();
    // A HEAD suffices when only the digest matters and no platform filter needs the bytes.
    let (digest, media_type, root) = if w.compare && !filtering {
        match source.head_manifest(&w.reference).await? {
            Some(info) => (info.digest, info.media_type, None),
            None => {
                return Ok(Resolved::Missing {
                    tag: w.tag,
                    op: Operation::ManifestHead,
                });
            }
        }
    } else {
        match source.find_manifest(&w.reference).await? {
            Some(m) => (m.digest.clone(), m.media_type.clone(), Some(m)),
            None => {
                return Ok(Resolved::Missing {
                    tag: w.tag,
                    op: Operation::ManifestGet,
                });
            }
        }
    };
    // A platform filter rewrites an index: the target must hold the rewritten one, unless the
    // mapping keeps the digest (then the rewritten one is the fallback).
    let mut target_digest = digest.clone();
    let mut fallback_digest = None;
    if let Some(m) = root.as_ref().filter(|m| media::is_index(&m.media_type)) {
        let root = target_root(source, m, platforms, keep_digest)?;
        target_digest = root.digest().clone();
        fallback_digest = root.fallback_digest().cloned();
    }
    Ok(Resolved::Image(Box::new(ImagePlan {
        tag: w.tag,
        digest: target_digest,
        retagged_from: None,
        fallback_digest,
        source_digest: digest,
        subject: None,
        media_type,
        root,
        targets: Vec::new(),
    })))
}

fn target_root(
    source: &Source,
    index: &Manifest,
    platforms: &[Platform],
    keep_digest: bool,
) -> Result<ferry_config::platform::TargetRoot, Error> {
    ferry_config::platform::target_root(index.clone(), platforms, keep_digest)
        .map_err(|e| source.error(Operation::ManifestGet, ErrorKind::InvalidResponse(e)))
}
