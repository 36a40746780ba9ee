//! The watch listener: /healthz, /readyz, /metrics and /v1/events over HTTP/1.1 (hyper), plain or
//! TLS, one request per connection, with a cap on connections, timeouts, and accept pauses.
//!
//! The cap is taken from the process's open-file limit at start (a quarter of it, at most
//! [`MAX_CONNECTIONS`]), so however many clients connect, three quarters of the descriptors stay
//! for the runs. At the cap, nothing more is accepted: further connections wait in the kernel's
//! backlog, holding no descriptor of ours. A failed `accept` (out of descriptors) pauses accepting,
//! doubling from [`FIRST_PAUSE`] to [`LAST_PAUSE`], until one of our connections closes; the
//! failures of a streak are logged at the 1st, 2nd, 4th, 8th… so the log cannot be flooded.

use std::convert::Infallible;
use std::sync::Arc;
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
/// The first pause after a failed accept, and the longest.
pub const FIRST_PAUSE: Duration = Duration::from_millis(10);
pub const LAST_PAUSE: Duration = Duration::from_secs(1);

/// What one connection may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more wait in the kernel's backlog.
    pub connections: usize,
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
        Limits {
            connections: usize::try_from(quarter)
                .unwrap_or(MAX_CONNECTIONS)
                .clamp(1, MAX_CONNECTIONS),
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

/// A connection's place under the cap: freed, and the accept loop told, when it closes.
struct Slot {
    _permit: OwnedSemaphorePermit,
    closed: Arc<Notify>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.closed.notify_one();
    }
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
    let slots = Arc::new(Semaphore::new(limits.connections));
    let closed = Arc::new(Notify::new());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.header_bytes)
        .max_headers(limits.headers)
        .keep_alive(false)
        .title_case_headers(true);
    let mut failures: u64 = 0;
    let mut pause = FIRST_PAUSE;
    loop {
        // At the cap, wait here: the next connection stays in the backlog, costing us nothing.
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        match listener.next().await {
            Ok(stream) => {
                let slot = Slot {
                    _permit: permit,
                    closed: Arc::clone(&closed),
                };
                failures = 0;
                pause = FIRST_PAUSE;
                let (health, metrics) = (Arc::clone(&health), Arc::clone(&metrics));
                let intake = intake.clone();
                let service = hyper::service::service_fn(move |request| {
                    let (health, metrics, intake) =
                        (Arc::clone(&health), Arc::clone(&metrics), intake.clone());
                    async move {
                        let now = Instant::now();
                        let answer = match request.uri().path() {
                            p if p == "/v1/events" || p.starts_with("/v1/events/") => {
                                super::endpoint::answer(request, intake.as_deref(), &metrics).await
                            }
                            path => {
                                if path == "/metrics" {
                                    let oldest =
                                        intake.as_ref().and_then(|i| i.oldest_unmirrored());
                                    metrics.set_oldest_event(
                                        oldest.map_or(0.0, |at| (now - at).as_secs_f64()),
                                    );
                                }
                                answer(&request, &health, &metrics, now)
                            }
                        };
                        Ok::<_, Infallible>(answer)
                    }
                });
                let (http, tls) = (http.clone(), tls.clone());
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
                    if let Ok(Err(e)) =
                        tokio::time::timeout(limits.connection_timeout, served).await
                    {
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

    #[test]
    fn the_cap_is_a_quarter_of_the_open_files_within_one_and_the_maximum() {
        assert_eq!(Limits::for_open_files(Some(128)).connections, 32);
        assert_eq!(Limits::for_open_files(Some(3)).connections, 1);
        assert_eq!(Limits::for_open_files(Some(0)).connections, 1);
        assert_eq!(Limits::for_open_files(Some(1 << 20)).connections, 64);
        assert_eq!(Limits::for_open_files(None).connections, 64);
    }
}
