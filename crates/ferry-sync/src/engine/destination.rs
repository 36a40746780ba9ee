//! Where an image goes, opened once per target the way `Source` is: a registry repository with
//! its client, or a store place (layout or archive) written through its one write trait.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{BlobPush, MountOutcome, UploadSession, UploadShape};
use ferry_distribution::retry::Failure;
use ferry_distribution::{Digest, Operation, RegistryClient};

use super::feed::{Feed, Upload, primed};
use super::graph::ImageGraph;
use super::manifests::ManifestPusher;
use crate::error::SyncError;
use crate::plan::TargetState;
use crate::registries::Registries;
use crate::report::KeptDigestRefused;
use ferry_config::Target;
use ferry_store::StoreError;
use ferry_store::archive::writer::{ArchiveTarget, ArchiveWriter, Output};
use ferry_store::layout::writer::LayoutWriter;
use ferry_store::store::{ImageIn, SinkError, StoreKey, StoreWrite};

/// An opened target.
#[derive(Debug, Clone)]
pub enum Destination {
    /// A registry repository.
    Registry {
        /// A client for the target's registry.
        client: RegistryClient,
        /// The repository on it (shared: the run plans a copy of the destination per blob).
        repository: Arc<str>,
    },
    /// A store place: an OCI image-layout directory, or an OCI archive (`oci-archive:PATH`,
    /// or `ferry export`'s bundle: one tar stream shared by every target written into it).
    Store(Arc<dyn StoreWrite>),
}

/// Where an image came from, for an archive's record of it.
pub(crate) struct ImageFrom {
    /// Its mapping's index.
    pub mapping: usize,
    /// `source:tag` or `source@digest`.
    pub source: String,
}

/// What putting an image's manifests on a destination did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// The manifests are there, the root under its tag (or by digest for a pin).
    Pushed,
    /// The target refused the source's index (`platforms_keep_digest`) and holds the filtered
    /// one: which, and why.
    KeptDigestRefused(KeptDigestRefused),
}

/// The repository a sync creates before pushing to `target` in `state`: a registry target whose
/// repository does not exist, on a registry that creates repositories (ECR's
/// `create_repositories`). The engine creates it (once an image for it was fetched and
/// verified); the dry run lists it.
pub(crate) fn repository_to_create<'a>(
    target: &'a Target,
    state: &TargetState,
    registries: &Registries,
) -> Option<(&'a str, &'a str)> {
    match (target, state) {
        (
            Target::Registry {
                registry,
                repository,
            },
            TargetState::NewRepository,
        ) if registries.settings(registry).create_repositories.is_some() => {
            Some((registry.as_str(), repository.as_str()))
        }
        _ => None,
    }
}

/// A destination by what it names, for ordering and lookups: a registry repository before a
/// store place, each by name.
#[derive(PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Key<'a> {
    Registry(&'a str, &'a str),
    Store(StoreKey),
}

impl Destination {
    /// A store place as a destination.
    pub(crate) fn store(writer: impl StoreWrite + 'static) -> Destination {
        Destination::Store(Arc::new(writer))
    }

    /// An archive's writer as one target's destination, its images named by `reference`.
    pub(crate) fn archive(writer: ArchiveWriter, reference: Option<String>) -> Destination {
        Destination::store(ArchiveTarget { writer, reference })
    }

    /// Opens `target`: its registry's client (built once per run by `registries`), or a writer
    /// for its layout directory.
    /// In an export (`stores` write a bundle) every target is the bundle: a registry target
    /// names its images there by its `host/repository`.
    pub(crate) async fn open(
        target: &Target,
        registries: &Registries,
        stores: &ferry_store::archive::Stores,
    ) -> Result<Destination, Error> {
        if let Some(bundle) = stores.export() {
            let reference = match target {
                Target::Registry { .. } => Some(target.to_string()),
                _ => None,
            };
            return Ok(Destination::archive(bundle.clone(), reference));
        }
        match target {
            Target::OciLayout { path } => Ok(Destination::store(LayoutWriter::new(path))),
            Target::OciArchive { path, reference } => Ok(Destination::archive(
                stores.write_at(path),
                reference.clone(),
            )),
            Target::DockerArchive { .. } => Err(target.archive_not_yet(Operation::UploadStart)),
            Target::Registry {
                registry,
                repository,
            } => Ok(Destination::Registry {
                client: registries.client(registry).await?,
                repository: repository.as_str().into(),
            }),
        }
    }

