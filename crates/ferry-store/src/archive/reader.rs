//! An `oci-archive:` or `docker-archive:` tar as a source: indexed once per file per run (its
//! [`ArchiveSet`]), then read like a layout, every blob streamed from its offset, checked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::OnceCell;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{Manifest, ManifestInfo, Referrer};
use ferry_distribution::{Digest, Operation};

use super::docker::DockerImage;
use super::input::{self, SpoolPlace, Spooled};
use super::reader_tar::{self, Links, TarEntry, TarIndex};
use super::streamed::{FromStdin, Opened, StreamBody, Streamed};
use crate::bundle::{
    BUNDLE_ENTRY, BUNDLE_ENTRY_LIMIT, BundleRecord, SIGNATURE_ENTRY, SIGNATURE_LIMIT,
};
use crate::layout::reader::{ByteStream, MANIFEST_LIMIT, READ_CHUNK, add_referrer, media_type_of};
use crate::layout::{INDEX_LIMIT, IndexEntry, blob_path, parse_index, tag_of_ref_name};
use ferry_config::Origin;

/// The tag a `ref.name` or `RepoTags` reference carries (`3.20` of
/// `registry.internal/mirror/alpine:3.20`, or the whole of a bare tag), for a copy's source.
pub fn tag_of_reference(reference: &str) -> Option<String> {
    tag_of_ref_name(reference)
}

/// What an indexed archive holds.
#[derive(Debug)]
pub enum Content {
    /// An OCI image layout: its `index.json`'s entries, and a ferry bundle's record.
    Oci {
        index: Vec<IndexEntry>,
        record: Option<Box<BundleRecord>>,
        /// The record's bytes as the tar holds them, and its signature entry's, for the run
        /// to verify under a key.
        raw: Option<RawRecord>,
    },
    /// `docker save` output: each image with the manifest ferry builds for it.
    Docker(Vec<DockerImage>),
}

/// A bundle record's bytes as read from the tar, and its signature entry's when there is one.
#[derive(Debug)]
pub struct RawRecord {
    /// `ferry-bundle.json`'s bytes: what a signature is over.
    pub bytes: Vec<u8>,
    /// `ferry-bundle.json.sig`'s text, when the bundle was signed.
    pub signature: Option<Vec<u8>>,
}

/// An archive after its one indexing pass, shared by every mapping that reads it.
#[derive(Debug)]
pub struct Indexed {
    pub tar: TarIndex,
    pub content: Content,
    pub(super) referrers: OnceCell<HashMap<Digest, Vec<Referrer>>>,
    /// Manifests an incremental bundle leaves out, read from the target by `ferry import`'s
    /// base check (each checked against its digest when supplied).
    pub(super) supplied: Mutex<HashMap<Digest, Manifest>>,
    /// Images the bundle's record lists whose root a base carried, admitted by `ferry
    /// import` once their root was supplied from the target: served as if `index.json`
    /// named them.
    pub(super) admitted: Mutex<Vec<IndexEntry>>,
    /// The spool file the tar was decompressed or copied into (removed with the last reader).
    pub(super) spool: Option<(input::SpoolFile, Spooled)>,
    /// A bundle read from a pipe head first: its body, streamed once by `ferry import`.
    pub(super) streamed: Option<Streamed>,
}

/// An archive opened for reading, with the image a `:REF` selects.
#[derive(Debug, Clone)]
pub struct ArchiveReader {
    inner: Arc<Indexed>,
    /// `oci-archive:PATH[:REF]`, as errors and reports name it.
    name: String,
    /// The `:REF`, when the origin names one image.
    reference: Option<String>,
}

/// One archive's indexing, shared by every reader of it in an [`ArchiveSet`].
type Indexing = Arc<OnceCell<Result<Arc<Indexed>, String>>>;

/// The archives one run reads, by path and kind, each indexed once however many mappings read
/// it (a bundle of a thousand images is indexed once, not once per image). Owned by whoever
/// runs (a command, a test) and handed to the run; cheap to clone, clones share.
#[derive(Debug, Clone, Default)]
pub struct ArchiveSet {
    open: Arc<Mutex<HashMap<(PathBuf, bool), Indexing>>>,
    /// Where a compressed archive, or one from standard input, is spooled.
    spool: SpoolPlace,
}

impl ArchiveSet {
    /// An empty set that spools under `spool`.
    pub fn spooling(spool: SpoolPlace) -> Self {
        ArchiveSet {
            open: Arc::default(),
            spool,
        }
    }

