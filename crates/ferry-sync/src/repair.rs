//! `ferry sync --repair`: a deep verify first (the verify's own checks, `verify::run`), then a
//! sync that writes again every image a target lacks a blob or child manifest of.
//!
//! The verify finds what a manifest comparison cannot: a tag whose digest matches while a blob
//! or child under it is gone (deleted from the registry's storage) or, in a layout, holds other
//! bytes (the latter is reported, not repaired: the engine skips a blob whose file is there).
//! Each such (mapping, target, image) is planned as stale instead of up to date, so the
//! engine HEADs its blobs (a missing one is streamed from the source and checked against its
//! digest, as any copy) and puts its manifests again. The report lists what was put back.

use std::collections::HashMap;

use serde::Serialize;

use crate::plan::TargetState;
use crate::verify::{Finding, Missing, VerifyReport};

/// What the deep verify found under images whose tag a target holds: by (mapping, target,
/// image name), the blobs and child manifests missing there.
#[derive(Debug, Default)]
pub(crate) struct Repairs {
    found: HashMap<(usize, String, String), Vec<String>>,
}

impl Repairs {
    /// The blobs and children `report` found missing under a held tag.
    pub(crate) fn of(report: &VerifyReport) -> Repairs {
        let mut found: HashMap<_, Vec<String>> = HashMap::new();
        for m in &report.mappings {
            for t in &m.targets {
                for f in &t.findings {
                    if let Finding::Missing {
                        kind: kind @ (Missing::Blob | Missing::Child),
                        name,
                        of: Some(image),
                        detail,
                        ..
                    } = f
                    {
                        let what = match (kind, detail) {
                            // A layout blob holding other bytes is there by the engine's skip
                            // rule (a file at its name): writing the image again would not
                            // replace it, so it is not claimed (verify goes on reporting it).
                            (Missing::Blob, Some(_)) => continue,
                            (Missing::Blob, None) => format!("blob {name}"),
                            (_, _) => format!("child manifest {name}"),
                        };
                        found
                            .entry((m.index, t.target.clone(), image.clone()))
                            .or_default()
                            .push(what);
                    }
                }
            }
        }
        Repairs { found }
    }

    /// Whether nothing needs repairing.
    pub(crate) fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// The state to plan for `image` on `target` of mapping `mapping`: stale (written again)
    /// where the verify found something missing under it, else `state` as it is.
    pub(crate) fn state(
        &self,
        mapping: usize,
        target: &ferry_config::Target,
        image: &crate::plan::ImagePlan,
        state: TargetState,
    ) -> TargetState {
        match state {
            TargetState::UpToDate
                if self
                    .found
                    .contains_key(&(mapping, target.to_string(), image.name())) =>
            {
                TargetState::Stale {
                    current: image.digest.clone(),
                }
            }
            other => other,
        }
    }

    /// What was put back: each image the verify found lacking that the sync then wrote.
    pub(crate) fn repaired(&self, report: &crate::report::SyncReport) -> Vec<Repaired> {
        let mut out: Vec<Repaired> = report
            .images
            .iter()
            .filter(|i| i.status == crate::report::ImageStatus::Synced)
            .filter_map(|i| {
                let missing = self
                    .found
                    .get(&(i.mapping, i.target.clone(), i.image.clone()))?;
                Some(Repaired {
                    mapping: i.mapping,
                    source: i.source.clone(),
                    image: i.image.clone(),
                    target: i.target.clone(),
                    put_back: missing.clone(),
                })
            })
            .collect();
        out.sort_by(|a, b| (a.mapping, &a.image, &a.target).cmp(&(b.mapping, &b.image, &b.target)));
        out
    }
}

/// One image `ferry sync --repair` wrote again on a target, and what it put back there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repaired {
    /// Position of the mapping in the config.
    pub mapping: usize,
    /// The mapping's source.
    pub source: String,
    /// The tag, or the digest of a pin.
    pub image: String,
    /// The target.
    pub target: String,
    /// What the deep verify found missing under it (`blob sha256:…`, `child manifest
    /// sha256:…`), now there again.
    pub put_back: Vec<String>,
}
