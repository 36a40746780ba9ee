//! Answers of the test registry before they become HTTP responses: status, headers, body, and
//! the OCI JSON error bodies (`{"errors":[{"code":..,"message":..}]}`).

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use bytes::Bytes;

/// One answer, kept as plain parts so faults can rewrite or cut it afterwards.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// Set for blob GETs: the digest whose served bytes are counted.
    pub(crate) blob_digest: Option<String>,
    /// Set by a hostile rule: the body goes out in this many pieces, one per interval.
    pub(crate) trickle: Option<(usize, std::time::Duration)>,
}

impl Reply {
    pub(crate) fn new(status: StatusCode) -> Self {
        Reply {
            status,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            blob_digest: None,
            trickle: None,
        }
    }

    /// Adds a header; values that are not valid header text are skipped (they come from the
    /// registry's own state, which only holds header-safe text).
    pub(crate) fn header(mut self, name: &'static str, value: impl AsRef<str>) -> Self {
        if let Ok(value) = HeaderValue::from_str(value.as_ref()) {
            self.headers.append(HeaderName::from_static(name), value);
        }
        self
    }

    pub(crate) fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// A JSON body with `Content-Type: application/json`.
    pub(crate) fn json(self, value: &serde_json::Value) -> Self {
        let text = value.to_string();
        self.header("content-type", "application/json").body(text)
    }
}

/// An OCI error answer.
pub(crate) fn oci_error(status: u16, code: &str, message: impl AsRef<str>) -> Reply {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Reply::new(status).json(&serde_json::json!({
        "errors": [{"code": code, "message": message.as_ref(), "detail": null}]
    }))
}

/// The OCI error code that fits a status the fault machinery answers with.
pub(crate) fn code_for_status(status: u16) -> &'static str {
    match status {
        401 => "UNAUTHORIZED",
        403 => "DENIED",
        404 => "NAME_UNKNOWN",
        429 => "TOOMANYREQUESTS",
        _ => "UNAVAILABLE",
    }
}
