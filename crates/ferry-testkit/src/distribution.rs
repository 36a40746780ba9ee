//! Harness for the real CNCF distribution registry (`docker-registry` 2.8) on a loopback port.
//! Owns its process, temporary storage, generated config, readiness wait and access-log reading.

use std::fmt;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdTcpListener};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// Where the Debian/Ubuntu package `docker-registry` installs the registry binary.
pub const DEFAULT_BINARY: &str = "/usr/bin/docker-registry";

/// Environment variable that names another registry binary to run.
pub const BINARY_ENV: &str = "FERRY_DOCKER_REGISTRY_BIN";

/// Environment variable that, set to `1`, lets tests skip when the binary is absent, on a
/// developer's machine only: the harness refuses it when [`CI_ENV`] is set.
pub const SKIP_ENV: &str = "FERRY_SKIP_REAL_REGISTRY";

/// Set by CI systems (GitHub Actions, GitLab CI, Buildkite and most others). Where it is set,
/// a missing registry is a failure and [`SKIP_ENV`] is refused.
pub const CI_ENV: &str = "CI";

/// What to tell a reader whose machine lacks the registry binary.
pub const INSTALL_HINT: &str = "install it with `sudo apt-get update && sudo apt-get install -y docker-registry` \
     (Debian/Ubuntu package `docker-registry`, CNCF distribution 2.8), or run `scripts/test`, \
     which installs it; set FERRY_DOCKER_REGISTRY_BIN to use a binary elsewhere";

/// User-Agent the harness sends on its own requests, so the access log can leave them out.
pub const HARNESS_USER_AGENT: &str = "ferry-testkit-harness";

/// How many times `start` retries when the chosen port was taken before the registry bound it.
const PORT_ATTEMPTS: u32 = 3;

/// Pause between readiness probes; polls a real child process, never used for test timing.
const PROBE_INTERVAL: Duration = Duration::from_millis(25);

/// Upper bound for one raw HTTP exchange made by the harness.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest response the raw HTTP helper reads; the harness only reads small API answers.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Why the harness could not start, query or stop the real registry.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// [`SKIP_ENV`] was set on a CI machine, where every real-registry test must run.
    #[error("{SKIP_ENV}=1 is refused because {CI_ENV} is set: CI runs every real-registry test")]
    SkipRefusedInCi,
    /// The registry binary does not exist at the path the harness was told to use.
    #[error("the distribution registry binary {binary} was not found; {INSTALL_HINT}")]
    BinaryMissing {
        /// The path that was looked up.
        binary: PathBuf,
    },
    /// A file-system or process operation failed.
    #[error("{action}: {source}")]
    Io {
        /// What the harness was doing, naming the path or address involved.
        action: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The registry process exited before it answered `GET /v2/`.
    #[error(
        "the distribution registry {binary} exited with {status} before answering GET /v2/ on {addr}; its log ends:\n{log_tail}"
    )]
    Exited {
        /// The binary that was run.
        binary: PathBuf,
        /// The loopback address it was configured to listen on.
        addr: SocketAddr,
        /// How it exited.
        status: ExitStatus,
        /// The last lines it wrote to stderr.
        log_tail: String,
    },
    /// The registry did not answer `GET /v2/` with 200 within the readiness bound.
    #[error(
        "the distribution registry {binary} did not answer GET /v2/ with 200 on {addr} within {waited:?} (last probe: {last_probe}); its log ends:\n{log_tail}"
    )]
    NotReady {
        /// The binary that was run.
        binary: PathBuf,
        /// The loopback address it was configured to listen on.
        addr: SocketAddr,
        /// How long the harness waited.
        waited: Duration,
        /// What the last probe saw.
        last_probe: String,
        /// The last lines it wrote to stderr.
        log_tail: String,
    },
    /// A raw HTTP exchange with the registry did not produce a readable HTTP/1.1 response.
    #[error("{method} {path} on {addr}: {problem}")]
    BadResponse {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
        /// Address that was asked.
        addr: SocketAddr,
        /// What was wrong with the answer.
        problem: String,
    },
}

impl HarnessError {
    fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            action: action.into(),
            source,
        }
    }
}

/// A running distribution registry on `127.0.0.1`, with its own storage; killed on drop.
pub struct RealRegistry {
    child: Option<Child>,
    addr: SocketAddr,
    binary: PathBuf,
    workdir: TempDir,
    sentinel_counter: AtomicU64,
    /// What `GET /v2/` over plain HTTP answers once the registry is up: 200, 401 with
    /// htpasswd, 400 ("client sent an HTTP request to an HTTPS server") with TLS.
    ready_status: u16,
    tls: bool,
}