    fn key(&self) -> Key<'_> {
        match self {
            Destination::Registry { client, repository } => {
                Key::Registry(client.host(), repository)
            }
            Destination::Store(s) => Key::Store(s.key()),
        }
    }

    /// `host/repository`, or `oci:<dir>`.
    pub(crate) fn name(&self) -> String {
        match self {
            Destination::Registry { client, repository } => {
                format!("{}/{repository}", client.host())
            }
            Destination::Store(s) => s.name(),
        }
    }

    /// The archive it writes, for a destination that is one (the run finishes it at the end).
    pub(crate) fn archive_output(&self) -> Option<Output> {
        match self {
            Destination::Registry { .. } => None,
            Destination::Store(s) => match s.key() {
                StoreKey::Archive(output) => Some(output),
                StoreKey::Layout(_) => None,
            },
        }
    }

    /// An error about this destination: naming the registry and repository, or the layout.
    pub(crate) fn error(&self, operation: Operation, kind: ErrorKind) -> Error {
        match self {
            Destination::Registry { client, repository } => {
                Error::new(client.host(), Some(repository), operation, kind)
            }
            Destination::Store(s) => Error::new(s.name(), None, operation, kind),
        }
    }

    /// Whether it holds `digest` already. A repository that did not exist before this run
    /// holds nothing (no HEAD is sent); a layout holds a blob only as a regular file (a symlink
    /// planted at its name does not count, and is never followed).
    pub(crate) async fn holds_blob(
        &self,
        digest: &Digest,
        new_repository: bool,
    ) -> Result<bool, Error> {
        match self {
            Destination::Registry { .. } if new_repository => Ok(false),
            Destination::Registry { client, repository } => client
                .head_blob(repository, digest)
                .await
                .map(|s| s.is_some()),
            Destination::Store(s) => Ok(s.holds_blob(digest)),
        }
    }

    /// Whether it holds `digest` of `source`'s image, by the engine's skip rule: a repository
    /// that did not exist before this run holds nothing (no HEAD is sent) unless the source
    /// leaves the blob out (an incremental bundle: `ferry import` may have put it there).
    /// Also says whether the target was asked (a HEAD, or a look at a store), for a caller
    /// that remembers answers. The engine's `BlobScheduler` and the dry run both ask this.
    pub(crate) async fn holds_blob_from(
        &self,
        source: &crate::source::Source,
        digest: &Digest,
        new_repository: bool,
    ) -> Result<(bool, bool), Error> {
        let assumed_empty = new_repository && source.carries(digest);
        let held = self.holds_blob(digest, assumed_empty).await?;
        Ok((held, !assumed_empty))
    }

    /// The source as a place a target of the same registry can mount from: a registry
    /// source's repository, through the source's client (the one client the run holds for that
    /// host, so the mount asks with the credentials the run reads the source with).
    pub(crate) fn source_repository(source: &crate::source::Source) -> Option<Destination> {
        match source {
            crate::source::Source::Registry { client, repository } => Some(Destination::Registry {
                client: client.clone(),
                repository: repository.as_str().into(),
            }),
            crate::source::Source::Store(_) => None,
        }
    }

    /// Whether a blob can reach it by a mount from `from`: two repositories of one registry
    /// that has not refused or ignored mounts this run.
    pub(crate) fn mounts_from(&self, from: &Destination) -> bool {
        match (self, from) {
            (Destination::Registry { client, .. }, Destination::Registry { client: c, .. }) => {
                client.host() == c.host()
                    && !client
                        .capabilities()
                        .support(ferry_distribution::capabilities::Feature::Mount)
                        .is_unavailable()
            }
            _ => false,
        }
    }

    /// Mounts `digest` from `from` (a repository of the same registry, see
    /// [`Destination::mounts_from`]); a refused mount hands over an upload session.
    pub(crate) async fn mount(
        &self,
        digest: &Digest,
        from: &Destination,
    ) -> Result<MountOutcome, Error> {
        match (self, from) {
            (
                Destination::Registry { client, repository },
                Destination::Registry {
                    repository: from_repository,
                    ..
                },
            ) => client.mount_blob(repository, digest, from_repository).await,
            _ => Err(self.error(
                Operation::Mount,
                ErrorKind::Local(format!("cannot mount {digest} from {}", from.name())),
            )),
        }
    }

    /// Writes the blob `feed` carries: into a registry repository through the client's
    /// `push_blob` (into `session` when a refused mount opened one), retried and resumed there;
    /// into a store place through its blob sink, the source read under its retry shape. A
    /// write that fails on the store is the store's error (`SyncError::Store`), never the
    /// source's.
    pub(crate) async fn write_blob(
        &self,
        feed: &Feed<'_>,
        shape: UploadShape,
        upload: Upload,
    ) -> Result<(), SyncError> {
        match self {
            Destination::Registry { client, repository } => {
                // Nothing goes to the target until the source has produced its first bytes: a
                // source that is paused or slow must not hold a target request open until it
                // times out (and is blamed on the target). A source that fails first fails the
                // first attempt, which later attempts recover from with a fresh read.
                let blob = feed.blob();
                // An upload an earlier process left (the state directory, read once by
                // `transfer`) goes on from the session's offset: it had no share of the tee.
                let Upload { session, recalled } = upload;
                let tee = match feed.take_first() {
                    Some(_) if recalled.is_some() => None,
                    Some(stream) => Some(primed(stream).await),
                    None => None,
                };
                let push = BlobPush {
                    repository,
                    digest: &blob.digest,
                    size: blob.size,
                    shape,
                    session,
                };
                let flow = client.push_blob_recalled(push, recalled, tee, feed).await?;
                tracing::trace!(registry = client.host(), repository = &**repository, blob = %blob.digest, ?flow, "blob pushed");
                Ok(())
            }
            Destination::Store(store) => store_blob(store.as_ref(), feed).await,
        }
    }

    /// The upload of `blob` here an earlier process left (recorded in the state directory), if
    /// any: it reads the source from the session's offset itself, not from the tee. One read
    /// of the journal per blob and destination (`transfer`).
    pub(crate) async fn recorded_upload(
        &self,
        blob: &super::graph::BlobRef,
    ) -> Option<UploadSession> {
        match self {
            Destination::Registry { client, repository } => {
                client
                    .recorded_upload(repository, &blob.digest, blob.size)
                    .await
            }
            Destination::Store(_) => None,
        }
    }

    /// Puts the graph's manifests here, children first, the root last under `tag` (by digest
    /// without one), once every blob is in.
    pub(crate) async fn put_graph(
        &self,
        pusher: &ManifestPusher,
        graph: &ImageGraph,
        tag: Option<&str>,
        from: &ImageFrom,
    ) -> Result<Put, SyncError> {
        match self {
            Destination::Registry { client, repository } => Ok(
                match pusher.push_registry(client, repository, graph, tag).await? {
                    Some(refused) => Put::KeptDigestRefused(refused),
                    None => Put::Pushed,
                },
            ),
            Destination::Store(store) => {
                // A store holds the source's index as it is, children missing or not.
                let (children, filtered) = graph.manifests.split_at(graph.manifests.len() - 1);
                let root = graph.original_root.as_ref().unwrap_or(&filtered[0]);
                let image = ImageIn {
                    manifests: children.iter().chain([root]).collect(),
                    blobs: graph.blobs.iter().map(|b| &b.digest).collect(),
                    tag,
                    source: from.source.clone(),
                    mapping: from.mapping,
                };
                pusher.push_store(store.as_ref(), &image).await?;
                Ok(Put::Pushed)
            }
        }
    }
}

