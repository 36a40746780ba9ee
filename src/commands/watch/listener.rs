//! The watch listener: /healthz, /readyz, /metrics and /v1/events over HTTP/1.1 (hyper), plain or
//! TLS, one request per connection, with caps on connections (in all and per client address),
//! room kept for the probes, timeouts, and accept pauses.
//!
//! One address holds at most [`Limits::per_client`] of the connections served (an IPv6 client
//! is its /64). Past that, or when every connection is taken, a connection goes to the room
//! kept for probes ([`Limits::probe_room`], at most half of it per address): there it has
//! [`Limits::probe_header_timeout`] to send its request, and only /healthz and /readyz are
//! answered (anything else is 503 with `Retry-After: 1`). A connection with no place in either
//! is closed unanswered and counted (`ferry_listener_connections_refused_total{reason}`). So
//! however many slow sockets one client opens, a liveness probe from another address is
//! answered, and one from the same address has the room's other half.
//!
//! The cap is taken from the process's open-file limit at start (a quarter of it, at most
//! [`MAX_CONNECTIONS`]), so however many clients connect, three quarters of the descriptors stay
//! for the runs. At the cap, nothing more is accepted: further connections wait in the kernel's
//! backlog, holding no descriptor of ours. A failed `accept` (out of descriptors) pauses accepting,
//! doubling from [`FIRST_PAUSE`] to [`LAST_PAUSE`], until one of our connections closes; the
//! failures of a streak are logged at the 1st, 2nd, 4th, 8th… so the log cannot be flooded.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::Health;
use super::intake::Intake;
use crate::metrics::WatchMetrics;

/// What /metrics answers: prometheus-client writes OpenMetrics text, which Prometheus reads.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The most connections served at once, whatever the open-file limit (probes and scrapes need
/// a handful).
pub const MAX_CONNECTIONS: usize = 64;
/// Connections kept for /healthz and /readyz beyond the cap.
pub const PROBE_ROOM: usize = 4;

/// The first pause after a failed accept, and the longest.
pub const FIRST_PAUSE: Duration = Duration::from_millis(10);
pub const LAST_PAUSE: Duration = Duration::from_secs(1);

/// What one connection may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more wait in the kernel's backlog.
    pub connections: usize,
    /// Of those, the most from one client address (an IPv6 client is its /64).
    pub per_client: usize,
    /// Connections kept beyond the cap for /healthz and /readyz only (at most half of them
    /// from one address).
    pub probe_room: usize,
    /// Time a connection in the probes' room has to send its request.
    pub probe_header_timeout: Duration,
    /// Time to send the request line and headers.
    pub header_timeout: Duration,
    /// Time for the whole connection: request, answer and its reading.
    pub connection_timeout: Duration,
    /// Bytes of request line and headers (hyper's read buffer; its minimum is 8 KiB).
    pub header_bytes: usize,
    /// Number of request headers.
    pub headers: usize,
}

impl Limits {
    /// The limits for a process allowed `open_files` descriptors (`None`: unknown or unlimited).
    pub fn for_open_files(open_files: Option<u64>) -> Limits {
        let quarter = open_files.map_or(MAX_CONNECTIONS as u64, |n| n / 4);
        let connections = usize::try_from(quarter)
            .unwrap_or(MAX_CONNECTIONS)
            .clamp(1, MAX_CONNECTIONS);
        Limits {
            connections,
            per_client: (connections / 4).max(1),
            probe_room: PROBE_ROOM,
            probe_header_timeout: Duration::from_secs(1),
            header_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(10),
            header_bytes: 8 * 1024,
            headers: 32,
        }
    }
}

/// The soft limit on open files (`RLIMIT_NOFILE`), if there is one.
pub fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Which room a connection is served in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// Under the cap: every path.
    Served,
    /// In the room kept for probes: /healthz and /readyz only.
    Probes,
}

/// Connections held per client address, in each room.
type Clients = Arc<Mutex<HashMap<IpAddr, (usize, usize)>>>;

