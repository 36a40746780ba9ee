//! The one transient classifier: what a failed attempt says about the registry (declined, outcome
//! unknown, or final), and how an HTTP answer or a transport error becomes a [`Failure`].

use std::time::SystemTime;

use crate::error::{Error, ErrorKind};
use crate::operation::{Operation, Replay};
use crate::retry::retry_after::parse_retry_after;

/// Whether the request reached the registry before the connection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// The connection never opened: nothing reached the registry.
    No,
    /// It may have been received and acted on.
    Unknown,
}

/// One failed attempt, as the attempt itself saw it. The retry loop classifies it.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The registry answered with a status the operation does not accept.
    Status {
        /// The HTTP status.
        status: u16,
        /// The registry's `Retry-After`, parsed.
        retry_after: Option<std::time::Duration>,
        /// The first error code of the body (`TOOMANYREQUESTS`), when there is one.
        code: Option<String>,
        /// The first error message of the body, when there is one.
        message: Option<String>,
    },
    /// The connection failed (refused, reset, timed out, or the body broke part way).
    Transport {
        /// What went wrong, for the error if no retry succeeds.
        message: String,
        /// Whether the request may have reached the registry: decides if a replay-unsafe operation
        /// is retried.
        sent: Sent,
        /// A failure on ferry's side, not the registry's: this machine's (out of sockets or
        /// file descriptors), or the bytes of a request body breaking off as ferry read them
        /// (a source's cut body). Retried, but not recorded against the registry.
        local: bool,
    },
    /// Already decided: returned as is, never retried (a digest mismatch, a refused redirect).
    Final(ErrorKind),
    /// An inner operation's own final error (a token exchange that gave up): returned as is so
    /// that its attempts are not multiplied by this operation's.
    Inner(Box<Error>),
    /// The registry has not caught up with its own writes: a manifest PUT answered
    /// `MANIFEST_BLOB_UNKNOWN` right after ferry committed every blob it names ([`commit_lag`]).
    /// Sent again after the policy's jittered backoff, as long as the operation's deadline
    /// allows, without spending the retry budget or touching the breaker: the wait follows the
    /// registry (issue 39), not a fixed schedule.
    Lagging {
        /// The HTTP status.
        status: u16,
        /// The error code (`MANIFEST_BLOB_UNKNOWN`).
        code: Option<String>,
        /// The error message.
        message: Option<String>,
    },
}

/// A manifest PUT's refusal read for a commit lag: `MANIFEST_BLOB_UNKNOWN` (400 or 404) when
/// ferry itself committed what the refusal is about in this run (`committed`, decided by
/// `auth::learned::AuthCapabilities::may_lag`) is [`Failure::Lagging`], waited for by
/// [`crate::retry::with_retry`] until the registry catches up or the deadline comes; anything
/// else is returned as it is (a blob really missing stays a final 400).
pub fn commit_lag(failure: Failure, committed: bool) -> Failure {
    match failure {
        Failure::Status {
            status: status @ (400 | 404),
            code,
            message,
            ..
        } if committed && code.as_deref() == Some("MANIFEST_BLOB_UNKNOWN") => Failure::Lagging {
            status,
            code,
            message,
        },
        other => other,
    }
}

/// What a failure says, before the operation's replay rule is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transience {
    /// The registry declined before doing any work (429, 503 with `Retry-After`, 408, or the
    /// connection never opened): safe to send again for every operation.
    Declined,
    /// The work may or may not have been done (500, 502, 503, 504, a connection lost after the
    /// request went out): safe to send again only for a replayable operation.
    Unknown,
    /// Sending again cannot help.
    Permanent,
}

/// The status codes that are ever worth another attempt.
pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// The transient classifier for the whole workspace.
pub fn transience(failure: &Failure) -> Transience {
    match failure {
        Failure::Status {
            status,
            retry_after,
            ..
        } => match status {
            429 | 408 => Transience::Declined,
            503 if retry_after.is_some() => Transience::Declined,
            500 | 502 | 503 | 504 => Transience::Unknown,
            _ => Transience::Permanent,
        },
        Failure::Transport { sent: Sent::No, .. } => Transience::Declined,
        Failure::Transport {
            sent: Sent::Unknown,
            ..
        } => Transience::Unknown,
        // The registry refused the manifest without storing it: safe to send again.
        Failure::Lagging { .. } => Transience::Declined,
        Failure::Final(_) | Failure::Inner(_) => Transience::Permanent,
    }
}

