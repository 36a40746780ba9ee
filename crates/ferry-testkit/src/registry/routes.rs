//! Request pipeline of the test registry: parses `/v2/...` paths (names may hold slashes),
//! classifies the operation, applies latency, rate limit, auth and faults, then dispatches.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt as _;

use super::auth::{AuthState, Need};
use super::content;
use super::faults::{Decision, FaultsHandle};
use super::metrics::{InFlightGuard, Metrics, OpKind, RequestRecord};
use super::net::ConnHandle;
use super::reply::{Reply, code_for_status, oci_error};
use super::state::Store;
use super::uploads;

/// Fixed settings chosen by the builder.
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    pub(crate) page_size: Option<usize>,
    pub(crate) latency: Vec<(String, Duration)>,
    pub(crate) referrers_api: bool,
    pub(crate) redirect_blobs: bool,
    pub(crate) personality: super::personality::Personality,
    pub(crate) listing: super::listing::ListingFaults,
    pub(crate) stalls: super::stall::BodyStalls,
}

/// State shared by both listeners and the test's handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) metrics: Metrics,
    pub(crate) faults: FaultsHandle,
    pub(crate) auth: Option<AuthState>,
    pub(crate) config: Config,
    pub(crate) base_url: String,
    pub(crate) redirect_url: String,
    pub(crate) redirect_authorizations: Mutex<Vec<String>>,
    pub(crate) hostile: super::hostile::HostileHandle,
    /// What the auth personalities remember (commit times, pulls counted).
    pub(crate) auth_personality: super::personality::auth::AuthState,
}

impl Shared {
    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        match self.store.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// Which listener a request arrived on.
#[derive(Debug, Clone)]
pub(crate) struct Listening {
    pub(crate) shared: Arc<Shared>,
    pub(crate) redirect_target: bool,
}

/// A parsed request target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Ping,
    Token,
    TagList { repo: String },
    Catalog,
    Manifest { repo: String, reference: String },
    Blob { repo: String, digest: String },
    Uploads { repo: String },
    Upload { repo: String, id: String },
    Referrers { repo: String, digest: String },
    RedirectBlob { digest: String },
    Unknown,
}

impl Route {
    pub(crate) fn repo(&self) -> Option<&str> {
        match self {
            Route::TagList { repo }
            | Route::Manifest { repo, .. }
            | Route::Blob { repo, .. }
            | Route::Uploads { repo }
            | Route::Upload { repo, .. }
            | Route::Referrers { repo, .. } => Some(repo),
            _ => None,
        }
    }
}

/// Splits `tail` at the last `/<marker>/` whose remainder holds no slash.
fn split_last<'a>(tail: &'a str, marker: &str) -> Option<(&'a str, &'a str)> {
    let index = tail.rfind(marker)?;
    let name = &tail[..index];
    let rest = &tail[index + marker.len()..];
    if name.is_empty() || rest.contains('/') {
        return None;
    }
    Some((name, rest))
}

/// Parses a path on the registry listener.
pub(crate) fn parse_route(path: &str) -> Route {
    if path == "/token" {
        return Route::Token;
    }
    if path == "/v2/" || path == "/v2" {
        return Route::Ping;
    }
    if path == "/v2/_catalog" {
        return Route::Catalog;
    }
    let Some(tail) = path.strip_prefix("/v2/") else {
        return Route::Unknown;
    };
    if let Some(name) = tail.strip_suffix("/tags/list")
        && !name.is_empty()
    {
        return Route::TagList {
            repo: name.to_string(),
        };
    }
    if let Some(name) = tail
        .strip_suffix("/blobs/uploads/")
        .or_else(|| tail.strip_suffix("/blobs/uploads"))
        && !name.is_empty()
    {
        return Route::Uploads {
            repo: name.to_string(),
        };
    }
    if let Some((name, id)) = split_last(tail, "/blobs/uploads/")
        && !id.is_empty()
    {
        return Route::Upload {
            repo: name.to_string(),
            id: id.to_string(),
        };
    }
    if let Some((name, digest)) = split_last(tail, "/blobs/")
        && !digest.is_empty()
    {
        return Route::Blob {
            repo: name.to_string(),
            digest: digest.to_string(),
        };
    }
    if let Some((name, reference)) = split_last(tail, "/manifests/")
        && !reference.is_empty()
    {
        return Route::Manifest {
            repo: name.to_string(),
            reference: reference.to_string(),
        };
    }
    if let Some((name, digest)) = split_last(tail, "/referrers/")
        && !digest.is_empty()
    {
        return Route::Referrers {
            repo: name.to_string(),
            digest: digest.to_string(),
        };
    }
    Route::Unknown
}

