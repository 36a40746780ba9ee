//! The engine's log line per (image, target) as each finishes (`ferry::image`, info): what a
//! `--log-format json` consumer follows while the run goes on.

use super::{TargetOutcome, Work};
use crate::error::SyncError;

/// One log line per (image, target) as it finishes, while the run goes on (`ferry::image`,
/// info): what a `--log-format json` consumer follows. Never a secret: errors name no credential.
pub(super) fn log_image(w: &Work, outcomes: &[TargetOutcome]) {
    for (t, outcome) in w.targets.iter().zip(outcomes) {
        match outcome {
            Ok(_) => tracing::info!(
                target: "ferry::image",
                mapping = w.mapping,
                source = %w.source_name,
                image = %w.image.name(),
                digest = %w.image.digest,
                destination = %t.target,
                "synced"
            ),
            Err(SyncError::Interrupted) => tracing::info!(
                target: "ferry::image",
                mapping = w.mapping,
                source = %w.source_name,
                image = %w.image.name(),
                destination = %t.target,
                "interrupted"
            ),
            Err(e) => tracing::info!(
                target: "ferry::image",
                mapping = w.mapping,
                source = %w.source_name,
                image = %w.image.name(),
                destination = %t.target,
                error = %e,
                "failed"
            ),
        }
    }
}
