//! Pruning inside an image layout: a tag leaves `index.json` (rewritten atomically), then the
//! blobs no remaining entry reaches are deleted, and nothing at all when the walk is unsure.

use std::collections::HashSet;
use std::path::Path;

use ferry_distribution::Digest;

use super::{blob_path, read_index};

/// Deeper than this, an index of indexes is not walked (and nothing is collected).
const MAX_DEPTH: usize = 8;

/// What a garbage collection freed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Collected {
    /// Blob files deleted.
    pub blobs: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Removes every index entry whose `ref.name` is exactly `tag` (an entry naming a full reference
/// such as `a:v1` is not ferry's `v1`); `false` when none was. Done under the layout's index lock,
/// re-reading `index.json` inside it. Blobs stay until [`collect_garbage`].
pub async fn remove_tag(dir: &Path, tag: &str) -> Result<bool, String> {
    super::writer::update_index(dir, |manifests| {
        let before = manifests.len();
        manifests.retain(|m| super::writer::ref_name_of(m) != Some(tag));
        let removed = manifests.len() != before;
        (removed, removed)
    })
    .await
}

/// Deletes every blob that no entry of `index.json` reaches (through indexes, manifests,
/// configs and layers). When any reachable manifest is missing or does not parse, nothing is
/// deleted: an unread manifest could reference any blob. Temporary files are left alone.
///
/// Runs under the layout's collecting lock (exclusive against every writer, which holds it
/// shared from its first blob write until its index entry is in) and its index lock, each waited
/// for at most `wait`: so no blob it removes is one a writer has written and not yet indexed.
/// Symlinks are never followed: a symlinked `blobs` or `blobs/<alg>` is not walked, a manifest
/// that is a symlink stops the collection, and a symlink at a blob name is removed itself.
pub async fn collect_garbage(dir: &Path, wait: std::time::Duration) -> Result<Collected, String> {
    use super::lock::{LockKind, acquire};
    let _collecting = acquire(dir, LockKind::Collecting, wait)
        .await
        .map_err(|e| e.to_string())?;
    let _index = acquire(dir, LockKind::Index, wait)
        .await
        .map_err(|e| e.to_string())?;
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
        let bytes = read_manifest_no_follow(&dir.join(blob_path(&digest)))
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
    if crate::fsio::real_dir(&blobs).await.is_err() {
        // Missing, or not a directory of the layout: nothing here to collect.
        return Ok(collected);
    }
    let mut algorithms = tokio::fs::read_dir(&blobs)
        .await
        .map_err(|e| format!("{}: {e}", blobs.display()))?;
    while let Some(alg) = algorithms.next_entry().await.map_err(|e| e.to_string())? {
        let Some(alg_name) = alg.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        // `file_type` does not follow symlinks: a symlinked `blobs/<alg>` is never walked.
        if !alg.file_type().await.is_ok_and(|t| t.is_dir()) {
            continue;
        }
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
            // The entry's own size (a symlink's, not its target's); unlinking never follows.
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

/// A manifest's bytes, refusing a symlink at its name and anything larger than 4 MiB.
async fn read_manifest_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    const MAX_MANIFEST: u64 = 4 * 1024 * 1024;
    let mut options = tokio::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    let file = options.open(path).await?;
    if !file.metadata().await?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST + 1).read_to_end(&mut bytes).await?;
    if bytes.len() as u64 > MAX_MANIFEST {
        return Err(std::io::Error::other("larger than a manifest may be"));
    }
    Ok(bytes)
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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::layout::lock::{self, LockKind};

    /// A layout whose index lists `names` (all pointing at one empty manifest) and one blob
    /// nothing references; returns that blob's path.
    fn layout(dir: &Path, names: &[&str]) -> std::path::PathBuf {
        let manifest = br#"{"schemaVersion":2,"config":null,"layers":[]}"#;
        let m = Digest::of_bytes(ferry_distribution::digest::Algorithm::Sha256, manifest);
        let stray = Digest::of_bytes(ferry_distribution::digest::Algorithm::Sha256, b"stray");
        std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        std::fs::write(dir.join(blob_path(&m)), manifest).unwrap();
        std::fs::write(dir.join(blob_path(&stray)), b"stray").unwrap();
        let entries: Vec<serde_json::Value> = names
            .iter()
            .map(|n| {
                serde_json::json!({
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": m.to_string(),
                    "size": manifest.len(),
                    "annotations": { crate::layout::REF_NAME: n },
                })
            })
            .collect();
        let index = serde_json::json!({ "schemaVersion": 2, "manifests": entries });
        std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
        dir.join(blob_path(&stray))
    }

    fn names(dir: &Path) -> Vec<String> {
        read_index(dir)
            .unwrap()
            .into_iter()
            .filter_map(|e| e.ref_name)
            .collect()
    }

    /// Writes `bytes` as a blob of the layout at `dir`; its digest.
    fn put(dir: &Path, bytes: &[u8]) -> Digest {
        let d = Digest::of_bytes(ferry_distribution::digest::Algorithm::Sha256, bytes);
        std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        std::fs::write(dir.join(blob_path(&d)), bytes).unwrap();
        d
    }

    /// Points the layout's `index.json` at `digests`, untagged.
    fn index_of(dir: &Path, digests: &[&Digest]) {
        let entries: Vec<_> = digests
            .iter()
            .map(|d| serde_json::json!({ "digest": d.to_string() }))
            .collect();
        let index = serde_json::json!({ "schemaVersion": 2, "manifests": entries });
        std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
    }

    /// A manifest over `layer`, padded with spaces to `len` bytes (when it is shorter).
    fn manifest_over(layer: &Digest, len: usize) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "layers": [{ "digest": layer.to_string() }],
        }))
        .unwrap();
        bytes.resize(len.max(bytes.len()), b' ');
        bytes
    }

    #[tokio::test]
    async fn an_index_nested_to_the_depth_limit_is_walked_and_one_level_more_is_not() {
        for levels in [MAX_DEPTH, MAX_DEPTH + 1] {
            let dir = tempfile::tempdir().unwrap();
            let layer = put(dir.path(), b"the deepest layer");
            let stray = put(dir.path(), b"stray");
            // The image manifest sits `levels` indexes below the entry of index.json.
            let mut top = put(dir.path(), &manifest_over(&layer, 0));
            for _ in 0..levels {
                let index = serde_json::json!({
                    "schemaVersion": 2,
                    "manifests": [{ "digest": top.to_string() }],
                });
                top = put(dir.path(), index.to_string().as_bytes());
            }
            index_of(dir.path(), &[&top]);
            let collected = collect_garbage(dir.path(), Duration::from_secs(3)).await;
            let has = |d: &Digest| dir.path().join(blob_path(d)).exists();
            if levels == MAX_DEPTH {
                assert_eq!(collected.unwrap().blobs, 1, "levels {levels}");
                assert!(has(&layer) && !has(&stray));
            } else {
                let err = collected.unwrap_err();
                assert!(err.contains("deeper than 8 levels"), "{err}");
                assert!(
                    has(&layer) && has(&stray),
                    "a blob was removed though the walk stopped"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_manifest_of_4_mib_is_walked_and_one_byte_more_stops_the_collection() {
        const FOUR_MIB: usize = 4 * 1024 * 1024;
        for len in [FOUR_MIB, FOUR_MIB + 1] {
            let dir = tempfile::tempdir().unwrap();
            let layer = put(dir.path(), b"a layer");
            let stray = put(dir.path(), b"stray");
            let manifest = put(dir.path(), &manifest_over(&layer, len));
            index_of(dir.path(), &[&manifest]);
            let collected = collect_garbage(dir.path(), Duration::from_secs(3)).await;
            let has = |d: &Digest| dir.path().join(blob_path(d)).exists();
            if len == FOUR_MIB {
                assert_eq!(collected.unwrap().blobs, 1, "len {len}");
                assert!(has(&layer) && !has(&stray));
            } else {
                let err = collected.unwrap_err();
                assert!(
                    err.contains(&manifest.to_string())
                        && err.contains("larger than a manifest may be"),
                    "{err}"
                );
                assert!(has(&stray), "a blob was removed though the walk stopped");
            }
        }
    }

    #[tokio::test]
    async fn a_manifest_that_is_a_symlink_stops_the_collection() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("layout");
        let layer = put(&dir, b"a layer");
        let stray = put(&dir, b"stray");
        let manifest = put(&dir, &manifest_over(&layer, 0));
        index_of(&dir, &[&manifest]);
        // The same bytes, outside the layout, linked in under the manifest's name.
        let outside = root.path().join("manifest");
        std::fs::rename(dir.join(blob_path(&manifest)), &outside).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join(blob_path(&manifest))).unwrap();
        let err = collect_garbage(&dir, Duration::from_secs(3))
            .await
            .unwrap_err();
        assert!(err.contains(&manifest.to_string()), "{err}");
        assert!(dir.join(blob_path(&stray)).exists());
        assert!(dir.join(blob_path(&layer)).exists());
    }

    #[tokio::test]
    async fn removing_a_tag_keeps_full_references_that_end_in_it() {
        let dir = tempfile::tempdir().unwrap();
        layout(dir.path(), &["a:v1", "b:v1", "v1", "v2"]);
        assert!(remove_tag(dir.path(), "v1").await.unwrap());
        assert_eq!(names(dir.path()), ["a:v1", "b:v1", "v2"]);
    }

    #[tokio::test(start_paused = true)]
    async fn collection_waits_for_writers_and_removes_nothing_a_writer_may_still_index() {
        let dir = tempfile::tempdir().unwrap();
        let stray = layout(dir.path(), &["v1"]);
        // A writer between its blob write and its index entry (`stray` stands for that blob).
        let writer = lock::acquire(dir.path(), LockKind::Writing, lock::LOCK_WAIT)
            .await
            .unwrap();
        let err = collect_garbage(dir.path(), Duration::from_secs(3))
            .await
            .unwrap_err();
        assert!(err.contains(".ferry-gc.lock"), "{err}");
        assert!(
            stray.exists(),
            "a blob a writer may still index was removed"
        );
        drop(writer);
        let collected = collect_garbage(dir.path(), Duration::from_secs(3))
            .await
            .unwrap();
        assert_eq!(collected.blobs, 1);
        assert!(!stray.exists());
    }

    #[tokio::test]
    async fn collection_never_follows_a_symlinked_blob_directory_out_of_the_layout() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("layout");
        layout(&dir, &["v1"]);
        // Another algorithm's directory is a symlink to a directory outside the layout, holding
        // a file named like an unreferenced digest.
        let outside = root.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let victim = outside.join("b".repeat(128));
        std::fs::write(&victim, b"not the layout's").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("blobs/sha512")).unwrap();
        // And an unreferenced blob name that is a symlink to a file outside.
        let target = root.path().join("target-file");
        std::fs::write(&target, b"keep").unwrap();
        let hex = "c".repeat(64);
        std::os::unix::fs::symlink(&target, dir.join("blobs/sha256").join(&hex)).unwrap();

        collect_garbage(&dir, Duration::from_secs(3)).await.unwrap();
        assert!(victim.exists(), "a file outside the layout was removed");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(
            std::fs::symlink_metadata(dir.join("blobs/sha256").join(&hex)).is_err(),
            "the symlink itself is unreferenced and goes"
        );
    }
}
