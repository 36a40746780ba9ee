//! The push-event benches' image: a new image (its own config and one small layer) pushed as
//! `repo:tag` through the registry client, so each event names something the target lacks.

use ferry_distribution::{Algorithm, Digest, RegistryClient, ops::Manifest};

/// A new image (its own config and layer) pushed as `repo:tag`: its manifest's digest.
pub async fn push(client: &RegistryClient, repo: &str, tag: &str) -> Digest {
    let config = format!(r#"{{"architecture":"amd64","os":"linux","tag":"{tag}"}}"#);
    let layer = format!("layer of {repo}:{tag}");
    let mut descriptors = Vec::new();
    for bytes in [config.as_bytes(), layer.as_bytes()] {
        let digest = Digest::of_bytes(Algorithm::Sha256, bytes);
        client
            .push_blob_bytes(repo, &digest, bytes.to_vec().into())
            .await
            .expect("blob pushed");
        descriptors.push(serde_json::json!({"digest": digest.to_string(), "size": bytes.len()}));
    }
    let mut config_descriptor = descriptors.remove(0);
    config_descriptor["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    descriptors[0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
    let bytes = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_descriptor,
        "layers": descriptors,
    }))
    .expect("json");
    let digest = Digest::of_bytes(Algorithm::Sha256, &bytes);
    let manifest = Manifest {
        digest: digest.clone(),
        bytes: bytes.into(),
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
    };
    client
        .put_manifest(repo, tag, &manifest)
        .await
        .expect("manifest pushed");
    digest
}
