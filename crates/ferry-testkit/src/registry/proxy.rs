//! A fault-injecting HTTP proxy in front of a real registry: forwards every request upstream with
//! bodies streamed both ways, rewrites `Location` to itself, and applies the registry's fault knobs.

use std::io;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::faults::{Decision, FaultsHandle};
use super::metrics::{InFlightGuard, Metrics, OpKind, RequestRecord, Stats};
use super::net::{self, ConnHandle};
use super::reply::{Reply, code_for_status, oci_error};
use super::routes::{announce, carries_body, classify, parse_route, query_pairs};

/// Request headers that belong to one hop and are not forwarded (the proxy's own `Host` is
/// replaced by the upstream's, so the upstream builds its URLs for itself).
const HOP_HEADERS: &[header::HeaderName] = &[
    header::HOST,
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::TE,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
];

#[derive(Debug)]
struct ProxyShared {
    /// `http://HOST:PORT` of the upstream registry, without a trailing slash.
    upstream: String,
    /// `http://127.0.0.1:PORT` of the proxy.
    base_url: String,
    client: reqwest::Client,
    faults: FaultsHandle,
    metrics: Metrics,
}

/// A running fault proxy on 127.0.0.1. Stops accepting connections when dropped.
///
/// Per request, in order: the token bucket (429, or the `ratelimit-*` announcement on the
/// answer), then scripted rules and random faults exactly as the in-process registry applies
/// them: statuses answered before forwarding, `AfterCommit` forwards and waits for the upstream's
/// answer before replacing it, `ResetBody` cuts a response body part way (or drops a request
/// body unforwarded), `Delay` and `Hang`.
#[derive(Debug)]
pub struct FaultProxy {
    shared: Arc<ProxyShared>,
    host: String,
    task: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// Binds a loopback port and forwards to `upstream` (e.g. `http://127.0.0.1:5000`).
    pub async fn start(upstream: &str) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let host = listener.local_addr()?.to_string();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(io::Error::other)?;
        let shared = Arc::new(ProxyShared {
            upstream: upstream.trim_end_matches('/').to_string(),
            base_url: format!("http://{host}"),
            client,
            faults: FaultsHandle::default(),
            metrics: Metrics::default(),
        });
        let router = axum::Router::new()
            .fallback(forward)
            .with_state(shared.clone());
        let task = net::serve(listener, router);
        Ok(FaultProxy { shared, host, task })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// `127.0.0.1:PORT`
    pub fn host(&self) -> String {
        self.host.clone()
    }

    /// The upstream base URL requests are forwarded to.
    pub fn upstream(&self) -> String {
        self.shared.upstream.clone()
    }

    /// Runtime fault knobs (rules, random faults, token bucket), as on the test registry.
    pub fn faults(&self) -> FaultsHandle {
        self.shared.faults.clone()
    }

    /// Counters since start or the last [`FaultProxy::reset_stats`]; statuses are the ones the
    /// proxy answered (its own faults and the upstream's answers alike).
    pub fn stats(&self) -> Stats {
        self.shared.metrics.lock().stats.clone()
    }