/// Whether this failure of this operation may be attempted again.
pub fn may_retry(failure: &Failure, operation: Operation) -> bool {
    match transience(failure) {
        Transience::Declined => true,
        Transience::Unknown => operation.replay() == Replay::Safe,
        Transience::Permanent => false,
    }
}

/// A throttle: the registry asks for fewer requests (429, or 503 which is how sheds arrive).
/// The AIMD window halves on these.
pub fn is_throttle(failure: &Failure) -> bool {
    matches!(
        failure,
        Failure::Status {
            status: 429 | 503,
            ..
        }
    )
}

/// Whether the failure counts against the registry's health in its breaker. `Some(true)` is a
/// fault, `Some(false)` is proof of life, `None` says nothing about the registry.
pub fn breaker_verdict(failure: &Failure) -> Option<bool> {
    match failure {
        // Local failures and decided errors say nothing about the registry, nor does a registry
        // catching up with its own writes.
        Failure::Transport { local: true, .. }
        | Failure::Final(_)
        | Failure::Inner(_)
        | Failure::Lagging { .. } => None,
        Failure::Transport { .. } => Some(true),
        Failure::Status {
            status,
            retry_after,
            ..
        } => match status {
            // A throttle or a shed is a registry that is alive and pacing us, not a fault.
            429 => Some(false),
            503 if retry_after.is_some() => Some(false),
            500 | 502 | 503 | 504 => Some(true),
            _ => Some(false),
        },
    }
}

impl Failure {
    /// A failure built from a reqwest error, deciding whether the request was sent.
    pub fn from_transport(error: &reqwest::Error) -> Failure {
        if let Some(problem) = certificate_problem(error) {
            return Failure::Final(ErrorKind::Certificate(problem));
        }
        if let Some(host) = plain_http_answer(error) {
            // A TLS handshake answered in plain HTTP: the registry serves http, and sending again
            // gets the same answer. Final, so it is neither retried nor counted in the breaker.
            return Failure::Final(ErrorKind::NotTls(format!(
                "{host} answered the TLS handshake in plain HTTP: it serves http, not https \
                 (set `insecure: true` on its `registries:` entry in the config)"
            )));
        }
        // The body ferry was sending failed on ferry's side: a blob's bytes, read from the
        // source, broke off part way (the body stream's own `Failure`, which reqwest keeps as a
        // source of its error). Not the registry's doing, so local: neither its breaker nor its
        // pacer counts it, and it teaches the registry's capabilities nothing.
        if let Some(inner) = body_failure(error) {
            return Failure::on_ferrys_side(inner);
        }
        let local = is_local_io_failure(error);
        // A connect error (refused, unreachable, connect timeout, TLS handshake) means the request
        // never reached the registry. Anything later may have.
        let sent = if error.is_connect() {
            Sent::No
        } else {
            Sent::Unknown
        };
        Failure::Transport {
            message: describe_transport(error),
            sent,
            local,
        }
    }

    /// `inner`, a failure of the bytes a request to this registry was to carry (a source's
    /// read that broke off), as that request's failure: on ferry's side, so local, retried for a
    /// replay-safe operation and recorded against neither registry's health nor its counters.
    pub(crate) fn on_ferrys_side(inner: &Failure) -> Failure {
        Failure::Transport {
            message: format!("the bytes being sent broke off on ferry's side: {inner}"),
            sent: Sent::Unknown,
            local: true,
        }
    }

    /// A failure from an HTTP answer the operation does not accept. Reads at most 16 KiB of the
    /// body to find the OCI error code and message.
    pub async fn from_response(response: reqwest::Response) -> Failure {
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let (code, message) = read_oci_error(response).await;
        Failure::Status {
            status,
            retry_after,
            code,
            message,
        }
    }

    /// The error this failure ends the operation with.
    pub fn into_kind(self) -> Result<ErrorKind, Box<Error>> {
        match self {
            Failure::Status {
                status,
                code,
                message,
                ..
            }
            | Failure::Lagging {
                status,
                code,
                message,
                ..
            } => Ok(ErrorKind::Status {
                status,
                code,
                message,
            }),
            Failure::Transport { message, local, .. } => Ok(if local {
                ErrorKind::Local(message)
            } else {
                ErrorKind::Transport(message)
            }),
            Failure::Final(kind) => Ok(kind),
            Failure::Inner(error) => Err(error),
        }
    }