impl fmt::Debug for RealRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealRegistry")
            .field("addr", &self.addr)
            .field("binary", &self.binary)
            .field("workdir", &self.workdir.path())
            .finish_non_exhaustive()
    }
}

/// True when `FERRY_SKIP_REAL_REGISTRY=1` is set and `CI` is not: tests may skip instead of
/// failing on a missing binary. Setting both is an error.
pub fn skip_requested() -> Result<bool, HarnessError> {
    skip_decision(
        std::env::var(SKIP_ENV).ok().as_deref(),
        std::env::var_os(CI_ENV).is_some_and(|v| !v.is_empty()),
    )
}

fn skip_decision(skip: Option<&str>, ci: bool) -> Result<bool, HarnessError> {
    match (skip == Some("1"), ci) {
        (true, true) => Err(HarnessError::SkipRefusedInCi),
        (requested, _) => Ok(requested),
    }
}

/// Writes a skip notice straight to the process's stderr. libtest captures `eprintln!` from a
/// passing test, so a skip written that way would be silent; this one shows in cargo's output.
fn announce_skip(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{message}");
}

impl RealRegistry {
    /// Starts the registry with default options and waits until `GET /v2/` answers 200.
    pub async fn start() -> Result<Self, HarnessError> {
        Self::start_with(RealRegistryOptions::default()).await
    }

    /// For tests: starts the registry, or returns `Ok(None)` when the binary is missing and
    /// `FERRY_SKIP_REAL_REGISTRY=1` is set. Without that variable a missing binary is an error.
    pub async fn start_for_test() -> Result<Option<Self>, HarnessError> {
        Self::start_for_test_with(RealRegistryOptions::default()).await
    }

    /// As [`RealRegistry::start_for_test`], with `options` (htpasswd, TLS).
    pub async fn start_for_test_with(
        options: RealRegistryOptions,
    ) -> Result<Option<Self>, HarnessError> {
        let skip = skip_requested()?;
        match Self::start_with(options).await {
            Ok(registry) => Ok(Some(registry)),
            Err(HarnessError::BinaryMissing { binary }) if skip => {
                announce_skip(&format!(
                    "SKIPPED (real registry): {} not found and {SKIP_ENV}=1 is set",
                    binary.display()
                ));
                Ok(None)
            }
            Err(other) => Err(other),
        }
    }

