//! The report rows of images `signatures:` kept out of a mapping: a refused image fails on every
//! target, a held one (`min_age`) is held there; neither was sent anywhere.

use crate::plan::ResolvedMapping;
use crate::report::{ImageReport, ImageStatus};

/// One row per target for each refused and each held image of `resolved`.
pub(super) fn reports(
    mapping: usize,
    source: &str,
    resolved: &ResolvedMapping,
) -> Vec<ImageReport> {
    let mut reports = Vec::new();
    for r in &resolved.signature_refused {
        for t in &resolved.targets {
            reports.push(ImageReport {
                mapping,
                source: source.to_owned(),
                image: r.image.clone(),
                digest: r.digest.clone(),
                target: t.to_string(),
                status: ImageStatus::Failed {
                    error: crate::error::SyncError::Signature {
                        source_name: resolved.origin.to_string(),
                        refusal: r.clone(),
                    },
                },
                pushed_as: None,
                kept_digest_refused: None,
            });
        }
    }
    for h in &resolved.signature_held {
        for t in &resolved.targets {
            reports.push(ImageReport {
                mapping,
                source: source.to_owned(),
                image: h.image.clone(),
                digest: h.digest.clone(),
                target: t.to_string(),
                status: ImageStatus::Held {
                    signed_at: h.signed_at,
                    mirrorable_at: h.mirrorable_at,
                },
                pushed_as: None,
                kept_digest_refused: None,
            });
        }
    }
    reports
}