    /// A short reason for logs.
    pub fn reason(&self) -> String {
        match self {
            Failure::Status { status, code, .. } => match code {
                Some(code) => format!("HTTP {status} {code}"),
                None => format!("HTTP {status}"),
            },
            Failure::Lagging { status, code, .. } => format!(
                "HTTP {status} {} right after ferry committed every blob it names: the registry \
                 is catching up",
                code.as_deref().unwrap_or("")
            ),
            Failure::Transport { message, .. } => message.clone(),
            Failure::Final(kind) => kind.to_string(),
            Failure::Inner(error) => error.to_string(),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason())
    }
}

impl std::error::Error for Failure {}

/// A reqwest error as a sentence, with its sources, and with any URL stripped of its query so a
/// signed URL or token never reaches a log.
fn describe_transport(error: &reqwest::Error) -> String {
    let mut text = String::new();
    if error.is_timeout() {
        text.push_str("timed out");
    } else if is_unresolved(error) {
        text.push_str(UNRESOLVED);
        text.push_str(": ");
        text.push_str(&host_of(error));
    } else if error.is_connect() {
        text.push_str(UNCONNECTED);
    } else if error.is_body() || error.is_decode() {
        text.push_str("response body broke off");
    } else {
        text.push_str("request failed");
    }
    let mut source = std::error::Error::source(error);
    let mut depth = 0;
    while let Some(s) = source {
        let part = s.to_string();
        if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
        depth += 1;
        if depth > 4 {
            break;
        }
    }
    text
}

/// The error's sources, stepping into the error an `io::Error` wraps (its `source()` skips it).
fn causes<'a>(
    error: &'a reqwest::Error,
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> + 'a {
    let mut node: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    std::iter::from_fn(move || {
        let current = node?;
        node = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => current.source(),
        };
        Some(current)
    })
    .take(16)
}

/// The host and port of the request, for a message.
fn host_of(error: &reqwest::Error) -> String {
    error
        .url()
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_owned(),
            })
        })
        .unwrap_or_else(|| "the server".to_owned())
}

/// The host, when the TLS handshake got a plain-HTTP answer: rustls read the first bytes of
/// `HTTP/1.1 400` as a record of an invalid content type.
fn plain_http_answer(error: &reqwest::Error) -> Option<String> {
    causes(error)
        .any(|c| {
            matches!(
                c.downcast_ref::<rustls::Error>(),
                Some(rustls::Error::InvalidMessage(
                    rustls::InvalidMessage::InvalidContentType
                ))
            )
        })
        .then(|| host_of(error))
}

/// The name of the registry did not resolve (hyper's connector says `dns error`).
fn is_unresolved(error: &reqwest::Error) -> bool {
    error.is_connect() && causes(error).any(|c| c.to_string().starts_with("dns error"))
}

/// The message of a transport failure whose host name did not resolve starts with this.
pub const UNRESOLVED: &str = "name not resolved";

/// The message of a transport failure whose connection could not be opened starts with this.
pub const UNCONNECTED: &str = "could not connect";

/// Whether this failure is a host name that did not resolve (the breaker names it so).
pub fn is_unresolved_failure(failure: &Failure) -> bool {
    matches!(failure, Failure::Transport { message, .. } if message.starts_with(UNRESOLVED))
}

/// What was wrong with the server's certificate, when TLS verification refused it: which host,
/// and why. Sending again cannot fix a certificate, so this failure is final.
fn certificate_problem(error: &reqwest::Error) -> Option<String> {
    use rustls::CertificateError as C;
    let mut node: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    let mut found = None;
    for _ in 0..16 {
        let Some(current) = node else { break };
        if let Some(rustls::Error::InvalidCertificate(c)) = current.downcast_ref::<rustls::Error>()
        {
            found = Some(c.clone());
            break;
        }
        // An io::Error's `source()` skips the error it wraps: step into it instead.
        node = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => current.source(),
        };
    }
    let problem = found?;
    let host = error
        .url()
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_owned(),
            })
        })
        .unwrap_or_else(|| "the server".to_owned());
    let why = match &problem {
        C::UnknownIssuer => "UnknownIssuer: it was not signed by a trusted CA (if the registry \
                             uses a private CA, set the registry's ca_bundle to that CA's PEM)"
            .to_owned(),
        C::Expired | C::ExpiredContext { .. } => "Expired: it is past its validity".to_owned(),
        C::NotValidYet | C::NotValidYetContext { .. } => {
            "NotValidYet: its validity has not begun (check this machine's clock)".to_owned()
        }
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "NotValidForName: it does not name this host".to_owned()
        }
        other => format!("{other:?}"),
    };
    Some(format!("the certificate of {host} was refused: {why}"))
}

