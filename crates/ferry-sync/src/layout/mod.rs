//! OCI image-layout directories as targets: reading `index.json` to learn which tags a layout
//! already holds (by `org.opencontainers.image.ref.name`), for the prepare phase.

use std::path::Path;

use ferry_distribution::Digest;

use crate::plan::{ImagePlan, TargetState};

/// The annotation an image layout's index uses for a tag.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

#[derive(serde::Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<Entry>,
}

#[derive(serde::Deserialize)]
struct Entry {
    digest: String,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

/// The (tag, digest) pairs a layout's `index.json` lists; empty when there is no layout yet.
pub fn read_tags(dir: &Path) -> Vec<(Option<String>, Digest)> {
    let Ok(text) = std::fs::read(dir.join("index.json")) else {
        return Vec::new();
    };
    let Ok(index) = serde_json::from_slice::<Index>(&text) else {
        return Vec::new();
    };
    index
        .manifests
        .into_iter()
        .filter_map(|e| {
            let d = Digest::parse(&e.digest).ok()?;
            Some((e.annotations.get(REF_NAME).cloned(), d))
        })
        .collect()
}

/// The state of each image in the layout at `dir`.
pub fn target_states(dir: &Path, images: &[ImagePlan]) -> Vec<TargetState> {
    if !dir.join("index.json").exists() {
        return vec![TargetState::NewRepository; images.len()];
    }
    let held = read_tags(dir);
    images
        .iter()
        .map(|image| {
            let found = held.iter().find(|(tag, digest)| match &image.tag {
                Some(t) => tag.as_deref() == Some(t.as_str()),
                None => *digest == image.digest,
            });
            match found {
                None => TargetState::Missing,
                Some((_, d)) if *d == image.digest && dir.join(blob_path(d)).exists() => {
                    TargetState::UpToDate
                }
                Some((_, d)) if *d == image.digest => TargetState::Missing,
                Some((_, d)) => TargetState::Stale { current: d.clone() },
            }
        })
        .collect()
}

/// `blobs/<alg>/<hex>` inside a layout.
pub fn blob_path(digest: &Digest) -> std::path::PathBuf {
    Path::new("blobs")
        .join(digest.algorithm().name())
        .join(digest.hex())
}
