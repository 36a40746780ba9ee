//! JFrog Artifactory's docker-domain webhook events and Sonatype Nexus Repository's
//! repository-component webhook, the two repository managers' own formats.

use serde_json::Value;

use super::{Notice, owned, text, url_host};

/// Artifactory's `docker` domain (source: JFrog Platform Administration docs, "Event Types",
/// "Domain: Docker"): `event_type` `pushed` or `deleted`, `data.repo_key`, `data.image_name`,
/// `data.tag`, `data.sha256` (the manifest's), `jpd_origin` the platform's URL. The image is
/// addressed by the repository-path method: `<host>/<repo_key>/<image_name>`.
pub fn jfrog(v: &Value) -> Result<Vec<Notice>, String> {
    let delete = match text(v, &["event_type"]) {
        Some("pushed") => false,
        Some("deleted") => true,
        _ => return Ok(Vec::new()),
    };
    let data = v.get("data").ok_or("a JFrog docker event without data")?;
    let repo_key = text(data, &["repo_key"]).ok_or("a JFrog docker event without data.repo_key")?;
    let image =
        text(data, &["image_name"]).ok_or("a JFrog docker event without data.image_name")?;
    Ok(vec![Notice {
        host: text(v, &["jpd_origin"]).and_then(url_host),
        repository: format!("{repo_key}/{image}"),
        tag: owned(data, &["tag"]),
        digest: text(data, &["sha256"]).map(|hex| format!("sha256:{hex}")),
        delete,
    }])
}

/// Nexus Repository's repository-component event (source: Sonatype Nexus Repository docs,
/// "Webhooks", `rm:repository:component` payload): `action` `CREATED`, `UPDATED` or `DELETED`,
/// `component.{format,name,version}`, `repositoryName`. For `docker`, the name is the image and
/// the version its tag; no digest, no host (the connector's address is not in the event).
pub fn nexus(v: &Value) -> Result<Vec<Notice>, String> {
    let delete = match text(v, &["action"]) {
        Some("CREATED" | "UPDATED") => false,
        Some("DELETED") => true,
        _ => return Ok(Vec::new()),
    };
    if text(v, &["component", "format"]) != Some("docker") {
        return Ok(Vec::new());
    }
    Ok(vec![Notice {
        host: None,
        repository: owned(v, &["component", "name"])
            .ok_or("a Nexus component event without component.name")?,
        tag: owned(v, &["component", "version"]),
        digest: None,
        delete,
    }])
}
