//! Writing into an image layout target: files appear only by rename from a temporary created
//! exclusively in a real directory of the layout, and `index.json` changes only under the lock.

use std::path::{Path, PathBuf};

use ferry_distribution::Digest;
use ferry_distribution::error::ErrorKind;
use ferry_distribution::ops::Manifest;
use ferry_distribution::retry::Failure;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::REF_NAME;
use super::lock::{self, LockKind};
use super::reader::ByteStream;
use crate::StoreError;
use crate::store::{BlobSink, ImageIn, SinkError, StoreKey, StoreWrite};

/// Whether the layout holds `digest` as a regular file (a symlink planted at its name does not
/// count, and is never followed).
pub fn holds_blob(dir: &Path, digest: &Digest) -> bool {
    std::fs::symlink_metadata(dir.join(super::blob_path(digest))).is_ok_and(|m| m.is_file())
}

/// `<dir>/blobs/<alg>`, created when missing; an error when it, or `blobs`, is anything but a
/// real directory (a symlink there would carry every write out of the layout).
pub async fn blob_dir(dir: &Path, digest: &Digest) -> std::io::Result<PathBuf> {
    let blobs = dir.join("blobs");
    let alg = blobs.join(digest.algorithm().name());
    for d in [&blobs, &alg] {
        match tokio::fs::create_dir(d).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tokio::fs::create_dir_all(d).await?;
            }
            Err(e) => return Err(e),
        }
        crate::fsio::real_dir(d).await?;
    }
    Ok(alg)
}

/// Reads, changes and rewrites the layout's `index.json` under the layout's index lock:
/// `change` gets the `manifests` array and says whether anything changed. A missing file starts
/// a new index; a file that cannot be read or parsed fails with its path, and is left as it is.
pub async fn update_index<R>(
    dir: &Path,
    change: impl FnOnce(&mut Vec<serde_json::Value>) -> (bool, R),
) -> Result<R, String> {
    let _lock = lock::acquire(dir, LockKind::Index, lock::LOCK_WAIT)
        .await
        .map_err(|e| e.to_string())?;
    let path = dir.join("index.json");
    let mut index: serde_json::Value = match tokio::fs::read(&path).await {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} does not parse ({e}): not rewriting it", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({
            "schemaVersion": 2,
            "mediaType": ferry_distribution::media::OCI_INDEX,
            "manifests": []
        }),
        Err(e) => {
            return Err(format!(
                "{} cannot be read ({e}): not rewriting it",
                path.display()
            ));
        }
    };
    let manifests = index
        .get_mut("manifests")
        .and_then(|m| m.as_array_mut())
        .ok_or_else(|| format!("{} has no manifests array", path.display()))?;
    let (changed, out) = change(manifests);
    if changed {
        let bytes = serde_json::to_vec_pretty(&index).map_err(|e| e.to_string())?;
        crate::fsio::write_atomic(&path, &bytes)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(out)
}

/// The `ref.name` annotation of an `index.json` entry, as written.
pub fn ref_name_of(entry: &serde_json::Value) -> Option<&str> {
    entry
        .get("annotations")
        .and_then(|a| a.get(REF_NAME))
        .and_then(|v| v.as_str())
}

/// An image-layout directory opened as a sync target: every write of a sync into it goes
/// through here (blobs streamed to a temporary and renamed, manifests, `index.json` entries).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LayoutWriter {
    dir: PathBuf,
}

