//! An OCI image-layout directory as a source: its tags (from `index.json`), manifests and blobs
//! read from `blobs/<alg>/<hex>`, each verified against its digest, blobs streamed from disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::io::AsyncSeekExt;
use tokio::sync::OnceCell;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{Manifest, ManifestInfo, Referrer};
use ferry_distribution::retry::Failure;
use ferry_distribution::{Digest, Operation, media};

use super::{IndexEntry, blob_path, read_index};

/// A manifest larger than this is refused, as it is from a registry.
const MANIFEST_LIMIT: u64 = 4 * 1024 * 1024;
/// Bytes read from disk per chunk of a blob stream.
const READ_CHUNK: usize = 256 * 1024;

/// A blob's bytes as they are read (from a layout here; from either kind of source through
/// `crate::source`).
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, Failure>> + Send>>;

/// Referrers by subject digest, gathered from the index in one pass.
type ReferrerMap = HashMap<Digest, Vec<Referrer>>;

/// A layout directory opened for reading.
#[derive(Debug, Clone)]
pub struct LayoutReader {
    dir: PathBuf,
    /// `oci:<dir>`, as errors and reports name it.
    name: String,
    /// Every manifest's subject, read once per opened layout (not once per image asked about).
    referrers: Arc<OnceCell<ReferrerMap>>,
}

impl LayoutReader {
    /// Opens `dir`, which must hold an `oci-layout` file and an `index.json`.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        let reader = LayoutReader {
            dir: dir.to_path_buf(),
            name: format!("oci:{}", dir.display()),
            referrers: Arc::default(),
        };
        for file in ["oci-layout", "index.json"] {
            if !dir.join(file).is_file() {
                return Err(reader.error(
                    Operation::TagList,
                    format!("not an OCI image layout: {file} is missing"),
                ));
            }
        }
        Ok(reader)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn error(&self, operation: Operation, message: impl Into<String>) -> Error {
        Error::new(
            &self.name,
            None,
            operation,
            ErrorKind::Local(message.into()),
        )
    }

    fn entries(&self, operation: Operation) -> Result<Vec<IndexEntry>, Error> {
        read_index(&self.dir).map_err(|e| self.error(operation, e))
    }

    /// Every tag the layout's index names, sorted, each once.
    pub fn list_tags(&self) -> Result<Vec<String>, Error> {
        let mut tags: Vec<String> = self
            .entries(Operation::TagList)?
            .into_iter()
            .filter_map(|e| e.tag)
            .collect();
        tags.sort();
        tags.dedup();
        Ok(tags)
    }

    /// What `reference` (a tag or a digest) names here, or `None`.
    pub async fn head_manifest(&self, reference: &str) -> Result<Option<ManifestInfo>, Error> {
        Ok(self.find_manifest(reference).await?.map(|m| ManifestInfo {
            digest: m.digest,
            media_type: m.media_type,
            size: m.bytes.len() as u64,
        }))
    }

    /// The manifest `reference` names, its bytes verified, or `None` when the layout has no such
    /// tag or blob.
    pub async fn find_manifest(&self, reference: &str) -> Result<Option<Manifest>, Error> {
        let op = Operation::ManifestGet;
        let (digest, declared) = match Digest::parse(reference) {
            Ok(d) => (d, None),
            Err(_) => {
                let entries = self.entries(op)?;
                let Some(entry) = entries
                    .into_iter()
                    .find(|e| e.tag.as_deref() == Some(reference))
                else {
                    return Ok(None);
                };
                (entry.digest, entry.media_type)
            }
        };
        let path = self.dir.join(blob_path(&digest));
        let size = match tokio::fs::metadata(&path).await {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.error(op, format!("{}: {e}", path.display()))),
        };
        if size > MANIFEST_LIMIT {
            return Err(Error::new(
                &self.name,
                None,
                op,
                ErrorKind::TooLarge {
                    what: "manifest",
                    limit: MANIFEST_LIMIT,
                },
            ));
        }
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|e| self.error(op, format!("{}: {e}", path.display())))?;
        let actual = Digest::of_bytes(digest.algorithm(), &bytes);
        if actual != digest {
            return Err(Error::new(
                &self.name,
                None,
                op,
                ErrorKind::DigestMismatch {
                    expected: digest.to_string(),
                    actual: actual.to_string(),
                },
            ));
        }
        let media_type = match declared.or_else(|| media_type_of(&bytes)) {
            Some(t) => t,
            None => {
                return Err(self.error(
                    op,
                    format!("{digest} is not a manifest or index this layout can name"),
                ));
            }
        };
        Ok(Some(Manifest {
            bytes: Bytes::from(bytes),
            media_type,
            digest,
        }))
    }

    /// The blob's bytes from `offset` on, read from disk as they are consumed.
    pub async fn open_blob(&self, digest: &Digest, offset: u64) -> Result<ByteStream, Error> {
        let op = Operation::BlobGet;
        let path = self.dir.join(blob_path(digest));
        let mut file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| self.error(op, format!("{}: {e}", path.display())))?;
        if offset > 0 {
            file.seek(std::io::SeekFrom::Start(offset))
                .await
                .map_err(|e| self.error(op, format!("{}: {e}", path.display())))?;
        }
        let name = self.name.clone();
        let stream = tokio_util::io::ReaderStream::with_capacity(file, READ_CHUNK).map(move |r| {
            r.map_err(|e| Failure::Final(ErrorKind::Local(format!("{name}: reading a blob: {e}"))))
        });
        Ok(Box::pin(stream))
    }

    /// Manifests in the index whose `subject` is `digest` (how a layout holds referrers).
    pub async fn list_referrers(&self, digest: &Digest) -> Result<Vec<Referrer>, Error> {
        let map = self
            .referrers
            .get_or_try_init(|| self.read_referrers())
            .await?;
        Ok(map.get(digest).cloned().unwrap_or_default())
    }

    async fn read_referrers(&self) -> Result<ReferrerMap, Error> {
        let mut map = ReferrerMap::new();
        for entry in self.entries(Operation::ReferrersList)? {
            let Some(m) = self.find_manifest(&entry.digest.to_string()).await? else {
                continue;
            };
            let Ok(parsed) = serde_json::from_slice::<Subjected>(&m.bytes) else {
                continue;
            };
            let Some(subject) = parsed.subject.and_then(|s| Digest::parse(&s.digest).ok()) else {
                continue;
            };
            let list = map.entry(subject).or_default();
            if !list.iter().any(|r| r.digest == m.digest) {
                list.push(Referrer {
                    media_type: m.media_type,
                    size: m.bytes.len() as u64,
                    digest: m.digest,
                    artifact_type: parsed.artifact_type,
                });
            }
        }
        Ok(map)
    }
}

