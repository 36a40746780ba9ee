//! Manifests go last: children by digest, then the root by tag (or digest for a pin), each once
//! per place in a run; into a store place they go as blobs, then its index is pointed at the root.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use ferry_distribution::RegistryClient;
use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::Manifest;

use super::graph::ImageGraph;
use crate::error::SyncError;
use crate::report::KeptDigestRefused;
use ferry_store::store::{ImageIn, StoreWrite};

/// Remembers which manifests this run already put where, so shared children go once.
type PushKey = (String, String, String);
type PushCell = Arc<OnceCell<Result<(), Error>>>;

/// Puts manifests on targets, children before parents, each (registry, repository, digest) once per
/// run.
#[derive(Debug, Default)]
pub(crate) struct ManifestPusher {
    /// One push per (registry, repository, digest) in a run; a second image that needs the
    /// same manifest waits for that push to finish (and shares its outcome) before it goes on.
    pushed: Mutex<HashMap<PushKey, PushCell>>,
    /// The run's live counters: manifest bytes written into layout targets go there.
    progress: Arc<crate::progress::SyncProgress>,
}

impl ManifestPusher {
    /// A pusher that counts what it writes into layouts in `progress`.
    pub(crate) fn new(progress: Arc<crate::progress::SyncProgress>) -> Self {
        ManifestPusher {
            progress,
            ..ManifestPusher::default()
        }
    }
}

/// Whether a registry's answer to an index PUT refuses its content (children it does not hold,
/// as distribution 2.8 answers `400 MANIFEST_BLOB_UNKNOWN`; see docs/registries.md) rather than
/// failing for a reason the filtered index would share (auth, throttling, transport).
fn refuses_incomplete_index(e: &Error) -> bool {
    matches!(
        e.kind,
        ErrorKind::Status { status, .. } if matches!(status, 400 | 404 | 409 | 412 | 422)
    )
}

impl ManifestPusher {
    async fn put_once(
        &self,
        client: &RegistryClient,
        repository: &str,
        manifest: &Manifest,
    ) -> Result<(), Error> {
        let digest = manifest.digest.to_string();
        let key = (
            client.host().to_owned(),
            repository.to_owned(),
            digest.clone(),
        );
        let cell = {
            let mut pushed = self.pushed.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(pushed.entry(key).or_default())
        };
        cell.get_or_init(|| async {
            client
                .put_manifest(repository, &digest, manifest)
                .await
                .map(|_| ())
        })
        .await
        .clone()
    }

    /// Pushes the graph into a registry repository: children first, root last under `tag`.
    /// With an original root kept (`platforms_keep_digest`), that goes in the root's place;
    /// where the registry refuses it for its missing children, the filtered root is pushed and
    /// the refusal returned.
    pub(crate) async fn push_registry(
        &self,
        client: &RegistryClient,
        repository: &str,
        graph: &ImageGraph,
        tag: Option<&str>,
    ) -> Result<Option<KeptDigestRefused>, Error> {
        let (children, root) = graph.manifests.split_at(graph.manifests.len() - 1);
        for m in children {
            self.put_once(client, repository, m).await?;
        }
        let filtered = &root[0];
        let Some(original) = &graph.original_root else {
            self.put_root(client, repository, filtered, tag).await?;
            return Ok(None);
        };
        match self.put_root(client, repository, original, tag).await {
            Ok(()) => Ok(None),
            Err(e) if refuses_incomplete_index(&e) => {
                tracing::warn!(
                    registry = client.host(),
                    repository,
                    kept = %original.digest,
                    pushed = %filtered.digest,
                    "the target refused the source's index (platforms_keep_digest): pushed the filtered index"
                );
                self.put_root(client, repository, filtered, tag).await?;
                Ok(Some(KeptDigestRefused {
                    pushed: filtered.digest.to_string(),
                    reason: e.to_string(),
                }))
            }
            Err(e) => Err(e),
        }
    }

    async fn put_root(
        &self,
        client: &RegistryClient,
        repository: &str,
        root: &Manifest,
        tag: Option<&str>,
    ) -> Result<(), Error> {
        match tag {
            Some(tag) => client.put_manifest(repository, tag, root).await.map(|_| ()),
            None => self.put_once(client, repository, root).await,
        }
    }

    /// Writes the image's manifests into a store place as blobs and points its index at the
    /// root (for a layout the caller holds its writing lock; the index lock is taken there).
    pub(crate) async fn push_store(
        &self,
        store: &dyn StoreWrite,
        image: &ImageIn<'_>,
    ) -> Result<(), SyncError> {
        for m in &image.manifests {
            let written = store.write_manifest(m).await?;
            self.progress.layout_written(written);
        }
        Ok(store.point_index(image).await?)
    }
}
