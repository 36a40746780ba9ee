//! Harbor's webhooks: the default JSON (`PUSH_ARTIFACT` / `DELETE_ARTIFACT` with `event_data`)
//! and the CloudEvents format (`harbor.artifact.pushed` / `.deleted`, the same data unwrapped).

use serde_json::Value;

use super::{Notice, owned, text};

/// Harbor's default payload (source: goharbor.io docs, "Configure Webhook Notifications",
/// payload format): `type`, `event_data.repository.repo_full_name`, `event_data.resources[]`
/// with `tag`, `digest`, `resource_url`.
pub fn default(v: &Value) -> Result<Vec<Notice>, String> {
    let delete = match text(v, &["type"]) {
        Some("PUSH_ARTIFACT") => false,
        Some("DELETE_ARTIFACT") => true,
        _ => return Ok(Vec::new()),
    };
    let data = v
        .get("event_data")
        .ok_or("a Harbor event without event_data")?;
    resources(data, delete)
}

/// Harbor's CloudEvents payload (source: goharbor.io docs, "Configure Webhook Notifications",
/// CloudEvents format, Harbor 2.10+): `type` `harbor.artifact.pushed` or `.deleted`, `data`
/// holding `resources` and `repository` as the default format's `event_data` does.
pub fn cloudevent(kind: &str, data: &Value) -> Result<Vec<Notice>, String> {
    let delete = match kind {
        "harbor.artifact.pushed" => false,
        "harbor.artifact.deleted" => true,
        _ => return Ok(Vec::new()),
    };
    resources(data, delete)
}

fn resources(data: &Value, delete: bool) -> Result<Vec<Notice>, String> {
    let repository = owned(data, &["repository", "repo_full_name"])
        .ok_or("a Harbor event without repository.repo_full_name")?;
    let resources = data
        .get("resources")
        .and_then(Value::as_array)
        .ok_or("a Harbor event without resources")?;
    Ok(resources
        .iter()
        .map(|r| Notice {
            host: text(r, &["resource_url"]).and_then(|u| u.split('/').next().map(str::to_owned)),
            repository: repository.clone(),
            tag: owned(r, &["tag"]),
            digest: owned(r, &["digest"]),
            delete,
        })
        .collect())
}
