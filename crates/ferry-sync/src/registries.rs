//! One [`RegistryClient`] per registry host for a whole run, built from the config: endpoint,
//! TLS, credentials (resolved once, never printed), pacing and retry overrides.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_distribution::auth::Credentials;
use ferry_distribution::auth::discover::CredentialFiles;
use ferry_distribution::auth::docker_config::DockerConfig;
use ferry_distribution::client::{RegistryClient, RegistryOptions, RunScope};
use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::gate::GateSettings;
use ferry_distribution::operation::Operation;
use ferry_distribution::retry::RetryPolicy;

use crate::ecr::repositories::Created;
use crate::ecr::{EcrAuth, EcrTokens};
use ferry_config::{AuthSettings, Config, RegistrySettings};

/// How long a docker credential helper may take before ferry gives up on it.
const HELPER_TIMEOUT: Duration = Duration::from_secs(20);

/// The registry clients of one run, created on first use and shared by every phase.
#[derive(Debug, Clone)]
pub struct Registries {
    settings: Arc<Vec<RegistrySettings>>,
    clients: Arc<Mutex<HashMap<String, RegistryClient>>>,
    /// Where registries without `auth` look for the user's login.
    files: Arc<CredentialFiles>,
    /// The ECR API handle (tokens cached for as long as these clients live), or a test's.
    ecr: Arc<EcrTokens>,
    /// ECR repositories this run made sure of, by (host, repository): each created once.
    created: Arc<Mutex<Creations>>,
    /// Each registry's breaker, by host: this run's, or carried in from an earlier run's.
    breakers: Breakers,
    /// The run this is the view of ([`Registries::for_run`]): its journal and counters.
    run: Option<Arc<RunView>>,
    /// Applied to every host's settings, listed or not (`ferry import`'s access flags).
    every_host: Option<Adjust>,
}

/// [`EveryHost`], printed as its name.
#[derive(Clone)]
struct Adjust(EveryHost);

impl std::fmt::Debug for Adjust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EveryHost")
    }
}

/// Adjusts every host's settings (see [`Registries::with_every_host`]).
pub type EveryHost = Arc<dyn Fn(&mut RegistrySettings) + Send + Sync>;

/// Each registry's circuit breaker, by host, kept beyond one run's [`Registries`]: `ferry watch`
/// hands the same `Breakers` to every run, so a registry one run found down is not hammered
/// afresh by the next (its breaker's cool-down and probe decide, as within a run). Cheap to
/// clone; clones share.
#[derive(Debug, Clone, Default)]
pub struct Breakers(Arc<Mutex<HashMap<String, Arc<ferry_distribution::breaker::Breaker>>>>);

impl Breakers {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ferry_distribution::breaker::Breaker>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One run's share of the clients: where its uploads are recorded, and its counters per host.
#[derive(Debug)]
struct RunView {
    journal: Option<Arc<dyn ferry_distribution::ops::UploadJournal>>,
    scopes: Mutex<HashMap<String, Arc<RunScope>>>,
    /// The repositories this run itself created.
    created: Mutex<Vec<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

type Creation = tokio::sync::OnceCell<Result<Created, Error>>;
/// Each repository's creation, by (host, repository).
type Creations = HashMap<(String, String), Arc<Creation>>;

impl Registries {
    /// The clients for `config`'s registries, none built yet: each is built on first use.
    pub fn new(config: &Config) -> Self {
        Registries {
            settings: Arc::new(config.registries.clone()),
            clients: Arc::new(Mutex::new(HashMap::new())),
            files: Arc::new(CredentialFiles::from_env()),
            ecr: Arc::new(EcrTokens::new()),
            created: Arc::new(Mutex::new(HashMap::new())),
            breakers: Breakers::default(),
            run: None,
            every_host: None,
        }
    }

    /// Applies `adjust` to the settings of every host this run talks to, whether the config
    /// lists it or not (`ferry import --insecure`: every host an image of the bundle goes to).
    pub fn with_every_host(mut self, adjust: EveryHost) -> Self {
        self.every_host = Some(Adjust(adjust));
        self
    }

