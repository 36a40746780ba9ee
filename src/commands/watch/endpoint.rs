//! `POST /v1/events` on the watch listener: the body read within its limit, the token checked,
//! the notices parsed and offered to the intake; every refusal has its status and a reason.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::events::{self, MAX_BODY};
use super::intake::Intake;
use crate::metrics::WatchMetrics;

/// The answer to one request to /v1/events.
pub async fn answer(
    request: Request<Incoming>,
    intake: Option<&Intake>,
    metrics: &WatchMetrics,
) -> Response<Full<Bytes>> {
    if request.method() != Method::POST {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only POST");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    let Some((intake, token)) = intake.and_then(|i| i.token().map(|t| (i, t))) else {
        return text(
            StatusCode::NOT_FOUND,
            "events are not configured: add `events: {token: \"${FERRY_EVENTS_TOKEN}\"}` to the config",
        );
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        metrics.event("rejected_too_large", 1);
        return text(StatusCode::PAYLOAD_TOO_LARGE, "the body is over 1 MiB");
    }
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            metrics.event("rejected_too_large", 1);
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the body is over 1 MiB, or broke off",
            );
        }
    };
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    let signature = parts
        .headers
        .get("x-hub-signature-256")
        .map(|v| v.as_bytes());
    if !events::authorized(authorization, signature, &body, &token) {
        metrics.event("rejected_unauthorized", 1);
        let mut response = text(
            StatusCode::UNAUTHORIZED,
            "send Authorization: Bearer <events.token>, or GitHub's X-Hub-Signature-256",
        );
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return response;
    }
    let notices = match events::parse(&body) {
        Ok(n) => n,
        Err(reason) => {
            metrics.event("rejected_malformed", 1);
            return text(StatusCode::BAD_REQUEST, &reason);
        }
    };
    metrics.event("received", notices.len());
    // Durable (journaled) when it returns: before the answer.
    let offered = intake.offer(&notices, tokio::time::Instant::now()).await;
    metrics.event("queued", offered.queued);
    metrics.event("coalesced", offered.coalesced);
    metrics.event("ignored", offered.ignored);
    metrics.event("refused", offered.refused);
    let summary = format!(
        "{{\"queued\":{},\"coalesced\":{},\"ignored\":{},\"refused\":{}}}\n",
        offered.queued, offered.coalesced, offered.ignored, offered.refused
    );
    if offered.refused > 0 && offered.queued + offered.coalesced == 0 {
        let mut response = with_body(StatusCode::SERVICE_UNAVAILABLE, "application/json", summary);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
        return response;
    }
    with_body(StatusCode::ACCEPTED, "application/json", summary)
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    with_body(status, "text/plain; charset=utf-8", format!("{body}\n"))
}

fn with_body(
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<Full<Bytes>> {
    let length = body.len();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