/// Out of file descriptors, sockets or buffers: this machine's failure, not the registry's.
/// The failure of a request body ferry was streaming, when that is what ended the request.
fn body_failure(error: &reqwest::Error) -> Option<&Failure> {
    causes(error).find_map(|cause| cause.downcast_ref::<Failure>())
}

fn is_local_io_failure(error: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            // EMFILE, ENFILE, EADDRNOTAVAIL, ENOBUFS
            if matches!(io.raw_os_error(), Some(23 | 24 | 99 | 105)) {
                return true;
            }
        }
        source = s.source();
    }
    false
}

async fn read_oci_error(response: reqwest::Response) -> (Option<String>, Option<String>) {
    use futures::StreamExt;
    const LIMIT: usize = 16 * 1024;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        let room = LIMIT - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= LIMIT {
            break;
        }
    }
    parse_oci_error(&body)
}

/// The first `{"errors":[{"code","message"}]}` entry of an error body, if there is one.
pub fn parse_oci_error(body: &[u8]) -> (Option<String>, Option<String>) {
    #[derive(serde::Deserialize)]
    struct Body {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: Option<String>,
        message: Option<String>,
    }
    match serde_json::from_slice::<Body>(body) {
        Ok(b) => match b.errors.into_iter().next() {
            // Both are the registry's text: cut and escaped here, where they enter an error, so
            // a 15 KiB code or a newline in a message cannot forge a report line.
            Some(e) => (
                e.code.as_deref().map(crate::text::for_error),
                e.message.as_deref().map(crate::text::for_error),
            ),
            None => (None, None),
        },
        Err(_) => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn status(code: u16, retry_after: Option<u64>) -> Failure {
        Failure::Status {
            status: code,
            retry_after: retry_after.map(Duration::from_secs),
            code: None,
            message: None,
        }
    }

    #[test]
    fn only_the_transient_statuses_are_transient() {
        for code in 100..600u16 {
            let t = transience(&status(code, None));
            let expected = matches!(code, 408 | 429 | 500 | 502 | 503 | 504);
            assert_eq!(t != Transience::Permanent, expected, "status {code}");
            assert_eq!(is_transient_status(code), expected, "status {code}");
        }
    }

    #[test]
    fn a_throttle_is_replayed_for_every_operation_an_unknown_outcome_only_when_safe() {
        for op in Operation::ALL {
            assert!(may_retry(&status(429, None), op), "{op}");
            assert!(may_retry(&status(503, Some(3)), op), "{op}");
            let safe = op.replay() == Replay::Safe;
            assert_eq!(may_retry(&status(502, None), op), safe, "{op}");
            assert_eq!(may_retry(&status(503, None), op), safe, "{op}");
            let lost = Failure::Transport {
                message: "reset".into(),
                sent: Sent::Unknown,
                local: false,
            };
            assert_eq!(may_retry(&lost, op), safe, "{op}");
            let refused = Failure::Transport {
                message: "refused".into(),
                sent: Sent::No,
                local: false,
            };
            assert!(may_retry(&refused, op), "{op}");
            assert!(!may_retry(&status(404, None), op), "{op}");
            assert!(!may_retry(&status(401, None), op), "{op}");
        }
    }

    #[test]
    fn a_shed_is_not_a_fault_but_a_gateway_error_is() {
        assert_eq!(breaker_verdict(&status(503, Some(30))), Some(false));
        assert_eq!(breaker_verdict(&status(429, None)), Some(false));
        assert_eq!(breaker_verdict(&status(503, None)), Some(true));
        assert_eq!(breaker_verdict(&status(502, None)), Some(true));
        assert_eq!(breaker_verdict(&status(404, None)), Some(false));
        let local = Failure::Transport {
            message: "EMFILE".into(),
            sent: Sent::No,
            local: true,
        };
        assert_eq!(breaker_verdict(&local), None);
    }

    #[test]
    fn oci_error_bodies_are_read() {
        let (code, message) =
            parse_oci_error(br#"{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}"#);
        assert_eq!(code.as_deref(), Some("TOOMANYREQUESTS"));
        assert_eq!(message.as_deref(), Some("slow down"));
        assert_eq!(parse_oci_error(b"<html>"), (None, None));
    }

    #[tokio::test]
    async fn a_refused_connection_is_transient_and_unsent() {
        // A real closed port: bind, learn the port, drop the listener.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/v2/"))
            .send()
            .await
            .unwrap_err();
        let f = Failure::from_transport(&err);
        assert_eq!(transience(&f), Transience::Declined, "{f:?}");
        assert!(may_retry(&f, Operation::TagDelete));
        assert_eq!(breaker_verdict(&f), Some(true));
    }

    /// A one-shot HTTP server on a loopback port that writes `raw` to the first connection and
    /// closes it; returns the URL to ask.
    async fn serve_once(raw: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v2/", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = conn.read(&mut request).await;
            let _ = conn.write_all(&raw).await;
            let _ = conn.shutdown().await;
        });
        url
    }

    /// An HTTP/1.1 answer whose body is sent as these chunks (chunked transfer encoding).
    fn chunked(status: &str, chunks: &[&[u8]]) -> Vec<u8> {
        let mut raw =
            format!("HTTP/1.1 {status}\r\ntransfer-encoding: chunked\r\n\r\n").into_bytes();
        for c in chunks {
            raw.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
            raw.extend_from_slice(c);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        raw
    }

    async fn failure_of(raw: Vec<u8>) -> Failure {
        let url = serve_once(raw).await;
        let response = reqwest::get(url).await.unwrap();
        Failure::from_response(response).await
    }

    fn code_and_message(f: &Failure) -> (Option<&str>, Option<&str>) {
        match f {
            Failure::Status { code, message, .. } => (code.as_deref(), message.as_deref()),
            other => panic!("not a status: {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_answers_oci_error_is_read_across_chunks_up_to_16_kib() {
        let head: &[u8] = br#"{"errors":[{"code":"DIGEST_INVALID","message":"m"#;
        let pad = vec![b'x'; 8 * 1024];
        let tail: &[u8] = br#""}]}"#;
        // 8 KiB in three chunks: every chunk is read.
        let f = failure_of(chunked("400 Bad Request", &[head, &pad, tail])).await;
        let (code, message) = code_and_message(&f);
        assert_eq!(code, Some("DIGEST_INVALID"));
        assert!(
            message.is_some_and(|m| m.starts_with("mxxx")),
            "{message:?}"
        );
        // Past 16 KiB the body is cut, so it no longer parses: nothing more is read or held.
        let pad = vec![b'x'; 17 * 1024];
        let f = failure_of(chunked("400 Bad Request", &[&[head, &pad, tail].concat()])).await;
        assert_eq!(code_and_message(&f), (None, None));
    }

    #[tokio::test]
    async fn a_transport_failure_says_what_broke_with_each_cause_once() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = reqwest::get(format!("http://127.0.0.1:{port}/v2/"))
            .await
            .unwrap_err();
        let Failure::Transport { message, .. } = Failure::from_transport(&err) else {
            panic!("not a transport failure");
        };
        assert!(message.starts_with("could not connect: "), "{message}");
        let mut parts = message.split(": ").skip(1).collect::<Vec<_>>();
        assert!(message.contains("refused"), "the root cause: {message}");
        assert!(parts.iter().all(|p| !p.is_empty()), "{message}");
        let n = parts.len();
        parts.sort();
        parts.dedup();
        assert_eq!(parts.len(), n, "a cause repeated: {message}");

        // A body that breaks off part way.
        let url = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort".to_vec()).await;
        let err = reqwest::get(url).await.unwrap().bytes().await.unwrap_err();
        let Failure::Transport { message, .. } = Failure::from_transport(&err) else {
            panic!("not a transport failure");
        };
        assert!(message.starts_with("response body broke off"), "{message}");
    }

    #[test]
    fn an_error_code_and_message_are_cut_and_escaped_where_they_enter_an_error() {
        let code = format!("{}\nFORGED synced everything", "C".repeat(15 * 1024));
        let body = serde_json::json!({"errors": [{"code": code, "message": "m\x1b[2J"}]});
        let (code, message) = parse_oci_error(body.to_string().as_bytes());
        let code = code.unwrap();
        assert!(code.len() <= crate::text::SHOWN_BYTES + 3, "{}", code.len());
        assert!(!code.contains('\n') && !code.contains("FORGED"), "{code}");
        assert_eq!(message.as_deref(), Some("m\\x1b[2J"));
        let long = serde_json::json!({"errors": [{"message": "x".repeat(400)}]});
        let (_, message) = parse_oci_error(long.to_string().as_bytes());
        assert_eq!(message.unwrap(), format!("{}…", "x".repeat(300)));
    }

    #[test]
    fn a_failure_displays_as_its_reason() {
        assert_eq!(status(429, None).to_string(), "HTTP 429");
    }
}
