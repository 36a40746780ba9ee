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
    let rows = |image: &str, digest: &str, status: ImageStatus| {
        resolved
            .targets
            .iter()
            .map(|t| ImageReport {
                mapping,
                source: source.to_owned(),
                image: image.to_owned(),
                digest: digest.to_owned(),
                target: t.to_string(),
                status: status.clone(),
                pushed_as: None,
                kept_digest_refused: None,
                bytes_resumed: 0,
                in_base: None,
            })
            .collect::<Vec<_>>()
    };
    let mut reports = Vec::new();
    for r in &resolved.signature_refused {
        let error = crate::error::SyncError::Signature {
            source_name: resolved.origin.to_string(),
            refusal: r.clone(),
        };
        reports.extend(rows(&r.image, &r.digest, ImageStatus::Failed { error }));
    }
    for h in &resolved.signature_held {
        let held = ImageStatus::Held {
            signed_at: h.signed_at,
            mirrorable_at: h.mirrorable_at,
        };
        reports.extend(rows(&h.image, &h.digest, held));
    }
    reports
}
