//! The client for one registry: transport (reqwest on rustls, timeouts, user agent), the ping
//! that learns its auth scheme once per run, one authenticated attempt, and the retry entry point.

use crate::stats::RegistryStats;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use reqwest::{RequestBuilder, Response, StatusCode};
use tokio::sync::OnceCell;
use tokio::time::Instant;
use url::Url;

use crate::auth::{Authenticator, Credentials, Scopes};
use crate::challenge::parse_www_authenticate;
use crate::error::{Error, ErrorKind};
use crate::gate::{GateSettings, RegistryGate};
use crate::operation::Operation;
use crate::retry::{Attempt, Call, Failure, with_retry};

/// Attempts the ping makes on a fault of the registry (docs/retry.md, "two attempts").
pub const PING_FAULT_ATTEMPTS: u32 = 2;

/// How an authentication failure that sent no credentials starts (the registry asked for
/// some and none were configured or found): a command adds where it takes them.
pub const NO_CREDENTIALS: &str = "no credentials were sent";

/// Everything needed to talk to one registry.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// The normalised host references name (`docker.io`, `localhost:5000`).
    pub host: String,
    /// Where its API is served, when not `https://<api host>` (scheme included).
    pub endpoint: Option<String>,
    /// Plain HTTP and unverified TLS. Only when configured.
    pub insecure: bool,
    /// Extra trusted roots: a PEM bundle, or a directory whose `*.crt` files are read as one.
    pub ca_bundle: Option<PathBuf>,
    /// A client certificate for registries that require mutual TLS; shown to the registry's
    /// own host only, never to token realms or storage on other hosts.
    pub client_identity: Option<crate::identity::ClientIdentity>,
    /// What to present to the registry; held as secrets.
    pub credentials: Credentials,
    /// The host the credentials were stored for, when they were found rather than configured:
    /// a token realm then gets them only on that host or its own domain
    /// ([`crate::auth::discover::realm_may_receive`]), anywhere else it is asked anonymously.
    pub credentials_bound_to: Option<String>,
    /// Window, rate, retry and breaker settings for this registry.
    pub gate: GateSettings,
    /// How long a TCP and TLS connect may take before the attempt fails.
    pub connect_timeout: Duration,
    /// Longest silence while reading a response before the attempt fails.
    pub read_timeout: Duration,
    /// The ping's own bound: a registry that accepts connections and never answers is found
    /// out within this.
    pub ping_timeout: Duration,
    /// Manifests above this size are refused.
    pub manifest_limit: u64,
    /// A breaker for this registry to use instead of a fresh one: the state an earlier client
    /// for it left (`ferry watch`'s previous run), so a registry found down stays so.
    pub breaker: Option<Arc<crate::breaker::Breaker>>,
    /// Where uploads in flight are recorded so the next process resumes them (ferry-sync's
    /// state directory); `None`: an upload lives only as long as its process.
    pub journal: Option<Arc<dyn crate::ops::resume::UploadJournal>>,
}

impl RegistryOptions {
    /// Options for `host` with defaults: https, anonymous, the default gate.
    pub fn new(host: impl Into<String>) -> Self {
        RegistryOptions {
            host: host.into(),
            endpoint: None,
            insecure: false,
            ca_bundle: None,
            client_identity: None,
            credentials: Credentials::Anonymous,
            credentials_bound_to: None,
            gate: GateSettings::default(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            ping_timeout: Duration::from_secs(15),
            manifest_limit: 4 * 1024 * 1024,
            breaker: None,
            journal: None,
        }
    }

    /// A registry on loopback or elsewhere served over plain HTTP at `url`.
    pub fn insecure_at(url: &str) -> Self {
        let host = url
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_owned();
        let mut o = RegistryOptions::new(host);
        o.endpoint = Some(url.to_owned());
        o.insecure = true;
        o
    }
}

/// A registry client. Cheap to clone; clones share the window, breaker, tokens and counters.
/// A run's view of it ([`RegistryClient::for_run`]) shares all of that and adds the run's own.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    inner: Arc<Inner>,
    run: Option<Arc<RunScope>>,
}

