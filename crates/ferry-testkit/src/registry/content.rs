//! Read-and-write handlers of the test registry for tags, manifests, blobs, referrers and the
//! token endpoint: the OCI distribution answers built from the in-memory store.

use std::sync::Arc;

use axum::http::{Method, StatusCode, header};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use super::listing::LaterPage;
use super::metrics::OpKind;
use super::reply::{Reply, code_for_status, oci_error};
use super::routes::{Incoming, Route, Shared, query_pairs, query_value};
use super::state::{is_digest, sha256_digest};

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// `GET /token?service=..&scope=..` (Basic credentials optional), or the `POST /token` form
/// (`grant_type=password` with `username`/`password`, one space-separated `scope`).
pub(crate) fn token(
    shared: &Arc<Shared>,
    incoming: &Incoming,
    authorization: Option<&str>,
    form: &[u8],
) -> Reply {
    let Some(auth) = &shared.auth else {
        return oci_error(404, "UNSUPPORTED", "token auth is not enabled");
    };
    let scopes_of = |pairs: &[(String, String)]| -> Vec<String> {
        pairs
            .iter()
            .filter(|(k, _)| k == "scope")
            .map(|(_, v)| v.clone())
            .collect()
    };
    let (scopes, credentials) = if incoming.method == Method::POST {
        let text = String::from_utf8_lossy(form);
        let pairs = query_pairs(Some(&text));
        let basic = match (
            query_value(&pairs, "grant_type"),
            query_value(&pairs, "username"),
            query_value(&pairs, "password"),
        ) {
            (Some("password"), Some(user), Some(password)) => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )),
            _ => None,
        };
        (scopes_of(&pairs), basic)
    } else {
        (
            scopes_of(&incoming.pairs),
            authorization.map(str::to_string),
        )
    };
    match auth.issue(credentials.as_deref(), &scopes) {
        Ok(issued) => Reply::new(StatusCode::OK).json(&json!({
            "token": issued.token,
            "access_token": issued.token,
            "expires_in": issued.expires_in,
        })),
        Err(_) => oci_error(401, "UNAUTHORIZED", "invalid username or password"),
    }
}

/// `GET /v2/NAME/tags/list?n=&last=`
pub(crate) fn tag_list(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    let Route::TagList { repo } = &incoming.route else {
        return oci_error(404, "UNSUPPORTED", "not a tag list");
    };
    let store = shared.store();
    let Some(repository) = store.repos.get(repo) else {
        return oci_error(
            404,
            "NAME_UNKNOWN",
            format!("repository {repo} is not known"),
        );
    };
    let tags: Vec<String> = repository.tags.keys().cloned().collect();
    let tagged: std::collections::HashSet<&String> = repository.tags.values().collect();
    let mut untagged: Vec<String> = repository
        .manifests
        .keys()
        .filter(|d| !tagged.contains(d))
        .cloned()
        .collect();
    untagged.sort();
    if let Some(reply) = super::personality::listing::tag_list(
        &shared.config.personality,
        &shared.base_url,
        repo,
        &tags,
        &untagged,
        &incoming.pairs,
        shared.config.page_size,
    ) {
        return reply;
    }
    let asked = match query_value(&incoming.pairs, "n") {
        None => None,
        Some(text) => match text.parse::<usize>() {
            Ok(n) => Some(n),
            Err(_) => return oci_error(400, "PAGINATION_NUMBER_INVALID", "n is not a number"),
        },
    };
    let limit = match (asked, shared.config.page_size) {
        (Some(n), Some(page)) => n.min(page),
        (Some(n), None) => n,
        (None, Some(page)) => page,
        (None, None) => usize::MAX,
    };
    let last = query_value(&incoming.pairs, "last");
    let later_fault = last.and_then(|_| shared.config.listing.later_page(repo));
    if let Some(LaterPage::Fail(code)) = later_fault {
        return oci_error(code, code_for_status(code), "injected listing fault");
    }
    let mut remaining = repository
        .tags
        .keys()
        .filter(|tag| last.is_none_or(|l| tag.as_str() > l));
    let page: Vec<String> = remaining.by_ref().take(limit).cloned().collect();
    let more = remaining.next().is_some();
    let mut reply = Reply::new(StatusCode::OK).json(&json!({"name": repo, "tags": page}));
    if more && let Some(last_tag) = page.last() {
        let next = match (later_fault, last) {
            (Some(LaterPage::LinkToItself), Some(this)) => this,
            _ => last_tag.as_str(),
        };
        reply = reply.header(
            "link",
            format!("</v2/{repo}/tags/list?n={limit}&last={next}>; rel=\"next\""),
        );
    }
    reply
}

