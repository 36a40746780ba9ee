//! `POST /v1/events` (and `/v1/events/<path_secret>`) on the watch listener: the body read
//! within its limit, the sender judged (`events::auth`), the notices parsed and offered to the
//! intake; every refusal has its status and a reason, none quotes a secret.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::events::auth::{self, Presented, Verdict};
use super::events::{self, CloudHeaders, MAX_BODY, Parsed};
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
    let Some((intake, settings)) = intake.and_then(|i| i.events().map(|s| (i, s))) else {
        return text(
            StatusCode::NOT_FOUND,
            "events are not configured: add `events: {token: \"${FERRY_EVENTS_TOKEN}\"}` to the config",
        );
    };
    // `/v1/events/<segment>`: judged by the path secret alone, before the body is read.
    let segment = request
        .uri()
        .path()
        .strip_prefix("/v1/events/")
        .map(str::to_owned);
    if let Some(segment) = &segment {
        let only_path = Presented {
            path_secret: Some(segment),
            ..Presented::default()
        };
        if auth::judge(&settings, &only_path, &|_| None, 0) == Verdict::NotFound {
            metrics.event("rejected_unauthorized", 1);
            return text(StatusCode::NOT_FOUND, "no such endpoint");
        }
    }
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
    let header = |name: &str| parts.headers.get(name).map(|v| v.as_bytes());
    let presented = Presented {
        path_secret: segment.as_deref(),
        authorization: header("authorization"),
        github: header("x-hub-signature-256"),
        jfrog: header("x-jfrog-event-auth"),
        nexus: header("x-nexus-webhook-signature"),
        body: &body,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let fetched = |i: usize| match &settings.oidc.get(i)?.keys {
        ferry_config::OidcKeys::Url(url) => intake.jwks().keys(url),
        ferry_config::OidcKeys::File { .. } => None,
    };
    let mut verdict = Verdict::Unauthorized;
    // Keys from a `jwks_url` are fetched when first needed, and again (at most once a minute)
    // when a token does not verify under the ones held: the sender may have rotated its keys.
    for stale in [false, true] {
        intake.jwks().refresh(&settings, stale).await;
        verdict = auth::judge(&settings, &presented, &fetched, now);
        if verdict != Verdict::Unauthorized
            || !settings
                .oidc
                .iter()
                .any(|o| matches!(o.keys, ferry_config::OidcKeys::Url(_)))
        {
            break;
        }
    }
    match verdict {
        Verdict::Allowed(scheme) => tracing::debug!("watch: an event let in by {scheme:?}"),
        Verdict::NotFound => {
            metrics.event("rejected_unauthorized", 1);
            return text(StatusCode::NOT_FOUND, "no such endpoint");
        }
        Verdict::Unauthorized => {
            metrics.event("rejected_unauthorized", 1);
            let mut response = text(
                StatusCode::UNAUTHORIZED,
                "send Authorization: Bearer <events.token or an OIDC token>, a signature header configured under events.hmac, or post to /v1/events/<events.path_secret>",
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    let text_header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 256)
    };
    let ce = CloudHeaders {
        kind: text_header("ce-type"),
        source: text_header("ce-source"),
    };
    let (notices, dropped) = match events::parse(&body, ce) {
        Ok(Parsed::Notices(n, dropped)) => (n, dropped),
        Ok(Parsed::Validation(code)) => {
            // Event Grid's handshake: echo its code, queue nothing.
            let answer = serde_json::json!({ "validationResponse": code }).to_string();
            return with_body(StatusCode::OK, "application/json", answer);
        }
        Err(reason) => {
            metrics.event("rejected_malformed", 1);
            return text(StatusCode::BAD_REQUEST, &reason);
        }
    };
    metrics.event("received", notices.len() + dropped);
    // Durable (journaled) when it returns: before the answer.
    let offered = intake.offer(&notices, tokio::time::Instant::now()).await;
    metrics.event("queued", offered.queued);
    metrics.event("coalesced", offered.coalesced);
    // Notices dropped for invalid names count as ignored.
    let ignored = offered.ignored + dropped;
    metrics.event("ignored", ignored);
    metrics.event("refused", offered.refused);
    let summary = format!(
        "{{\"queued\":{},\"coalesced\":{},\"ignored\":{},\"refused\":{}}}\n",
        offered.queued, offered.coalesced, ignored, offered.refused
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