    /// Opens the archive `origin` names, indexing it on the set's first open of it, checking a
    /// ferry bundle's record and that a `:REF` names an image in it.
    pub async fn open(&self, origin: &Origin) -> Result<ArchiveReader, Error> {
        let (path, oci) = archive_of(origin)?;
        let key = match path.as_path() == Path::new(input::STDIN) {
            true => (path.clone(), oci),
            false => (
                std::path::absolute(path).unwrap_or_else(|_| path.clone()),
                oci,
            ),
        };
        let cell = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_default()
            .clone();
        let spool = self.spool.clone();
        let indexed = cell
            .get_or_init(|| index_archive(path.clone(), oci, spool))
            .await;
        ArchiveReader::over(origin, indexed.clone())
    }
}

/// The archive file `origin` names and whether it is an OCI archive (else `docker save`'s).
fn archive_of(origin: &Origin) -> Result<(&PathBuf, bool), Error> {
    match origin {
        Origin::OciArchive { path, .. } => Ok((path, true)),
        Origin::DockerArchive { path, .. } => Ok((path, false)),
        _ => Err(Error::new(
            origin.to_string(),
            None,
            Operation::TagList,
            ErrorKind::Local("not an archive".into()),
        )),
    }
}

impl ArchiveReader {
    /// Opens the archive `origin` names, indexing it now (outside any [`ArchiveSet`]: one
    /// archive read once, or a test of a hostile archive), checking a ferry bundle's record
    /// and that a `:REF` names an image in it.
    pub async fn open(origin: &Origin) -> Result<ArchiveReader, Error> {
        let (path, oci) = archive_of(origin)?;
        let indexed = index_archive(path.clone(), oci, SpoolPlace::default()).await;
        ArchiveReader::over(origin, indexed)
    }

    /// The reader of `origin` over its indexing's outcome.
    fn over(origin: &Origin, indexed: Result<Arc<Indexed>, String>) -> Result<Self, Error> {
        let name = origin.to_string();
        let fail = |m: String| Error::new(&name, None, Operation::TagList, ErrorKind::Local(m));
        let reference = match origin {
            Origin::OciArchive { reference, .. } | Origin::DockerArchive { reference, .. } => {
                reference.clone()
            }
            _ => None,
        };
        let reader = ArchiveReader {
            inner: indexed.map_err(fail)?,
            name: name.clone(),
            reference,
        };
        if let Content::Docker(images) = &reader.inner.content {
            docker_choice(reader.reference.as_deref(), images.len()).map_err(fail)?;
        }
        if let Some(r) = &reader.reference
            && reader.selected().is_empty()
        {
            return Err(fail(format!(
                "the archive holds no image named {}",
                crate::quoted(r)
            )));
        }
        Ok(reader)
    }

    /// Supplies a manifest the archive leaves out (read from where a base bundle put it), so
    /// an image over it can be read by every reader of this archive in its set; refused unless
    /// its bytes hash to its digest.
    pub fn supply(&self, manifest: Manifest) -> bool {
        let actual = Digest::of_bytes(manifest.digest.algorithm(), &manifest.bytes);
        if actual != manifest.digest {
            return false;
        }
        self.inner
            .supplied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(actual, manifest);
        true
    }

    /// Serves an image the bundle's record lists but `index.json` leaves out (its root a
    /// base's), under `ref_name`; refused (`false`) unless its root was supplied first.
    pub fn admit(&self, ref_name: &str, digest: &Digest) -> bool {
        let media_type = {
            let supplied = self
                .inner
                .supplied
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match supplied.get(digest) {
                Some(m) => m.media_type.clone(),
                None => return false,
            }
        };
        self.inner
            .admitted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(IndexEntry {
                digest: digest.clone(),
                media_type: Some(media_type),
                size: None,
                tag: tag_of_ref_name(ref_name),
                ref_name: Some(ref_name.to_owned()),
            });
        true
    }

    /// `oci-archive:PATH[:REF]`, as reports name it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The ferry bundle record, for an OCI archive that holds one (its digest checked, and
    /// every entry of the tar held against it).
    /// How the archive was spooled (decompressed, or read from standard input), if it was.
    pub fn spooled(&self) -> Option<&Spooled> {
        self.inner.spool.as_ref().map(|(_, s)| s)
    }

