//! Where an image goes, opened once per target the way `Source` is: a registry repository with
//! its client, or a layout writer. The engine and the dry run ask it the same questions.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::path::Path;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{BlobPush, MountOutcome, UploadSession, UploadShape};
use ferry_distribution::retry::Failure;
use ferry_distribution::{Digest, Operation, RegistryClient};

use super::graph::ImageGraph;
use super::manifests::ManifestPusher;
use super::transfer::{Feed, primed};
use crate::error::SyncError;
use crate::plan::TargetState;
use crate::registries::Registries;
use crate::report::KeptDigestRefused;
use ferry_config::Target;
use ferry_store::archive::writer::{ArchiveWriter, ImageIn, Naming};
use ferry_store::layout::writer::LayoutWriter;

/// An opened target.
#[derive(Debug, Clone)]
pub enum Destination {
    /// A registry repository.
    Registry {
        /// A client for the target's registry.
        client: RegistryClient,
        /// The repository on it.
        repository: String,
    },
    /// An OCI image-layout directory, written through its writer.
    Layout(LayoutWriter),
    /// An OCI archive (`oci-archive:PATH`) or `ferry export`'s bundle: one tar stream shared by
    /// every target written into it.
    Archive {
        /// The archive's writer, one per file for the run.
        writer: ArchiveWriter,
        /// What names the images in it: the target's `REF` (`oci-archive:PATH:REF`) or, in a
        /// bundle, the registry target's `host/repository`.
        reference: Option<String>,
    },
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
/// layout, each by name.
#[derive(PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Key<'a> {
    Registry(&'a str, &'a str),
    Layout(&'a Path),
    Archive(&'a ferry_store::archive::writer::Output),
}

impl Destination {
    /// Opens `target`: its registry's client (built once per run by `registries`), or a writer
    /// for its layout directory.
    /// In an export (`stores` write a bundle) every target is the bundle: a registry target
    /// names its images there by its `host/repository`.
    pub async fn open(
        target: &Target,
        registries: &Registries,
        stores: &ferry_store::archive::Stores,
    ) -> Result<Destination, Error> {
        if let Some(bundle) = stores.export() {
            let reference = match target {
                Target::Registry { .. } => Some(target.to_string()),
                _ => None,
            };
            return Ok(Destination::Archive {
                writer: bundle.clone(),
                reference,
            });
        }
        match target {
            Target::OciLayout { path } => Ok(Destination::Layout(LayoutWriter::new(path))),
            Target::OciArchive { path, reference } => Ok(Destination::Archive {
                writer: stores.write_at(path),
                reference: reference.clone(),
            }),
            Target::DockerArchive { .. } => Err(target.archive_not_yet(Operation::UploadStart)),
            Target::Registry {
                registry,
                repository,
            } => Ok(Destination::Registry {
                client: registries.client(registry).await?,
                repository: repository.clone(),
            }),
        }
    }

    fn key(&self) -> Key<'_> {
        match self {
            Destination::Registry { client, repository } => {
                Key::Registry(client.host(), repository)
            }
            Destination::Layout(w) => Key::Layout(w.dir()),
            Destination::Archive { writer, .. } => Key::Archive(writer.output()),
        }
    }

    /// `host/repository`, or `oci:<dir>`.
    pub fn name(&self) -> String {
        match self {
            Destination::Registry { client, repository } => {
                format!("{}/{repository}", client.host())
            }
            Destination::Layout(w) => w.name(),
            Destination::Archive { writer, .. } => writer.name(),
        }
    }

    /// An error about this destination: naming the registry and repository, or the layout.
    pub fn error(&self, operation: Operation, kind: ErrorKind) -> Error {
        match self {
            Destination::Registry { client, repository } => {
                Error::new(client.host(), Some(repository), operation, kind)
            }
            Destination::Layout(w) => Error::new(w.name(), None, operation, kind),
            Destination::Archive { writer, .. } => Error::new(writer.name(), None, operation, kind),
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
            Destination::Layout(w) => Ok(w.holds_blob(digest)),
            Destination::Archive { writer, .. } => Ok(writer.holds(digest)),
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
    pub async fn mount(&self, digest: &Digest, from: &Destination) -> Result<MountOutcome, Error> {
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
    /// into a layout through its writer, under the source's retry shape.
    pub(crate) async fn write_blob(
        &self,
        feed: &Feed<'_>,
        shape: UploadShape,
        session: Option<UploadSession>,
    ) -> Result<(), Error> {
        match self {
            Destination::Registry { client, repository } => {
                // Nothing goes to the target until the source has produced its first bytes: a
                // source that is paused or slow must not hold a target request open until it
                // times out (and is blamed on the target). A source that fails first fails the
                // first attempt, which later attempts recover from with a fresh read.
                let blob = feed.blob();
                // An upload an earlier process left (the state directory) goes on from the
                // session's offset: it had no share of the tee (`transfer`), and lets it go.
                let recorded = self.resumes(blob);
                let tee = match feed.take_first() {
                    Some(_) if recorded => None,
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
                let flow = client.push_blob(push, tee, feed).await?;
                tracing::trace!(registry = client.host(), repository, blob = %blob.digest, ?flow, "blob pushed");
                Ok(())
            }
            Destination::Layout(w) => {
                feed.source()
                    .read_with_retry(|| async {
                        let stream = match feed.take_first() {
                            Some(stream) => stream,
                            None => feed.reopen(0).await?,
                        };
                        w.write_blob(&feed.blob().digest, feed.blob().size, stream)
                            .await
                    })
                    .await
            }
            Destination::Archive { writer, .. } => archive_blob(writer, feed).await,
        }
    }

    /// Whether an upload of `blob` here was left by an earlier process (recorded in the state
    /// directory): it reads the source from the session's offset itself, not from the tee.
    pub(crate) fn resumes(&self, blob: &super::graph::BlobRef) -> bool {
        match self {
            Destination::Registry { client, repository } => {
                client.has_recorded_upload(repository, &blob.digest, blob.size)
            }
            Destination::Layout(_) | Destination::Archive { .. } => false,
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
            Destination::Layout(w) => {
                pusher.push_layout(w, graph, tag).await?;
                Ok(Put::Pushed)
            }
            Destination::Archive { writer, reference } => {
                // An archive holds the source's index as it is, as a layout does.
                let (children, filtered) = graph.manifests.split_at(graph.manifests.len() - 1);
                let root = graph.original_root.as_ref().unwrap_or(&filtered[0]);
                let ref_name = match (writer.naming(), reference, tag) {
                    (Naming::FullReference, Some(r), Some(t)) => Some(format!("{r}:{t}")),
                    (Naming::FullReference, Some(r), None) => Some(format!("{r}@{}", root.digest)),
                    (_, Some(r), _) if writer.naming() == Naming::Tag => Some(r.clone()),
                    (_, _, t) => t.map(str::to_owned),
                };
                let image = ImageIn {
                    manifests: children.iter().chain([root]).collect(),
                    blobs: graph.blobs.iter().map(|b| &b.digest).collect(),
                    ref_name,
                    source: from.source.clone(),
                    mapping: from.mapping,
                };
                let written = writer.put_image(image).await?;
                pusher.layout_written(written);
                Ok(Put::Pushed)
            }
        }
    }
}

/// Streams one blob into an archive: the tar is taken once the source has produced its first
/// bytes (a source that never answers holds no other blob back). The tee's bytes are verified
/// by the tee (it checks the digest and holds the last chunk back), so they are not hashed
/// again; a read that breaks part way is resumed under the source's retry shape from byte 0
/// (the prefix already in the tar hashed, not written again) or, once resumed, from the
/// first byte not hashed. A blob that fails inside the tar cuts the archive (see
/// `archive::writer`).
async fn archive_blob(writer: &ArchiveWriter, feed: &Feed<'_>) -> Result<(), Error> {
    use futures::StreamExt as _;
    let blob = feed.blob();
    let first = match feed.take_first() {
        Some(stream) => Some(primed(stream).await),
        None => None,
    };
    let first = match first {
        // The source's bytes failed for good (a digest mismatch) before any reached the tar:
        // this blob fails, the archive goes on.
        Some(Err(Failure::Final(kind))) => {
            return Err(writer.error(Operation::BlobGet, kind));
        }
        Some(Err(_)) | None => None,
        Some(Ok(s)) => Some(s),
    };
    let Some(entry) = writer.begin_blob(&blob.digest, blob.size).await? else {
        return Ok(());
    };
    let entry = tokio::sync::Mutex::new(entry);
    let first = std::sync::Mutex::new(first);
    feed.source()
        .read_with_retry(|| async {
            let mut entry = entry.lock().await;
            let taken = first.lock().unwrap_or_else(|p| p.into_inner()).take();
            // The tee's stream while nothing else was written; a resumed read after it.
            let (mut stream, verified) = match taken {
                Some(s) if entry.written() == 0 => (s, true),
                _ => (feed.reopen(entry.resume_at()).await?, false),
            };
            while let Some(chunk) = stream.next().await {
                let chunk = chunk?;
                entry
                    .write(&chunk, verified)
                    .await
                    .map_err(Failure::Final)?;
            }
            Ok(())
        })
        .await?;
    entry.into_inner().finish().await
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