    /// Starts the registry with `options` and waits until `GET /v2/` answers 200.
    pub async fn start_with(options: RealRegistryOptions) -> Result<Self, HarnessError> {
        if !options.binary.is_file() {
            return Err(HarnessError::BinaryMissing {
                binary: options.binary,
            });
        }
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            match Self::start_once(&options).await {
                Ok(registry) => return Ok(registry),
                // The free port may have been taken between our probe bind and the child's bind.
                Err(error @ HarnessError::Exited { .. })
                    if error.to_string().contains("in use") =>
                {
                    last_error = Some(error);
                }
                Err(other) => return Err(other),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            HarnessError::io(
                "starting the distribution registry",
                std::io::Error::other("no start attempt was made"),
            )
        }))
    }

    async fn start_once(options: &RealRegistryOptions) -> Result<Self, HarnessError> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("ferry-real-registry-");
        let workdir = match &options.work_in {
            Some(parent) => builder.tempdir_in(parent),
            None => builder.tempdir(),
        }
        .map_err(|e| HarnessError::io("creating the registry's temporary directory", e))?;
        let storage = workdir.path().join("storage");
        std::fs::create_dir(&storage)
            .map_err(|e| HarnessError::io(format!("creating {}", storage.display()), e))?;
        let addr = free_loopback_addr()?;
        let config_path = workdir.path().join("config.yml");
        let config = config_text(options, &storage, addr, workdir.path())?;
        std::fs::write(&config_path, config)
            .map_err(|e| HarnessError::io(format!("writing {}", config_path.display()), e))?;

        let access_log = create_log(&workdir.path().join("access.log"))?;
        let stderr_log = create_log(&workdir.path().join("stderr.log"))?;
        let mut command = Command::new(&options.binary);
        command
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(access_log)
            .stderr(stderr_log)
            .kill_on_drop(true);
        // REGISTRY_* variables override the config file; the harness wants only its own config.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("REGISTRY_") {
                command.env_remove(name);
            }
        }
        let child = command.spawn().map_err(|e| {
            HarnessError::io(format!("running {} serve", options.binary.display()), e)
        })?;

        let mut registry = Self {
            child: Some(child),
            addr,
            binary: options.binary.clone(),
            workdir,
            sentinel_counter: AtomicU64::new(0),
            ready_status: if options.tls.is_some() {
                400
            } else if options.htpasswd.is_some() {
                401
            } else {
                200
            },
            tls: options.tls.is_some(),
        };
        registry.wait_ready(options.ready_timeout).await?;
        Ok(registry)
    }

    async fn wait_ready(&mut self, bound: Duration) -> Result<(), HarnessError> {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                let exited = child.try_wait().map_err(|e| {
                    HarnessError::io(format!("checking on {}", self.binary.display()), e)
                })?;
                if let Some(status) = exited {
                    return Err(HarnessError::Exited {
                        binary: self.binary.clone(),
                        addr: self.addr,
                        status,
                        log_tail: self.stderr_tail(),
                    });
                }
            }
            let last_probe = match http_request(self.addr, "GET", "/v2/").await {
                Ok(response) if response.status == self.ready_status => return Ok(()),
                Ok(response) => format!("status {}", response.status),
                Err(error) => error.to_string(),
            };
            if started.elapsed() >= bound {
                return Err(HarnessError::NotReady {
                    binary: self.binary.clone(),
                    addr: self.addr,
                    waited: started.elapsed(),
                    last_probe,
                    log_tail: self.stderr_tail(),
                });
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    }

    /// Base URL, e.g. `http://127.0.0.1:41234` (`https://` when served over TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Registry host as used in image references, e.g. `127.0.0.1:41234`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// The loopback socket address the registry listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The registry's storage root (the filesystem driver's `rootdirectory`).
    pub fn storage_dir(&self) -> PathBuf {
        self.workdir.path().join("storage")
    }

    /// The file that receives the registry's stdout: one combined-format line per request.
    pub fn access_log_path(&self) -> PathBuf {
        self.workdir.path().join("access.log")
    }

    /// The file that receives the registry's stderr (its own warnings and errors).
    pub fn stderr_log_path(&self) -> PathBuf {
        self.workdir.path().join("stderr.log")
    }

    /// Sends one request over a fresh HTTP/1.1 connection and returns the whole answer.
    pub async fn request(&self, method: &str, path: &str) -> Result<RawResponse, HarnessError> {
        http_request(self.addr, method, path).await
    }

    /// The requests the registry has served so far, in the order it logged them, without the
    /// harness's own. Waits until a marker request made now shows up in the log, so every request
    /// whose response the caller has already read is included.
    pub async fn access_log(&self) -> Result<AccessLog, HarnessError> {
        let marker = format!(
            "/v2/?ferry-testkit-marker={}",
            self.sentinel_counter.fetch_add(1, Ordering::Relaxed)
        );
        http_request(self.addr, "GET", &marker).await?;
        let path = self.access_log_path();
        let started = Instant::now();
        loop {
            let entries = read_access_log(&path)?;
            if entries.iter().any(|entry| entry.path == marker) {
                return Ok(AccessLog {
                    entries: entries
                        .into_iter()
                        .filter(|entry| entry.user_agent != HARNESS_USER_AGENT)
                        .collect(),
                });
            }
            if started.elapsed() >= EXCHANGE_TIMEOUT {
                return Err(HarnessError::BadResponse {
                    method: "GET".into(),
                    path: marker,
                    addr: self.addr,
                    problem: format!(
                        "the request never appeared in {} within {EXCHANGE_TIMEOUT:?}",
                        path.display()
                    ),
                });
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    }

    /// The registry process's id while it runs (a bench reads its CPU time from `/proc`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Kills the registry and waits for it to exit; its storage is removed when `self` drops.
    pub async fn stop(mut self) -> Result<(), HarnessError> {
        if let Some(mut child) = self.child.take() {
            child
                .kill()
                .await
                .map_err(|e| HarnessError::io(format!("stopping {}", self.binary.display()), e))?;
        }
        Ok(())
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(self.stderr_log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(20);
        lines[start..].join("\n")
    }
}

impl Drop for RealRegistry {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            // start_kill only sends the signal; kill_on_drop covers a child that outlives this.
            let _ = child.start_kill();
        }
    }
}

