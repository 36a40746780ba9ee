//! The harness's settings and the registry config file they become: filesystem storage, the
//! access log, and optionally htpasswd Basic auth and TLS with required client certificates.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{BINARY_ENV, DEFAULT_BINARY, HarnessError};

/// Settings for [`RealRegistry::start_with`](super::RealRegistry::start_with).
#[derive(Debug, Clone)]
pub struct RealRegistryOptions {
    /// The registry binary to run.
    pub binary: PathBuf,
    /// How long to wait for `GET /v2/` to answer 200 after the process starts.
    pub ready_timeout: Duration,
    /// One `(user, password)` the registry requires as Basic auth (htpasswd, bcrypt); `None`
    /// serves everyone. The readiness probe then takes its 401 as ready.
    pub htpasswd: Option<(String, String)>,
    /// Serve HTTPS with these files; `None` is plain HTTP. The harness's own plain-HTTP probe is
    /// then answered 400, which counts as ready; [`RealRegistry::access_log`](super::RealRegistry::access_log) is not available.
    pub tls: Option<RealRegistryTls>,
    /// Where the registry POSTs its notifications (`notifications.endpoints`, distribution's
    /// envelope of events), with the headers each carries; `None` sends none.
    pub notifications: Option<RealRegistryNotifications>,
    /// The registry's `log.level` in its stderr log: `warn` by default; `info` logs every
    /// response with its duration, status and the client's address and port (a profile's
    /// per-request costs and connections, benches/compare.rs).
    pub log_level: &'static str,
    /// The directory the registry's work directory (its storage, config and logs) is made in;
    /// `None`: the system's temporary directory. A bench puts it on tmpfs to take the disk's
    /// `fsync` out of what it measures (docs/performance.md, "Above the CPU floor").
    pub work_in: Option<PathBuf>,
}

/// One notifications endpoint of the registry.
#[derive(Debug, Clone)]
pub struct RealRegistryNotifications {
    /// The URL events are POSTed to.
    pub url: String,
    /// Headers sent with each POST (`Authorization: Bearer …`).
    pub headers: Vec<(String, String)>,
}

/// PEM files for a registry served over TLS (see [`crate::pki::TestPki`]).
#[derive(Debug, Clone)]
pub struct RealRegistryTls {
    /// The server certificate.
    pub certificate: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// CAs whose client certificates are required (`http.tls.clientcas`); empty asks for none.
    pub client_cas: Vec<PathBuf>,
}

impl Default for RealRegistryOptions {
    /// The binary named by `FERRY_DOCKER_REGISTRY_BIN`, else [`DEFAULT_BINARY`]; a 15 s readiness bound.
    fn default() -> Self {
        let binary = std::env::var_os(BINARY_ENV)
            .filter(|value| !value.is_empty())
            .map_or_else(|| PathBuf::from(DEFAULT_BINARY), PathBuf::from);
        Self {
            binary,
            ready_timeout: Duration::from_secs(15),
            htpasswd: None,
            tls: None,
            notifications: None,
            log_level: "warn",
            work_in: None,
        }
    }
}

/// The whole config file for `options`, writing the htpasswd file into `workdir` when asked.
pub(super) fn config_text(
    options: &RealRegistryOptions,
    storage: &Path,
    addr: SocketAddr,
    workdir: &Path,
) -> Result<String, HarnessError> {
    let mut config = config_yaml(storage, addr).replacen(
        "level: warn",
        &format!("level: {}", options.log_level),
        1,
    );
    // `http:` ends the base config, so its `tls` block goes right after it.
    if let Some(tls) = &options.tls {
        config.push_str(&tls_yaml(tls));
    }
    if let Some((user, password)) = &options.htpasswd {
        let path = workdir.join("htpasswd");
        let hash = bcrypt::hash(password, 4).map_err(|e| {
            HarnessError::io("hashing the htpasswd password", std::io::Error::other(e))
        })?;
        std::fs::write(&path, format!("{user}:{hash}\n"))
            .map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))?;
        config.push_str(&format!(
            "auth:\n  htpasswd:\n    realm: ferry-testkit\n    path: {:?}\n",
            path.display().to_string()
        ));
    }
    if let Some(n) = &options.notifications {
        config.push_str(&notifications_yaml(n));
    }
    Ok(config)
}

/// The `notifications` block: one endpoint, quick to retry, blob pushes left out.
fn notifications_yaml(n: &RealRegistryNotifications) -> String {
    let mut out = format!(
        "notifications:\n  endpoints:\n    - name: ferry\n      url: {:?}\n      timeout: 2s\n      threshold: 3\n      backoff: 500ms\n      ignoredmediatypes: [application/octet-stream]\n",
        n.url
    );
    if !n.headers.is_empty() {
        out.push_str("      headers:\n");
        for (name, value) in &n.headers {
            out.push_str(&format!("        {name}: [{value:?}]\n"));
        }
    }
    out
}

/// The `http.tls` block (indented under `http:`, which `config_yaml` ends with).
fn tls_yaml(tls: &RealRegistryTls) -> String {
    let mut out = format!(
        "  tls:\n    certificate: {:?}\n    key: {:?}\n",
        tls.certificate.display().to_string(),
        tls.key.display().to_string()
    );
    if !tls.client_cas.is_empty() {
        out.push_str("    clientcas:\n");
        for ca in &tls.client_cas {
            out.push_str(&format!("      - {:?}\n", ca.display().to_string()));
        }
    }
    out
}

/// The registry config: filesystem storage under `storage`, deletes on, no auth, plain HTTP on
/// `addr`, warnings only on stderr and the per-request access log on stdout.
pub(super) fn config_yaml(storage: &Path, addr: SocketAddr) -> String {
    // A fixed secret silences the "no HTTP secret" warning; it only signs upload state.
    format!(
        "version: 0.1\n\
         log:\n  level: warn\n  formatter: text\n  accesslog:\n    disabled: false\n\
         storage:\n  filesystem:\n    rootdirectory: {storage:?}\n  delete:\n    enabled: true\n  \
         maintenance:\n    uploadpurging:\n      enabled: false\n\
         http:\n  addr: {addr}\n  secret: ferry-testkit-not-a-secret\n",
        storage = storage.display().to_string(),
    )
}
