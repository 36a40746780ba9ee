//! OCI image-layout directories: `index.json` and blob paths shared by reading a layout as a
//! source ([`reader`]), writing one as a target (the engine) and pruning one ([`prune`]).

pub mod lock;
pub mod open;
pub mod prune;
pub mod reader;
pub mod writer;

use std::path::Path;

use ferry_distribution::Digest;

pub use reader::LayoutReader;

/// An `index.json` larger than this is refused before it is read (about 100,000 tagged entries).
pub const INDEX_LIMIT: u64 = 32 * 1024 * 1024;

/// The annotation an image layout's index uses for a tag.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

#[derive(serde::Deserialize)]
struct RawIndex {
    #[serde(default)]
    manifests: Vec<RawEntry>,
}

#[derive(serde::Deserialize)]
struct RawEntry {
    digest: String,
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

/// One manifest an image layout's `index.json` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The manifest's digest.
    pub digest: Digest,
    /// Its media type, when the entry names one.
    pub media_type: Option<String>,
    /// Its size in bytes, when the entry gives one.
    pub size: Option<u64>,
    /// The tag, from `org.opencontainers.image.ref.name`.
    pub tag: Option<String>,
    /// That annotation as written (a tag, or a full reference in a multi-repository layout).
    pub ref_name: Option<String>,
}

/// The tag in a `ref.name` annotation: the value itself, or the tag of a full reference
/// (`docker.io/library/alpine:3.20`, as some tools write it); `None` for a reference without one.
pub fn tag_of_ref_name(value: &str) -> Option<String> {
    if !value.contains(['/', ':', '@']) {
        return (!value.is_empty()).then(|| value.to_owned());
    }
    let name = value.split('@').next().unwrap_or(value);
    let last = name.rsplit('/').next().unwrap_or(name);
    last.rsplit_once(':')
        .map(|(_, tag)| tag.to_owned())
        .filter(|t| !t.is_empty())
}

/// Every entry of the layout's `index.json`, or why it cannot be read.
pub fn read_index(dir: &Path) -> Result<Vec<IndexEntry>, String> {
    let path = dir.join("index.json");
    let text =
        open::read_small(dir, Path::new("index.json"), INDEX_LIMIT).map_err(|e| match e {
            open::OpenError::Missing => format!("{}: not found", path.display()),
            e => e.to_string(),
        })?;
    parse_index(&text, &path.display().to_string())
}

/// Every entry of an `index.json` read as `bytes` (from a layout directory, or from an
/// archive's tar entry), `what` naming it in errors.
pub fn parse_index(bytes: &[u8], what: &str) -> Result<Vec<IndexEntry>, String> {
    let index: RawIndex = serde_json::from_slice(bytes)
        .map_err(|e| format!("{what} does not parse: {}", crate::complaint(e)))?;
    index
        .manifests
        .into_iter()
        .map(|e| {
            let digest = Digest::parse(&e.digest).map_err(|err| {
                format!(
                    "{what}: bad digest {}: {}",
                    crate::quoted(&e.digest),
                    crate::complaint(err)
                )
            })?;
            Ok(IndexEntry {
                digest,
                media_type: e.media_type,
                size: e.size,
                tag: e.annotations.get(REF_NAME).and_then(|v| tag_of_ref_name(v)),
                ref_name: e.annotations.get(REF_NAME).cloned(),
            })
        })
        .collect()
}

/// The (tag, digest) pairs of a layout target's `index.json`; empty when there is no layout yet
/// (or its index cannot be read: the write then fails naming the file). A tag here is a
/// `ref.name` as written: an entry naming a full reference (`a:v1` in a layout holding several
/// repositories) is matched on that whole text, so it never stands for ferry's tag `v1`.
pub fn read_tags(dir: &Path) -> Vec<(Option<String>, Digest)> {
    read_index(dir)
        .map(|entries| {
            entries
                .into_iter()
                .map(|e| (e.ref_name.filter(|r| !r.is_empty()), e.digest))
                .collect()
        })
        .unwrap_or_default()
}

/// `blobs/<alg>/<hex>` inside a layout.
pub fn blob_path(digest: &Digest) -> std::path::PathBuf {
    Path::new("blobs")
        .join(digest.algorithm().name())
        .join(digest.hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn an_index_behind_a_link_or_past_its_limit_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::write(&elsewhere, r#"{"manifests":[]}"#).unwrap();
        let layout = dir.path().join("layout");
        std::fs::create_dir(&layout).unwrap();
        std::os::unix::fs::symlink(&elsewhere, layout.join("index.json")).unwrap();
        let error = read_index(&layout).unwrap_err();
        assert!(
            error.contains("index.json") && error.contains("symbolic link"),
            "{error}"
        );
        std::fs::remove_file(layout.join("index.json")).unwrap();
        let index = std::fs::File::create(layout.join("index.json")).unwrap();
        index.set_len(INDEX_LIMIT + 1).unwrap();
        let error = read_index(&layout).unwrap_err();
        assert!(error.contains("larger than"), "{error}");
        index.set_len(0).unwrap();
        std::fs::write(layout.join("index.json"), r#"{"manifests":[]}"#).unwrap();
        assert_eq!(read_index(&layout).unwrap(), vec![]);
    }

    #[test]
    fn an_index_of_ten_thousand_tags_is_read_whole() {
        // About 2 MiB: far inside the 32 MiB limit (about 100,000 entries).
        let digest = format!("sha256:{}", "d".repeat(64));
        let entries: Vec<serde_json::Value> = (0..10_000)
            .map(|n| {
                serde_json::json!({
                    "mediaType": ferry_distribution::media::OCI_MANIFEST,
                    "digest": digest,
                    "size": 1234,
                    "annotations": { REF_NAME: format!("v{n}") },
                })
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let bytes = serde_json::to_vec(&serde_json::json!({ "manifests": entries })).unwrap();
        assert!(bytes.len() > 2 * 1024 * 1024, "{}", bytes.len());
        std::fs::write(dir.path().join("index.json"), bytes).unwrap();
        let index = read_index(dir.path()).unwrap();
        assert_eq!(index.len(), 10_000);
        assert_eq!(index[9_999].tag.as_deref(), Some("v9999"));
    }

    #[test]
    fn a_ref_name_is_a_tag_or_a_reference_that_may_carry_one() {
        for (value, tag) in [
            ("3.20", Some("3.20")),
            ("docker.io/library/alpine:3.20", Some("3.20")),
            ("alpine:latest", Some("latest")),
            ("localhost:5000/app:v1", Some("v1")),
            ("localhost:5000/app", None),
            ("localhost:5000/app@sha256:abc", None),
            ("app:v2@sha256:abc", Some("v2")),
            ("", None),
        ] {
            assert_eq!(tag_of_ref_name(value).as_deref(), tag, "{value}");
        }
    }
}
