//! An OCI image-layout directory as a source: its tags (from `index.json`), manifests and blobs
//! read from `blobs/<alg>/<hex>`, each verified against its digest, blobs streamed from disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use tokio::io::AsyncSeekExt;
use tokio::sync::OnceCell;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{Manifest, ManifestInfo, Referrer};
use ferry_distribution::retry::Failure;
use ferry_distribution::{Digest, Operation, media};

use super::open::{self, OpenError};
use super::{IndexEntry, blob_path, read_index};

/// A manifest larger than this is refused, as it is from a registry.
pub const MANIFEST_LIMIT: u64 = 4 * 1024 * 1024;
/// Bytes read from disk per chunk of a blob stream.
pub const READ_CHUNK: usize = 256 * 1024;

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
            match open::open_regular(dir, Path::new(file)) {
                Ok(_) => {}
                Err(OpenError::Missing) => {
                    return Err(reader.error(
                        Operation::TagList,
                        format!("not an OCI image layout: {file} is missing"),
                    ));
                }
                Err(e) => {
                    return Err(reader.error(
                        Operation::TagList,
                        format!("not a usable OCI image layout: {e}"),
                    ));
                }
            }
        }
        Ok(reader)
    }

    /// `oci:<directory>`, as reports name the layout.
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
        let dir = self.dir.clone();
        let relative = blob_path(&digest);
        let read =
            tokio::task::spawn_blocking(move || open::read_small(&dir, &relative, MANIFEST_LIMIT))
                .await
                .map_err(|e| self.error(op, format!("reading manifest {digest}: {e}")))?;
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(OpenError::Missing) => return Ok(None),
            Err(OpenError::TooLarge(_)) => {
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
            Err(e) => return Err(self.error(op, format!("manifest {digest}: {e}"))),
        };
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

    /// The blob's bytes from `offset` on, read from disk as they are consumed and cut off past
    /// `size`, the size its descriptor declares: a blob file longer than that (or one that never
    /// ends) fails with an error naming the layout and the digest.
    pub async fn open_blob(
        &self,
        digest: &Digest,
        size: u64,
        offset: u64,
    ) -> Result<ByteStream, Error> {
        let op = Operation::BlobGet;
        let dir = self.dir.clone();
        let relative = blob_path(digest);
        let opened = tokio::task::spawn_blocking(move || open::open_regular(&dir, &relative))
            .await
            .map_err(|e| self.error(op, format!("opening blob {digest}: {e}")))?
            .map_err(|e| self.error(op, format!("blob {digest}: {e}")))?;
        if opened.len > size {
            return Err(self.error(
                op,
                format!(
                    "blob {digest} is {} bytes, longer than the {size} bytes its descriptor declares",
                    opened.len
                ),
            ));
        }
        let mut file = tokio::fs::File::from_std(opened.file);
        if offset > 0 {
            file.seek(std::io::SeekFrom::Start(offset))
                .await
                .map_err(|e| self.error(op, format!("blob {digest}: {e}")))?;
        }
        let name = self.name.clone();
        let stream = tokio_util::io::ReaderStream::with_capacity(file, READ_CHUNK).map(move |r| {
            r.map_err(|e| Failure::Final(ErrorKind::Local(format!("{name}: reading a blob: {e}"))))
        });
        let what = format!("{}: blob {digest}", self.name);
        Ok(Box::pin(ferry_distribution::limit::bounded(
            stream,
            size.saturating_sub(offset),
            what,
        )))
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
            add_referrer(&mut map, m);
        }
        Ok(map)
    }
}

impl crate::store::StoreRead for LayoutReader {
    fn name(&self) -> &str {
        &self.name
    }

    fn list_tags(&self) -> Result<Vec<String>, Error> {
        LayoutReader::list_tags(self)
    }

    fn no_manifest(&self, reference: &str) -> String {
        format!("the layout has no manifest {reference}")
    }