    /// The ferry bundle record, for an OCI archive that holds one (its digest checked).
    pub fn record(&self) -> Option<&BundleRecord> {
        match &self.inner.content {
            Content::Oci { record, .. } => record.as_deref(),
            Content::Docker(_) => None,
        }
    }

    /// The record's bytes and signature as the tar holds them (`None` without a record).
    pub fn raw_record(&self) -> Option<&RawRecord> {
        match &self.inner.content {
            Content::Oci { raw, .. } => raw.as_ref(),
            Content::Docker(_) => None,
        }
    }

    /// Every image of an OCI archive's `index.json`: its `ref.name` (if any) and digest.
    pub fn images(&self) -> Vec<(Option<String>, Digest)> {
        match &self.inner.content {
            Content::Oci { index, .. } => index
                .iter()
                .map(|e| (e.ref_name.clone(), e.digest.clone()))
                .collect(),
            Content::Docker(images) => images
                .iter()
                .flat_map(|i| {
                    i.repo_tags
                        .iter()
                        .map(|t| (Some(t.clone()), i.manifest.digest.clone()))
                })
                .collect(),
        }
    }

    /// Whether the archive carries the blob (or manifest) `digest` (a streamed bundle's body:
    /// until it was read).
    pub fn carries(&self, digest: &Digest) -> bool {
        self.blob_entry(digest).is_some()
            || self
                .inner
                .streamed
                .as_ref()
                .is_some_and(|s| s.carries(digest))
    }

    /// A bundle read from a pipe head first: its body, the first time it is asked for, and the
    /// size the record gives each blob it carries. After this its blobs are not carried.
    pub fn take_body(&self) -> Option<(StreamBody, HashMap<Digest, Option<u64>>)> {
        let streamed = self.inner.streamed.as_ref()?;
        let body = streamed
            .body
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        streamed
            .drained
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Some((body, streamed.carried.clone()))
    }

    fn error(&self, operation: Operation, message: impl Into<String>) -> Error {
        Error::new(
            &self.name,
            None,
            operation,
            ErrorKind::Local(message.into()),
        )
    }

    /// The (tag, digest, media type) of each image this reader serves: the one `:REF` names,
    /// or every one the archive tags.
    fn selected(&self) -> Vec<(Option<String>, Digest, Option<String>)> {
        let wanted = |ref_name: Option<&str>| match &self.reference {
            Some(r) => ref_name.is_some_and(|n| same_reference(n, r)),
            None => true,
        };
        match &self.inner.content {
            Content::Oci { index, .. } => {
                let admitted = self
                    .inner
                    .admitted
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                index
                    .iter()
                    .chain(admitted.iter())
                    .filter(|e| wanted(e.ref_name.as_deref()))
                    .map(|e| (e.tag.clone(), e.digest.clone(), e.media_type.clone()))
                    .collect()
            }
            Content::Docker(images) => match docker_choice(self.reference.as_deref(), images.len())
            {
                // One image by position (or the only one), as skopeo takes it: served as
                // `latest`, the tag skopeo gives it on the other side.
                Ok(Some(n)) => images
                    .get(n)
                    .map(|i| {
                        (
                            Some("latest".to_owned()),
                            i.manifest.digest.clone(),
                            Some(i.manifest.media_type.clone()),
                        )
                    })
                    .into_iter()
                    .collect(),
                Err(_) => Vec::new(),
                Ok(None) => images
                    .iter()
                    .flat_map(|i| i.repo_tags.iter().map(move |t| (i, t)))
                    .filter(|(_, t)| wanted(Some(t)))
                    .map(|(i, t)| {
                        let tag = tag_of_ref_name(t).unwrap_or_else(|| "latest".to_owned());
                        (
                            Some(tag),
                            i.manifest.digest.clone(),
                            Some(i.manifest.media_type.clone()),
                        )
                    })
                    .collect(),
            },
        }
    }

