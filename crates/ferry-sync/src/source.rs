//! Where a mapping's images are read from: a registry repository (through its client, under the
//! one retry shape), an OCI image-layout directory or a tar archive; prepare and engine see one.

use std::sync::Arc;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::{Manifest, ManifestInfo, Referrer};
use ferry_distribution::retry::{Call, Failure};
use ferry_distribution::{Digest, Operation, RegistryClient};

use crate::registries::Registries;
use ferry_config::Origin;
use ferry_store::layout::LayoutReader;
use ferry_store::store::StoreRead;

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
    /// A store place opened for reading: an OCI image-layout directory, or an `oci-archive:`
    /// or `docker-archive:` tar (indexed once and read by seeking).
    Store(Arc<dyn StoreRead>),
}

impl Source {
    /// A store place as a source.
    pub(crate) fn store(reader: impl StoreRead + 'static) -> Source {
        Source::Store(Arc::new(reader))
    }

    /// Opens `origin`: a registry's client (built once per run by `registries`), a layout
    /// directory, which must exist, or an archive (indexed once per run by `stores`).
    pub(crate) async fn open(
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
            Origin::OciLayout { path } => Ok(Source::store(LayoutReader::open(path)?)),
            Origin::OciArchive { .. } | Origin::DockerArchive { .. } => {
                Ok(Source::store(stores.read(origin).await?))
            }
        }
    }

    /// Whether it is a store place on disk (reads of it send no request).
    pub fn is_store(&self) -> bool {
        matches!(self, Source::Store(_))
    }

    /// `host/repository`, or `oci:<dir>`: unique per source within a run.
    pub fn name(&self) -> String {
        match self {
            Source::Registry { client, repository } => format!("{}/{repository}", client.host()),
            Source::Store(s) => s.name().to_owned(),
        }
    }

    /// An error about this source: naming the registry and repository, or the layout.
    pub fn error(&self, operation: Operation, kind: ErrorKind) -> Error {
        match self {
            Source::Registry { client, repository } => {
                Error::new(client.host(), Some(repository), operation, kind)
            }
            Source::Store(s) => s.error(operation, kind),
        }
    }

    /// Every tag (all pages of a registry's listing under one retry budget).
    pub async fn list_tags(&self) -> Result<Vec<String>, Error> {
        match self {
            Source::Registry { client, repository } => client.list_tags(repository).await,
            Source::Store(s) => s.list_tags(),
        }
    }

    /// Digest and type of what `reference` names, or `None`.
    pub async fn head_manifest(&self, reference: &str) -> Result<Option<ManifestInfo>, Error> {
        match self {
            Source::Registry { client, repository } => {
                client.head_manifest(repository, reference).await
            }
            Source::Store(s) => s.head_manifest(reference).await,
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
            Source::Store(s) => s.find_manifest(reference).await,
        }
    }

    /// The manifest `reference` names, verified; its absence is an error.
    pub async fn get_manifest(&self, reference: &str) -> Result<Manifest, Error> {
        match self {
            Source::Registry { client, repository } => {
                client.get_manifest(repository, reference).await
            }
            Source::Store(s) => s.find_manifest(reference).await?.ok_or_else(|| {
                self.error(
                    Operation::ManifestGet,
                    ErrorKind::Local(s.no_manifest(reference)),
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
            Source::Store(s) => s.open_blob(digest, size, offset).await,
        }
    }

    /// [`Self::open_blob`] from the start for a caller that hashes every byte itself and checks
    /// the digest before it passes the last chunk on (the engine's tee): an archive then skips
    /// its own hash, so each byte is hashed once.
    pub(crate) async fn open_blob_hashed_by_caller(
        &self,
        digest: &Digest,
        size: u64,
    ) -> Result<ByteStream, Error> {
        match self {
            Source::Store(s) => s.open_blob_hashed_by_caller(digest, size).await,
            Source::Registry { .. } => self.open_blob(digest, size, 0).await,
        }
    }

    /// Referrers of `digest`: the registry's referrers API (`None` where it has none), or the
    /// layout's index entries whose subject is `digest`.
    pub async fn list_referrers(&self, digest: &Digest) -> Result<Option<Vec<Referrer>>, Error> {
        match self {
            Source::Registry { client, repository } => {
                client.list_referrers(repository, digest).await
            }
            Source::Store(s) => s.list_referrers(digest).await.map(Some),
        }
    }

    /// Whether the source carries the bytes of `digest`: an incremental bundle leaves out what
    /// its base carries (`ferry import` may have put it on the target already).
    pub(crate) fn carries(&self, digest: &Digest) -> bool {
        match self {
            Source::Registry { .. } => true,
            Source::Store(s) => s.carries(digest),
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
            Source::Store(s) => attempt().await.map_err(|f| match f.into_kind() {
                Ok(kind) => s.error(Operation::BlobGet, kind).with_attempts(1),
                Err(inner) => *inner,
            }),
        }
    }
}