    fn find_manifest<'a>(
        &'a self,
        reference: &'a str,
    ) -> BoxFuture<'a, Result<Option<Manifest>, Error>> {
        Box::pin(LayoutReader::find_manifest(self, reference))
    }

    fn open_blob<'a>(
        &'a self,
        digest: &'a Digest,
        size: u64,
        offset: u64,
    ) -> BoxFuture<'a, Result<ByteStream, Error>> {
        Box::pin(LayoutReader::open_blob(self, digest, size, offset))
    }

    fn list_referrers<'a>(
        &'a self,
        digest: &'a Digest,
    ) -> BoxFuture<'a, Result<Vec<Referrer>, Error>> {
        Box::pin(LayoutReader::list_referrers(self, digest))
    }
}

/// Files `m` under the subject it names, once, when it names one (an image index entry that is
/// a referrer); anything else is not a referrer and is passed over.
pub fn add_referrer(map: &mut HashMap<Digest, Vec<Referrer>>, m: Manifest) {
    let Ok(parsed) = serde_json::from_slice::<Subjected>(&m.bytes) else {
        return;
    };
    let Some(subject) = parsed.subject.and_then(|s| Digest::parse(&s.digest).ok()) else {
        return;
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

/// What a manifest says of its subject, to list it as a referrer (a layout's or an archive's).
#[derive(serde::Deserialize)]
pub struct Subjected {
    pub subject: Option<SubjectRef>,
    #[serde(rename = "artifactType")]
    pub artifact_type: Option<String>,
}

#[derive(serde::Deserialize)]
pub struct SubjectRef {
    pub digest: String,
}

/// A manifest's type from its own `mediaType` field, or from its shape when the field is absent
/// (it is optional in OCI manifests and indexes); `None` for something that is neither.
pub fn media_type_of(bytes: &[u8]) -> Option<String> {
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

    /// A layout holding one blob file of `bytes`, opened; returns the reader and the file path.
    fn one_blob(dir: &Path, bytes: &[u8]) -> (LayoutReader, Digest, PathBuf) {
        std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        std::fs::write(
            dir.join("index.json"),
            r#"{"schemaVersion":2,"manifests":[]}"#,
        )
        .unwrap();
        let digest = Digest::of_bytes(ferry_distribution::Algorithm::Sha256, bytes);
        let path = dir.join(blob_path(&digest));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        (LayoutReader::open(dir).unwrap(), digest, path)
    }

    /// Writes `bytes` as a blob of the layout at `dir`; its digest.
    fn put(dir: &Path, bytes: &[u8]) -> Digest {
        let digest = Digest::of_bytes(ferry_distribution::Algorithm::Sha256, bytes);
        std::fs::write(dir.join(blob_path(&digest)), bytes).unwrap();
        digest
    }

    #[tokio::test]
    async fn a_blob_is_streamed_in_256_kib_chunks() {
        // Never the whole blob in memory at once, and not thousands of small reads either.
        let dir = tempfile::tempdir().unwrap();
        let bytes = vec![7u8; 1024 * 1024];
        let (reader, digest, _) = one_blob(dir.path(), &bytes);
        let chunks: Vec<Bytes> = reader
            .open_blob(&digest, bytes.len() as u64, 0)
            .await
            .unwrap()
            .map(|c| c.unwrap())
            .collect()
            .await;
        let sizes: Vec<usize> = chunks.iter().map(Bytes::len).collect();
        assert_eq!(sizes, [256 * 1024; 4]);
    }

    #[tokio::test]
    async fn a_manifest_of_4_mib_is_read_and_one_byte_more_is_too_large() {
        const FOUR_MIB: usize = 4 * 1024 * 1024;
        let dir = tempfile::tempdir().unwrap();
        let (reader, _, _) = one_blob(dir.path(), b"layer");
        for len in [FOUR_MIB, FOUR_MIB + 1] {
            let mut bytes =
                format!(r#"{{"mediaType":"{}","layers":[]}}"#, media::OCI_MANIFEST).into_bytes();
            bytes.resize(len, b' ');
            let digest = put(dir.path(), &bytes);
            let found = reader.find_manifest(&digest.to_string()).await;
            if len == FOUR_MIB {
                assert_eq!(found.unwrap().unwrap().bytes.len(), FOUR_MIB);
            } else {
                let error = found.unwrap_err();
                assert!(
                    matches!(
                        error.kind,
                        ErrorKind::TooLarge {
                            what: "manifest",
                            limit
                        } if limit == FOUR_MIB as u64
                    ),
                    "{error}"
                );
            }
        }
    }

    #[tokio::test]
    async fn each_referrer_of_a_subject_is_listed_once_however_often_the_index_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let (reader, layer, _) = one_blob(dir.path(), b"layer");
        let subject = put(
            dir.path(),
            format!(
                r#"{{"mediaType":"{}","layers":[{{"digest":"{layer}","size":5}}]}}"#,
                media::OCI_MANIFEST
            )
            .as_bytes(),
        );
        let referrer = |kind: &str| {
            put(
                dir.path(),
                format!(
                    r#"{{"mediaType":"{}","artifactType":"{kind}","layers":[],"subject":{{"digest":"{subject}"}}}}"#,
                    media::OCI_MANIFEST
                )
                .as_bytes(),
            )
        };
        let signature = referrer("application/vnd.example.signature");
        let sbom = referrer("application/vnd.example.sbom");
        // The signature is in the index twice (tagged and untagged), the SBOM once.
        let entry = |d: &Digest, tag: Option<&str>| {
            let mut e =
                serde_json::json!({ "mediaType": media::OCI_MANIFEST, "digest": d.to_string() });
            if let Some(tag) = tag {
                e["annotations"] = serde_json::json!({ crate::layout::REF_NAME: tag });
            }
            e
        };
        let index = serde_json::json!({ "schemaVersion": 2, "manifests": [
            entry(&subject, Some("v1")),
            entry(&signature, Some("v1.sig")),
            entry(&signature, None),
            entry(&sbom, None),
        ]});
        std::fs::write(dir.path().join("index.json"), index.to_string()).unwrap();
        let listed: Vec<_> = reader
            .list_referrers(&subject)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.digest, r.artifact_type))
            .collect();
        assert_eq!(
            listed,
            [
                (
                    signature,
                    Some("application/vnd.example.signature".to_owned())
                ),
                (sbom, Some("application/vnd.example.sbom".to_owned())),
            ]
        );
    }

    #[tokio::test]
    async fn a_blob_that_grows_while_read_is_cut_at_its_declared_size_first_and_resumed() {
        for offset in [0u64, 4] {
            let dir = tempfile::tempdir().unwrap();
            let (reader, digest, path) = one_blob(dir.path(), b"0123456789");
            let stream = reader.open_blob(&digest, 10, offset).await.unwrap();
            // Written to after it was opened (and after its length was checked).
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            std::io::Write::write_all(&mut file, &[0u8; 1024 * 1024]).unwrap();
            let items: Vec<_> = stream.collect().await;
            let bytes: usize = items
                .iter()
                .filter_map(|i| i.as_ref().ok())
                .map(Bytes::len)
                .sum();
            assert!(
                bytes as u64 <= 10 - offset,
                "offset {offset}: {bytes} bytes passed"
            );
            let error = items
                .iter()
                .find_map(|i| i.as_ref().err())
                .map(|f| f.reason())
                .expect("the overrun is an error");
            assert!(
                error.contains(&digest.to_string()) && error.contains(reader.name()),
                "{error}"
            );
        }
    }

    #[tokio::test]
    async fn a_blob_file_longer_than_its_descriptor_is_refused_before_a_byte_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let (reader, digest, _) = one_blob(dir.path(), b"0123456789");
        let Err(error) = reader.open_blob(&digest, 9, 0).await else {
            panic!("a blob longer than declared was opened");
        };
        let text = error.to_string();
        assert!(
            text.contains(&digest.to_string()) && text.contains("oci:") && text.contains("9 bytes"),
            "{text}"
        );
        assert!(reader.open_blob(&digest, 10, 0).await.is_ok());
    }

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