    /// Every request seen, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.metrics.lock().records.clone()
    }

    /// Waits until `done` holds of the requests seen so far, woken whenever a request starts,
    /// is answered or ends: no polling and no timer (a test waits for the proxy to be holding
    /// a request, then acts).
    pub async fn wait_until(&self, mut done: impl FnMut(&[RequestRecord]) -> bool) {
        loop {
            let mut notified = std::pin::pin!(self.shared.metrics.changed.notified());
            notified.as_mut().enable();
            if done(&self.requests()) {
                return;
            }
            notified.await;
        }
    }

    /// Waits until no request is in flight (every answer's body relayed to its end or cut),
    /// woken as requests end: counters read after it hold nothing still moving.
    pub async fn wait_idle(&self) {
        loop {
            let mut notified = std::pin::pin!(self.shared.metrics.changed.notified());
            notified.as_mut().enable();
            if self.shared.metrics.lock().in_flight == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Clears counters and records (requests in flight stay counted).
    pub fn reset_stats(&self) {
        self.shared.metrics.reset();
    }
}

/// The single handler: every request, every method.
async fn forward(
    State(shared): State<Arc<ProxyShared>>,
    ConnectInfo(conn): ConnectInfo<ConnHandle>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().map(str::to_string);
    let pairs = query_pairs(query.as_deref());
    let route = parse_route(&path);
    let op = classify(&parts.method, &route, &pairs);
    let repo = route.repo().map(str::to_string);
    let guard = shared.metrics.start(RequestRecord {
        id: 0,
        op,
        method: parts.method.to_string(),
        path: path.clone(),
        query: query.clone(),
        repo: repo.clone(),
        status: 0,
        authorization: parts.headers.contains_key(header::AUTHORIZATION),
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

    if has_dot_segment(&path) {
        let reply = oci_error(
            400,
            "UNSUPPORTED",
            format!(
                "proxy: cannot forward {path:?} as sent: it holds a dot segment that URL parsing would resolve"
            ),
        );
        return local(reply, guard);
    }

    let admission = shared.faults.admit();
    let announced = admission.headers;
    if let Some(retry_after) = admission.refused {
        let reply = oci_error(429, "TOOMANYREQUESTS", "rate limit exceeded")
            .header("retry-after", retry_after);
        return local(announce(reply, &announced), guard);
    }

    let mut after_commit = None;
    let mut cut_response_after = None;
    match shared.faults.decide(op, repo.as_deref()) {
        None => {}
        Some(Decision::Reject { code, retry_after }) => {
            let mut reply = oci_error(code, code_for_status(code), "injected fault");
            if let Some(value) = retry_after {
                reply = reply.header("retry-after", value);
            }
            return local(announce(reply, &announced), guard);
        }
        Some(Decision::AfterCommit { code }) => after_commit = Some(code),
        Some(Decision::ResetBody { after_bytes }) => {
            if carries_body(op, &parts.method) {
                drain_then_cut(body, after_bytes, &conn).await;
                guard.set_status(0);
                return Response::new(Body::empty());
            }
            cut_response_after = Some(after_bytes);
        }
        Some(Decision::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(Decision::Hang) => std::future::pending::<()>().await,
    }

    let target = match &query {
        Some(query) => format!("{}{path}?{query}", shared.upstream),
        None => format!("{}{path}", shared.upstream),
    };
    let mut headers = parts.headers;
    for name in HOP_HEADERS {
        headers.remove(name);
    }
    let outgoing = shared
        .client
        .request(parts.method.clone(), &target)
        .headers(headers);
    let outgoing = if parts.method == Method::GET || parts.method == Method::HEAD {
        outgoing
    } else {
        outgoing.body(reqwest::Body::wrap_stream(body.into_data_stream()))
    };
    let upstream = match outgoing.send().await {
        Ok(upstream) => upstream,
        Err(error) => {
            let reply = oci_error(
                502,
                "UNAVAILABLE",
                format!("proxy: upstream failed: {error}"),
            );
            return local(announce(reply, &announced), guard);
        }
    };
    if let Some(code) = after_commit {
        // The upstream did the work; its answer is lost on the way back.
        let mut rest = upstream.bytes_stream();
        while let Some(Ok(_)) = rest.next().await {}
        let reply = oci_error(code, code_for_status(code), "injected fault after commit");
        return local(announce(reply, &announced), guard);
    }

    if let Some(limit) = cut_response_after
        && upstream
            .content_length()
            .is_some_and(|len| len <= limit as u64)
    {
        // Nothing (or not enough) to cut inside the body: drop the connection unanswered.
        guard.set_status(0);
        conn.kill();
        return Response::new(Body::empty());
    }
    let status = upstream.status();
    let mut headers = rewrite_headers(upstream.headers(), &shared);
    for (name, value) in &announced {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.append(*name, value);
        }
    }
    guard.set_status(status.as_u16());
    let counted = match (op, &route) {
        (OpKind::BlobGet, super::routes::Route::Blob { digest, .. }) => Some(digest.clone()),
        _ => None,
    };
    let body = relay(
        upstream.bytes_stream(),
        cut_response_after,
        guard,
        shared.metrics.clone(),
        counted,
    );
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// Whether a path segment is `.` or `..`, literally or percent-encoded (`%2e`, any case).
fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    })
}

/// The upstream's answer headers for the client: hop-by-hop headers dropped, and a `Location`
/// that points at the upstream rewritten to point at the proxy.
fn rewrite_headers(upstream: &HeaderMap, shared: &ProxyShared) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in upstream {
        if name == header::CONNECTION || name == header::TRANSFER_ENCODING {
            continue;
        }
        if name == header::LOCATION
            && let Ok(text) = value.to_str()
            && let Some(rest) = text.strip_prefix(shared.upstream.as_str())
            && let Ok(rewritten) = HeaderValue::from_str(&format!("{}{rest}", shared.base_url))
        {
            headers.append(name, rewritten);
            continue;
        }
        headers.append(name, value.clone());
    }
    headers
}