    /// One run's view of these clients: the same clients (what they learned, their windows and
    /// breakers), with the run's own counters per registry ([`Registries::report`] counts only
    /// what this run sent, whatever else shares the clients) and its uploads in flight recorded
    /// in `journal` (the run's state directory), so the next run resumes them.
    pub fn for_run(
        &self,
        journal: Option<Arc<dyn ferry_distribution::ops::UploadJournal>>,
    ) -> Registries {
        Registries {
            run: Some(Arc::new(RunView {
                journal,
                scopes: Mutex::new(HashMap::new()),
                created: Mutex::new(Vec::new()),
            })),
            ..self.clone()
        }
    }

    /// Builds each registry's client on `breakers`' breaker for it (the state an earlier run
    /// left), and leaves this run's breakers there for the next.
    pub fn with_breakers(mut self, breakers: Breakers) -> Self {
        self.breakers = breakers;
        self
    }

    /// Looks for logins in `files` instead of the places the environment names.
    pub fn with_credential_files(mut self, files: CredentialFiles) -> Self {
        self.files = Arc::new(files);
        self
    }

    /// Sends this run's ECR API calls (tokens, repository listing and creation) through
    /// `tokens` instead of its own default cache (a VPC endpoint, a test's stub endpoint).
    pub fn with_ecr_api(mut self, tokens: EcrTokens) -> Self {
        self.ecr = Arc::new(tokens);
        self
    }

    fn ecr_api(&self) -> &EcrTokens {
        &self.ecr
    }

    /// The settings of `host`: the config's entry, or an unlisted host's defaults.
    pub fn settings(&self, host: &str) -> RegistrySettings {
        self.settings_for(host)
    }

    /// Whether `host`'s repositories are listed through the ECR API: an ECR private host whose
    /// config sets no `auth` or `type: ecr`. An explicit other `auth` wins over the host rule
    /// (issue 39): the registry's own catalog is read with the credentials configured.
    pub(crate) fn lists_with_ecr_api(&self, host: &str) -> bool {
        crate::ecr::EcrHost::parse(host).is_some()
            && matches!(
                self.settings_for(host).auth,
                AuthSettings::Discover | AuthSettings::Ecr { .. }
            )
    }

    /// Every repository of the ECR registry `host` (`DescribeRepositories`), at most `max`.
    pub(crate) async fn ecr_repositories(
        &self,
        host: &str,
        max: usize,
    ) -> Result<Vec<String>, Error> {
        self.ecr_api()
            .describe_repositories(&self.settings_for(host), max)
            .await
    }

    /// Makes sure `repository` exists on `host` when the registry creates repositories
    /// (`create_repositories`): one `CreateRepository` per repository for the whole run, every
    /// caller waiting on the first. `None` when the registry does not create repositories.
    pub(crate) async fn ensure_repository(
        &self,
        host: &str,
        repository: &str,
    ) -> Option<Result<Created, Error>> {
        let settings = self.settings_for(host);
        let creation = settings.create_repositories.clone()?;
        let cell = Arc::clone(
            self.created_lock()
                .entry((host.to_owned(), repository.to_owned()))
                .or_default(),
        );
        let asked_here = std::sync::atomic::AtomicBool::new(false);
        let outcome = cell
            .get_or_init(|| async {
                asked_here.store(true, std::sync::atomic::Ordering::Relaxed);
                self.ecr_api()
                    .create_repository(&settings, repository, &creation)
                    .await
            })
            .await;
        if let Some(run) = &self.run
            && asked_here.into_inner()
            && matches!(outcome, Ok(Created::New))
        {
            lock(&run.created).push(format!("{host}/{repository}"));
        }
        Some(outcome.clone())
    }

    /// The repositories this run created (`host/repository`), sorted; outside a run's view,
    /// every one these clients created.
    pub(crate) fn created_repositories(&self) -> Vec<String> {
        if let Some(run) = &self.run {
            let mut out = lock(&run.created).clone();
            out.sort();
            return out;
        }
        let mut out: Vec<String> = self
            .created_lock()
            .iter()
            .filter(|(_, cell)| matches!(cell.get(), Some(Ok(Created::New))))
            .map(|((host, repository), _)| format!("{host}/{repository}"))
            .collect();
        out.sort();
        out
    }

