//! Hostile answers of the test registry: rules that rewrite what it answers for one repository
//! or operation (extreme headers, statuses and bodies, extra names, bodies trickled out slowly).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;

use super::metrics::{InFlightGuard, OpKind};
use super::reply::Reply;

/// One rewrite of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Hostility {
    /// Replaces the status.
    Status(u16),
    /// Sets a header to raw bytes (replacing any value the registry put there), so values
    /// that are not text can be sent too.
    Header(&'static str, Vec<u8>),
    /// Replaces the body.
    Body(Bytes),
    /// Sets one top-level member of a JSON body (`expires_in` of a token answer).
    JsonMember(&'static str, serde_json::Value),
    /// Adds names to a tag list answer's `tags`.
    ExtraTags(Vec<String>),
    /// Appends this many bytes to the body (a blob longer than its descriptor says).
    Overlong(usize),
    /// Sends the body in `pieces` parts, waiting `every` (tokio clock) before each: an answer
    /// that keeps its connection busy without ever stalling long enough to look dead.
    Trickle {
        /// How many parts the body is cut into (at least one).
        pieces: usize,
        /// The wait before each part.
        every: Duration,
    },
    /// Replaces the answer with an OCI error of this status, code and message (a code need
    /// not be the short word the spec lists: a hostile one is long and holds newlines).
    OciError {
        /// The status.
        status: u16,
        /// The `code` of the one error.
        code: String,
        /// Its `message`.
        message: String,
    },
}

/// Which answers a rule rewrites: all that match both the operation and the repository (a
/// `None` matches every one; the token endpoint and the ping have no repository).
#[derive(Debug, Clone, PartialEq)]
pub struct HostileRule {
    pub op: Option<OpKind>,
    pub repo: Option<String>,
    pub answer: Vec<Hostility>,
    /// How many answers it rewrites (`None`: every one).
    pub times: Option<usize>,
    /// How many matching answers it lets through untouched first.
    pub skip: usize,
}

impl HostileRule {
    /// A rule for `op` on `repo`.
    pub fn new(op: OpKind, repo: Option<&str>, answer: Vec<Hostility>) -> Self {
        HostileRule {
            op: Some(op),
            repo: repo.map(str::to_owned),
            answer,
            times: None,
            skip: 0,
        }
    }

    /// The same rule, leaving the first `n` matching answers untouched.
    pub fn after(mut self, n: usize) -> Self {
        self.skip = n;
        self
    }

    /// The same rule for the first `n` matching answers only.
    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }
}

/// The registry's hostile rules, changeable while it runs.
#[derive(Debug, Clone, Default)]
pub struct HostileHandle {
    rules: Arc<Mutex<Vec<HostileRule>>>,
}

impl HostileHandle {
    pub fn add(&self, rule: HostileRule) {
        self.lock().push(rule);
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<HostileRule>> {
        self.rules.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answer with every matching rule applied, in the order they were added.
    pub(crate) fn apply(&self, op: OpKind, repo: Option<&str>, mut reply: Reply) -> Reply {
        let mut rules = self.lock();
        for rule in rules.iter_mut().filter(|r| {
            r.op.is_none_or(|o| o == op)
                && r.repo.as_deref().is_none_or(|x| Some(x) == repo)
                && r.times != Some(0)
        }) {
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            if let Some(n) = &mut rule.times {
                *n -= 1;
            }
            for hostility in &rule.answer {
                reply = rewrite(reply, hostility);
            }
        }
        reply
    }
}

fn rewrite(mut reply: Reply, hostility: &Hostility) -> Reply {
    match hostility {
        Hostility::Status(code) => {
            reply.status = StatusCode::from_u16(*code).unwrap_or(StatusCode::IM_A_TEAPOT);
        }
        Hostility::Header(name, value) => {
            if let Ok(value) = HeaderValue::from_bytes(value) {
                reply.headers.insert(HeaderName::from_static(name), value);
            }
        }
        Hostility::Body(body) => {
            reply.body = body.clone();
            reply.headers.remove("content-length");
        }
        Hostility::JsonMember(key, value) => {
            if let Ok(serde_json::Value::Object(mut map)) =
                serde_json::from_slice::<serde_json::Value>(&reply.body)
            {
                map.insert((*key).to_owned(), value.clone());
                reply.body = serde_json::Value::Object(map).to_string().into();
                reply.headers.remove("content-length");
            }
        }
        Hostility::ExtraTags(names) => {
            if let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&reply.body)
                && let Some(tags) = value.get_mut("tags").and_then(|t| t.as_array_mut())
            {
                tags.extend(names.iter().cloned().map(serde_json::Value::String));
                reply.body = value.to_string().into();
                reply.headers.remove("content-length");
            }
        }
        Hostility::Trickle { pieces, every } => reply.trickle = Some(((*pieces).max(1), *every)),
        Hostility::OciError {
            status,
            code,
            message,
        } => {
            let error = super::reply::oci_error(*status, code, message);
            reply.status = error.status;
            reply.body = error.body;
            reply.headers.remove("content-length");
            reply.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        Hostility::Overlong(extra) => {
            let mut body = reply.body.to_vec();
            body.resize(body.len() + extra, 0x5a);
            reply.body = body.into();
            reply.headers.remove("content-length");
        }
    }
    reply
}

/// The reply with its body sent in `pieces` parts, each after a wait of `every`.
pub(crate) fn trickled(
    reply: Reply,
    pieces: usize,
    every: Duration,
    guard: InFlightGuard,
) -> Response {
    use futures::StreamExt as _;
    guard.set_status(reply.status.as_u16());
    let body = reply.body;
    let size = body.len().div_ceil(pieces).max(1);
    let parts: Vec<Bytes> = (0..body.len())
        .step_by(size)
        .map(|at| body.slice(at..(at + size).min(body.len())))
        .collect();
    let mut headers = reply.headers;
    if let Ok(value) = HeaderValue::from_str(&body.len().to_string()) {
        headers.insert(header::CONTENT_LENGTH, value);
    }
    let stream = futures::stream::iter(parts).then(move |part| async move {
        tokio::time::sleep(every).await;
        Ok::<_, std::io::Error>(part)
    });
    let stream = stream.chain(futures::stream::once(async move {
        drop(guard);
        Ok(Bytes::new())
    }));
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = reply.status;
    *response.headers_mut() = headers;
    response
}