/// An answer made by the proxy itself.
fn local(reply: Reply, guard: InFlightGuard) -> Response {
    guard.set_status(reply.status.as_u16());
    let mut headers = reply.headers;
    if let Ok(value) = HeaderValue::from_str(&reply.body.len().to_string()) {
        headers.insert(header::CONTENT_LENGTH, value);
    }
    let mut response = Response::new(Body::from(reply.body));
    *response.status_mut() = reply.status;
    *response.headers_mut() = headers;
    drop(guard);
    response
}

/// Reads up to `limit` bytes of a request body, then cuts the connection unanswered.
async fn drain_then_cut(body: Body, limit: usize, conn: &ConnHandle) {
    let mut stream = body.into_data_stream();
    let mut read = 0usize;
    while read < limit {
        match stream.next().await {
            Some(Ok(chunk)) => read = read.saturating_add(chunk.len()),
            _ => break,
        }
    }
    conn.kill();
}

/// Forwards the upstream body chunk by chunk; with `cut_after`, stops after that many bytes and
/// fails the body (the client sees a reset part way through). Holds `guard` until the end.
fn relay(
    upstream: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    cut_after: Option<usize>,
    guard: InFlightGuard,
    metrics: Metrics,
    counted: Option<String>,
) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    struct Relay<S> {
        upstream: S,
        allowance: Option<usize>,
        guard: Option<InFlightGuard>,
        done: bool,
    }
    let state = Relay {
        upstream: Box::pin(upstream),
        allowance: cut_after,
        guard: Some(guard),
        done: false,
    };
    futures::stream::unfold(state, move |mut state| {
        let metrics = metrics.clone();
        let counted = counted.clone();
        async move {
            if state.done {
                return None;
            }
            if state.allowance == Some(0) {
                // Let the connection flush what was sent, then fail the body.
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
                state.done = true;
                state.guard = None;
                return Some((
                    Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        "body cut by fault proxy",
                    )),
                    state,
                ));
            }
            match state.upstream.next().await {
                Some(Ok(mut chunk)) => {
                    if let Some(left) = state.allowance.as_mut() {
                        if chunk.len() >= *left {
                            chunk = chunk.slice(..*left);
                        }
                        *left -= chunk.len();
                    }
                    if let Some(digest) = &counted {
                        metrics.add_blob_bytes(digest, chunk.len() as u64);
                    }
                    Some((Ok(chunk), state))
                }
                Some(Err(error)) => {
                    state.done = true;
                    state.guard = None;
                    Some((Err(io::Error::other(error)), state))
                }
                None => {
                    state.guard = None;
                    if state.allowance.is_some() {
                        // The body ended before the cut point: still fail it, as promised.
                        state.allowance = Some(0);
                        return Some((Ok(Bytes::new()), state));
                    }
                    None
                }
            }
        }
    })
}