/// The address a client is counted under: an IPv4 address (a mapped one too), or an IPv6
/// address's /64 (one host or one network's share).
fn client_of(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// A connection's place: freed, its client's count lowered, and the accept loop told, when it
/// closes.
struct Slot {
    _permit: OwnedSemaphorePermit,
    closed: Arc<Notify>,
    clients: Clients,
    client: Option<IpAddr>,
    room: Room,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(ip) = self.client {
            let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(held) = clients.get_mut(&ip) {
                match self.room {
                    Room::Served => held.0 = held.0.saturating_sub(1),
                    Room::Probes => held.1 = held.1.saturating_sub(1),
                }
                if *held == (0, 0) {
                    clients.remove(&ip);
                }
            }
        }
        self.closed.notify_one();
    }
}

/// The place for a connection from `client` that holds `permit` (taken in `room` before it was
/// accepted): under the cap while its address holds fewer than its share, else in the probes'
/// room while that has a place for it; `None`: closed unanswered.
fn place(
    client: Option<IpAddr>,
    permit: (OwnedSemaphorePermit, Room),
    served: &Arc<Semaphore>,
    probes: &Arc<Semaphore>,
    clients: &Clients,
    limits: &Limits,
) -> Option<(OwnedSemaphorePermit, Room)> {
    let mut held = clients.lock().unwrap_or_else(|p| p.into_inner());
    let counts = client.map_or((0, 0), |ip| held.get(&ip).copied().unwrap_or_default());
    let under = counts.0 < limits.per_client;
    let room_share = (limits.probe_room / 2).max(1);
    let placed = match (under, permit) {
        (true, (p, Room::Served)) => Some((p, Room::Served)),
        (true, (p, Room::Probes)) => match Arc::clone(served).try_acquire_owned() {
            Ok(s) => Some((s, Room::Served)),
            Err(_) if counts.1 < room_share => Some((p, Room::Probes)),
            Err(_) => None,
        },
        (false, (p, Room::Probes)) if counts.1 < room_share => Some((p, Room::Probes)),
        (false, (_, Room::Probes)) => None,
        (false, (_, Room::Served)) if counts.1 < room_share => Arc::clone(probes)
            .try_acquire_owned()
            .ok()
            .map(|p| (p, Room::Probes)),
        (false, (_, Room::Served)) => None,
    };
    if let (Some((_, room)), Some(ip)) = (&placed, client) {
        let entry = held.entry(ip).or_default();
        match room {
            Room::Served => entry.0 += 1,
            Room::Probes => entry.1 += 1,
        }
    }
    placed
}

/// Where connections come from: a [`TcpListener`] (or, in tests, one that fails on cue).
pub trait Connections {
    fn next(&self) -> impl Future<Output = std::io::Result<TcpStream>> + Send;
}