/// Query parameters as decoded pairs (repeated keys kept).
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let Some(query) = query else {
        return Vec::new();
    };
    let Ok(uri) = format!("/?{query}").parse::<axum::http::Uri>() else {
        return Vec::new();
    };
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

pub(crate) fn query_value<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

pub(crate) fn classify(method: &Method, route: &Route, pairs: &[(String, String)]) -> OpKind {
    match (route, method.as_str()) {
        (Route::Ping, "GET" | "HEAD") => OpKind::Ping,
        (Route::Token, "GET" | "POST") => OpKind::Token,
        (Route::TagList { .. }, "GET") => OpKind::TagList,
        (Route::Catalog, "GET") => OpKind::Catalog,
        (Route::Manifest { .. }, "HEAD") => OpKind::ManifestHead,
        (Route::Manifest { .. }, "GET") => OpKind::ManifestGet,
        (Route::Manifest { .. }, "PUT") => OpKind::ManifestPut,
        (Route::Manifest { .. }, "DELETE") => OpKind::ManifestDelete,
        (Route::Blob { .. }, "HEAD") => OpKind::BlobHead,
        (Route::Blob { .. }, "GET") => OpKind::BlobGet,
        (Route::Blob { .. }, "DELETE") => OpKind::BlobDelete,
        (Route::Uploads { .. }, "POST") => {
            if query_value(pairs, "mount").is_some() {
                OpKind::Mount
            } else if query_value(pairs, "digest").is_some() {
                OpKind::UploadMonolithic
            } else {
                OpKind::UploadStart
            }
        }
        (Route::Upload { .. }, "PATCH") => OpKind::UploadPatch,
        (Route::Upload { .. }, "PUT") => OpKind::UploadPut,
        (Route::Upload { .. }, "GET") => OpKind::UploadStatus,
        (Route::Upload { .. }, "DELETE") => OpKind::UploadCancel,
        (Route::Referrers { .. }, "GET") => OpKind::Referrers,
        (Route::RedirectBlob { .. }, "GET") => OpKind::RedirectBlobGet,
        _ => OpKind::Unknown,
    }
}

pub(crate) fn carries_body(op: OpKind, method: &Method) -> bool {
    (op == OpKind::Token && method == Method::POST)
        || matches!(
            op,
            OpKind::ManifestPut
                | OpKind::UploadMonolithic
                | OpKind::UploadPatch
                | OpKind::UploadPut
        )
}

fn needs_for(op: OpKind, route: &Route, pairs: &[(String, String)]) -> Vec<Need> {
    const PULL: &[&str] = &["pull"];
    const PULL_PUSH: &[&str] = &["pull", "push"];
    let Some(repo) = route.repo() else {
        return Vec::new();
    };
    let actions = match op {
        OpKind::TagList
        | OpKind::ManifestHead
        | OpKind::ManifestGet
        | OpKind::BlobHead
        | OpKind::BlobGet
        | OpKind::Referrers => PULL,
        _ => PULL_PUSH,
    };
    let mut needs = vec![Need {
        repo: repo.to_string(),
        actions,
    }];
    if op == OpKind::Mount
        && let Some(from) = query_value(pairs, "from")
        && from != repo
    {
        needs.push(Need {
            repo: from.to_string(),
            actions: PULL,
        });
    }
    needs
}

/// Everything a dispatcher gets about one request.
pub(crate) struct Incoming {
    pub(crate) method: Method,
    pub(crate) route: Route,
    pub(crate) pairs: Vec<(String, String)>,
    pub(crate) headers: axum::http::HeaderMap,
    pub(crate) body: Body,
    /// When set, read at most this many body bytes, then cut the connection.
    pub(crate) cut_request_after: Option<usize>,
    pub(crate) conn: ConnHandle,
}

/// The request body could not be read in full (fault cut, or the client went away).
#[derive(Debug)]
pub(crate) struct BodyCut;

impl Incoming {
    /// Reads the whole request body, honouring a `ResetBody` fault.
    pub(crate) async fn read_body(&mut self) -> Result<Bytes, BodyCut> {
        let body = std::mem::replace(&mut self.body, Body::empty());
        let mut stream = body.into_data_stream();
        let mut collected = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| BodyCut)?;
            collected.extend_from_slice(&chunk);
            if let Some(limit) = self.cut_request_after
                && collected.len() >= limit
            {
                self.conn.kill();
                return Err(BodyCut);
            }
        }
        if self.cut_request_after.is_some() {
            // The whole body fit under the limit: still lose the reply.
            self.conn.kill();
            return Err(BodyCut);
        }
        Ok(collected.into())
    }
}