/// One request as the registry's access log recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLogEntry {
    /// Request method, e.g. `GET`.
    pub method: String,
    /// Request target as sent, including any query string.
    pub path: String,
    /// Response status code.
    pub status: u16,
    /// The client's `User-Agent`, empty if it sent none.
    pub user_agent: String,
}

/// The requests a [`RealRegistry`] has logged, for counting what a client sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessLog {
    /// Every logged request, oldest first.
    pub entries: Vec<AccessLogEntry>,
}

impl AccessLog {
    /// How many requests used `method` on a path that starts with `path_prefix`.
    pub fn count(&self, method: &str, path_prefix: &str) -> usize {
        self.entries
            .iter()
            .filter(|entry| entry.method == method && entry.path.starts_with(path_prefix))
            .count()
    }

    /// How many requests were logged in total.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no request was logged.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Parses one combined-log-format line:
/// `HOST - - [TIME] "METHOD PATH PROTO" STATUS BYTES "REFERER" "USER-AGENT"`.
/// Returns `None` for a line that is not in that shape.
pub fn parse_access_line(line: &str) -> Option<AccessLogEntry> {
    let (_, after_open) = line.split_once('"')?;
    let (request_line, rest) = after_open.split_once('"')?;
    let mut request = request_line.split(' ');
    let method = request.next()?.to_owned();
    let path = request.next()?.to_owned();
    let status = rest.split_whitespace().next()?.parse().ok()?;
    // Referer is the next quoted field, user agent the one after it.
    let mut quoted = rest.split('"').skip(1).step_by(2);
    let _referer = quoted.next()?;
    let user_agent = quoted.next()?.to_owned();
    Some(AccessLogEntry {
        method,
        path,
        status,
        user_agent,
    })
}

fn read_access_log(path: &Path) -> Result<Vec<AccessLogEntry>, HarnessError> {
    let file = std::fs::File::open(path)
        .map_err(|e| HarnessError::io(format!("opening {}", path.display()), e))?;
    let mut entries = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| HarnessError::io(format!("reading {}", path.display()), e))?;
        if let Some(entry) = parse_access_line(&line) {
            entries.push(entry);
        }
    }
    Ok(entries)
}

/// A response read by the harness's raw HTTP/1.1 client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    /// Status code.
    pub status: u16,
    /// Header fields in the order received, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body bytes (everything after the header block until the server closed the connection).
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let wanted = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(header, _)| *header == wanted)
            .map(|(_, value)| value.as_str())
    }
}

/// Sends `METHOD PATH HTTP/1.1` with `Connection: close` to `addr` and reads the whole answer.
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
) -> Result<RawResponse, HarnessError> {
    let bad = |problem: String| HarnessError::BadResponse {
        method: method.to_owned(),
        path: path.to_owned(),
        addr,
        problem,
    };
    let exchange = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|e| bad(format!("connect failed: {e}")))?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: {HARNESS_USER_AGENT}\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| bad(format!("write failed: {e}")))?;
        let mut raw = Vec::new();
        (&mut stream)
            .take(MAX_RESPONSE_BYTES as u64 + 1)
            .read_to_end(&mut raw)
            .await
            .map_err(|e| bad(format!("read failed: {e}")))?;
        if raw.len() > MAX_RESPONSE_BYTES {
            return Err(bad(format!(
                "response is larger than {MAX_RESPONSE_BYTES} bytes"
            )));
        }
        parse_response(&raw).map_err(bad)
    };
    tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
        .await
        .map_err(|_| bad(format!("no complete answer within {EXCHANGE_TIMEOUT:?}")))?
}

fn parse_response(raw: &[u8]) -> Result<RawResponse, String> {
    let split = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in {} bytes", raw.len()))?;
    let head =
        std::str::from_utf8(&raw[..split]).map_err(|_| "header block is not UTF-8".to_owned())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("unreadable status line {status_line:?}"))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Ok(RawResponse {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    })
}

fn free_loopback_addr() -> Result<SocketAddr, HarnessError> {
    let listener = StdTcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| HarnessError::io("binding 127.0.0.1:0 to find a free port", e))?;
    listener
        .local_addr()
        .map_err(|e| HarnessError::io("reading the free port's address", e))
}

fn create_log(path: &Path) -> Result<std::fs::File, HarnessError> {
    std::fs::File::create(path)
        .map_err(|e| HarnessError::io(format!("creating {}", path.display()), e))
}

mod config;
use config::config_text;
pub use config::{RealRegistryNotifications, RealRegistryOptions, RealRegistryTls};

#[cfg(test)]
mod tests;