    /// Every tag of the images served, sorted, each once.
    pub fn list_tags(&self) -> Result<Vec<String>, Error> {
        let mut tags: Vec<String> = self.selected().into_iter().filter_map(|s| s.0).collect();
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

    /// The manifest `reference` names, its bytes verified, or `None`. A tag two images of the
    /// served set carry with different digests is refused: name one with `:REF`.
    pub async fn find_manifest(&self, reference: &str) -> Result<Option<Manifest>, Error> {
        let op = Operation::ManifestGet;
        let (digest, declared) = match Digest::parse(reference) {
            Ok(d) => (d, None),
            Err(_) => {
                let mut found = self
                    .selected()
                    .into_iter()
                    .filter(|(tag, _, _)| tag.as_deref() == Some(reference));
                let Some((_, digest, media_type)) = found.next() else {
                    return Ok(None);
                };
                if found.any(|(_, d, _)| d != digest) {
                    return Err(self.error(
                        op,
                        format!(
                            "tag {reference} names several images in the archive: name one \
                             as {}:REF",
                            self.name
                        ),
                    ));
                }
                (digest, media_type)
            }
        };
        if let Content::Docker(images) = &self.inner.content {
            return Ok(images
                .iter()
                .find(|i| i.manifest.digest == digest)
                .map(|i| i.manifest.clone()));
        }
        let Some(entry) = self.blob_entry(&digest) else {
            let supplied = self
                .inner
                .supplied
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            return Ok(supplied.get(&digest).cloned());
        };
        if entry.size > MANIFEST_LIMIT {
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
        let bytes = reader_tar::read_entry(&self.inner.tar.path, entry)
            .await
            .map_err(|e| self.error(op, format!("reading manifest {digest}: {e}")))?;
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
        let Some(media_type) = declared.or_else(|| media_type_of(&bytes)) else {
            return Err(self.error(
                op,
                format!("{digest} is not a manifest or index this archive can name"),
            ));
        };
        Ok(Some(Manifest {
            bytes: Bytes::from(bytes),
            media_type,
            digest,
        }))
    }

    /// Where the blob `digest` is in the tar.
    fn blob_entry(&self, digest: &Digest) -> Option<TarEntry> {
        match &self.inner.content {
            Content::Oci { .. } => {
                let name = blob_path(digest);
                self.inner.tar.get(&name.to_string_lossy())
            }
            Content::Docker(images) => images
                .iter()
                .find_map(|i| i.blobs.get(digest).and_then(|n| self.inner.tar.get(n))),
        }
    }

    /// The blob's bytes from `offset` on, streamed from its place in the tar and checked: an
    /// entry of another size than `size` is refused before a byte is read, and bytes that do
    /// not hash to `digest` end the stream in `DigestMismatch` before its last chunk.
    pub async fn open_blob(
        &self,
        digest: &Digest,
        size: u64,
        offset: u64,
    ) -> Result<ByteStream, Error> {
        self.open_entry(digest, size, offset, true).await
    }

    /// [`Self::open_blob`] from the start without the reader's own hash, for a caller that
    /// hashes every byte and checks the digest before passing the last chunk on (the
    /// engine's tee): the size is still checked, and a short entry ends the stream short.
    pub async fn open_blob_hashed_by_caller(
        &self,
        digest: &Digest,
        size: u64,
    ) -> Result<ByteStream, Error> {
        self.open_entry(digest, size, 0, false).await
    }

    async fn open_entry(
        &self,
        digest: &Digest,
        size: u64,
        offset: u64,
        hash: bool,
    ) -> Result<ByteStream, Error> {
        let op = Operation::BlobGet;
        let Some(entry) = self.blob_entry(digest) else {
            return Err(Error::new(
                &self.name,
                None,
                op,
                ErrorKind::Status {
                    status: 404,
                    code: Some("BLOB_UNKNOWN".into()),
                    message: Some(format!("the archive does not carry blob {digest}")),
                },
            ));
        };
        if entry.size != size {
            return Err(self.error(
                op,
                format!(
                    "blob {digest} is {} bytes in the archive, its descriptor declares {size}",
                    entry.size
                ),
            ));
        }
        let what = format!("{}: blob {digest}", self.name);
        let stream = reader_tar::verified_stream(
            &self.inner.tar.path,
            entry,
            digest,
            offset,
            READ_CHUNK,
            what,
            hash,
        )
        .await
        .map_err(|e| self.error(op, format!("blob {digest}: {e}")))?;
        Ok(Box::pin(stream))
    }

    /// Manifests in an OCI archive's index whose `subject` is `digest`.
    pub async fn list_referrers(&self, digest: &Digest) -> Result<Vec<Referrer>, Error> {
        let map = self
            .inner
            .referrers
            .get_or_try_init(|| self.read_referrers())
            .await?;
        Ok(map.get(digest).cloned().unwrap_or_default())
    }

    async fn read_referrers(&self) -> Result<HashMap<Digest, Vec<Referrer>>, Error> {
        let mut map: HashMap<Digest, Vec<Referrer>> = HashMap::new();
        let Content::Oci { index, .. } = &self.inner.content else {
            return Ok(map);
        };
        for entry in index {
            let Some(m) = self.find_manifest(&entry.digest.to_string()).await? else {
                continue;
            };
            add_referrer(&mut map, m);
        }
        Ok(map)
    }
}

impl crate::store::StoreRead for ArchiveReader {
    fn name(&self) -> &str {
        &self.name
    }

    fn list_tags(&self) -> Result<Vec<String>, Error> {
        ArchiveReader::list_tags(self)
    }

    fn no_manifest(&self, reference: &str) -> String {
        format!("the archive does not carry manifest {reference}")
    }

    fn find_manifest<'a>(
        &'a self,
        reference: &'a str,
    ) -> BoxFuture<'a, Result<Option<Manifest>, Error>> {
        Box::pin(ArchiveReader::find_manifest(self, reference))
    }

