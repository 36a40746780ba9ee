//! Referrers on a target without the referrers API: after the referrers themselves are pushed,
//! the subject's `<alg>-<hex>` tag is (re)written as an index listing them (the tag schema).

use std::collections::BTreeMap;

use bytes::Bytes;
use ferry_distribution::error::Error;
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, RegistryClient, media};

/// A referrer that now stands on a target, to be listed under its subject's tag.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// A client for the target's registry.
    pub client: RegistryClient,
    /// The target repository the referrer was pushed to.
    pub repository: String,
    /// The manifest the referrer refers to: the tag-schema index is named after it.
    pub subject: Digest,
    /// The referrer's manifest, for its descriptor in the index.
    pub referrer: Manifest,
    /// The referrer's (work, target) in the engine's run, whose report a failure here fails.
    pub report: (usize, usize),
}

/// Writes the tag-schema index for every subject whose target has no referrers API, merging
/// with what the tag already lists. One write per (target repository, subject).
pub(crate) async fn write_fallback_indexes(pushed: Vec<Pushed>) -> Vec<(Pushed, Error)> {
    let mut groups: BTreeMap<(String, String, Digest), Vec<Pushed>> = BTreeMap::new();
    for p in pushed {
        groups
            .entry((
                p.client.host().to_owned(),
                p.repository.clone(),
                p.subject.clone(),
            ))
            .or_default()
            .push(p);
    }
    let mut failures = Vec::new();
    for ((_, repository, subject), items) in groups {
        let client = items[0].client.clone();
        // Does the target index subjects itself? (Learned once per registry.)
        match client.list_referrers(&repository, &subject).await {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(e) => {
                failures.extend(items.into_iter().map(|p| (p, e.clone())));
                continue;
            }
        }
        if let Err(e) = merge_and_put(&client, &repository, &subject, &items).await {
            failures.extend(items.into_iter().map(|p| (p, e.clone())));
        }
    }
    failures
}

async fn merge_and_put(
    client: &RegistryClient,
    repository: &str,
    subject: &Digest,
    items: &[Pushed],
) -> Result<(), Error> {
    let tag = subject.fallback_tag();
    let mut index = match client.get_manifest(repository, &tag).await {
        Ok(m) => serde_json::from_slice::<serde_json::Value>(&m.bytes).unwrap_or_default(),
        Err(e) if e.is_not_found() => serde_json::Value::Null,
        Err(e) => return Err(e),
    };
    if !index.is_object() || !index.get("manifests").is_some_and(|m| m.is_array()) {
        index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": media::OCI_INDEX,
            "manifests": [],
        });
    }
    let list = index["manifests"].as_array_mut().expect("checked above");
    let before = list.len();
    for p in items {
        let digest = p.referrer.digest.to_string();
        if list
            .iter()
            .any(|d| d["digest"].as_str() == Some(digest.as_str()))
        {
            continue;
        }
        let body: serde_json::Value = serde_json::from_slice(&p.referrer.bytes).unwrap_or_default();
        let mut descriptor = serde_json::json!({
            "mediaType": p.referrer.media_type,
            "digest": digest,
            "size": p.referrer.bytes.len(),
        });
        let artifact_type = body
            .get("artifactType")
            .or_else(|| body.pointer("/config/mediaType"));
        if let Some(t) = artifact_type {
            descriptor["artifactType"] = t.clone();
        }
        if let Some(a) = body.get("annotations") {
            descriptor["annotations"] = a.clone();
        }
        list.push(descriptor);
    }
    if list.len() == before {
        return Ok(());
    }
    let bytes = Bytes::from(serde_json::to_vec(&index).unwrap_or_default());
    let manifest = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes,
        media_type: media::OCI_INDEX.to_owned(),
    };
    client.put_manifest(repository, &tag, &manifest).await?;
    Ok(())
}
