//! One [`RegistryClient`] per registry host for a whole run, built from the config: endpoint,
//! TLS, credentials (resolved once, never printed), pacing and retry overrides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_distribution::auth::Credentials;
use ferry_distribution::auth::docker_config::DockerConfig;
use ferry_distribution::client::{RegistryClient, RegistryOptions};
use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::gate::GateSettings;
use ferry_distribution::operation::Operation;
use ferry_distribution::retry::RetryPolicy;

use crate::config::{AuthSettings, Config, RegistrySettings};
use crate::ecr::{EcrAuth, EcrTokens};

/// How long a docker credential helper may take before ferry gives up on it.
const HELPER_TIMEOUT: Duration = Duration::from_secs(20);

/// The registry clients of one run, created on first use and shared by every phase.
#[derive(Debug, Clone)]
pub struct Registries {
    settings: Arc<Vec<RegistrySettings>>,
    clients: Arc<Mutex<HashMap<String, RegistryClient>>>,
    /// Applied to every client built here (tests shorten timeouts, benches tune).
    tune: Tuning,
}

impl std::fmt::Debug for Tuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tuning")
    }
}

/// Adjusts every client's options before it is built.
#[derive(Clone)]
struct Tuning(Arc<dyn Fn(&mut RegistryOptions) + Send + Sync>);

impl Registries {
    /// The clients for `config`'s registries, none built yet: each is built on first use.
    pub fn new(config: &Config) -> Self {
        Registries {
            settings: Arc::new(config.registries.clone()),
            clients: Arc::new(Mutex::new(HashMap::new())),
            tune: Tuning(Arc::new(|_| {})),
        }
    }

    /// Adjusts every client's options before it is built.
    pub fn with_tuning(
        mut self,
        tune: impl Fn(&mut RegistryOptions) + Send + Sync + 'static,
    ) -> Self {
        self.tune = Tuning(Arc::new(tune));
        self
    }

    fn settings_for(&self, host: &str) -> RegistrySettings {
        self.settings
            .iter()
            .find(|r| r.host == host)
            .cloned()
            .unwrap_or_else(|| RegistrySettings::unlisted(host))
    }

    /// The client for `host`, built on first use.
    pub async fn client(&self, host: &str) -> Result<RegistryClient, Error> {
        if let Some(c) = self.lock().get(host) {
            return Ok(c.clone());
        }
        let settings = self.settings_for(host);
        let credentials = resolve_credentials(&settings).await?;
        let options = options_for(&settings, credentials, &*self.tune.0);
        let client = RegistryClient::new(options)?;
        // Another task may have built one meanwhile: keep the first, so state is shared.
        Ok(self.lock().entry(host.to_owned()).or_insert(client).clone())
    }

    /// Every client built so far, by host.
    pub fn built(&self) -> Vec<RegistryClient> {
        let mut v: Vec<_> = self.lock().values().cloned().collect();
        v.sort_by(|a, b| a.host().cmp(b.host()));
        v
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RegistryClient>> {
        self.clients.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The client options a registry's settings describe.
pub fn options_for(
    settings: &RegistrySettings,
    credentials: Credentials,
    tune: &dyn Fn(&mut RegistryOptions),
) -> RegistryOptions {
    let mut options = RegistryOptions::new(settings.host.clone());
    options.endpoint = settings.url.clone();
    options.insecure = settings.insecure;
    options.ca_bundle = settings.ca_bundle.clone();
    options.credentials = credentials;
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
    tune(&mut options);
    options
}

/// The credentials a registry's auth settings name, looked up once.
pub async fn resolve_credentials(settings: &RegistrySettings) -> Result<Credentials, Error> {
    let fail = |message: String| {
        Error::new(
            &settings.host,
            None,
            Operation::TokenExchange,
            ErrorKind::Auth(message),
        )
    };
    match &settings.auth {
        // ECR private never serves anonymous requests: its hosts use the AWS chain unless set.
        // ECR Public serves pulls anonymously, so it asks for a token only with `type: ecr`.
        AuthSettings::Anonymous => match EcrAuth::implied_by(&settings.host) {
            Some(ecr) => ecr.credentials(&settings.host, EcrTokens::shared()).await,
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
            let config = DockerConfig::load(path.as_deref()).map_err(|e| fail(e.to_string()))?;
            match config
                .lookup(&settings.host, HELPER_TIMEOUT)
                .await
                .map_err(|e| fail(e.to_string()))?
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
            ecr.credentials(&settings.host, EcrTokens::shared()).await
        }
    }
}
