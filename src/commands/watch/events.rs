//! Push notifications on `POST /v1/events`: each registry's format (its dialect, one file each
//! under `events/`) read into notices (registry, repository, tag or digest, push or delete).
//!
//! Dialects: distribution's envelope, Harbor (default and CloudEvents), Docker Hub, GitHub's
//! `package` and `registry_package`, Quay's `repo_push`, JFrog Artifactory's docker events,
//! Nexus's repository-component events, ACR (one event, or Event Grid's array), zot and
//! Chainguard (binary-mode CloudEvents: `ce-type`/`ce-source` headers), GAR/GCR through a
//! Pub/Sub push, ECR's EventBridge events; any JSON one inside a structured CloudEvent
//! (`specversion` + `data`). An event is untrusted input: it only picks among the config's
//! mappings (see `intake`), never a target or a repository of its own, and a notice whose names
//! are not valid references (a `..`, a control character, an upper-case repository, a malformed
//! digest) is dropped here. Who may send is `auth`'s business, decided before a byte is parsed.

mod artifactory;
pub mod auth;
mod cloud;
mod distribution;
mod ecr;
mod github;
mod harbor;
mod hub;

use ferry_distribution::reference::{RepositoryName, Tag};
use serde_json::Value;

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

/// The CloudEvents attributes a binary-mode delivery carries as headers.
#[derive(Debug, Default, Clone, Copy)]
pub struct CloudHeaders<'a> {
    /// `ce-type`.
    pub kind: Option<&'a str>,
    /// `ce-source`.
    pub source: Option<&'a str>,
}

/// What a request body says.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Pushes and deletes, to be offered to the intake, and how many notices were dropped for
    /// naming an invalid host, repository, tag or digest.
    Notices(Vec<Notice>, usize),
    /// Azure Event Grid's subscription handshake: answered with this code, nothing queued.
    Validation(String),
}

/// The notices of one request body in any supported dialect; an error says why none could be
/// read. Notices whose names are not valid references are dropped (and logged at debug).
pub fn parse(body: &[u8], ce: CloudHeaders<'_>) -> Result<Parsed, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let parsed = match ce.kind {
        Some(kind) => binary(kind, ce.source, &value)?,
        None => dialect(&value)?,
    };
    let Parsed::Notices(notices, _) = parsed else {
        return Ok(parsed);
    };
    if notices.len() > MAX_NOTICES {
        return Err(format!(
            "{} notices in one request, more than {MAX_NOTICES}",
            notices.len()
        ));
    }
    let read = notices.len();
    let notices: Vec<Notice> = notices.into_iter().filter_map(checked).collect();
    let dropped = read - notices.len();
    Ok(Parsed::Notices(notices, dropped))
}

/// A binary-mode CloudEvent: the type from the header, the body its data.
fn binary(kind: &str, source: Option<&str>, data: &Value) -> Result<Parsed, String> {
    let notices = if kind == "dev.chainguard.registry.push.v1" {
        cloud::chainguard(source, data)?
    } else if kind.starts_with("dev.chainguard.") {
        // Chainguard's other events (pulls, IAM, subscriptions): nothing to mirror.
        Vec::new()
    } else if kind.contains(".image.") || kind.contains(".repository.") {
        // zot's (`zotregistry.image.updated`, `.image.lint_failed`, `.repository.created`…,
        // under its type prefix): only updates and deletes of an image are read.
        cloud::zot(kind, source, data)?
    } else if kind.starts_with("harbor.") {
        harbor::cloudevent(kind, data)?
    } else {
        return dialect(data);
    };
    Ok(Parsed::Notices(notices, 0))
}

/// A body in one of the JSON dialects, told apart by the fields each one alone has.
fn dialect(value: &Value) -> Result<Parsed, String> {
    if let Some(items) = value.as_array() {
        return distribution::event_grid(items);
    }
    if let (Some(_), Some(data)) = (value.get("specversion"), value.get("data")) {
        // A structured CloudEvent: its type says the dialect, or its data is one.
        let kind = text(value, &["type"]).unwrap_or_default();
        let source = text(value, &["source"]);
        return binary(kind, source, data);
    }
    let notices = if let Some(events) = value.get("events").and_then(Value::as_array) {
        distribution::envelope(events)
    } else if value.get("event_data").is_some() {
        harbor::default(value)?
    } else if value.get("updated_tags").is_some() {
        hub::quay(value)?
    } else if value.get("push_data").is_some() {
        hub::docker_hub(value)?
    } else if value.get("registry_package").is_some() {
        github::package(value, "registry_package")?
    } else if value.get("package").is_some() {
        github::package(value, "package")?
    } else if text(value, &["detail-type"]) == Some("ECR Image Action") {
        ecr::image_action(value)?
    } else if text(value, &["domain"]) == Some("docker") && value.get("event_type").is_some() {
        artifactory::jfrog(value)?
    } else if value.get("repositoryName").is_some() && value.get("component").is_some() {
        artifactory::nexus(value)?
    } else if value.get("message").is_some() && value.get("subscription").is_some() {
        cloud::pubsub(value)?
    } else if value.get("action").is_some() && value.get("target").is_some() {
        distribution::acr(value)
    } else {
        return Err("not an event ferry knows (distribution, Harbor, Docker Hub, GitHub, Quay, JFrog, Nexus, ACR, zot, GAR, Chainguard, ECR)".into());
    };
    Ok(Parsed::Notices(notices, 0))
}

/// The notice if every name in it is valid, else `None` (logged at debug, without the names).
fn checked(n: Notice) -> Option<Notice> {
    let host_ok = n.host.as_deref().is_none_or(|h| {
        !h.is_empty()
            && h.len() <= 255
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
    });
    let ok = host_ok
        && RepositoryName::parse(&n.repository).is_ok()
        && n.tag.as_deref().is_none_or(|t| Tag::parse(t).is_ok())
        && n.digest
            .as_deref()
            .is_none_or(|d| ferry_distribution::Digest::parse(d).is_ok());
    if !ok {
        tracing::debug!(
            "watch: an event naming an invalid host, repository, tag or digest was ignored"
        );
    }
    ok.then_some(n)
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

fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let host = rest.split('/').next()?;
    (!host.is_empty()).then(|| host.to_owned())
}

#[cfg(test)]
mod tests;
