//! Amazon ECR's EventBridge events, as an EventBridge API destination posts them (bare, or
//! wrapped in a structured CloudEvent by a transformer).

use serde_json::Value;

use super::{Notice, owned, text};

/// `ECR Image Action` (source: AWS docs, "Amazon ECR events and EventBridge", sample event for
/// a completed image push): `detail.result` `SUCCESS`, `detail.action-type` `PUSH` or `DELETE`,
/// `detail.repository-name`, `detail.image-tag`, `detail.image-digest`, `account`, `region`.
pub fn image_action(v: &Value) -> Result<Vec<Notice>, String> {
    if text(v, &["detail", "result"]) != Some("SUCCESS") {
        return Ok(Vec::new());
    }
    let delete = match text(v, &["detail", "action-type"]) {
        Some("PUSH") => false,
        Some("DELETE") => true,
        _ => return Ok(Vec::new()),
    };
    let account = text(v, &["account"]).ok_or("an ECR event without account")?;
    let region = text(v, &["region"]).ok_or("an ECR event without region")?;
    Ok(vec![Notice {
        host: Some(format!("{account}.dkr.ecr.{region}.amazonaws.com")),
        repository: owned(v, &["detail", "repository-name"])
            .ok_or("an ECR event without detail.repository-name")?,
        tag: owned(v, &["detail", "image-tag"]),
        digest: owned(v, &["detail", "image-digest"]),
        delete,
    }])
}