/// `GET /v2/_catalog?n=&last=`: every repository the store holds, in name order, paged like
/// the tag list (`page_size`, `Link: rel="next"`).
pub(crate) fn catalog(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    let store = shared.store();
    let names: Vec<String> = store.repos.keys().cloned().collect();
    if let Some(reply) =
        super::personality::listing::catalog(&shared.config.personality, &names, &incoming.pairs)
    {
        return reply;
    }
    let asked = match query_value(&incoming.pairs, "n") {
        None => None,
        Some(text) => match text.parse::<usize>() {
            Ok(n) => Some(n),
            Err(_) => return oci_error(400, "PAGINATION_NUMBER_INVALID", "n is not a number"),
        },
    };
    let limit = match (asked, shared.config.page_size) {
        (Some(n), Some(page)) => n.min(page),
        (Some(n), None) => n,
        (None, Some(page)) => page,
        (None, None) => usize::MAX,
    };
    let last = query_value(&incoming.pairs, "last");
    let mut remaining = store
        .repos
        .keys()
        .filter(|name| last.is_none_or(|l| name.as_str() > l));
    let page: Vec<String> = remaining.by_ref().take(limit).cloned().collect();
    let more = remaining.next().is_some();
    let mut reply = Reply::new(StatusCode::OK).json(&json!({ "repositories": page }));
    if more && let Some(last_name) = page.last() {
        let mut next =
            reqwest::Url::parse("http://catalog.invalid/v2/_catalog").expect("a fixed URL parses");
        next.query_pairs_mut()
            .append_pair("n", &limit.to_string())
            .append_pair("last", last_name);
        let query = next.query().unwrap_or_default();
        reply = reply.header("link", format!("</v2/_catalog?{query}>; rel=\"next\""));
    }
    reply
}

/// `HEAD`/`GET /v2/NAME/manifests/REF`
pub(crate) fn manifest_get(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    let Route::Manifest { repo, reference } = &incoming.route else {
        return oci_error(404, "UNSUPPORTED", "not a manifest");
    };
    let Some((digest, manifest)) = shared.store().manifest(repo, reference) else {
        return oci_error(
            404,
            "MANIFEST_UNKNOWN",
            format!("manifest {reference} is not in {repo}"),
        );
    };
    let reply = Reply::new(StatusCode::OK)
        .header("content-type", &manifest.media_type)
        .header("docker-content-digest", &digest)
        .header("content-length", manifest.bytes.len().to_string());
    if incoming.method == Method::HEAD {
        reply
    } else {
        reply.body(manifest.bytes)
    }
}

/// Descriptor digests a manifest refers to: `(blobs, child manifests)`.
fn references(document: &Value) -> (Vec<String>, Vec<String>) {
    let digest_of = |v: &Value| v.get("digest").and_then(Value::as_str).map(str::to_string);
    let mut blobs = Vec::new();
    if let Some(config) = document.get("config") {
        blobs.extend(digest_of(config));
    }
    if let Some(layers) = document.get("layers").and_then(Value::as_array) {
        blobs.extend(layers.iter().filter_map(digest_of));
    }
    if let Some(blobs_field) = document.get("blobs").and_then(Value::as_array) {
        blobs.extend(blobs_field.iter().filter_map(digest_of));
    }
    let children = document
        .get("manifests")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(digest_of).collect())
        .unwrap_or_default();
    (blobs, children)
}