impl Connections for TcpListener {
    async fn next(&self) -> std::io::Result<TcpStream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

/// Accepts connections until aborted; each gets one answer and is closed (no events).
#[cfg(test)]
pub async fn serve(
    listener: impl Connections,
    limits: Limits,
    health: Arc<Health>,
    metrics: Arc<WatchMetrics>,
) {
    serve_all(listener, limits, health, metrics, None, None).await
}

/// [`serve`], with `POST /v1/events` taken into `intake`, over TLS when `tls` is given (the
/// handshake counts against the connection's timeout).
pub async fn serve_all(
    listener: impl Connections,
    limits: Limits,
    health: Arc<Health>,
    metrics: Arc<WatchMetrics>,
    intake: Option<Arc<Intake>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let served = Arc::new(Semaphore::new(limits.connections));
    let probes = Arc::new(Semaphore::new(limits.probe_room));
    let clients: Clients = Arc::default();
    let closed = Arc::new(Notify::new());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.header_bytes)
        .max_headers(limits.headers)
        .keep_alive(false)
        .title_case_headers(true);
    let mut probes_http = http.clone();
    probes_http.header_read_timeout(limits.probe_header_timeout);
    let mut failures: u64 = 0;
    let mut pause = FIRST_PAUSE;
    loop {
        // With no place in either room, wait here: the next connection stays in the backlog,
        // costing us nothing.
        let permit = tokio::select! {
            biased;
            p = Arc::clone(&served).acquire_owned() => p.map(|p| (p, Room::Served)),
            p = Arc::clone(&probes).acquire_owned() => p.map(|p| (p, Room::Probes)),
        };
        let Ok(permit) = permit else {
            return;
        };
        match listener.next().await {
            Ok(stream) => {
                failures = 0;
                pause = FIRST_PAUSE;
                let client = stream.peer_addr().ok().map(|a| client_of(a.ip()));
                let Some((permit, room)) =
                    place(client, permit, &served, &probes, &clients, &limits)
                else {
                    tracing::debug!(
                        "watch listener: a connection from {} closed unanswered: that address holds its share",
                        client.map_or("?".to_owned(), |c| c.to_string())
                    );
                    metrics.listener_refused("per_client");
                    continue;
                };
                let slot = Slot {
                    _permit: permit,
                    closed: Arc::clone(&closed),
                    clients: Arc::clone(&clients),
                    client,
                    room,
                };
                let (health, metrics) = (Arc::clone(&health), Arc::clone(&metrics));
                let intake = intake.clone();
                let service = hyper::service::service_fn(move |request| {
                    let (health, metrics, intake) =
                        (Arc::clone(&health), Arc::clone(&metrics), intake.clone());
                    async move {
                        let now = Instant::now();
                        let answer = match (room, request.uri().path()) {
                            (Room::Probes, "/healthz" | "/readyz") => {
                                answer(&request, &health, &metrics, now)
                            }
                            (Room::Probes, _) => {
                                metrics.listener_refused("probes_only");
                                busy()
                            }
                            (Room::Served, p)
                                if p == "/v1/events" || p.starts_with("/v1/events/") =>
                            {
                                super::endpoint::answer(request, intake.as_deref(), &metrics).await
                            }
                            (Room::Served, path) => {
                                if path == "/metrics" {
                                    let oldest =
                                        intake.as_ref().and_then(|i| i.oldest_unmirrored());
                                    metrics.set_oldest_event(
                                        oldest.map_or(0.0, |at| (now - at).as_secs_f64()),
                                    );
                                    if let Some(held) = intake.as_ref().map(|i| i.footprint()) {
                                        metrics.set_events_held("keys", held.keys);
                                        metrics.set_events_held("digests", held.digests);
                                        metrics.set_events_held("bytes", held.bytes);
                                        metrics.set_events_held("journal", held.journal);
                                    }
                                }
                                answer(&request, &health, &metrics, now)
                            }
                        };
                        Ok::<_, Infallible>(answer)
                    }
                });
                let (http, tls) = match room {
                    Room::Served => (http.clone(), tls.clone()),
                    Room::Probes => (probes_http.clone(), tls.clone()),
                };
                let bound = match room {
                    Room::Served => limits.connection_timeout,
                    Room::Probes => limits.probe_header_timeout.saturating_mul(2),
                };
                tokio::spawn(async move {
                    let _slot = slot;
                    let served = async {
                        match tls {
                            None => http.serve_connection(TokioIo::new(stream), service).await,
                            Some(tls) => match tls.accept(stream).await {
                                Ok(stream) => {
                                    http.serve_connection(TokioIo::new(stream), service).await
                                }
                                Err(e) => {
                                    tracing::debug!("watch listener: TLS handshake failed: {e}");
                                    Ok(())
                                }
                            },
                        }
                    };
                    if let Ok(Err(e)) = tokio::time::timeout(bound, served).await {
                        tracing::debug!("watch listener: connection ended: {e}");
                    }
                });
            }
            Err(e) => {
                // Given back without a word: only a closing connection cuts a pause short.
                drop(permit);
                failures += 1;
                if failures.is_power_of_two() {
                    tracing::warn!(
                        "watch listener: accept failed ({failures} in a row): {e}; pausing accepts up to {}ms",
                        pause.as_millis()
                    );
                }
                // Not a retry of a request: a pause in accepting, cut short when one of our
                // connections closes and gives a descriptor back.
                let _ = tokio::time::timeout(pause, closed.notified()).await;
                pause = pause.saturating_mul(2).min(LAST_PAUSE);
            }
        }
    }
}