#[derive(serde::Deserialize)]
struct Subjected {
    subject: Option<SubjectRef>,
    #[serde(rename = "artifactType")]
    artifact_type: Option<String>,
}

#[derive(serde::Deserialize)]
struct SubjectRef {
    digest: String,
}

/// A manifest's type from its own `mediaType` field, or from its shape when the field is absent
/// (it is optional in OCI manifests and indexes); `None` for something that is neither.
fn media_type_of(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Shape {
        #[serde(rename = "mediaType")]
        media_type: Option<String>,
        manifests: Option<serde_json::Value>,
        layers: Option<serde_json::Value>,
    }
    let shape: Shape = serde_json::from_slice(bytes).ok()?;
    match shape {
        Shape {
            media_type: Some(t),
            ..
        } if media::is_known_manifest_type(&t) => Some(t),
        Shape {
            media_type: None,
            manifests: Some(_),
            ..
        } => Some(media::OCI_INDEX.to_owned()),
        Shape {
            media_type: None,
            layers: Some(_),
            ..
        } => Some(media::OCI_MANIFEST.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_type_comes_from_its_field_or_its_shape() {
        let typed = format!(
            r#"{{"mediaType":"{}","manifests":[]}}"#,
            media::DOCKER_MANIFEST_LIST
        );
        assert_eq!(
            media_type_of(typed.as_bytes()).as_deref(),
            Some(media::DOCKER_MANIFEST_LIST)
        );
        assert_eq!(
            media_type_of(br#"{"schemaVersion":2,"manifests":[]}"#).as_deref(),
            Some(media::OCI_INDEX)
        );
        assert_eq!(
            media_type_of(br#"{"schemaVersion":2,"config":{},"layers":[]}"#).as_deref(),
            Some(media::OCI_MANIFEST)
        );
        assert_eq!(media_type_of(b"not json"), None);
        assert_eq!(media_type_of(br#"{"mediaType":"text/plain"}"#), None);
        assert_eq!(media_type_of(br#"{"architecture":"amd64"}"#), None);
    }
}