/// Stores a manifest after checking what it references; returns `(digest, subject digest)`.
pub(crate) fn store_manifest(
    shared: &Shared,
    repo: &str,
    reference: &str,
    content_type: Option<&str>,
    bytes: Bytes,
) -> Result<(String, Option<String>), Box<Reply>> {
    let refuse = |status, code, message: String| Box::new(oci_error(status, code, message));
    let document: Value = serde_json::from_slice(&bytes).map_err(|e| {
        refuse(
            400,
            "MANIFEST_INVALID",
            format!("manifest is not JSON: {e}"),
        )
    })?;
    let media_type = content_type
        .map(str::to_string)
        .or_else(|| {
            document
                .get("mediaType")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .ok_or_else(|| {
            refuse(
                400,
                "MANIFEST_INVALID",
                "no Content-Type and no mediaType".into(),
            )
        })?;
    let digest = sha256_digest(&bytes);
    if is_digest(reference) && reference != digest {
        return Err(refuse(
            400,
            "DIGEST_INVALID",
            format!("manifest bytes have digest {digest}, not {reference}"),
        ));
    }
    let (blobs, children) = references(&document);
    let mut store = shared.store();
    let existing = store.repos.get(repo);
    let has_blob = |d: &String| existing.is_some_and(|r| r.blobs.contains(d));
    let has_manifest = |d: &String| existing.is_some_and(|r| r.manifests.contains_key(d));
    if let Some(missing) = blobs.iter().find(|d| !has_blob(d)) {
        return Err(refuse(
            400,
            "MANIFEST_BLOB_UNKNOWN",
            format!("blob {missing} is not in {repo}"),
        ));
    }
    let check_children = !shared.config.personality.index_children_unchecked;
    if let Some(missing) = children.iter().find(|d| check_children && !has_manifest(d)) {
        return Err(refuse(
            400,
            "MANIFEST_BLOB_UNKNOWN",
            format!("manifest {missing} is not in {repo}"),
        ));
    }
    let repository = store.repo_mut(repo);
    repository.manifests.insert(
        digest.clone(),
        super::state::StoredManifest { media_type, bytes },
    );
    if !is_digest(reference) {
        repository
            .tags
            .insert(reference.to_string(), digest.clone());
    }
    let subject = document
        .get("subject")
        .and_then(|s| s.get("digest"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok((digest, subject))
}

/// `PUT /v2/NAME/manifests/REF`
pub(crate) fn manifest_put(shared: &Arc<Shared>, incoming: &Incoming, body: Bytes) -> Reply {
    let Route::Manifest { repo, reference } = &incoming.route else {
        return oci_error(404, "UNSUPPORTED", "not a manifest");
    };
    let content_type = incoming
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    match store_manifest(shared, repo, reference, content_type, body) {
        Ok((digest, subject)) => {
            let mut reply = Reply::new(StatusCode::CREATED)
                .header("location", format!("/v2/{repo}/manifests/{digest}"))
                .header("docker-content-digest", &digest);
            if shared.config.referrers_api
                && let Some(subject) = subject
            {
                reply = reply.header("oci-subject", subject);
            }
            reply
        }
        Err(reply) => *reply,
    }
}

/// `DELETE /v2/NAME/manifests/REF`: by digest removes the manifest and its tags; by tag removes
/// the tag.
pub(crate) fn manifest_delete(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    let Route::Manifest { repo, reference } = &incoming.route else {
        return oci_error(404, "UNSUPPORTED", "not a manifest");
    };
    let mut store = shared.store();
    let Some(repository) = store.repos.get_mut(repo) else {
        return oci_error(
            404,
            "NAME_UNKNOWN",
            format!("repository {repo} is not known"),
        );
    };
    let found = if is_digest(reference) {
        let removed = repository.manifests.remove(reference).is_some();
        repository.tags.retain(|_, d| d != reference);
        removed
    } else {
        repository.tags.remove(reference).is_some()
    };
    if found {
        Reply::new(StatusCode::ACCEPTED)
    } else {
        oci_error(
            404,
            "MANIFEST_UNKNOWN",
            format!("manifest {reference} is not in {repo}"),
        )
    }
}

/// Parses `bytes=N-` or `bytes=N-M` into an inclusive range within `len`.
fn parse_range(value: &str, len: usize) -> Option<(usize, usize)> {
    let spec = value.trim().strip_prefix("bytes=")?;
    let (start, end) = spec.split_once('-')?;
    let start: usize = start.trim().parse().ok()?;
    let end = if end.trim().is_empty() {
        len.checked_sub(1)?
    } else {
        end.trim().parse::<usize>().ok()?.min(len.checked_sub(1)?)
    };
    (start <= end && start < len).then_some((start, end))
}

/// `HEAD`/`GET /v2/NAME/blobs/DIGEST`, and `GET /blobs/DIGEST` on the redirect listener.
pub(crate) fn blob_get(shared: &Arc<Shared>, incoming: &Incoming, op: OpKind) -> Reply {
    let (bytes, digest) = match &incoming.route {
        Route::Blob { repo, digest } => match shared.store().repo_blob(repo, digest) {
            Some(bytes) => (bytes, digest.clone()),
            None => {
                return oci_error(
                    404,
                    "BLOB_UNKNOWN",
                    format!("blob {digest} is not in {repo}"),
                );
            }
        },
        Route::RedirectBlob { digest } => match shared.store().blobs.get(digest) {
            Some(bytes) => (bytes.clone(), digest.clone()),
            None => return oci_error(404, "BLOB_UNKNOWN", format!("blob {digest} is not stored")),
        },
        _ => return oci_error(404, "UNSUPPORTED", "not a blob"),
    };
    if op == OpKind::BlobGet && shared.config.redirect_blobs {
        return Reply::new(StatusCode::TEMPORARY_REDIRECT).header(
            "location",
            format!("{}/blobs/{digest}", shared.redirect_url),
        );
    }
    let reply = Reply::new(StatusCode::OK)
        .header("docker-content-digest", &digest)
        .header("content-type", "application/octet-stream")
        .header("accept-ranges", "bytes");
    if incoming.method == Method::HEAD {
        return reply.header("content-length", bytes.len().to_string());
    }
    let range = incoming
        .headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok());
    let mut reply = match range {
        None => reply.body(bytes),
        Some(value) => match parse_range(value, bytes.len()) {
            Some((start, end)) => {
                let mut partial = reply
                    .header(
                        "content-range",
                        format!("bytes {start}-{end}/{}", bytes.len()),
                    )
                    .body(bytes.slice(start..=end));
                partial.status = StatusCode::PARTIAL_CONTENT;
                partial
            }
            None => {
                return oci_error(
                    416,
                    "BLOB_UNKNOWN",
                    format!("range {value} is not satisfiable"),
                )
                .header("content-range", format!("bytes */{}", bytes.len()));
            }
        },
    };
    reply.blob_digest = Some(digest);
    reply
}

/// `DELETE /v2/NAME/blobs/DIGEST`: unlinks the blob from the repository.
pub(crate) fn blob_delete(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    let Route::Blob { repo, digest } = &incoming.route else {
        return oci_error(404, "UNSUPPORTED", "not a blob");
    };
    let mut store = shared.store();
    let removed = store
        .repos
        .get_mut(repo)
        .is_some_and(|r| r.blobs.remove(digest));
    if removed {
        Reply::new(StatusCode::ACCEPTED)
    } else {
        oci_error(
            404,
            "BLOB_UNKNOWN",
            format!("blob {digest} is not in {repo}"),
        )
    }
}

/// `GET /v2/NAME/referrers/DIGEST[?artifactType=]`
pub(crate) fn referrers(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    let Route::Referrers { repo, digest } = &incoming.route else {
        return oci_error(404, "UNSUPPORTED", "not a referrers request");
    };
    if !shared.config.referrers_api {
        return oci_error(404, "UNSUPPORTED", "the referrers API is switched off");
    }
    if !is_digest(digest) {
        return oci_error(400, "DIGEST_INVALID", format!("{digest} is not a digest"));
    }
    let filter = query_value(&incoming.pairs, "artifactType");
    let store = shared.store();
    let mut descriptors = Vec::new();
    if let Some(repository) = store.repos.get(repo) {
        let mut digests: Vec<&String> = repository.manifests.keys().collect();
        digests.sort();
        for manifest_digest in digests {
            let Some(stored) = repository.manifests.get(manifest_digest) else {
                continue;
            };
            let Ok(document) = serde_json::from_slice::<Value>(&stored.bytes) else {
                continue;
            };
            let subject = document
                .get("subject")
                .and_then(|s| s.get("digest"))
                .and_then(Value::as_str);
            if subject != Some(digest.as_str()) {
                continue;
            }
            let artifact_type = document
                .get("artifactType")
                .and_then(Value::as_str)
                .or_else(|| {
                    document
                        .get("config")
                        .and_then(|c| c.get("mediaType"))
                        .and_then(Value::as_str)
                });
            if let Some(wanted) = filter
                && artifact_type != Some(wanted)
            {
                continue;
            }
            let mut descriptor = json!({
                "mediaType": stored.media_type,
                "digest": manifest_digest,
                "size": stored.bytes.len(),
            });
            if let Some(kind) = artifact_type {
                descriptor["artifactType"] = json!(kind);
            }
            if let Some(annotations) = document.get("annotations") {
                descriptor["annotations"] = annotations.clone();
            }
            descriptors.push(descriptor);
        }
    }
    let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": descriptors});
    let mut reply = Reply::new(StatusCode::OK)
        .header("content-type", OCI_INDEX)
        .body(index.to_string());
    if filter.is_some() {
        reply = reply.header("oci-filters-applied", "artifactType");
    }
    reply
}