    fn created_lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Creation>>> {
        self.created.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn settings_for(&self, host: &str) -> RegistrySettings {
        let mut settings = self
            .settings
            .iter()
            .find(|r| r.host == host)
            .cloned()
            .unwrap_or_else(|| RegistrySettings::unlisted(host));
        if let Some(Adjust(adjust)) = &self.every_host {
            adjust(&mut settings);
        }
        settings
    }

    /// The client for `host`, built on first use.
    pub async fn client(&self, host: &str) -> Result<RegistryClient, Error> {
        let built = self.lock().get(host).cloned();
        if let Some(c) = built {
            return Ok(self.seen_by_run(c));
        }
        let settings = self.settings_for(host);
        let resolved = resolve_credentials_with(&settings, &self.files, self.ecr_api()).await?;
        let mut options = options_for(&settings, resolved);
        options.breaker = self.breakers.lock().get(host).cloned();
        let client = RegistryClient::new(options)?;
        // Another task may have built one meanwhile: keep the first, so state is shared.
        let client = self.lock().entry(host.to_owned()).or_insert(client).clone();
        self.breakers
            .lock()
            .entry(host.to_owned())
            .or_insert_with(|| Arc::clone(&client.gate().breaker));
        Ok(self.seen_by_run(client))
    }

    /// `client` as this run sees it (its own counters and journal), or as it is outside a run.
    fn seen_by_run(&self, client: RegistryClient) -> RegistryClient {
        let Some(run) = &self.run else {
            return client;
        };
        let scope = lock(&run.scopes)
            .entry(client.host().to_owned())
            .or_insert_with(|| Arc::new(RunScope::new(run.journal.clone())))
            .clone();
        client.for_run(scope)
    }

    /// Each built client's counters, window, breaker and capabilities now, as a report shows
    /// them (what `ferry watch` counts for a run cancelled before its report).
    pub fn report(&self) -> Vec<crate::report::RegistryReport> {
        self.built()
            .iter()
            .map(crate::report::RegistryReport::of)
            .collect()
    }

    /// Every client built so far, by host: for a run's view, those the run used, as it saw them.
    pub fn built(&self) -> Vec<RegistryClient> {
        let all: Vec<_> = self.lock().values().cloned().collect();
        let mut v: Vec<_> = match &self.run {
            None => all,
            Some(run) => {
                let used = lock(&run.scopes).clone();
                all.into_iter()
                    .filter_map(|c| {
                        let scope = used.get(c.host())?;
                        Some(c.for_run(Arc::clone(scope)))
                    })
                    .collect()
            }
        };
        v.sort_by(|a, b| a.host().cmp(b.host()));
        v
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RegistryClient>> {
        self.clients.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The client options a registry's settings describe.
pub(crate) fn options_for(
    settings: &RegistrySettings,
    resolved: ResolvedCredentials,
) -> RegistryOptions {
    let mut options = RegistryOptions::new(settings.host.clone());
    options.endpoint = settings.url.clone();
    options.insecure = settings.insecure;
    options.ca_bundle = settings.ca_bundle.clone();
    options.client_identity = settings.client_identity.clone();
    options.credentials_bound_to = match &resolved.source {
        CredentialSource::Found { host, .. } => Some(host.clone()),
        _ => None,
    };
    options.credentials = resolved.credentials;
    let mut retry = RetryPolicy::default();
    let o = &settings.retry;
    if let Some(v) = o.attempts {
        retry.attempts = v.max(1);
    }
    if let Some(v) = o.base {
        retry.base = v;
    }
    if let Some(v) = o.cap {
        retry.cap = v;
    }
    if let Some(v) = o.retry_after_cap {
        retry.retry_after_cap = v;
    }
    if let Some(v) = o.deadline {
        retry.deadline = v;
    }
    options.gate = GateSettings {
        max_concurrent: settings.max_concurrent.max(1),
        split_read_write: ferry_distribution::quirks::split_read_write(&settings.host),
        requests_per_second: settings.requests_per_second,
        retry,
        ..GateSettings::default()
    };
    options
}

/// Where a registry's credentials came from, for `ferry auth check` (never the secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// The config's `auth` named them (or `auth: {type: anonymous}` named none).
    Config,
    /// No `auth` in the config: found in the user's login file for `host`.
    Found {
        /// The file.
        file: PathBuf,
        /// The host they are stored for; token realms elsewhere do not get them.
        host: String,
    },
    /// No `auth` in the config and no login file has an entry for the host.
    NoneFound,
    /// No `auth` in the config and an ECR host: ECR auth from the AWS credential chain.
    EcrDefault,
}

/// A registry's credentials and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedCredentials {
    /// What is presented to the registry.
    pub credentials: Credentials,
    /// Where it came from.
    pub source: CredentialSource,
}

impl ResolvedCredentials {
    fn from_config(credentials: Credentials) -> Self {
        ResolvedCredentials {
            credentials,
            source: CredentialSource::Config,
        }
    }

    /// The credentials and their source in a few words, never the secret.
    pub fn describe(&self) -> String {
        let what = self.credentials.describe();
        match &self.source {
            CredentialSource::Config => what,
            CredentialSource::Found { file, .. } => format!("{what} from {}", file.display()),
            CredentialSource::NoneFound => format!("{what} (no login found)"),
            CredentialSource::EcrDefault => format!("{what} (ECR default)"),
        }
    }
}

/// The host a registry's requests go to, under which the user's login would be stored: the
/// `url` override's `host[:port]` when it names one, else the registry's host.
fn login_host(settings: &RegistrySettings) -> String {
    settings
        .url
        .as_deref()
        .and_then(|u| url::Url::parse(u).ok())
        .and_then(|u| {
            let host = u.host_str()?.to_owned();
            Some(match u.port() {
                Some(port) => format!("{host}:{port}"),
                None => host,
            })
        })
        .unwrap_or_else(|| settings.host.clone())
}

/// The credentials a registry's auth settings name, looked up once; a registry without `auth`
/// looks in `files`.
pub async fn resolve_credentials(
    settings: &RegistrySettings,
    files: &CredentialFiles,
) -> Result<ResolvedCredentials, Error> {
    resolve_credentials_with(settings, files, &EcrTokens::new()).await
}

/// [`resolve_credentials`], asking ECR through `tokens`.
pub(crate) async fn resolve_credentials_with(
    settings: &RegistrySettings,
    files: &CredentialFiles,
    tokens: &EcrTokens,
) -> Result<ResolvedCredentials, Error> {
    let fail = |message: String| {
        Error::new(
            &settings.host,
            None,
            Operation::TokenExchange,
            ErrorKind::Auth(message),
        )
    };
    match &settings.auth {
        AuthSettings::Discover => {
            if let Some(ecr) = EcrAuth::implied_by(&settings.host) {
                let credentials = ecr.credentials(&settings.host, tokens).await?;
                return Ok(ResolvedCredentials {
                    credentials,
                    source: CredentialSource::EcrDefault,
                });
            }
            let host = login_host(settings);
            let found = files.discover(&host, HELPER_TIMEOUT).await.map_err(|e| {
                fail(format!(
                    "{e} (read because the config sets no auth for this host; \
                     `auth: {{ type: anonymous }}` skips the lookup)"
                ))
            })?;
            let source = match found.source {
                Some(file) => CredentialSource::Found { file, host },
                None => CredentialSource::NoneFound,
            };
            Ok(ResolvedCredentials {
                credentials: found.credentials,
                source,
            })
        }
        other => resolve_configured(settings, other, tokens)
            .await
            .map(ResolvedCredentials::from_config),
    }
}

/// The credentials an explicit `auth` names.
async fn resolve_configured(
    settings: &RegistrySettings,
    auth: &AuthSettings,
    tokens: &EcrTokens,
) -> Result<Credentials, Error> {
    let fail = |e: ferry_distribution::auth::docker_config::CredentialError| {
        Error::new(
            &settings.host,
            None,
            Operation::TokenExchange,
            ErrorKind::Auth(e.to_string()),
        )
    };
    match auth {
        // An explicit `auth` wins over the host rule (issue 39): `type: anonymous` sends no
        // credentials even to a host named like ECR private (a proxy or a mirror in front of
        // it, a test double), and asks AWS nothing.
        AuthSettings::Anonymous => Ok(Credentials::Anonymous),
        // No `auth`: ECR private never serves anonymous requests, so its hosts use the AWS
        // chain. ECR Public serves pulls anonymously and asks for a token only with `type: ecr`.
        AuthSettings::Discover => match EcrAuth::implied_by(&settings.host) {
            Some(ecr) => ecr.credentials(&settings.host, tokens).await,
            None => Ok(Credentials::Anonymous),
        },
        AuthSettings::Basic { username, password } => Ok(Credentials::Basic {
            username: username.clone(),
            password: password.clone(),
        }),
        AuthSettings::Token { token } => Ok(Credentials::Bearer {
            token: token.clone(),
        }),
        AuthSettings::DockerConfig { path } => {
            let config = DockerConfig::load(path.as_deref()).map_err(fail)?;
            match config
                .lookup(&settings.host, HELPER_TIMEOUT)
                .await
                .map_err(fail)?
            {
                Some(c) => Ok(c.into()),
                None => Ok(Credentials::Anonymous),
            }
        }
        AuthSettings::Ecr { region, profile } => {
            let ecr = EcrAuth {
                region: region.clone(),
                profile: profile.clone(),
            };
            ecr.credentials(&settings.host, tokens).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(host: &str, url: Option<&str>) -> RegistrySettings {
        let mut s = RegistrySettings::unlisted(host);
        s.url = url.map(str::to_owned);
        s
    }

    #[test]
    fn a_login_is_looked_up_under_the_host_requests_go_to() {
        assert_eq!(login_host(&settings("ghcr.io", None)), "ghcr.io");
        assert_eq!(
            login_host(&settings(
                "docker.io",
                Some("https://mirror.example:8443/v2")
            )),
            "mirror.example:8443"
        );
        assert_eq!(
            login_host(&settings("docker.io", Some("https://registry-1.docker.io"))),
            "registry-1.docker.io"
        );
        // A url that does not parse leaves the host as the config names it.
        assert_eq!(login_host(&settings("r.io", Some("not a url"))), "r.io");
    }

    #[tokio::test]
    async fn an_unlisted_host_finds_its_login_and_anonymous_opts_out() {
        use base64::Engine as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auth.json");
        let auth = base64::engine::general_purpose::STANDARD.encode("u:p");
        std::fs::write(
            &file,
            format!(r#"{{"auths":{{"r.io":{{"auth":"{auth}"}}}}}}"#),
        )
        .unwrap();
        let files = CredentialFiles {
            containers: vec![file.clone()],
            docker: None,
        };
        let found = resolve_credentials(&settings("r.io", None), &files)
            .await
            .unwrap();
        assert_eq!(
            found.source,
            CredentialSource::Found {
                file: file.clone(),
                host: "r.io".into()
            }
        );
        assert_eq!(
            found.describe(),
            format!("basic as u from {}", file.display())
        );
        let options = options_for(&settings("r.io", None), found);
        assert_eq!(options.credentials_bound_to.as_deref(), Some("r.io"));

        let mut optout = settings("r.io", None);
        optout.auth = AuthSettings::Anonymous;
        let none = resolve_credentials(&optout, &files).await.unwrap();
        assert_eq!(none.credentials, Credentials::Anonymous);
        assert_eq!(none.source, CredentialSource::Config);
        let options = options_for(&optout, none);
        assert_eq!(options.credentials_bound_to, None);

        let other = resolve_credentials(&settings("q.io", None), &files)
            .await
            .unwrap();
        assert_eq!(other.describe(), "anonymous (no login found)");
    }
}
