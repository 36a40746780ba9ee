//! Docker Hub's and Quay's webhooks: both name the tags pushed and no digest, and neither can
//! carry a header of ours (they reach ferry through `POST /v1/events/<path_secret>`).

use serde_json::Value;

use super::{Notice, owned, text};

/// Docker Hub's webhook (source: docs.docker.com, "Webhooks", example payload):
/// `push_data.tag` and `repository.repo_name`; a push only.
pub fn docker_hub(v: &Value) -> Result<Vec<Notice>, String> {
    let repository = owned(v, &["repository", "repo_name"])
        .ok_or("a Docker Hub event without repository.repo_name")?;
    Ok(vec![Notice {
        host: Some("docker.io".into()),
        repository,
        tag: owned(v, &["push_data", "tag"]),
        digest: None,
        delete: false,
    }])
}

/// Quay's `repo_push` notification (source: docs.quay.io, "Repository notifications",
/// "Repository Push"): `repository`, `docker_url`, `updated_tags` (one or several).
pub fn quay(v: &Value) -> Result<Vec<Notice>, String> {
    let repository = owned(v, &["repository"]).ok_or("a Quay event without repository")?;
    let host = text(v, &["docker_url"]).and_then(|u| u.split('/').next().map(str::to_owned));
    let tags = v
        .get("updated_tags")
        .and_then(Value::as_array)
        .ok_or("a Quay event whose updated_tags is not a list")?;
    Ok(tags
        .iter()
        .filter_map(Value::as_str)
        .map(|tag| Notice {
            host: host.clone(),
            repository: repository.clone(),
            tag: Some(tag.to_owned()),
            digest: None,
            delete: false,
        })
        .collect())
}
