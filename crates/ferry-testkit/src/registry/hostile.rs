//! Hostile answers of the test registry: rules that rewrite what it answers for one repository
//! or operation (extreme and malformed headers, statuses and bodies, extra names in tag lists).

use std::sync::{Arc, Mutex};

use axum::http::{HeaderName, HeaderValue, StatusCode};
use bytes::Bytes;

use super::metrics::OpKind;
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
        Hostility::Overlong(extra) => {
            let mut body = reply.body.to_vec();
            body.resize(body.len() + extra, 0x5a);
            reply.body = body.into();
            reply.headers.remove("content-length");
        }
    }
    reply
}
