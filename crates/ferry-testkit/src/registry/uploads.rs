//! Blob upload sessions of the test registry: POST start, single-request POST, cross-repository
//! mount, PATCH (with and without `Content-Range`), status GET, closing PUT and cancel.

use std::sync::Arc;

use axum::http::{StatusCode, header};
use bytes::Bytes;
use rand::Rng as _;

use super::reply::{Reply, oci_error};
use super::routes::{Incoming, Route, Shared, query_value};
use super::state::{UploadSession, sha256_digest};

/// `Range` value for a session holding `size` bytes (`0-0` when empty, as distribution does).
fn range_value(size: usize) -> String {
    format!("0-{}", size.saturating_sub(1))
}

fn session_reply(status: StatusCode, repo: &str, id: &str, size: usize) -> Reply {
    Reply::new(status)
        .header("location", format!("/v2/{repo}/blobs/uploads/{id}"))
        .header("docker-upload-uuid", id)
        .header("range", range_value(size))
}

fn open_session(shared: &Shared, repo: &str) -> Reply {
    let id = hex::encode(rand::rng().random::<[u8; 16]>());
    shared.store().uploads.insert(
        id.clone(),
        UploadSession {
            repo: repo.to_string(),
            data: Vec::new(),
            started: tokio::time::Instant::now(),
        },
    );
    session_reply(StatusCode::ACCEPTED, repo, &id, 0)
}

fn created(repo: &str, digest: &str) -> Reply {
    Reply::new(StatusCode::CREATED)
        .header("location", format!("/v2/{repo}/blobs/{digest}"))
        .header("docker-content-digest", digest)
}

fn uploads_repo(incoming: &Incoming) -> Option<&str> {
    match &incoming.route {
        Route::Uploads { repo } => Some(repo),
        _ => None,
    }
}

/// `POST /v2/NAME/blobs/uploads/`
pub(crate) fn start(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    match uploads_repo(incoming) {
        Some(repo) => open_session(shared, repo),
        None => oci_error(404, "UNSUPPORTED", "not an upload collection"),
    }
}

/// `POST /v2/NAME/blobs/uploads/?mount=D&from=REPO`: 201 when the blob is linked in REPO,
/// otherwise 202 with a fresh session.
pub(crate) fn mount(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    let Some(repo) = uploads_repo(incoming) else {
        return oci_error(404, "UNSUPPORTED", "not an upload collection");
    };
    let digest = query_value(&incoming.pairs, "mount").unwrap_or_default();
    if let Some(from) = query_value(&incoming.pairs, "from") {
        let mut store = shared.store();
        if store.repo_blob(from, digest).is_some() {
            store.repo_mut(repo).blobs.insert(digest.to_string());
            return created(repo, digest);
        }
    }
    open_session(shared, repo)
}

/// `POST /v2/NAME/blobs/uploads/?digest=D` with the whole blob.
pub(crate) fn monolithic(shared: &Arc<Shared>, incoming: &Incoming, body: Bytes) -> Reply {
    let Some(repo) = uploads_repo(incoming) else {
        return oci_error(404, "UNSUPPORTED", "not an upload collection");
    };
    let expected = query_value(&incoming.pairs, "digest").unwrap_or_default();
    let actual = sha256_digest(&body);
    if actual != expected {
        return oci_error(
            400,
            "DIGEST_INVALID",
            format!("body has digest {actual}, not {expected}"),
        );
    }
    shared.store().put_blob(repo, body);
    created(repo, &actual)
}

fn session_parts(incoming: &Incoming) -> Option<(&str, &str)> {
    match &incoming.route {
        Route::Upload { repo, id } => Some((repo, id)),
        _ => None,
    }
}

fn unknown_session(id: &str) -> Reply {
    oci_error(
        404,
        "BLOB_UPLOAD_UNKNOWN",
        format!("upload session {id} is not known"),
    )
}