    fn open_blob<'a>(
        &'a self,
        digest: &'a Digest,
        size: u64,
        offset: u64,
    ) -> BoxFuture<'a, Result<ByteStream, Error>> {
        Box::pin(ArchiveReader::open_blob(self, digest, size, offset))
    }

    fn list_referrers<'a>(
        &'a self,
        digest: &'a Digest,
    ) -> BoxFuture<'a, Result<Vec<Referrer>, Error>> {
        Box::pin(ArchiveReader::list_referrers(self, digest))
    }

    fn open_blob_hashed_by_caller<'a>(
        &'a self,
        digest: &'a Digest,
        size: u64,
    ) -> BoxFuture<'a, Result<ByteStream, Error>> {
        Box::pin(ArchiveReader::open_blob_hashed_by_caller(
            self, digest, size,
        ))
    }

    fn carries(&self, digest: &Digest) -> bool {
        ArchiveReader::carries(self, digest)
    }
}

/// Which image of a docker-archive of `count` images a `:REF` picks by position, as skopeo
/// reads `docker-archive:FILE` (the only image) and `docker-archive:FILE:@N` (the Nth of
/// `manifest.json`, from 0): `Some(n)`, or `None` for a `:REPO:TAG` (matched by `RepoTags`).
/// No `:REF` over several images, or an `@N` past the last, is an error naming the count.
fn docker_choice(reference: Option<&str>, count: usize) -> Result<Option<usize>, String> {
    let several = |what: &str| {
        format!(
            "{what}: the archive holds {count} images; name one as :REPO:TAG or :@N (N from 0 \
             to {})",
            count.saturating_sub(1)
        )
    };
    match reference {
        None if count == 1 => Ok(Some(0)),
        None if count == 0 => Err("the archive holds no image".to_owned()),
        None => Err(several("no image named")),
        Some(r) => match r.strip_prefix('@').map(str::parse::<usize>) {
            None => Ok(None),
            Some(Ok(n)) if n < count => Ok(Some(n)),
            Some(Ok(n)) => Err(several(&format!("@{n}"))),
            Some(Err(_)) => Err(format!(
                "{r:?}: @ must be followed by an image's position in manifest.json (from 0)"
            )),
        },
    }
}

/// Whether a `ref.name` (or `RepoTags` entry) is the `:REF` asked for: the same text, or the
/// same reference once both are normalised (`myrepo/app:v1` is `docker.io/myrepo/app:v1`).
fn same_reference(written: &str, asked: &str) -> bool {
    if written == asked {
        return true;
    }
    match (
        ferry_distribution::Reference::parse(written),
        ferry_distribution::Reference::parse(asked),
    ) {
        (Ok(a), Ok(b)) => {
            a.registry == b.registry
                && a.repository == b.repository
                && a.tag.as_deref().unwrap_or("latest") == b.tag.as_deref().unwrap_or("latest")
                && a.digest == b.digest
        }
        _ => false,
    }
}

