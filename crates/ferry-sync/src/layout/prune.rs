//! Pruning inside an image layout: a tag leaves `index.json` (rewritten atomically), then the
//! blobs no remaining entry reaches are deleted, and nothing at all when the walk is unsure.

use std::collections::HashSet;
use std::path::Path;

use ferry_distribution::Digest;

use super::{REF_NAME, blob_path, read_index, tag_of_ref_name, write_atomic};

/// Deeper than this, an index of indexes is not walked (and nothing is collected).
const MAX_DEPTH: usize = 8;

/// What a garbage collection freed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Collected {
    pub blobs: u64,
    pub bytes: u64,
}

/// Removes every index entry tagged `tag`; `false` when none was. Blobs stay until
/// [`collect_garbage`].
pub async fn remove_tag(dir: &Path, tag: &str) -> Result<bool, String> {
    let path = dir.join("index.json");
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut index: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} does not parse: {e}", path.display()))?;
    let manifests = index
        .get_mut("manifests")
        .and_then(|m| m.as_array_mut())
        .ok_or_else(|| format!("{} has no manifests array", path.display()))?;
    let pointer = format!("/annotations/{}", REF_NAME.replace('/', "~1"));
    let before = manifests.len();
    manifests.retain(|m| {
        m.pointer(&pointer)
            .and_then(|v| v.as_str())
            .and_then(tag_of_ref_name)
            .as_deref()
            != Some(tag)
    });
    if manifests.len() == before {
        return Ok(false);
    }
    let bytes = serde_json::to_vec_pretty(&index).map_err(|e| e.to_string())?;
    write_atomic(&path, &bytes)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(true)
}

/// Deletes every blob that no entry of `index.json` reaches (through indexes, manifests,
/// configs and layers). When any reachable manifest is missing or does not parse, nothing is
/// deleted: an unread manifest could reference any blob. Temporary files are left alone.
pub async fn collect_garbage(dir: &Path) -> Result<Collected, String> {
    let entries = read_index(dir)?;
    let mut reachable: HashSet<Digest> = HashSet::new();
    let mut pending: Vec<(Digest, usize)> = entries.into_iter().map(|e| (e.digest, 0)).collect();
    while let Some((digest, depth)) = pending.pop() {
        if !reachable.insert(digest.clone()) {
            continue;
        }
        if depth > MAX_DEPTH {
            return Err(format!("the index nests deeper than {MAX_DEPTH} levels"));
        }
        let path = dir.join(blob_path(&digest));
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|e| format!("manifest {digest} cannot be read ({e}): not collecting"))?;
        let refs = references(&bytes)
            .ok_or_else(|| format!("manifest {digest} does not parse: not collecting"))?;
        for (child, is_manifest) in refs {
            if is_manifest {
                pending.push((child, depth + 1));
            } else {
                reachable.insert(child);
            }
        }
    }
    let mut collected = Collected::default();
    let blobs = dir.join("blobs");
    let mut algorithms = match tokio::fs::read_dir(&blobs).await {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(collected),
        Err(e) => return Err(format!("{}: {e}", blobs.display())),
    };
    while let Some(alg) = algorithms.next_entry().await.map_err(|e| e.to_string())? {
        let Some(alg_name) = alg.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Ok(mut files) = tokio::fs::read_dir(alg.path()).await else {
            continue;
        };
        while let Some(file) = files.next_entry().await.map_err(|e| e.to_string())? {
            let Some(hex) = file.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            // Only files named by a digest; temporary `.partial` names never parse.
            let Ok(digest) = Digest::parse(&format!("{alg_name}:{hex}")) else {
                continue;
            };
            if reachable.contains(&digest) {
                continue;
            }
            let size = file.metadata().await.map(|m| m.len()).unwrap_or(0);
            tokio::fs::remove_file(file.path())
                .await
                .map_err(|e| format!("{}: {e}", file.path().display()))?;
            collected.blobs += 1;
            collected.bytes += size;
        }
    }
    Ok(collected)
}

/// The descriptors a manifest or index points at, each with whether it is a manifest itself;
/// `None` when the bytes are neither.
fn references(bytes: &[u8]) -> Option<Vec<(Digest, bool)>> {
    #[derive(serde::Deserialize)]
    struct Descriptor {
        digest: String,
    }
    #[derive(serde::Deserialize)]
    struct Shape {
        manifests: Option<Vec<Descriptor>>,
        config: Option<Descriptor>,
        layers: Option<Vec<Descriptor>>,
        blobs: Option<Vec<Descriptor>>,
    }
    let shape: Shape = serde_json::from_slice(bytes).ok()?;
    let digest = |d: &Descriptor| Digest::parse(&d.digest).ok();
    let mut out = Vec::new();
    if let Some(children) = &shape.manifests {
        for c in children {
            out.push((digest(c)?, true));
        }
        return Some(out);
    }
    if shape.config.is_none() && shape.layers.is_none() && shape.blobs.is_none() {
        return None;
    }
    for d in shape
        .config
        .iter()
        .chain(shape.layers.iter().flatten())
        .chain(shape.blobs.iter().flatten())
    {
        out.push((digest(d)?, false));
    }
    Some(out)
}
