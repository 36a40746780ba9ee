//! GitHub's webhooks for GitHub Packages: the `package` event and the older `registry_package`,
//! each for a container version published on ghcr.io.

use serde_json::Value;

use super::{Notice, owned, text};

/// GitHub's `package` and `registry_package` events (source: docs.github.com, "Webhook events
/// and payloads", `package` and `registry_package`): `action` `published` or `updated`, the
/// package under `package` or `registry_package` with `name`, `package_type` (`CONTAINER` or
/// `container`), `owner.login` (or `namespace`) and
/// `package_version.container_metadata.tag.{name,digest}`. GitHub posts one event per child
/// manifest of an index too, with an empty tag name: those come through with a digest only.
pub fn package(v: &Value, key: &str) -> Result<Vec<Notice>, String> {
    if !matches!(text(v, &["action"]), Some("published" | "updated")) {
        return Ok(Vec::new());
    }
    let package = &v[key];
    let kind = text(package, &["package_type"])
        .or_else(|| text(package, &["ecosystem"]))
        .map(str::to_ascii_lowercase);
    if kind.as_deref() != Some("container") {
        return Ok(Vec::new());
    }
    let owner = text(package, &["owner", "login"])
        .or_else(|| text(package, &["namespace"]))
        .ok_or("a GitHub package event without its owner")?;
    let name = text(package, &["name"]).ok_or("a GitHub package event without its name")?;
    let version = &package["package_version"];
    Ok(vec![Notice {
        host: Some("ghcr.io".into()),
        repository: format!("{owner}/{name}").to_ascii_lowercase(),
        tag: owned(version, &["container_metadata", "tag", "name"]),
        digest: owned(version, &["container_metadata", "tag", "digest"])
            .or_else(|| owned(version, &["version"]).filter(|v| v.starts_with("sha256:"))),
        delete: false,
    }])
}
