//! Events that come as CloudEvents in binary mode (`ce-type`, `ce-source` headers, the data as
//! the body): zot's and Chainguard's; and Google Artifact Registry's through a Pub/Sub push.

use base64::Engine as _;
use serde_json::Value;

use super::{Notice, owned, text, url_host};

/// zot's events extension (source: zotregistry.dev, "Event Support for zot", and
/// project-zot/zot's `pkg/extensions/events`): `ce-type` `zotregistry.image.updated` or
/// `.image.deleted` (the prefix may be changed with `typePrefix`), `ce-source` the registry's
/// configured source, data `{name, reference, digest, mediaType}` where `reference` is a tag
/// or a digest.
pub fn zot(kind: &str, source: Option<&str>, data: &Value) -> Result<Vec<Notice>, String> {
    let delete = if kind.ends_with(".image.updated") {
        false
    } else if kind.ends_with(".image.deleted") {
        true
    } else {
        return Ok(Vec::new());
    };
    let reference = text(data, &["reference"]);
    Ok(vec![Notice {
        host: source.and_then(source_host),
        repository: owned(data, &["name"]).ok_or("a zot event without name")?,
        tag: reference.filter(|r| !r.contains(':')).map(str::to_owned),
        digest: owned(data, &["digest"])
            .or_else(|| reference.filter(|r| r.contains(':')).map(str::to_owned)),
        delete,
    }])
}

/// Chainguard's registry push (source: edu.chainguard.dev, "Chainguard Events" reference,
/// "Service: Registry - Push"): `ce-type` `dev.chainguard.registry.push.v1`, `ce-source`
/// `cgr.dev`, body `{actor, body: {repository, tag, digest, type, error}}`; a push of a blob
/// (`type` other than `manifest`) or one that failed (`error.status` set) is left out.
pub fn chainguard(source: Option<&str>, v: &Value) -> Result<Vec<Notice>, String> {
    let body = v.get("body").ok_or("a Chainguard event without body")?;
    if text(body, &["type"]).is_some_and(|t| t != "manifest")
        || body
            .pointer("/error/status")
            .and_then(Value::as_u64)
            .is_some_and(|s| s != 0)
    {
        return Ok(Vec::new());
    }
    let named = text(body, &["repository"]).ok_or("a Chainguard event without body.repository")?;
    // The repository may be named with its registry (`cgr.dev/org/image`) or without.
    let (host, repository) = match named.split_once('/') {
        Some((first, rest)) if first.contains('.') || first.contains(':') => {
            (Some(first.to_owned()), rest.to_owned())
        }
        _ => (source.and_then(source_host), named.to_owned()),
    };
    Ok(vec![Notice {
        host,
        repository,
        tag: owned(body, &["tag"]),
        digest: owned(body, &["digest"]),
        delete: false,
    }])
}

/// A Pub/Sub push delivery (source: Google Cloud docs, "Push subscriptions", the push request
/// body `{message: {data, attributes, messageId, publishTime}, subscription}`) carrying an
/// Artifact Registry or Container Registry notification (source: Google Cloud docs,
/// "Configure Pub/Sub notifications", topic `gcr`: data `{action: INSERT|DELETE, digest:
/// "<host>/<path>@sha256:…", tag: "<host>/<path>:<tag>"}`, base64-encoded).
pub fn pubsub(v: &Value) -> Result<Vec<Notice>, String> {
    let data = text(v, &["message", "data"]).ok_or("a Pub/Sub push without message.data")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| "a Pub/Sub message whose data is not base64")?;
    let inner: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("a Pub/Sub message whose data is not JSON: {e}"))?;
    let delete = match text(&inner, &["action"]) {
        Some("INSERT") => false,
        Some("DELETE") => true,
        _ => return Ok(Vec::new()),
    };
    let tagged = text(&inner, &["tag"]).and_then(split_tagged);
    let digested = text(&inner, &["digest"]).and_then(|r| {
        let (name, digest) = r.split_once('@')?;
        let (host, repository) = name.split_once('/')?;
        Some((host, repository, digest))
    });
    let (host, repository) = match (&tagged, &digested) {
        (Some((h, r, _)), _) => (*h, *r),
        (None, Some((h, r, _))) => (*h, *r),
        (None, None) => return Err("a GAR notification naming neither tag nor digest".into()),
    };
    Ok(vec![Notice {
        host: Some(host.to_owned()),
        repository: repository.to_owned(),
        tag: tagged.map(|(_, _, t)| t.to_owned()),
        digest: digested.map(|(_, _, d)| d.to_owned()),
        delete,
    }])
}

/// `host/path:tag` into its three parts (the tag after the last `:` past the last `/`).
fn split_tagged(reference: &str) -> Option<(&str, &str, &str)> {
    let (host, rest) = reference.split_once('/')?;
    let (repository, tag) = rest.rsplit_once(':')?;
    (!tag.contains('/')).then_some((host, repository, tag))
}

/// A CloudEvent's `source` as a host: a URL's host, or the text itself when it is one.
fn source_host(source: &str) -> Option<String> {
    if source.contains("://") {
        return url_host(source);
    }
    (!source.contains('/')).then(|| source.to_owned())
}