/// Parses `start-end` (inclusive), tolerating a `bytes ` prefix.
fn parse_content_range(value: &str) -> Option<(usize, usize)> {
    let value = value.trim();
    let value = value.strip_prefix("bytes ").unwrap_or(value);
    let value = value.split('/').next()?;
    let (start, end) = value.split_once('-')?;
    Some((start.trim().parse().ok()?, end.trim().parse().ok()?))
}

/// `PATCH` on a session: appends the body; with `Content-Range` the start must equal the size
/// held so far (else 416) and the length must match the range.
pub(crate) fn patch(shared: &Arc<Shared>, incoming: &Incoming, body: Bytes) -> Reply {
    let Some((repo, id)) = session_parts(incoming) else {
        return oci_error(404, "UNSUPPORTED", "not an upload session");
    };
    let content_range = incoming
        .headers
        .get(header::CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut store = shared.store();
    let Some(session) = store.uploads.get_mut(id).filter(|s| s.repo == repo) else {
        return unknown_session(id);
    };
    if let Some(value) = content_range {
        let Some((start, end)) = parse_content_range(&value) else {
            return oci_error(
                400,
                "BLOB_UPLOAD_INVALID",
                format!("bad Content-Range {value}"),
            );
        };
        if start != session.data.len() {
            return oci_error(
                416,
                "BLOB_UPLOAD_INVALID",
                format!(
                    "range starts at {start}, session holds {}",
                    session.data.len()
                ),
            )
            .header("range", range_value(session.data.len()))
            .header("location", format!("/v2/{repo}/blobs/uploads/{id}"));
        }
        if end < start || end - start + 1 != body.len() {
            return oci_error(
                400,
                "BLOB_UPLOAD_INVALID",
                format!("range {value} does not match {} body bytes", body.len()),
            );
        }
    }
    session.data.extend_from_slice(&body);
    let size = session.data.len();
    session_reply(StatusCode::ACCEPTED, repo, id, size)
}

/// `GET` on a session: 204 with the current `Range`.
pub(crate) fn status(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    let Some((repo, id)) = session_parts(incoming) else {
        return oci_error(404, "UNSUPPORTED", "not an upload session");
    };
    let store = shared.store();
    match store.uploads.get(id).filter(|s| s.repo == repo) {
        Some(session) => session_reply(StatusCode::NO_CONTENT, repo, id, session.data.len()),
        None => unknown_session(id),
    }
}

/// `PUT` on a session with `?digest=D` and an optional last chunk: verifies and stores.
/// A digest mismatch answers 400 `DIGEST_INVALID` and leaves the session open.
pub(crate) fn put(shared: &Arc<Shared>, incoming: &Incoming, body: Bytes) -> Reply {
    let Some((repo, id)) = session_parts(incoming) else {
        return oci_error(404, "UNSUPPORTED", "not an upload session");
    };
    let Some(expected) = query_value(&incoming.pairs, "digest") else {
        return oci_error(400, "DIGEST_INVALID", "closing PUT has no digest parameter");
    };
    let mut store = shared.store();
    let Some(session) = store.uploads.get_mut(id).filter(|s| s.repo == repo) else {
        return unknown_session(id);
    };
    let mut whole = session.data.clone();
    whole.extend_from_slice(&body);
    let actual = sha256_digest(&whole);
    if actual != expected {
        return oci_error(
            400,
            "DIGEST_INVALID",
            format!("uploaded bytes have digest {actual}, not {expected}"),
        );
    }
    store.uploads.remove(id);
    store.put_blob(repo, whole.into());
    created(repo, &actual)
}

/// `DELETE` on a session.
pub(crate) fn cancel(shared: &Arc<Shared>, incoming: &Incoming) -> Reply {
    let Some((repo, id)) = session_parts(incoming) else {
        return oci_error(404, "UNSUPPORTED", "not an upload session");
    };
    let mut store = shared.store();
    if store.uploads.get(id).is_some_and(|s| s.repo == repo) {
        store.uploads.remove(id);
        Reply::new(StatusCode::NO_CONTENT)
    } else {
        unknown_session(id)
    }
}
