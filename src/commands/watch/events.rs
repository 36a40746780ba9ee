//! Push notifications on `POST /v1/events`: each registry's format read into notices (registry,
//! repository, tag or digest, push or delete), and the check that a request carries the secret.
//!
//! Formats: distribution's envelope (`notifications.endpoints`), Harbor's `PUSH_ARTIFACT` /
//! `DELETE_ARTIFACT`, Quay's `repo_push`, GitHub's `registry_package` (GHCR), ECR's EventBridge
//! `ECR Image Action` (as an API destination posts it), and any of them inside a structured
//! CloudEvent (`specversion` + `data`). An event is untrusted input: it only picks among the
//! config's mappings (see `intake`), never a target or a repository of its own.

use ferry_distribution::Secret;
use hmac::{Hmac, Mac as _};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The largest body read; a longer one is refused unread (413).
pub const MAX_BODY: usize = 1 << 20;
/// The most notices one request may carry.
pub const MAX_NOTICES: usize = 1000;

/// One push or delete a registry announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The registry's host as the event names it, when it does.
    pub host: Option<String>,
    /// The repository path (`team/app`).
    pub repository: String,
    /// The tag pushed or deleted, when the event names one.
    pub tag: Option<String>,
    /// The manifest digest, when the event names one.
    pub digest: Option<String>,
    /// A delete rather than a push.
    pub delete: bool,
}

/// Whether the request carries the config's token: `Authorization: Bearer <token>`, or GitHub's
/// `X-Hub-Signature-256: sha256=<hex>` (an HMAC of the body keyed with the token). Both compared
/// in constant time.
pub fn authorized(
    authorization: Option<&[u8]>,
    signature: Option<&[u8]>,
    body: &[u8],
    token: &Secret,
) -> bool {
    if let Some(given) = authorization.and_then(|a| a.strip_prefix(b"Bearer ".as_slice())) {
        // Hash both first: the comparison then takes the same time whatever their lengths.
        let (a, b) = (Sha256::digest(given), Sha256::digest(token.expose()));
        return a
            .iter()
            .zip(b.iter())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0;
    }
    if let Some(hex) = signature.and_then(|s| s.strip_prefix(b"sha256=".as_slice()))
        && let Ok(expected) = hex::decode(hex)
        && let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(token.expose().as_bytes())
    {
        mac.update(body);
        return mac.verify_slice(&expected).is_ok();
    }
    false
}

/// The notices of one request body, in any supported format; an error says why none could be read.
pub fn parse(body: &[u8]) -> Result<Vec<Notice>, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let value = match (value.get("specversion"), value.get("data")) {
        // A structured CloudEvent: the registry's own event is its data.
        (Some(_), Some(data)) => data.clone(),
        _ => value,
    };
    let notices = if let Some(events) = value.get("events").and_then(Value::as_array) {
        distribution(events)
    } else if value.get("event_data").is_some() {
        harbor(&value)?
    } else if value.get("updated_tags").is_some() {
        quay(&value)?
    } else if value.get("registry_package").is_some() {
        github(&value)?
    } else if value.get("detail-type").and_then(Value::as_str) == Some("ECR Image Action") {
        ecr(&value)?
    } else {
        return Err("not an event ferry knows (distribution, Harbor, Quay, GitHub, ECR)".into());
    };
    if notices.len() > MAX_NOTICES {
        return Err(format!(
            "{} notices in one request, more than {MAX_NOTICES}",
            notices.len()
        ));
    }
    Ok(notices)
}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, key| v.get(key))?
        .as_str()
        .filter(|s| !s.is_empty())
}

fn owned(v: &Value, path: &[&str]) -> Option<String> {
    text(v, path).map(str::to_owned)
}

const MANIFEST_TYPES: [&str; 4] = [
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// distribution's envelope: manifest pushes and deletes (blob pushes and pulls are left out).
fn distribution(events: &[Value]) -> Vec<Notice> {
    events
        .iter()
        .filter_map(|e| {
            let delete = match text(e, &["action"])? {
                "push" => false,
                "delete" => true,
                _ => return None,
            };
            let tag = owned(e, &["target", "tag"]);
            let media = text(e, &["target", "mediaType"]);
            if tag.is_none() && !media.is_some_and(|m| MANIFEST_TYPES.contains(&m)) {
                return None;
            }
            let host = text(e, &["target", "url"])
                .and_then(url_host)
                .or_else(|| owned(e, &["request", "host"]));
            Some(Notice {
                host,
                repository: owned(e, &["target", "repository"])?,
                tag,
                digest: owned(e, &["target", "digest"]),
                delete,
            })
        })
        .collect()
}

fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let host = rest.split('/').next()?;
    (!host.is_empty()).then(|| host.to_owned())
}

/// Harbor: `PUSH_ARTIFACT` / `DELETE_ARTIFACT`, one notice per resource.
fn harbor(v: &Value) -> Result<Vec<Notice>, String> {
    let delete = match text(v, &["type"]) {
        Some("PUSH_ARTIFACT") => false,
        Some("DELETE_ARTIFACT") => true,
        _ => return Ok(Vec::new()),
    };
    let repository = owned(v, &["event_data", "repository", "repo_full_name"])
        .ok_or("a Harbor event without event_data.repository.repo_full_name")?;
    let resources = v
        .pointer("/event_data/resources")
        .and_then(Value::as_array)
        .ok_or("a Harbor event without event_data.resources")?;
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

/// Quay's `repo_push`: one notice per updated tag.
fn quay(v: &Value) -> Result<Vec<Notice>, String> {
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

/// GitHub's `registry_package` (`published`) for a container on ghcr.io.
fn github(v: &Value) -> Result<Vec<Notice>, String> {
    if text(v, &["action"]) != Some("published") {
        return Ok(Vec::new());
    }
    let package = &v["registry_package"];
    let kind = text(package, &["package_type"]).map(str::to_ascii_lowercase);
    if kind.as_deref() != Some("container") {
        return Ok(Vec::new());
    }
    let owner = text(package, &["owner", "login"])
        .or_else(|| text(package, &["namespace"]))
        .ok_or("a registry_package event without its owner")?;
    let name = text(package, &["name"]).ok_or("a registry_package event without its name")?;
    let version = &package["package_version"];
    Ok(vec![Notice {
        host: Some("ghcr.io".into()),
        repository: format!("{owner}/{name}").to_ascii_lowercase(),
        tag: owned(version, &["container_metadata", "tag", "name"]),
        digest: owned(version, &["container_metadata", "tag", "digest"])
            .or_else(|| owned(version, &["version"])),
        delete: false,
    }])
}

/// ECR's EventBridge `ECR Image Action` (PUSH or DELETE, SUCCESS only).
fn ecr(v: &Value) -> Result<Vec<Notice>, String> {
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

#[cfg(test)]
mod tests;
