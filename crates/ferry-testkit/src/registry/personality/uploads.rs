//! How field registries answer blob uploads (issue 31, uploads): Artifactory's refused PUT with
//! a body, GHCR's and ACR's request size limits, and the container-registry crate's binary.

// Each answer reproduces what its public source shows on the wire; the switches' doc comments in
// `Personality` name the sources, and docs/registries.md has one row per behaviour.

use axum::body::Body;
use axum::http::{Method, StatusCode, header};

use super::Personality;
use crate::registry::metrics::OpKind;
use crate::registry::reply::{Reply, oci_error};
use crate::registry::routes::{BodyCut, Incoming};

/// GHCR's answer to a request body over its limit (wasmCloud/wash-archive#268).
fn ghcr_too_large(limit: u64) -> Reply {
    oci_error(
        416,
        "REQUESTED_RANGE_NOT_SATISFIABLE",
        format!(
            "the request body is too large and exceeds the maximum permissible limit of {:.2}MiB",
            limit as f64 / (1u64 << 20) as f64
        ),
    )
}

/// ACR's answer to a request body over its limit: not JSON, a front end's page
/// (goharbor/harbor#23015 logs it as `413 Request Entity Too Large - AzureContainerRegistry`).
fn acr_too_large() -> Reply {
    Reply::new(StatusCode::PAYLOAD_TOO_LARGE)
        .header("content-type", "text/html")
        .body(
            "<html><head><title>413 Request Entity Too Large</title></head><body>\
             <h1>413 Request Entity Too Large</h1><hr>AzureContainerRegistry</body></html>",
        )
}

/// The container-registry binary's answer to what it does not do (`RegistryError::NotSupported`
/// is a 500 with a plain-text body).
fn not_supported(feature: &str) -> Reply {
    Reply::new(StatusCode::INTERNAL_SERVER_ERROR)
        .header("content-type", "text/plain; charset=utf-8")
        .body(format!("feature not supported: {feature}"))
}

/// Unread request bytes above which an early answer reaches the client as a reset (loopback
/// socket buffers hold about this much).
const UNREAD_RESETS: u64 = 256 << 10;

fn declared_length(incoming: &Incoming) -> Option<u64> {
    incoming
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The upload personality's answer to a request, when it has one; `None` lets the registry
/// answer as usual (with the body put back where it was read).
pub(crate) async fn intercept(
    personality: &Personality,
    op: OpKind,
    incoming: &mut Incoming,
) -> Result<Option<Reply>, BodyCut> {
    let carries_body = matches!(op, OpKind::UploadPatch | OpKind::UploadPut);
    if personality.container_registry_uploads {
        match op {
            // Answered from the headers, before the body is read (the binary's
            // `upload_finalize`). A body larger than the socket buffers is still being sent
            // when the server closes with unread bytes, which the kernel answers with a reset:
            // the client sees a broken connection, not the 500.
            OpKind::UploadPut if declared_length(incoming).unwrap_or(0) > UNREAD_RESETS => {
                incoming.conn.kill();
                return Err(BodyCut);
            }
            OpKind::UploadPut if declared_length(incoming).unwrap_or(0) != 0 => {
                return Ok(Some(not_supported(
                    "missing content length not implemented",
                )));
            }
            OpKind::UploadPatch if incoming.headers.contains_key(header::RANGE) => {
                return Ok(Some(not_supported("unsupported feature: chunked uploads")));
            }
            // The session route has a PATCH and a PUT only.
            OpKind::UploadStatus | OpKind::UploadCancel => {
                return Ok(Some(Reply::new(StatusCode::METHOD_NOT_ALLOWED)));
            }
            _ => {}
        }
    }
    let limits = [
        personality.upload_request_limit_416,
        personality.upload_request_limit_413,
    ];
    let put_refused = personality.put_with_body_blob_unknown
        && op == OpKind::UploadPut
        && incoming.method == Method::PUT;
    if !carries_body || (limits.iter().all(Option::is_none) && !put_refused) {
        return Ok(None);
    }
    // Read the body first, as these registries do, so the client sees the answer.
    let body = incoming.read_body().await?;
    let len = body.len() as u64;
    if let Some(limit) = personality.upload_request_limit_416
        && len > limit
    {
        return Ok(Some(ghcr_too_large(limit)));
    }
    if let Some(limit) = personality.upload_request_limit_413
        && len > limit
    {
        return Ok(Some(acr_too_large()));
    }
    if put_refused && !body.is_empty() {
        return Ok(Some(oci_error(
            404,
            "BLOB_UNKNOWN",
            "blob unknown to registry",
        )));
    }
    incoming.body = Body::from(body);
    Ok(None)
}