/// What one run keeps of its own on a client shared across runs (`ferry watch`): the requests
/// it sent, and where its uploads in flight are recorded.
#[derive(Debug, Default)]
pub struct RunScope {
    stats: RegistryStats,
    journal: Option<Arc<dyn crate::ops::resume::UploadJournal>>,
}

impl RunScope {
    /// A run's scope recording its uploads in `journal` (or nowhere).
    pub fn new(journal: Option<Arc<dyn crate::ops::resume::UploadJournal>>) -> Self {
        RunScope {
            stats: RegistryStats::default(),
            journal,
        }
    }
}

#[derive(Debug)]
struct Inner {
    host: String,
    base: Url,
    /// For the registry's own origin: unverified TLS when the registry is configured insecure.
    http: reqwest::Client,
    /// For every other host (token realms, redirects to storage): always verified TLS.
    verified_http: reqwest::Client,
    auth: Authenticator,
    gate: RegistryGate,
    options: RegistryOptions,
    ready: OnceCell<()>,
    /// What the registry turned out to accept (upload flow, mounts, referrers API, ...).
    capabilities: crate::capabilities::Capabilities,
    /// How the registry pages its listings (issue 31, listing): see `ops/pages.rs`.
    listing: crate::ops::ListingStyle,
}

impl RegistryClient {
    /// A client for one registry. Fails on a bad endpoint, plain http without `insecure`, or an
    /// unreadable CA bundle; nothing is sent yet.
    pub fn new(options: RegistryOptions) -> Result<Self, Error> {
        let err = |kind| Error::new(&options.host, None, Operation::Ping, kind);
        let base = match &options.endpoint {
            Some(e) => Url::parse(e).map_err(|e| {
                err(ErrorKind::Local(format!(
                    "registry endpoint is not a URL: {e}"
                )))
            })?,
            None => {
                let api = if options.host == "docker.io" {
                    "registry-1.docker.io"
                } else {
                    options.host.as_str()
                };
                let scheme = if options.insecure { "http" } else { "https" };
                Url::parse(&format!("{scheme}://{api}/")).map_err(|e| {
                    err(ErrorKind::Local(format!("registry host is not valid: {e}")))
                })?
            }
        };
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(err(ErrorKind::Local(format!(
                "registry endpoint {base} is not an http(s) URL"
            ))));
        }
        if base.scheme() == "http" && !options.insecure {
            return Err(err(ErrorKind::Refused(
                "plain http is used only for a registry configured insecure".into(),
            )));
        }
        let bundle = match &options.ca_bundle {
            None => None,
            Some(path) => {
                let pem = read_ca_bundle(path).map_err(|e| {
                    err(ErrorKind::Local(format!(
                        "cannot read CA bundle {}: {e}",
                        path.display()
                    )))
                })?;
                Some(reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                    err(ErrorKind::Local(format!(
                        "CA bundle {} is not PEM: {e}",
                        path.display()
                    )))
                })?)
            }
        };
        let identity = match &options.client_identity {
            None => None,
            Some(identity) => Some(
                identity
                    .load()
                    .map_err(|e| err(ErrorKind::Local(e.to_string())))?,
            ),
        };
        // `insecure` applies to the configured host alone: one client for its origin, and a
        // verified one for every other host it points at. The client certificate likewise.
        let build = |unverified: bool, identity: Option<reqwest::Identity>| {
            let mut builder = reqwest::Client::builder()
                .user_agent(concat!("ferry/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(options.connect_timeout)
                .read_timeout(options.read_timeout)
                .redirect(reqwest::redirect::Policy::none())
                .pool_idle_timeout(Duration::from_secs(60))
                .tls_danger_accept_invalid_certs(unverified);
            if let Some(certs) = &bundle {
                builder = builder.tls_certs_merge(certs.clone());
            }
            if let Some(identity) = identity {
                builder = builder.identity(identity);
            }
            builder
                .build()
                .map_err(|e| err(ErrorKind::Local(format!("cannot build HTTP client: {e}"))))
        };
        let http = build(options.insecure, identity)?;
        let verified_http = build(false, None)?;
        let token_gate = RegistryGate::new(
            format!("{} token service", options.host),
            GateSettings {
                max_concurrent: 4,
                split_read_write: false,
                requests_per_second: None,
                retry: options.gate.retry.clone(),
                breaker: options.gate.breaker,
            },
        );
        let auth = Authenticator::new(
            &options.host,
            options.credentials.clone(),
            base.host_str().filter(|_| options.insecure),
            token_gate,
        )
        .bound_to(options.credentials_bound_to.clone());
        Ok(RegistryClient {
            inner: Arc::new(Inner {
                host: options.host.clone(),
                base,
                http,
                verified_http,
                auth,
                gate: match &options.breaker {
                    Some(b) => RegistryGate::new(options.host.clone(), options.gate.clone())
                        .with_breaker(Arc::clone(b)),
                    None => RegistryGate::new(options.host.clone(), options.gate.clone()),
                },
                options,
                ready: OnceCell::new(),
                capabilities: crate::capabilities::Capabilities::default(),
                listing: crate::ops::ListingStyle::default(),
            }),
            run: None,
        })
    }

    /// The registry's host as references name it.
    pub fn host(&self) -> &str {
        &self.inner.host
    }

    /// Where the API is served (`https://registry-1.docker.io/`).
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// This client as one run sees it: the same connections, window, breaker, tokens and
    /// learned capabilities, with the run's own counters ([`RegistryClient::stats`]) and upload
    /// journal.
    pub fn for_run(&self, scope: Arc<RunScope>) -> RegistryClient {
        RegistryClient {
            inner: Arc::clone(&self.inner),
            run: Some(scope),
        }
    }

    /// The requests and bytes counted: the run's own for a run's view, else every request
    /// sent through this client and its clones.
    pub fn stats(&self) -> crate::stats::StatsSnapshot {
        match &self.run {
            Some(run) => run.stats.snapshot(),
            None => self.inner.gate.stats.snapshot(),
        }
    }

    /// The run's own counters, for a run's view.
    pub(crate) fn run_stats(&self) -> Option<&RegistryStats> {
        self.run.as_deref().map(|r| &r.stats)
    }

    /// Bumps one counter, the registry's and the run's (bytes read and written).
    pub(crate) fn count(&self, bump: impl Fn(&RegistryStats)) {
        bump(&self.inner.gate.stats);
        if let Some(run) = self.run_stats() {
            bump(run);
        }
    }

    /// Where uploads in flight are recorded: the run's journal for a run's view, else the
    /// options' (if any).
    pub(crate) fn journal(&self) -> Option<&dyn crate::ops::resume::UploadJournal> {
        match &self.run {
            Some(run) => run.journal.as_deref(),
            None => self.inner.options.journal.as_deref(),
        }
    }

    /// The registry's pacing and protection, shared by every clone of this client.
    pub fn gate(&self) -> &RegistryGate {
        &self.inner.gate
    }

    /// The options the client was built with.
    pub fn options(&self) -> &RegistryOptions {
        &self.inner.options
    }

    /// The client for the registry's own origin.
    pub fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    /// Whether `url` is on the configured host (any port): the only host `insecure` covers.
    pub(crate) fn is_configured_host(&self, url: &Url) -> bool {
        url.host() == self.inner.base.host()
    }

    /// The client for `url`: the registry's own (unverified when configured insecure) on the
    /// configured host, a verified one for any other host.
    pub(crate) fn http_for(&self, url: &Url) -> &reqwest::Client {
        if self.is_configured_host(url) {
            &self.inner.http
        } else {
            &self.inner.verified_http
        }
    }

    /// Whether the registry serves the referrers API: `None` until a listing has said.
    pub fn referrers_api(&self) -> Option<bool> {
        use crate::capabilities::{Feature, Support};
        match self.inner.capabilities.support(Feature::ReferrersApi) {
            Support::Unknown => None,
            s => Some(!s.is_unavailable()),
        }
    }

    pub(crate) fn learn_referrers_api(&self, supported: bool) {
        use crate::capabilities::{Feature, Support};
        let support = if supported {
            Support::Works
        } else {
            Support::Refused
        };
        let before = self.inner.capabilities.support(Feature::ReferrersApi);
        self.inner
            .capabilities
            .learn(Feature::ReferrersApi, support);
        // Not serving the referrers API (distribution answers 404) is ordinary: referrers are
        // found under the tag schema instead. Said once, at info, never as a warning.
        if !supported && before == Support::Unknown {
            tracing::info!(
                registry = self.host(),
                "the registry does not serve the referrers API: using the referrers tag schema"
            );
        }
    }

    /// What this registry has shown it accepts, learned during the run.
    pub fn capabilities(&self) -> &crate::capabilities::Capabilities {
        &self.inner.capabilities
    }

    /// How this registry pages its listings, learned during the run.
    pub fn listing_style(&self) -> &crate::ops::ListingStyle {
        &self.inner.listing
    }

    /// How the registry asked to be authenticated, learned from the ping (`None` before it).
    pub fn auth_scheme(&self) -> Option<crate::auth::AuthScheme> {
        self.inner.auth.scheme()
    }

    /// The registry's token path, for probes that read what a token grants.
    pub(crate) fn authenticator(&self) -> &Authenticator {
        &self.inner.auth
    }

    /// The credentials this client presents.
    pub fn credentials(&self) -> &Credentials {
        self.inner.auth.credentials()
    }

    /// `<base>/v2/<path>`.
    pub fn api_url(&self, path: &str) -> Url {
        let mut url = self.inner.base.clone();
        let base_path = url.path().trim_end_matches('/').to_owned();
        url.set_path(&format!("{base_path}/v2/{}", path.trim_start_matches('/')));
        url
    }

    /// Resolves a `Location` or `Link` against the registry and insists it stays on the
    /// registry's origin, so credentials are never sent elsewhere.
    pub(crate) fn same_origin(&self, reference: &str) -> Result<Url, Failure> {
        let url = self.inner.base.join(reference).map_err(|e| {
            Failure::Final(ErrorKind::InvalidResponse(format!(
                "registry sent an unusable URL: {e}"
            )))
        })?;
        if url.origin() != self.inner.base.origin() {
            return Err(Failure::Final(ErrorKind::Refused(format!(
                "registry pointed at another origin ({}://{}): not followed with credentials",
                url.scheme(),
                url.host_str().unwrap_or("?")
            ))));
        }
        Ok(url)
    }

    /// Pings `/v2/` once per run to learn how the registry authenticates. A ping that fails on
    /// a fault of the registry (by `retry::classify::breaker_verdict`, the retry loop's own
    /// verdict: a refused connection, a 5xx without `Retry-After`) trips its breaker, so
    /// everything else aimed at it fails at once. A shed (503 with `Retry-After`), a throttle, a
    /// local transport failure or a decided error fails the ping and leaves the breaker be.
    pub async fn ensure_ready(&self) -> Result<(), Error> {
        self.inner
            .ready
            .get_or_try_init(|| async {
                let fault = std::sync::atomic::AtomicBool::new(false);
                let result = self.ping(&fault).await;
                if let Err(e) = &result
                    && fault.load(std::sync::atomic::Ordering::Relaxed)
                {
                    let unresolved = matches!(&e.kind, ErrorKind::Transport(m)
                        if m.starts_with(crate::retry::classify::UNRESOLVED));
                    self.inner.gate.breaker.trip_for(unresolved);
                }
                result
            })
            .await
            .map(|_| ())
    }

    /// One ping, retried; `fault` ends up saying whether its last failed attempt was the
    /// registry's fault (an attempt cut by the ping's deadline leaves it as it was).
    async fn ping(&self, fault: &std::sync::atomic::AtomicBool) -> Result<(), Error> {
        let timeout = self.inner.options.ping_timeout;
        // The policy's budget, bounded by the ping's own deadline: a throttle is retried as for
        // any operation, a silent registry costs at most two ping timeouts.
        let budget = self.inner.gate.policy.budget();
        let call = Call {
            operation: Operation::Ping,
            repository: None,
            deadline: Some(Instant::now() + timeout * 2 + Duration::from_secs(5)),
            run_stats: self.run_stats(),
        };
        let faults = std::sync::atomic::AtomicU32::new(0);
        with_retry(&self.inner.gate, call, &budget, |_| async {
            let failure = match self.ping_once(timeout).await {
                Ok(()) => return Ok(()),
                Err(failure) => failure,
            };
            let verdict = crate::retry::classify::breaker_verdict(&failure);
            let is_fault = verdict == Some(true);
            fault.store(is_fault, std::sync::atomic::Ordering::Relaxed);
            // A fault of the registry (a 5xx without Retry-After, a refused or silent
            // connection) gets PING_FAULT_ATTEMPTS attempts, then the breaker decides; a throttle
            // or a shed is proof of life and keeps the policy's budget.
            if is_fault
                && faults.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
                    >= PING_FAULT_ATTEMPTS
            {
                return Err(match failure.into_kind() {
                    Ok(kind) => Failure::Final(kind),
                    Err(inner) => Failure::Inner(inner),
                });
            }
            Err(failure)
        })
        .await
    }

    /// Counts a request that went out: one answered, or one whose failure came after the
    /// connection was made. A name that did not resolve or a connection that could not be
    /// opened sent nothing, and the registry's access log never sees it.
    fn count_sent(&self, failure: Option<&reqwest::Error>) {
        if !failure.is_some_and(reqwest::Error::is_connect) {
            self.count(RegistryStats::http_request);
        }
    }

    /// One `GET /v2/`: learns the registry's authentication from its answer.
    async fn ping_once(&self, timeout: Duration) -> Result<(), Failure> {
        let response = self
            .inner
            .http
            .get(self.api_url(""))
            .timeout(timeout)
            .send()
            .await;
        self.count_sent(response.as_ref().err());
        let response = response.map_err(|e| Failure::from_transport(&e))?;
        // The ping's answer is the first: a quota it announces paces everything after it.
        self.observe(&response);
        match response.status() {
            StatusCode::UNAUTHORIZED => {
                let challenges = challenges_of(&response);
                self.inner.auth.learn(&challenges).map_err(Failure::Final)?;
                Ok(())
            }
            s if s.is_success() || s == StatusCode::NOT_FOUND => {
                self.inner.auth.learn_none();
                Ok(())
            }
            _ => Err(Failure::from_response(response).await),
        }
    }

    /// One attempt: builds the request, adds the `Authorization` the scopes need, sends it, and
    /// answers a 401 with a single token refresh (never a loop). Any other status is returned
    /// for the operation to judge.
    pub async fn send<B>(&self, scopes: &Scopes, build: B) -> Result<Response, Failure>
    where
        B: Fn(&reqwest::Client) -> RequestBuilder,
    {
        let response = self.send_once(scopes, &build).await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let challenges = challenges_of(&response);
        if challenges.is_empty() {
            return Ok(response);
        }
        // Stale or missing token: learn what the registry asks for and try once more.
        let asked = challenges.iter().find_map(|c| match c {
            crate::challenge::Challenge::Bearer { scope, .. } => scope.clone(),
            _ => None,
        });
        self.inner.auth.learn(&challenges).map_err(Failure::Final)?;
        self.inner.auth.invalidate(scopes);
        let widened = scopes.with(asked.as_deref());
        let retry = self.send_once(&widened, &build).await?;
        if retry.status() == StatusCode::UNAUTHORIZED {
            return Err(Failure::Final(ErrorKind::Auth(
                match self.inner.auth.credentials() {
                    // Nothing was refused: nothing was sent.
                    Credentials::Anonymous => format!(
                        "{NO_CREDENTIALS}: {} asks for them, and none are configured or found for it",
                        self.host()
                    ),
                    c => format!("the registry refused the credentials ({})", c.describe()),
                },
            )));
        }
        Ok(retry)
    }

    /// One attempt whose body can be sent only once (a stream). A 401 refreshes the token and
    /// comes back as declined-before-work, so the retry loop runs the attempt again with a fresh
    /// body (bounded by its budget) rather than this layer re-sending.
    pub(crate) async fn send_streaming(
        &self,
        scopes: &Scopes,
        request: RequestBuilder,
    ) -> Result<Response, Failure> {
        let response = self.authorized_send(scopes, request).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            let challenges = challenges_of(&response);
            if !challenges.is_empty() {
                self.inner.auth.learn(&challenges).map_err(Failure::Final)?;
                self.inner.auth.invalidate(scopes);
                return Err(Failure::Transport {
                    message: "token refused; refreshed for the next attempt".into(),
                    sent: crate::retry::Sent::No,
                    local: true,
                });
            }
        }
        Ok(response)
    }

    async fn send_once<B>(&self, scopes: &Scopes, build: &B) -> Result<Response, Failure>
    where
        B: Fn(&reqwest::Client) -> RequestBuilder,
    {
        self.authorized_send(scopes, build(&self.inner.http)).await
    }

    /// Adds the `Authorization` the scopes need, sends, and lets the pacer read the quota.
    async fn authorized_send(
        &self,
        scopes: &Scopes,
        mut request: RequestBuilder,
    ) -> Result<Response, Failure> {
        if let Some(header) = self.inner.auth.header(self, scopes).await? {
            request = request.header(AUTHORIZATION, header);
        }
        // Split so the request goes out on the client that built it (verified or not).
        let (http, request) = request.build_split();
        let request = request.map_err(|e| Failure::from_transport(&e))?;
        // The request log of `-v`: method, path and status, never the query (a session URL's
        // query can carry signed state) nor a header.
        let (method, path) = (request.method().clone(), request.url().path().to_owned());
        let started = Instant::now();
        let response = http.execute(request).await;
        self.count_sent(response.as_ref().err());
        let ms = started.elapsed().as_millis();
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                tracing::debug!(target: "ferry::http", registry = %self.host(), "{method} {path} failed after {ms}ms");
                return Err(Failure::from_transport(&e));
            }
        };
        let status = response.status().as_u16();
        tracing::debug!(target: "ferry::http", registry = %self.host(), "{method} {path} {status} {ms}ms");
        self.observe(&response);
        Ok(response)
    }

    /// Feeds what an answer announces about the registry's quota to its pacer, with the ticket
    /// of the attempt it answers (so the operation is known to be metered).
    fn observe(&self, response: &Response) {
        let gate = &self.inner.gate;
        let Some(ticket) = crate::retry::current_ticket(gate) else {
            return;
        };
        match crate::pacer::quota_headers(response.headers()) {
            Some(quota) => gate.pacer.observe_quota(quota, ticket),
            None => gate.pacer.observe_no_quota(ticket),
        }
    }

    /// Runs one operation through the one retry shape, with a fresh budget from the registry's
    /// policy, after the once-per-run ping.
    pub async fn run<T, F, Fut>(&self, call: Call<'_>, attempt: F) -> Result<T, Error>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let budget = self.inner.gate.policy.budget();
        self.run_with_budget(call, &budget, attempt).await
    }

    /// As [`RegistryClient::run`], drawing retries from a budget shared with other calls (a
    /// walk over pages).
    pub(crate) async fn run_with_budget<T, F, Fut>(
        &self,
        call: Call<'_>,
        budget: &crate::retry::RetryBudget,
        attempt: F,
    ) -> Result<T, Error>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        self.ensure_ready().await.map_err(|mut e| {
            if e.repository.is_none() {
                e.repository = call.repository.map(str::to_owned);
            }
            e
        })?;
        let mut call = call;
        if call.run_stats.is_none() {
            call.run_stats = self.run_stats();
        }
        with_retry(&self.inner.gate, call, budget, attempt).await
    }
}

fn challenges_of(response: &Response) -> Vec<crate::challenge::Challenge> {
    response
        .headers()
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| parse_www_authenticate(v).ok())
        .flatten()
        .collect()
}

/// A CA bundle's PEM: the file, or for a directory (skopeo's `--cert-dir`) every `*.crt` in it,
/// in name order.
fn read_ca_bundle(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    if !path.is_dir() {
        return std::fs::read(path);
    }
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(path)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "crt"))
        .collect();
    files.sort();
    let mut pem = Vec::new();
    for file in files {
        pem.extend_from_slice(&std::fs::read(&file)?);
        pem.push(b'\n');
    }
    Ok(pem)
}