/// The answer in the probes' room to anything but /healthz and /readyz.
fn busy() -> Response<Full<Bytes>> {
    let mut response = plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy: your address holds its share of connections; only /healthz and /readyz are answered now",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The answer to one request.
fn answer(
    request: &Request<Incoming>,
    health: &Health,
    metrics: &WatchMetrics,
    now: Instant,
) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match request.uri().path() {
        "/healthz" => plain(StatusCode::OK, "ok"),
        "/readyz" => {
            let (status, body) = health.readiness(now);
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            plain(status, &body)
        }
        "/metrics" => with_body(StatusCode::OK, OPENMETRICS, metrics.encode()),
        _ => plain(
            StatusCode::NOT_FOUND,
            "try /healthz, /readyz, /metrics or POST /v1/events",
        ),
    }
}

/// A text answer, ending in a newline.
fn plain(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let body = match body.ends_with('\n') {
        true => body.to_owned(),
        false => format!("{body}\n"),
    };
    with_body(status, "text/plain; charset=utf-8", body)
}

/// An answer with its length and no caching (hyper leaves the body out in answer to HEAD, and
/// keeps the length GET would get).
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpStream;

    /// A listener on a free loopback port, serving until the handle is dropped.
    async fn listening(limits: Limits) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let health = Arc::new(Health::new(Duration::from_secs(60)));
        let metrics = Arc::new(WatchMetrics::new());
        (addr, tokio::spawn(serve(listener, limits, health, metrics)))
    }

    /// Whatever the server sends until it closes (a reset counts as closed).
    async fn read_all(s: &mut TcpStream) -> String {
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Fails every accept with EMFILE, `failures` times, then waits forever; notes when.
    struct Exhausted {
        failures: u32,
        calls: std::sync::atomic::AtomicU32,
        done: Notify,
    }

    impl Connections for Exhausted {
        async fn next(&self) -> std::io::Result<TcpStream> {
            let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n < self.failures {
                return Err(std::io::Error::from_raw_os_error(24));
            }
            self.done.notify_one();
            std::future::pending().await
        }
    }

    // Out of descriptors, accept fails at once, again and again: the loop pauses between
    // tries (10 ms doubling to 1 s), so 20 failures take over 10 s instead of no time at all.
    #[tokio::test(start_paused = true)]
    async fn a_failing_accept_pauses_doubling_up_to_a_second() {
        let exhausted = Arc::new(Exhausted {
            failures: 20,
            calls: Default::default(),
            done: Notify::new(),
        });
        struct Shared(Arc<Exhausted>);
        impl Connections for Shared {
            fn next(&self) -> impl Future<Output = std::io::Result<TcpStream>> + Send {
                let inner = Arc::clone(&self.0);
                async move { inner.next().await }
            }
        }
        let start = Instant::now();
        let health = Arc::new(Health::new(Duration::from_secs(60)));
        let metrics = Arc::new(WatchMetrics::new());
        let limits = Limits::for_open_files(Some(1024));
        let server = tokio::spawn(serve(
            Shared(Arc::clone(&exhausted)),
            limits,
            health,
            metrics,
        ));
        exhausted.done.notified().await;
        let took = start.elapsed();
        // 10+20+…+640 ms, then 1 s for each of the other 13 pauses.
        let expected: Duration = (0..20)
            .map(|i| (FIRST_PAUSE * 2u32.pow(i.min(7))).min(LAST_PAUSE))
            .sum();
        assert_eq!(took, expected, "20 failed accepts took {took:?}");
        assert!(took > Duration::from_secs(10));
        server.abort();
    }

    // A slowloris: request headers that never end are cut off by the header timeout (5 s of
    // the paused clock), well before the connection's own bound (10 s).
    #[tokio::test(start_paused = true)]
    async fn headers_that_never_end_are_cut_off_at_the_header_timeout() {
        let limits = Limits::for_open_files(Some(1024));
        let (addr, server) = listening(limits).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        let start = Instant::now();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a")
            .await
            .unwrap();
        let out = read_all(&mut s).await;
        let took = start.elapsed();
        assert!(!out.contains("200 OK"), "{out}");
        assert!(
            took >= limits.header_timeout && took < limits.connection_timeout,
            "closed after {took:?}"
        );
        server.abort();
    }

    // On the real clock (a paused one would fire the header timer while loopback I/O is in
    // flight); nothing here is about time.
    #[tokio::test]
    async fn a_header_block_over_the_limit_is_refused_unanswered_by_the_routes() {
        let limits = Limits::for_open_files(Some(1024));
        let (addr, server) = listening(limits).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        let big = format!(
            "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "a".repeat(64 * 1024)
        );
        // The server may close before it has read everything: a failed write is fine.
        let _ = s.write_all(big.as_bytes()).await;
        let out = read_all(&mut s).await;
        assert!(
            out.is_empty() || out.starts_with("HTTP/1.1 431 "),
            "{}",
            &out[..out.len().min(200)]
        );
        // Too many headers, each small: refused as well.
        let mut s = TcpStream::connect(addr).await.unwrap();
        let many: String = (0..100).map(|i| format!("X-{i}: v\r\n")).collect();
        let _ = s
            .write_all(format!("GET /healthz HTTP/1.1\r\n{many}\r\n").as_bytes())
            .await;
        let out = read_all(&mut s).await;
        assert!(!out.contains("200 OK"), "{out}");
        // And the listener still answers a plain request.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\n\r\n").await.unwrap();
        assert!(read_all(&mut s).await.starts_with("HTTP/1.1 200 OK\r\n"));
        server.abort();
    }

    // At the cap, a further connection is not accepted (so holds no descriptor) until one of
    // the held ones closes; then it is answered.
    #[tokio::test]
    async fn past_the_cap_a_connection_waits_until_one_closes() {
        let limits = Limits {
            connections: 2,
            per_client: 2,
            probe_room: 0,
            ..Limits::for_open_files(Some(1024))
        };
        let (addr, server) = listening(limits).await;
        let first = TcpStream::connect(addr).await.unwrap();
        let _second = TcpStream::connect(addr).await.unwrap();
        let mut third = TcpStream::connect(addr).await.unwrap();
        third
            .write_all(b"GET /healthz HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut byte = [0u8; 1];
        let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut byte)).await;
        assert!(early.is_err(), "answered past the cap: {early:?}");
        drop(first);
        let out = tokio::time::timeout(limits.connection_timeout, read_all(&mut third))
            .await
            .expect("answered once a slot was free");
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        server.abort();
    }

    /// A connection from the loopback address `from` (127.0.0.x: each is another client).
    async fn connect_from(from: [u8; 4], to: std::net::SocketAddr) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
        socket.connect(to).await.unwrap()
    }

    async fn get_from(from: [u8; 4], to: std::net::SocketAddr, path: &str) -> String {
        let mut s = connect_from(from, to).await;
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        read_all(&mut s).await
    }

    /// A listener serving with `limits`, its health ready, and its metrics.
    async fn ready(
        limits: Limits,
    ) -> (
        std::net::SocketAddr,
        Arc<WatchMetrics>,
        tokio::task::JoinHandle<()>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let health = Arc::new(Health::new(Duration::from_secs(60)));
        health.finished(0, Instant::now());
        let metrics = Arc::new(WatchMetrics::new());
        let server = tokio::spawn(serve(listener, limits, health, Arc::clone(&metrics)));
        (addr, metrics, server)
    }

    fn refused(metrics: &WatchMetrics, reason: &str) -> u64 {
        let text = metrics.encode();
        let series = format!("ferry_listener_connections_refused_total{{reason=\"{reason}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .map_or(0, |v| v.trim().parse().unwrap())
    }

    // Issue 39: 70 slow sockets from one client held all 64 places and a liveness probe failed.
    // Now one address holds its share (2 of 8) and one place of the probes' room; the rest of
    // its sockets are closed unanswered as they come, and a probe from another address is
    // answered. The kernel hands connections over in order, so once the probe is answered
    // every one of the hog's has been placed or refused: the count is exact, no clock read.
    #[tokio::test]
    async fn one_client_s_slow_sockets_cannot_keep_the_probes_from_an_answer() {
        let limits = Limits {
            connections: 8,
            per_client: 2,
            probe_room: 2,
            // Nothing here is about time: no socket is cut while the test runs.
            header_timeout: Duration::from_secs(120),
            probe_header_timeout: Duration::from_secs(120),
            connection_timeout: Duration::from_secs(240),
            ..Limits::for_open_files(Some(1024))
        };
        let (addr, metrics, server) = ready(limits).await;
        let mut hog = Vec::new();
        for _ in 0..20 {
            let mut s = connect_from([127, 0, 0, 1], addr).await;
            s.write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: a")
                .await
                .unwrap();
            hog.push(s);
        }
        let out = get_from([127, 0, 0, 2], addr, "/healthz").await;
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert_eq!(
            refused(&metrics, "per_client"),
            20 - 2 - 1,
            "two served, one in the probes' room, the rest refused"
        );
        let out = get_from([127, 0, 0, 2], addr, "/readyz").await;
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        // The hog's last socket was closed unanswered.
        let last = hog.last_mut().unwrap();
        assert_eq!(read_all(last).await, "");
        server.abort();
    }

    // Issue 39: with every place under the cap taken (two clients, each its share), a probe
    // goes to the room kept for it and is answered; anything else there is 503, not served.
    #[tokio::test]
    async fn with_the_cap_taken_the_probes_room_answers_probes_only() {
        let limits = Limits {
            connections: 4,
            per_client: 2,
            probe_room: 2,
            // Nothing here is about time: no socket is cut while the test runs.
            header_timeout: Duration::from_secs(120),
            probe_header_timeout: Duration::from_secs(120),
            connection_timeout: Duration::from_secs(240),
            ..Limits::for_open_files(Some(1024))
        };
        let (addr, metrics, server) = ready(limits).await;
        let mut held = Vec::new();
        for from in [[127, 0, 0, 3], [127, 0, 0, 4]] {
            for _ in 0..2 {
                let mut s = connect_from(from, addr).await;
                s.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: a")
                    .await
                    .unwrap();
                held.push(s);
            }
        }
        let out = get_from([127, 0, 0, 2], addr, "/healthz").await;
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        let out = get_from([127, 0, 0, 5], addr, "/readyz").await;
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        let out = get_from([127, 0, 0, 5], addr, "/metrics").await;
        assert!(out.starts_with("HTTP/1.1 503 "), "{out}");
        assert!(out.contains("Retry-After: 1"), "{out}");
        assert_eq!(refused(&metrics, "probes_only"), 1);
        assert_eq!(refused(&metrics, "per_client"), 0);
        server.abort();
    }

    #[test]
    fn a_client_is_its_address_or_its_ipv6_64() {
        let v6: IpAddr = "2001:db8:1:2:3:4:5:6".parse().unwrap();
        assert_eq!(client_of(v6), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(client_of(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn the_cap_is_a_quarter_of_the_open_files_within_one_and_the_maximum() {
        assert_eq!(Limits::for_open_files(Some(128)).connections, 32);
        assert_eq!(Limits::for_open_files(Some(3)).connections, 1);
        assert_eq!(Limits::for_open_files(Some(0)).connections, 1);
        assert_eq!(Limits::for_open_files(Some(1 << 20)).connections, 64);
        assert_eq!(Limits::for_open_files(None).connections, 64);
        assert_eq!(Limits::for_open_files(None).per_client, 16);
        assert_eq!(Limits::for_open_files(Some(8)).per_client, 1);
    }
}
