//! The errors a registry operation ends with: each names the registry, repository, operation,
//! attempts made and what went wrong (HTTP status and OCI error code), and never a credential.

use std::fmt;

use crate::operation::Operation;

/// What went wrong, without the where. Non-exhaustive: a new kind of failure is not a breaking
/// change, so code outside this crate keeps a catch-all arm.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The registry answered with a status ferry does not retry (or stopped retrying).
    Status {
        /// The HTTP status.
        status: u16,
        /// The first error code in the body (`MANIFEST_UNKNOWN`), when there is one.
        code: Option<String>,
        /// The first error message in the body, shortened and escaped.
        message: Option<String>,
    },
    /// The connection failed: refused, reset, timed out, or the body broke part way.
    Transport(String),
    /// The registry asked for a wait that does not fit the operation's deadline (or kept asking
    /// after the attempts were spent). The caller may schedule it later.
    Throttled {
        /// The wait the registry asked for.
        seconds: u64,
    },
    /// The registry's breaker is open after repeated failures: nothing was sent.
    BreakerOpen,
    /// The operation's deadline passed before it could finish.
    DeadlineExceeded,
    /// Bytes did not hash to the digest that names them.
    DigestMismatch {
        /// The digest that names the content.
        expected: String,
        /// What the bytes hashed to.
        actual: String,
    },
    /// A response larger than ferry accepts for its kind.
    TooLarge {
        /// What was being read (`manifest`, `tag list page`).
        what: &'static str,
        /// The largest size accepted, in bytes.
        limit: u64,
    },
    /// The registry answered something that breaks the protocol.
    InvalidResponse(String),
    /// ferry refused to follow the registry somewhere unsafe (another origin, https to http).
    Refused(String),
    /// The registry's TLS certificate was refused (untrusted issuer, expired, wrong name): a
    /// permanent failure of this configuration, never retried and not counted in the breaker.
    Certificate(String),
    /// A TLS handshake was answered in plain HTTP: the registry serves http. Final, never
    /// retried and not counted in the breaker; the text says how to configure it.
    NotTls(String),
    /// Credentials could not be found, or the registry refused them.
    Auth(String),
    /// A failure of this machine (out of sockets, a local file), not of the registry.
    Local(String),
    /// The operation was cancelled by ferry (shutdown).
    Cancelled,
}

/// A failed registry operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The registry host the operation was sent to.
    pub registry: String,
    /// The repository, for an operation on one.
    pub repository: Option<String>,
    /// What was being done.
    pub operation: Operation,
    /// Requests actually sent for this operation (0 when nothing was sent).
    pub attempts: u32,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl Error {
    /// An error for `operation` with no attempt counted (nothing was sent, or the caller sets it).
    pub fn new(
        registry: impl Into<String>,
        repository: Option<&str>,
        operation: Operation,
        kind: ErrorKind,
    ) -> Self {
        Error {
            registry: registry.into(),
            repository: repository.map(str::to_owned),
            operation,
            attempts: 0,
            kind,
        }
    }

    /// The same error with the number of requests that were sent.
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    /// The HTTP status, when the registry answered one.
    pub fn status(&self) -> Option<u16> {
        match &self.kind {
            ErrorKind::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The registry answered 404: the thing (or its repository) is not there.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// True for an authentication failure (exit code 4 at the CLI).
    pub fn is_auth(&self) -> bool {
        matches!(self.kind, ErrorKind::Auth(_)) || matches!(self.status(), Some(401) | Some(403))
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Status {
                status,
                code,
                message,
            } => {
                write!(f, "HTTP {status}")?;
                if let Some(code) = code {
                    write!(f, " {code}")?;
                }
                if let Some(message) = message {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            ErrorKind::Transport(e) => write!(f, "connection failed: {e}"),
            ErrorKind::Throttled { seconds } => {
                write!(f, "throttled: the registry asked to wait {seconds}s")
            }
            ErrorKind::BreakerOpen => {
                f.write_str("breaker open: the registry was found failing earlier in this run (its first error says how), nothing was sent")
            }
            ErrorKind::DeadlineExceeded => f.write_str("deadline exceeded"),
            ErrorKind::DigestMismatch { expected, actual } => {
                write!(f, "digest mismatch: expected {expected}, got {actual}")
            }
            ErrorKind::TooLarge { what, limit } => {
                write!(f, "{what} larger than the {limit}-byte limit")
            }
            ErrorKind::InvalidResponse(e) => write!(f, "invalid response: {e}"),
            ErrorKind::Refused(e) => write!(f, "refused: {e}"),
            ErrorKind::Certificate(e) => write!(f, "TLS certificate refused: {e}"),
            ErrorKind::NotTls(e) => write!(f, "TLS handshake failed: {e}"),
            ErrorKind::Auth(e) => write!(f, "authentication failed: {e}"),
            ErrorKind::Local(e) => write!(f, "local failure: {e}"),
            ErrorKind::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.registry)?;
        if let Some(repo) = &self.repository {
            write!(f, "/{repo}")?;
        }
        write!(f, ": {}: {}", self.operation, self.kind)?;
        if self.attempts > 1 {
            write!(f, " (after {} attempts)", self.attempts)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Strips a URL's query and user-info so an error or log line never carries a token or a
/// signed-URL credential.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or_default().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_registry_repository_operation_status_and_attempts() {
        let e = Error::new(
            "ghcr.io",
            Some("org/app"),
            Operation::ManifestPutByTag,
            ErrorKind::Status {
                status: 502,
                code: None,
                message: None,
            },
        )
        .with_attempts(3);
        assert_eq!(
            e.to_string(),
            "ghcr.io/org/app: manifest PUT (tag): HTTP 502 (after 3 attempts)"
        );
    }

    #[test]
    fn redact_url_drops_query_and_userinfo() {
        let r = redact_url("https://u:p@s3.example/blob?X-Amz-Signature=abc&token=t#f");
        assert_eq!(r, "https://s3.example/blob");
    }
}