/// The single entry point for both listeners.
pub(crate) async fn handle(
    State(listening): State<Listening>,
    ConnectInfo(conn): ConnectInfo<ConnHandle>,
    request: Request,
) -> Response {
    let shared = listening.shared.clone();
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().map(str::to_string);
    let pairs = query_pairs(query.as_deref());
    let route = if listening.redirect_target {
        match path.strip_prefix("/blobs/") {
            Some(digest) if !digest.is_empty() => Route::RedirectBlob {
                digest: digest.to_string(),
            },
            _ => Route::Unknown,
        }
    } else {
        parse_route(&path)
    };
    let op = classify(&parts.method, &route, &pairs);
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let guard = shared.metrics.start(RequestRecord {
        id: 0,
        op,
        method: parts.method.to_string(),
        path,
        query,
        repo: route.repo().map(str::to_string),
        status: 0,
        authorization: authorization.is_some(),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        at: tokio::time::Instant::now(),
    });

    if let Some(repo) = route.repo()
        && let Some(delay) = shared
            .config
            .latency
            .iter()
            .filter(|(prefix, _)| repo.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, delay)| *delay)
    {
        tokio::time::sleep(delay).await;
    }

    let mut announced = Vec::new();
    if listening.redirect_target {
        let mut log = match shared.redirect_authorizations.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(value) = &authorization {
            log.push(value.clone());
        }
    } else {
        let admission = shared.faults.admit();
        announced = admission.headers;
        if let Some(retry_after) = admission.refused {
            let reply = oci_error(429, "TOOMANYREQUESTS", "rate limit exceeded")
                .header("retry-after", retry_after);
            return finish(&shared, announce(reply, &announced), guard, None, &conn);
        }
        if let Some(auth) = &shared.auth
            && op != OpKind::Token
        {
            let needs = needs_for(op, &route, &pairs);
            if let Err(challenge) = auth.check(&shared.base_url, authorization.as_deref(), &needs) {
                let reply =
                    super::personality::auth::unauthorized(&shared.config.personality, challenge);
                let reply = shared
                    .hostile
                    .apply(op, route.repo(), announce(reply, &announced));
                return finish(&shared, reply, guard, None, &conn);
            }
        }
    }

    let decision = shared.faults.decide(op, route.repo());
    let mut after_commit = None;
    let mut cut_response_after = None;
    let mut cut_request_after = None;
    match decision {
        None => {}
        Some(Decision::Reject { code, retry_after }) => {
            let mut reply = oci_error(code, code_for_status(code), "injected fault");
            if let Some(value) = retry_after {
                reply = reply.header("retry-after", value);
            }
            return finish(&shared, announce(reply, &announced), guard, None, &conn);
        }
        Some(Decision::AfterCommit { code }) => after_commit = Some(code),
        Some(Decision::ResetBody { after_bytes }) => {
            if carries_body(op, &parts.method) {
                cut_request_after = Some(after_bytes);
            } else {
                cut_response_after = Some(after_bytes);
            }
        }
        Some(Decision::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(Decision::Hang) => {
            std::future::pending::<()>().await;
        }
    }

    let mut incoming = Incoming {
        method: parts.method,
        route,
        pairs,
        headers: parts.headers,
        body,
        cut_request_after,
        conn: conn.clone(),
    };
    let mut op = op;
    if let Some(reply) = super::personality::refuse_missing_repository(
        &shared.config.personality,
        op,
        incoming.route.repo(),
        |repo| shared.store().repos.contains_key(repo),
    ) {
        return finish(&shared, reply, guard, None, &conn);
    }
    match super::personality::auth::intercept(&shared, op, &mut incoming).await {
        Ok(Some(reply)) => return finish(&shared, reply, guard, None, &conn),
        Ok(None) => {}
        Err(BodyCut) => {
            guard.set_status(0);
            return Response::new(Body::empty());
        }
    }
    match super::personality::intercept(&shared.config.personality, &mut op, &mut incoming).await {
        Ok(Some(reply)) => return finish(&shared, reply, guard, None, &conn),
        Ok(None) => {}
        Err(BodyCut) => {
            guard.set_status(0);
            return Response::new(Body::empty());
        }
    }
    let reply = match dispatch(&shared, op, &mut incoming, authorization.as_deref()).await {
        Ok(reply) => reply,
        Err(BodyCut) => {
            guard.set_status(0);
            return Response::new(Body::empty());
        }
    };
    super::personality::auth::after(&shared, op, &incoming, &reply);
    let reply = match after_commit {
        Some(code) => oci_error(code, code_for_status(code), "injected fault after commit"),
        None => reply,
    };
    let reply = shared
        .hostile
        .apply(op, incoming.route.repo(), announce(reply, &announced));
    if op == OpKind::BlobGet
        && reply.status.is_success()
        && let Some(after_bytes) = shared.config.stalls.after_bytes()
    {
        return super::stall::stalled(reply, after_bytes, guard);
    }
    if let Some((pieces, every)) = reply.trickle {
        return super::hostile::trickled(reply, pieces, every, guard);
    }
    finish(&shared, reply, guard, cut_response_after, &conn)
}