/// Streams one blob into a store place: its sink is begun once the source has produced its
/// first bytes (a source that never answers holds no other blob of an archive back). The tee's
/// bytes are verified by the tee (it checks the digest and holds the last chunk back); a read
/// that breaks part way is resumed under the source's retry shape from where the sink says
/// (`BlobSink::resume_at`). A write that fails is the store's `StoreError`; bytes that are not
/// the blob are the source's error.
async fn store_blob(store: &dyn StoreWrite, feed: &Feed<'_>) -> Result<(), SyncError> {
    use futures::StreamExt as _;
    let blob = feed.blob();
    let first = match feed.take_first() {
        Some(stream) => Some(primed(stream).await),
        None => None,
    };
    let first = match first {
        // The source's read failed before any byte reached the store: the source's failure
        // (a digest mismatch, or an open that gave up under its retry shape).
        Some(Err(Failure::Final(kind))) => {
            return Err(feed.source().error(Operation::BlobGet, kind).into());
        }
        Some(Err(Failure::Inner(e))) => return Err((*e).into()),
        Some(Err(_)) | None => None,
        Some(Ok(s)) => Some(s),
    };
    let Some(sink) = store.begin_blob(&blob.digest, blob.size).await? else {
        return Ok(());
    };
    let sink = tokio::sync::Mutex::new(sink);
    let first = std::sync::Mutex::new(first);
    let failed: std::sync::Mutex<Option<StoreError>> = std::sync::Mutex::default();
    let read = feed
        .source()
        .read_with_retry(|| async {
            let mut sink = sink.lock().await;
            let taken = first.lock().unwrap_or_else(|p| p.into_inner()).take();
            // The tee's stream while nothing else was written; a resumed read after it.
            let (mut stream, verified) = match taken {
                Some(s) if sink.written() == 0 => (s, true),
                _ => (feed.reopen(sink.resume_at()).await?, false),
            };
            while let Some(chunk) = stream.next().await {
                match sink.write(chunk?, verified).await {
                    Ok(()) => {}
                    Err(SinkError::Bytes(kind)) => return Err(Failure::Final(kind)),
                    Err(SinkError::Store(e)) => {
                        let kind = ErrorKind::Local(e.to_string());
                        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        return Err(Failure::Final(kind));
                    }
                }
            }
            Ok(())
        })
        .await;
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(SyncError::Store(e));
    }
    read?;
    match sink.into_inner().finish().await {
        Ok(()) => Ok(()),
        Err(SinkError::Store(e)) => Err(SyncError::Store(e)),
        Err(SinkError::Bytes(kind)) => Err(feed.source().error(Operation::BlobGet, kind).into()),
    }
}

impl PartialEq for Destination {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Destination {}

impl Hash for Destination {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialOrd for Destination {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Destination {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}