impl LayoutWriter {
    /// A writer for the layout at `dir` (created on the first write when missing).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LayoutWriter { dir: dir.into() }
    }

    /// The layout's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `oci:<dir>`, as reports name it.
    pub fn name(&self) -> String {
        format!("oci:{}", self.dir.display())
    }

    /// Whether the layout holds `digest` as a regular file (see [`holds_blob`]).
    pub fn holds_blob(&self, digest: &Digest) -> bool {
        holds_blob(&self.dir, digest)
    }

    /// Writes a blob of `size` bytes from `stream` in one go (see [`LayoutWriter::begin`]): a
    /// failure of the stream or of the write is final.
    pub async fn write_blob(
        &self,
        digest: &Digest,
        size: u64,
        mut stream: ByteStream,
    ) -> Result<(), Failure> {
        use futures::StreamExt as _;
        let local = |e: StoreError| Failure::Final(ErrorKind::Local(e.to_string()));
        let sink = |e: SinkError| match e {
            SinkError::Store(e) => local(e),
            SinkError::Bytes(kind) => Failure::Final(kind),
        };
        let Some(mut blob) = self.begin(digest, size).await.map_err(local)? else {
            return Ok(());
        };
        while let Some(chunk) = stream.next().await {
            blob.write(chunk?, false).await.map_err(sink)?;
        }
        Box::new(blob).finish().await.map_err(sink)
    }

    /// Starts writing a blob of `size` bytes: to a temporary created exclusively (never
    /// through a symlink) inside a real `blobs/<alg>` directory, hashed as it is written, then
    /// synced and renamed by [`BlobSink::finish`], so an interrupted run never leaves a partial
    /// file under a digest. `None` when the layout holds the blob already.
    pub async fn begin(
        &self,
        digest: &Digest,
        size: u64,
    ) -> Result<Option<LayoutBlob>, StoreError> {
        if self.holds_blob(digest) {
            return Ok(None);
        }
        let fail = |e: std::io::Error| StoreError::new(self.dir.clone(), "blob", e);
        // `blobs/<alg>` must be a real directory of the layout, and the temporary a new file.
        let parent = blob_dir(&self.dir, digest).await.map_err(fail)?;
        let tmp = parent.join(crate::fsio::temp_name(digest.hex()));
        let file = crate::fsio::create_temp(&tmp).await.map_err(fail)?;
        Ok(Some(LayoutBlob {
            dir: self.dir.clone(),
            path: parent.join(digest.hex()),
            tmp,
            file: Some(file),
            digest: digest.clone(),
            size,
            digester: digest.digester(),
        }))
    }

    /// Writes one manifest as a blob; the bytes written, 0 when the layout held it already.
    pub async fn write_manifest(&self, m: &Manifest) -> Result<u64, StoreError> {
        if self.holds_blob(&m.digest) {
            return Ok(0);
        }
        let fail = |e: std::io::Error| StoreError::new(self.dir.clone(), "manifest", e);
        let parent = blob_dir(&self.dir, &m.digest).await.map_err(fail)?;
        crate::fsio::write_atomic(&parent.join(m.digest.hex()), &m.bytes)
            .await
            .map_err(fail)?;
        Ok(m.bytes.len() as u64)
    }

    /// Points `index.json` at `root` under `tag` (replacing the entry whose `ref.name` is
    /// exactly `tag`), or adds it untagged; under the layout's cross-process index lock.
    pub async fn point_index(&self, root: &Manifest, tag: Option<&str>) -> Result<(), StoreError> {
        let dir = &self.dir;
        let layout = dir.join("oci-layout");
        if tokio::fs::symlink_metadata(&layout).await.is_err() {
            crate::fsio::write_atomic(&layout, br#"{"imageLayoutVersion":"1.0.0"}"#)
                .await
                .map_err(|e| StoreError::new(dir.clone(), "oci-layout", e))?;
        }
        let entry = {
            let mut e = serde_json::json!({
                "mediaType": root.media_type,
                "digest": root.digest.to_string(),
                "size": root.bytes.len(),
            });
            if let Some(tag) = tag {
                e["annotations"] = serde_json::json!({ REF_NAME: tag });
            }
            e
        };
        let digest = root.digest.to_string();
        update_index(dir, |manifests| {
            manifests.retain(|m| {
                let same_tag = tag.is_some() && ref_name_of(m) == tag;
                let same_untagged = tag.is_none()
                    && m.get("annotations").is_none()
                    && m.get("digest").and_then(|d| d.as_str()) == Some(digest.as_str());
                !(same_tag || same_untagged)
            });
            manifests.push(entry);
            (true, ())
        })
        .await
        .map_err(|e| StoreError::new(dir.clone(), "index.json", std::io::Error::other(e)))
    }
}

/// A blob on its way into a layout: its temporary file, removed unless the blob is finished.
pub struct LayoutBlob {
    dir: PathBuf,
    path: PathBuf,
    tmp: PathBuf,
    /// `None` once finished.
    file: Option<tokio::fs::File>,
    digest: Digest,
    size: u64,
    /// Every byte in the file, hashed: a layout checks what it keeps itself.
    digester: ferry_distribution::digest::Digester,
}

impl LayoutBlob {
    fn fail(&self, e: std::io::Error) -> SinkError {
        SinkError::Store(StoreError::new(
            self.dir.clone(),
            "blob",
            std::io::Error::new(e.kind(), format!("{}: {e}", self.tmp.display())),
        ))
    }
}

impl BlobSink for LayoutBlob {
    fn written(&self) -> u64 {
        self.digester.bytes_seen()
    }

    fn resume_at(&self) -> u64 {
        self.digester.bytes_seen()
    }