/// Adds the rate limiter's `ratelimit-*` announcement (if any) to an answer.
pub(crate) fn announce(mut reply: Reply, headers: &[(&'static str, String)]) -> Reply {
    for (name, value) in headers {
        reply = reply.header(name, value);
    }
    reply
}

async fn dispatch(
    shared: &Arc<Shared>,
    op: OpKind,
    incoming: &mut Incoming,
    authorization: Option<&str>,
) -> Result<Reply, BodyCut> {
    let reply = match op {
        OpKind::Ping => Reply::new(StatusCode::OK).json(&serde_json::json!({})),
        OpKind::Token => {
            let form = if incoming.method == Method::POST {
                incoming.read_body().await?
            } else {
                Bytes::new()
            };
            content::token(shared, incoming, authorization, &form)
        }
        OpKind::TagList => content::tag_list(shared, incoming),
        OpKind::Catalog => content::catalog(shared, incoming),
        OpKind::ManifestHead | OpKind::ManifestGet => content::manifest_get(shared, incoming),
        OpKind::ManifestPut => {
            let body = incoming.read_body().await?;
            content::manifest_put(shared, incoming, body)
        }
        OpKind::ManifestDelete => content::manifest_delete(shared, incoming),
        OpKind::BlobHead | OpKind::BlobGet | OpKind::RedirectBlobGet => {
            content::blob_get(shared, incoming, op)
        }
        OpKind::BlobDelete => content::blob_delete(shared, incoming),
        OpKind::Referrers => content::referrers(shared, incoming),
        OpKind::UploadStart => uploads::start(shared, incoming),
        OpKind::Mount => uploads::mount(shared, incoming),
        OpKind::UploadMonolithic => {
            let body = incoming.read_body().await?;
            uploads::monolithic(shared, incoming, body)
        }
        OpKind::UploadPatch => {
            let body = incoming.read_body().await?;
            uploads::patch(shared, incoming, body)
        }
        OpKind::UploadPut => {
            let body = incoming.read_body().await?;
            uploads::put(shared, incoming, body)
        }
        OpKind::UploadStatus => uploads::status(shared, incoming),
        OpKind::UploadCancel => uploads::cancel(shared, incoming),
        OpKind::Unknown => oci_error(404, "UNSUPPORTED", "no such route in the test registry"),
    };
    Ok(reply)
}

/// Turns a reply into a response, recording its status, counting blob bytes, and cutting the
/// body when a `ResetBody` fault asks for it.
fn finish(
    shared: &Arc<Shared>,
    reply: Reply,
    guard: InFlightGuard,
    cut_after: Option<usize>,
    conn: &ConnHandle,
) -> Response {
    let reply = super::personality::listing::throttle_body(&shared.config.personality, reply);
    let Reply {
        status,
        mut headers,
        body,
        blob_digest,
        ..
    } = reply;
    if let Some(limit) = cut_after
        && body.len() <= limit
    {
        // Nothing (or not enough) to cut inside the body: drop the connection unanswered.
        guard.set_status(0);
        conn.kill();
        return Response::new(Body::empty());
    }
    guard.set_status(status.as_u16());
    if !headers.contains_key(header::CONTENT_LENGTH)
        && status != StatusCode::NO_CONTENT
        && let Ok(value) = HeaderValue::from_str(&body.len().to_string())
    {
        headers.insert(header::CONTENT_LENGTH, value);
    }
    let streamed = cut_after.is_some() || blob_digest.is_some();
    let body = if streamed {
        let sent = match cut_after {
            Some(limit) => body.slice(..limit),
            None => body,
        };
        let metrics = shared.metrics.clone();
        let counted = sent.len() as u64;
        let cut = cut_after.is_some();
        let stream = futures::stream::unfold(
            (Some(sent), Some(guard), blob_digest, false),
            move |(chunk, guard, digest, done)| {
                let metrics = metrics.clone();
                async move {
                    if done {
                        return None;
                    }
                    if let Some(bytes) = chunk {
                        if let Some(d) = &digest {
                            metrics.add_blob_bytes(d, counted);
                        }
                        return Some((Ok(bytes), (None, guard, digest, !cut)));
                    }
                    // Let the connection flush what was sent, then fail the body.
                    for _ in 0..4 {
                        tokio::task::yield_now().await;
                    }
                    drop(guard);
                    Some((
                        Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "body cut by test registry fault",
                        )),
                        (None, None, digest, true),
                    ))
                }
            },
        );
        Body::from_stream(stream)
    } else {
        drop(guard);
        Body::from(body)
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
