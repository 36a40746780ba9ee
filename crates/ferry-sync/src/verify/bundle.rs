//! `ferry verify --bundle`: whether a site holds every image a bundle describes (its record's,
//! or its `index.json`'s) and every image of its `--since` bases, read-only, as verify's report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ferry_config::{Origin, Target};
use ferry_distribution::Digest;
use ferry_store::archive::Stores;
use ferry_store::bundle::BundleRecord;

use super::content::ContentChecker;
use super::report::{Finding, MappingVerify, Missing, TargetVerify, VerifyReport};
use crate::import::{ImportError, ImportImage, images, place, split_prefix};
use crate::registries::Registries;

/// What `ferry verify --bundle` checks.
#[derive(Debug, Clone)]
pub struct BundleVerify {
    /// The bundle's tar.
    pub bundle: PathBuf,
    /// Earlier bundles (their tar or kept record) whose images the site must hold too.
    pub since: Vec<PathBuf>,
    /// Where the images went, as `ferry import --target-prefix` put them.
    pub prefix: Option<String>,
    /// Check every blob too.
    pub deep: bool,
    /// Keys the bundle must be signed under, as for `ferry import` (none: not required).
    pub keys: Vec<crate::bundle_trust::PublicKey>,
}

/// Every image of `spec`'s bundle and bases checked on the registries their names (or the
/// prefix) give: the tag by digest (missing, drifted), an index's children, with `deep` each
/// blob. One report mapping per bundle (the bundle first, then each base in the order given),
/// one target per repository. An image a newer bundle names again is checked once, as the
/// newest names it. Sends only GET and HEAD.
pub(crate) async fn run(
    spec: &BundleVerify,
    registries: &Registries,
    stores: &Stores,
) -> Result<VerifyReport, ImportError> {
    let origin = Origin::OciArchive {
        path: spec.bundle.clone(),
        reference: None,
    };
    let reader = stores.read(&origin).await.map_err(ImportError::Open)?;
    // Before any request: a bundle the keys refuse is not a description of anything.
    let authenticity = crate::bundle_trust::authenticate(
        crate::bundle_trust::RecordParts::of(&reader),
        &spec.keys,
    )
    .map_err(ImportError::Untrusted)?;
    let (own, _unplaced) = images(&reader, spec.prefix.as_deref()).map_err(ImportError::Prefix)?;
    let prefix = match &spec.prefix {
        Some(p) => Some(split_prefix(p).map_err(ImportError::Prefix)?),
        None => None,
    };
    let mut groups: Vec<(String, Vec<ImportImage>)> = vec![(shown(&spec.bundle), own)];
    for path in &spec.since {
        let p = path.clone();
        let record: BundleRecord =
            tokio::task::spawn_blocking(move || ferry_store::bundle::export::read_since(&p))
                .await
                .map_err(|e| ImportError::Bases(e.to_string()))?
                .map_err(ImportError::Bases)?;
        let placed = record
            .images
            .iter()
            .filter_map(|i| {
                let d = Digest::parse(&i.digest).ok()?;
                place(&i.reference, &d, prefix.as_ref()).ok()
            })
            .collect();
        groups.push((shown(path), placed));
    }
    let checker = ContentChecker::new(registries, spec.deep);
    let mut seen = BTreeSet::new();
    let mut report = VerifyReport {
        authenticity: Some(authenticity),
        deep: spec.deep,
        ..VerifyReport::default()
    };
    for (index, (name, group)) in groups.into_iter().enumerate() {
        let mut targets: BTreeMap<String, TargetVerify> = BTreeMap::new();
        for image in group {
            if !seen.insert(image.target()) {
                continue;
            }
            let repo = format!("{}/{}", image.registry, image.repository);
            let entry = targets.entry(repo.clone()).or_insert_with(|| TargetVerify {
                target: repo,
                ..TargetVerify::default()
            });
            entry.checked += 1;
            entry
                .findings
                .extend(check(&image, registries, &checker).await);
        }
        report.mappings.push(MappingVerify {
            index,
            source: name,
            findings: Vec::new(),
            targets: targets.into_values().collect(),
        });
    }
    report.count(checker.children_checked(), checker.blobs_checked());
    Ok(report)
}

/// The file name a bundle is shown by.
fn shown(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// What is wrong with one image on its target.
async fn check(
    image: &ImportImage,
    registries: &Registries,
    checker: &ContentChecker<'_>,
) -> Vec<Finding> {
    let name = match &image.tag {
        Some(t) => t.as_str().to_owned(),
        None => image.digest.to_string(),
    };
    let client = match registries.client(&image.registry).await {
        Ok(c) => c,
        Err(e) => return vec![Finding::unreadable(image.target(), &e)],
    };
    let found = match client.head_manifest(&image.repository, &name).await {
        Ok(f) => f,
        Err(e) => return vec![Finding::unreadable(image.target(), &e)],
    };
    match found {
        None => vec![Finding::Missing {
            kind: Missing::Tag,
            name,
            digest: image.digest.to_string(),
            of: None,
            detail: None,
        }],
        Some(info) if info.digest != image.digest => vec![Finding::Drifted {
            tag: name,
            expected: image.digest.to_string(),
            found: info.digest.to_string(),
        }],
        Some(_) => {
            let target = Target::Registry {
                registry: image.registry.clone(),
                repository: image.repository.clone(),
            };
            checker.under_digest(&target, &image.digest, &name).await
        }
    }
}