/// The one indexing pass (on a blocking thread), then what the archive holds. A compressed
/// archive is first spooled under `spool` as a plain tar; so is one on standard input (`-`),
/// unless it is a head-first ferry bundle, known from its head and its body kept to stream.
async fn index_archive(
    path: PathBuf,
    oci: bool,
    spool: SpoolPlace,
) -> Result<Arc<Indexed>, String> {
    let links = if oci {
        Links::Refuse
    } else {
        Links::WithinArchive
    };
    let opened = tokio::task::spawn_blocking(move || {
        let prepared = if oci && path == Path::new(input::STDIN) {
            match super::streamed::open_stdin(&spool)? {
                FromStdin::Spooled(prepared) => prepared,
                FromStdin::Bundle(head, body) => return Ok(Opened::Stream(head, body)),
            }
        } else {
            input::prepare(&path, &spool)?
        };
        let tar = reader_tar::index(&prepared.path, links)?;
        Ok::<_, String>(Opened::Tar(tar, prepared.spool))
    })
    .await
    .map_err(|e| format!("indexing the archive: {e}"))??;
    let (tar, spool) = match opened {
        Opened::Tar(tar, spool) => (tar, spool),
        Opened::Stream(head, body) => return super::streamed::indexed(&head, body),
    };
    let content = if oci {
        oci_content(&tar).await?
    } else {
        Content::Docker(super::docker::images(&tar).await?)
    };
    Ok(Arc::new(Indexed {
        tar,
        content,
        referrers: OnceCell::new(),
        supplied: Mutex::default(),
        admitted: Mutex::default(),
        spool,
        streamed: None,
    }))
}

/// An OCI archive's `index.json` (parsed by the layout's parser) and a bundle's record,
/// checked against what the tar holds.
async fn oci_content(tar: &TarIndex) -> Result<Content, String> {
    if tar.get("oci-layout").is_none() {
        return Err("not an OCI archive: entry \"oci-layout\" is missing".into());
    }
    let index_entry = tar
        .get("index.json")
        .ok_or("not an OCI archive: entry \"index.json\" is missing")?;
    if index_entry.size > INDEX_LIMIT {
        return Err(format!(
            "entry \"index.json\" is {} bytes, larger than its limit of {INDEX_LIMIT}",
            index_entry.size
        ));
    }
    let index_json = reader_tar::read_entry(&tar.path, index_entry)
        .await
        .map_err(|e| format!("entry \"index.json\": {e}"))?;
    let index = parse_index(&index_json, "entry \"index.json\"")?;
    let signature = match tar.get(SIGNATURE_ENTRY) {
        None => None,
        Some(e) if e.size > SIGNATURE_LIMIT => {
            return Err(format!(
                "entry {SIGNATURE_ENTRY:?} is {} bytes, larger than its limit of {SIGNATURE_LIMIT}",
                e.size
            ));
        }
        Some(e) => Some(
            reader_tar::read_entry(&tar.path, e)
                .await
                .map_err(|err| format!("entry {SIGNATURE_ENTRY:?}: {err}"))?,
        ),
    };
    let (record, raw) = match tar.get(BUNDLE_ENTRY) {
        None if signature.is_some() => {
            return Err(format!(
                "entry {SIGNATURE_ENTRY:?} signs a {BUNDLE_ENTRY:?} the archive does not hold"
            ));
        }
        None => (None, None),
        Some(e) if e.size > BUNDLE_ENTRY_LIMIT => {
            return Err(format!(
                "entry {BUNDLE_ENTRY:?} is {} bytes, larger than its limit of {BUNDLE_ENTRY_LIMIT}",
                e.size
            ));
        }
        Some(e) => {
            let bytes = reader_tar::read_entry(&tar.path, e)
                .await
                .map_err(|err| format!("entry {BUNDLE_ENTRY:?}: {err}"))?;
            let listed: Vec<String> = carried(tar).into_keys().collect();
            let record = crate::bundle::check::parse_record(&listed, &bytes, &index_json)?;
            crate::bundle::check::against_tar(&record, &index, &index_json, &carried(tar))?;
            (Some(Box::new(record)), Some(RawRecord { bytes, signature }))
        }
    };
    Ok(Content::Oci { index, record, raw })
}

/// The tar's blob entries (`blobs/<alg>/<hex>`) as digests, with their sizes.
fn carried(tar: &TarIndex) -> crate::bundle::check::Carried {
    tar.names()
        .filter_map(|n| {
            let (alg, hex) = n.strip_prefix("blobs/")?.split_once('/')?;
            Some((format!("{alg}:{hex}"), tar.get(n)?.size))
        })
        .collect()
}

/// The tar file an archive origin names (for messages).
pub fn archive_path(origin: &Origin) -> Option<&Path> {
    match origin {
        Origin::OciArchive { path, .. } | Origin::DockerArchive { path, .. } => Some(path),
        _ => None,
    }
}