    fn write(&mut self, chunk: Bytes, _verified: bool) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            use tokio::io::AsyncWriteExt as _;
            if self.digester.bytes_seen() + chunk.len() as u64 > self.size {
                return Err(SinkError::Bytes(ErrorKind::DigestMismatch {
                    expected: format!("{} ({} bytes)", self.digest, self.size),
                    actual: format!("more than {} bytes", self.size),
                }));
            }
            let Some(file) = self.file.as_mut() else {
                return Err(self.fail(std::io::Error::other("the blob is finished")));
            };
            let wrote = file.write_all(&chunk).await;
            wrote.map_err(|e| self.fail(e))?;
            self.digester.update(&chunk);
            Ok(())
        })
    }

    fn finish(mut self: Box<Self>) -> BoxFuture<'static, Result<(), SinkError>> {
        Box::pin(async move {
            let digester = std::mem::replace(&mut self.digester, self.digest.digester());
            let seen = digester.bytes_seen();
            let actual = digester.finish();
            if actual != self.digest || seen != self.size {
                return Err(SinkError::Bytes(ErrorKind::DigestMismatch {
                    expected: self.digest.to_string(),
                    actual: actual.to_string(),
                }));
            }
            let Some(file) = self.file.take() else {
                return Err(self.fail(std::io::Error::other("the blob is finished")));
            };
            crate::fsio::commit(file, &self.tmp, &self.path)
                .await
                .map_err(|e| self.fail(e))
        })
    }
}

impl Drop for LayoutBlob {
    fn drop(&mut self) {
        // Unfinished (failed, or dropped part way): its temporary goes.
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl StoreWrite for LayoutWriter {
    fn name(&self) -> String {
        LayoutWriter::name(self)
    }

    fn key(&self) -> StoreKey {
        StoreKey::Layout(self.dir.clone())
    }

    fn holds_blob(&self, digest: &Digest) -> bool {
        LayoutWriter::holds_blob(self, digest)
    }

    fn begin_blob<'a>(
        &'a self,
        digest: &'a Digest,
        size: u64,
    ) -> BoxFuture<'a, Result<Option<Box<dyn BlobSink>>, StoreError>> {
        Box::pin(async move {
            let blob = self.begin(digest, size).await?;
            Ok(blob.map(|b| Box::new(b) as Box<dyn BlobSink>))
        })
    }

    fn write_manifest<'a>(
        &'a self,
        manifest: &'a Manifest,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(LayoutWriter::write_manifest(self, manifest))
    }

    fn point_index<'a>(&'a self, image: &'a ImageIn<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let Some(root) = image.manifests.last() else {
                return Ok(());
            };
            LayoutWriter::point_index(self, root, image.tag).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> Digest {
        Digest::parse(&format!("sha256:{}", "a".repeat(64))).unwrap()
    }

    #[tokio::test]
    async fn a_symlinked_blobs_directory_is_refused_and_nothing_lands_outside() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let layout = root.path().join("layout");
        std::fs::create_dir_all(layout.join("blobs")).unwrap();
        std::os::unix::fs::symlink(&outside, layout.join("blobs/sha256")).unwrap();
        let err = blob_dir(&layout, &digest()).await.unwrap_err().to_string();
        assert!(err.contains("blobs/sha256"), "{err}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn a_layout_root_that_does_not_exist_yet_is_created_with_its_blob_directories() {
        let root = tempfile::tempdir().unwrap();
        let layout = root.path().join("new/layout");
        let alg = blob_dir(&layout, &digest()).await.unwrap();
        assert_eq!(alg, layout.join("blobs/sha256"));
        assert!(std::fs::symlink_metadata(&alg).unwrap().is_dir());
        // Once there, the same call finds them and creates nothing new.
        assert_eq!(blob_dir(&layout, &digest()).await.unwrap(), alg);
    }

    #[tokio::test]
    async fn a_file_planted_at_the_algorithms_directory_is_refused_naming_it() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("blobs")).unwrap();
        std::fs::write(root.path().join("blobs/sha256"), b"not a directory").unwrap();
        let err = blob_dir(root.path(), &digest())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("blobs/sha256 is not a directory of the layout"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn an_index_that_cannot_be_parsed_fails_the_write_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.json"), b"{not json").unwrap();
        let err = update_index(dir.path(), |m| {
            m.clear();
            (true, ())
        })
        .await
        .unwrap_err();
        assert!(err.contains("index.json does not parse"), "{err}");
        assert_eq!(
            std::fs::read(dir.path().join("index.json")).unwrap(),
            b"{not json"
        );
    }

    #[tokio::test]
    async fn an_index_that_cannot_be_read_fails_the_write_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        // A directory at the name: reading fails with an error other than "not found".
        std::fs::create_dir(dir.path().join("index.json")).unwrap();
        let err = update_index(dir.path(), |_| (true, ())).await.unwrap_err();
        assert!(err.contains("index.json cannot be read"), "{err}");
    }
}
