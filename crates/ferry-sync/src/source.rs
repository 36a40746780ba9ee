//! Where a mapping's images are read from: a registry repository (through its client, under the
//! one retry shape), an OCI image-layout directory or a tar archive; prepare and engine see one.

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{Manifest, ManifestInfo, Referrer};
use ferry_distribution::retry::{Call, Failure};
use ferry_distribution::{Digest, Operation, RegistryClient};

use crate::registries::Registries;
use ferry_config::Origin;
use ferry_store::archive::reader::ArchiveReader;
use ferry_store::layout::LayoutReader;

pub(crate) use ferry_store::layout::reader::ByteStream;

/// An opened source repository.
#[derive(Debug, Clone)]
pub enum Source {
    /// A registry repository.
    Registry {
        /// A client for the source's registry.
        client: RegistryClient,
        /// The repository on it.
        repository: String,
    },
    /// An OCI image-layout directory, opened for reading.
    Layout(LayoutReader),
    /// An `oci-archive:` or `docker-archive:` tar, indexed once and read by seeking.
    Archive(ArchiveReader),
}

impl Source {
    /// Opens `origin`: a registry's client (built once per run by `registries`), a layout
    /// directory, which must exist, or an archive (indexed once per run by `stores`).
    pub async fn open(
        origin: &Origin,
        registries: &Registries,
        stores: &ferry_store::archive::Stores,
    ) -> Result<Source, Error> {
        match origin {
            Origin::Registry {
                registry,
                repository,
            } => Ok(Source::Registry {
                client: registries.client(registry).await?,
                repository: repository.clone(),
            }),
            Origin::OciLayout { path } => Ok(Source::Layout(LayoutReader::open(path)?)),
            Origin::OciArchive { .. } | Origin::DockerArchive { .. } => {
                Ok(Source::Archive(stores.read(origin).await?))
            }
        }
    }

    /// `host/repository`, or `oci:<dir>`: unique per source within a run.
    pub fn name(&self) -> String {
        match self {
            Source::Registry { client, repository } => format!("{}/{repository}", client.host()),
            Source::Layout(l) => l.name().to_owned(),
            Source::Archive(a) => a.name().to_owned(),
        }
    }

    /// An error about this source: naming the registry and repository, or the layout.
    pub fn error(&self, operation: Operation, kind: ErrorKind) -> Error {
        match self {
            Source::Registry { client, repository } => {
                Error::new(client.host(), Some(repository), operation, kind)
            }
            Source::Layout(l) => Error::new(l.name(), None, operation, kind),
            Source::Archive(a) => Error::new(a.name(), None, operation, kind),
        }
    }

    /// Every tag (all pages of a registry's listing under one retry budget).
    pub async fn list_tags(&self) -> Result<Vec<String>, Error> {
        match self {
            Source::Registry { client, repository } => client.list_tags(repository).await,
            Source::Layout(l) => l.list_tags(),
            Source::Archive(a) => a.list_tags(),
        }
    }

    /// Digest and type of what `reference` names, or `None`.
    pub async fn head_manifest(&self, reference: &str) -> Result<Option<ManifestInfo>, Error> {
        match self {
            Source::Registry { client, repository } => {
                client.head_manifest(repository, reference).await
            }
            Source::Layout(l) => l.head_manifest(reference).await,
            Source::Archive(a) => a.head_manifest(reference).await,
        }
    }

    /// The manifest `reference` names, verified, or `None` when there is no such thing.
    pub(crate) async fn find_manifest(&self, reference: &str) -> Result<Option<Manifest>, Error> {
        match self {
            Source::Registry { client, repository } => {
                match client.get_manifest(repository, reference).await {
                    Ok(m) => Ok(Some(m)),
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(e),
                }
            }
            Source::Layout(l) => l.find_manifest(reference).await,
            Source::Archive(a) => a.find_manifest(reference).await,
        }
    }

    /// The manifest `reference` names, verified; its absence is an error.
    pub async fn get_manifest(&self, reference: &str) -> Result<Manifest, Error> {
        match self {
            Source::Registry { client, repository } => {
                client.get_manifest(repository, reference).await
            }
            Source::Layout(l) => l.find_manifest(reference).await?.ok_or_else(|| {
                self.error(
                    Operation::ManifestGet,
                    ErrorKind::Local(format!("the layout has no manifest {reference}")),
                )
            }),
            Source::Archive(a) => a.find_manifest(reference).await?.ok_or_else(|| {
                self.error(
                    Operation::ManifestGet,
                    ErrorKind::Local(format!("the archive does not carry manifest {reference}")),
                )
            }),
        }
    }

    /// The blob's bytes from `offset` on (a registry's open retried until the body starts); `size`
    /// is the size its descriptor declares, past which a layout's stream is cut off.
    pub async fn open_blob(
        &self,
        digest: &Digest,
        size: u64,
        offset: u64,
    ) -> Result<ByteStream, Error> {
        match self {
            Source::Registry { client, repository } => {
                let s = client.get_blob(repository, digest, offset).await?;
                Ok(Box::pin(s))
            }
            Source::Layout(l) => l.open_blob(digest, size, offset).await,
            Source::Archive(a) => a.open_blob(digest, size, offset).await,
        }
    }

    /// [`Self::open_blob`] from the start for a caller that hashes every byte itself and checks
    /// the digest before it passes the last chunk on (the engine's tee): an archive then skips
    /// its own hash, so each byte is hashed once.
    pub async fn open_blob_hashed_by_caller(
        &self,
        digest: &Digest,
        size: u64,
    ) -> Result<ByteStream, Error> {
        match self {
            Source::Archive(a) => a.open_blob_hashed_by_caller(digest, size).await,
            _ => self.open_blob(digest, size, 0).await,
        }
    }

    /// Referrers of `digest`: the registry's referrers API (`None` where it has none), or the
    /// layout's index entries whose subject is `digest`.
    pub async fn list_referrers(&self, digest: &Digest) -> Result<Option<Vec<Referrer>>, Error> {
        match self {
            Source::Registry { client, repository } => {
                client.list_referrers(repository, digest).await
            }
            Source::Layout(l) => l.list_referrers(digest).await.map(Some),
            Source::Archive(a) => a.list_referrers(digest).await.map(Some),
        }
    }

    /// Runs `attempt` as one read of this source: under the registry's retry shape, or once for
    /// a layout or an archive (a local file fails the same way twice).
    pub(crate) async fn read_with_retry<T, F, Fut>(&self, attempt: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut attempt = attempt;
        match self {
            Source::Registry { client, repository } => {
                client
                    .run(Call::new(Operation::BlobGet, Some(repository)), |_| {
                        attempt()
                    })
                    .await
            }
            Source::Layout(l) => attempt().await.map_err(|f| match f.into_kind() {
                Ok(kind) => Error::new(l.name(), None, Operation::BlobGet, kind).with_attempts(1),
                Err(inner) => *inner,
            }),
            Source::Archive(a) => attempt().await.map_err(|f| match f.into_kind() {
                Ok(kind) => Error::new(a.name(), None, Operation::BlobGet, kind).with_attempts(1),
                Err(inner) => *inner,
            }),
        }
    }
}
