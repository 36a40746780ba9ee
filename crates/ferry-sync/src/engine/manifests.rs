//! Manifests go last: children by digest, then the root by tag (or digest for a pin), each once
//! per place in a run; into a layout they go as blobs with `index.json` updated atomically.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Operation, RegistryClient};

use super::graph::ImageGraph;

/// Remembers which manifests this run already put where, so shared children go once.
type PushKey = (String, String, String);
type PushCell = Arc<OnceCell<Result<(), Error>>>;

#[derive(Debug, Default)]
pub struct ManifestPusher {
    /// One push per (registry, repository, digest) in a run; a second image that needs the
    /// same manifest waits for that push to finish (and shares its outcome) before it goes on.
    pushed: Mutex<HashMap<PushKey, PushCell>>,
    layout_lock: tokio::sync::Mutex<()>,
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
    pub async fn push_registry(
        &self,
        client: &RegistryClient,
        repository: &str,
        graph: &ImageGraph,
        tag: Option<&str>,
    ) -> Result<(), Error> {
        let (children, root) = graph.manifests.split_at(graph.manifests.len() - 1);
        for m in children {
            self.put_once(client, repository, m).await?;
        }
        let root = &root[0];
        match tag {
            Some(tag) => {
                client.put_manifest(repository, tag, root).await?;
            }
            None => self.put_once(client, repository, root).await?,
        }
        Ok(())
    }

    /// Writes the graph's manifests into a layout as blobs and points `index.json` at the root.
    pub async fn push_layout(
        &self,
        dir: &Path,
        graph: &ImageGraph,
        tag: Option<&str>,
    ) -> Result<(), Error> {
        for m in &graph.manifests {
            write_manifest_blob(dir, m).await?;
        }
        let _guard = self.layout_lock.lock().await;
        update_index(dir, graph.root(), tag).await
    }
}

fn layout_error(dir: &Path, e: impl std::fmt::Display) -> Error {
    Error::new(
        format!("oci:{}", dir.display()),
        None,
        Operation::ManifestPutByTag,
        ErrorKind::Local(e.to_string()),
    )
}

async fn write_manifest_blob(dir: &Path, m: &Manifest) -> Result<(), Error> {
    let path = dir.join(crate::layout::blob_path(&m.digest));
    if path.exists() {
        return Ok(());
    }
    crate::layout::write_atomic(&path, &m.bytes)
        .await
        .map_err(|e| layout_error(dir, e))
}

async fn update_index(dir: &Path, root: &Manifest, tag: Option<&str>) -> Result<(), Error> {
    let layout = dir.join("oci-layout");
    if !layout.exists() {
        crate::layout::write_atomic(&layout, br#"{"imageLayoutVersion":"1.0.0"}"#)
            .await
            .map_err(|e| layout_error(dir, e))?;
    }
    let index_path = dir.join("index.json");
    let mut index: serde_json::Value = match tokio::fs::read(&index_path).await {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| layout_error(dir, e))?,
        Err(_) => serde_json::json!({
            "schemaVersion": 2,
            "mediaType": ferry_distribution::media::OCI_INDEX,
            "manifests": []
        }),
    };
    let entry = {
        let mut e = serde_json::json!({
            "mediaType": root.media_type,
            "digest": root.digest.to_string(),
            "size": root.bytes.len(),
        });
        if let Some(tag) = tag {
            e["annotations"] = serde_json::json!({ crate::layout::REF_NAME: tag });
        }
        e
    };
    let manifests = index
        .get_mut("manifests")
        .and_then(|m| m.as_array_mut())
        .ok_or_else(|| layout_error(dir, "index.json has no manifests array"))?;
    manifests.retain(|m| {
        let same_tag = tag.is_some()
            && m.pointer(&format!(
                "/annotations/{}",
                crate::layout::REF_NAME.replace('/', "~1")
            ))
            .and_then(|v| v.as_str())
            .and_then(crate::layout::tag_of_ref_name)
            .as_deref()
                == tag;
        let same_untagged = tag.is_none()
            && m.get("annotations").is_none()
            && m.get("digest").and_then(|d| d.as_str()) == Some(&root.digest.to_string());
        !(same_tag || same_untagged)
    });
    manifests.push(entry);
    let bytes = serde_json::to_vec_pretty(&index).map_err(|e| layout_error(dir, e))?;
    crate::layout::write_atomic(&index_path, &bytes)
        .await
        .map_err(|e| layout_error(dir, e))
}
