//! Amazon ECR and ECR Public credentials: a password from `GetAuthorizationToken` through the AWS
//! credential chain (aws-config), decoded to Basic `AWS:<password>` and cached until near expiry.
//! The same API handle lists and creates repositories (`repositories`).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_ecr::error::{DisplayErrorContext, ProvideErrorMetadata};
use base64::Engine as _;
use ferry_distribution::Secret;
use ferry_distribution::auth::Credentials;
use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::operation::Operation;

/// A token is fetched again once less than this is left of its life (ECR tokens last 12 hours).
pub(crate) const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// The ECR Public registry host.
pub(crate) const ECR_PUBLIC_HOST: &str = "public.ecr.aws";

/// The only region that serves the ECR Public API, whatever the registry's `auth.region`.
pub(crate) const ECR_PUBLIC_REGION: &str = "us-east-1";

/// Whether `host` (a port is ignored) is the ECR Public registry.
pub(crate) fn is_ecr_public(host: &str) -> bool {
    host.split(':')
        .next()
        .is_some_and(|name| name.eq_ignore_ascii_case(ECR_PUBLIC_HOST))
}

/// How long one `GetAuthorizationToken` call (credential lookup included) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) use ferry_config::EcrHost;

/// How one registry gets its ECR token: the region of the ECR API and the AWS profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EcrAuth {
    /// Overrides the region named by the host (needed only when the host names none).
    pub region: Option<String>,
    /// A profile of `~/.aws/config`; `None` follows the chain (`AWS_PROFILE`, then `default`).
    pub profile: Option<String>,
}

impl EcrAuth {
    /// ECR auth for a host whose auth is not set: every ECR private registry host, since ECR
    /// private never serves anonymous requests. `None` for other hosts, ECR Public included
    /// (it serves pulls anonymously; pushing there needs `type: ecr`).
    pub(crate) fn implied_by(host: &str) -> Option<EcrAuth> {
        EcrHost::parse(host).map(|_| EcrAuth::default())
    }

    /// The Basic `AWS:<password>` credentials for registry `host`, from `tokens`' cache or a
    /// fresh `GetAuthorizationToken` (ECR Public's, in [`ECR_PUBLIC_REGION`], for
    /// [`ECR_PUBLIC_HOST`]). Errors name the registry and never carry the token.
    pub async fn credentials(&self, host: &str, tokens: &EcrTokens) -> Result<Credentials, Error> {
        let fail = |message: String| {
            Error::new(
                host,
                None,
                Operation::TokenExchange,
                ErrorKind::Auth(message),
            )
        };
        if is_ecr_public(host) {
            let key = TokenKey {
                service: Service::Public,
                region: ECR_PUBLIC_REGION.to_owned(),
                profile: self.profile.clone(),
                registry_id: String::new(),
            };
            return tokens.get(&key).await.map_err(|e| fail(e.to_string()));
        }
        let parsed = EcrHost::parse(host);
        let region = match (&self.region, parsed) {
            (Some(region), _) => region.clone(),
            (None, Some(h)) => h.region.to_owned(),
            (None, None) => {
                return Err(fail(EcrError::NoRegion.to_string()));
            }
        };
        let key = TokenKey {
            service: Service::Private,
            region,
            profile: self.profile.clone(),
            registry_id: parsed.map(|h| h.account.to_owned()).unwrap_or_default(),
        };
        tokens.get(&key).await.map_err(|e| fail(e.to_string()))
    }
}

/// Why an ECR token could not be had. The messages never contain a token or an AWS secret.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EcrError {
    /// The region is in neither the host name nor `auth.region`.
    #[error(
        "the host is not `<account>.dkr.ecr.<region>.amazonaws.com`, so set `auth.region` for ECR"
    )]
    NoRegion,
    /// The AWS API call failed.
    #[error(
        "{service} GetAuthorizationToken in {region}{} failed: {message}",
        profile_note(.profile)
    )]
    Api {
        /// ECR or ECR Public.
        service: Service,
        /// The region asked.
        region: String,
        /// The AWS profile used, when one was set.
        profile: Option<String>,
        /// The SDK's message.
        message: String,
    },
    /// The call succeeded but carried no token.
    #[error("{service} GetAuthorizationToken in {region} returned no authorization token")]
    NoToken {
        /// ECR or ECR Public.
        service: Service,
        /// The region asked.
        region: String,
    },
    /// The token is not base64 of `user:password`.
    #[error("the ECR authorization token is not base64 of `user:password`: {reason}")]
    BadToken {
        /// What was wrong with it (never the token).
        reason: &'static str,
    },
}

fn profile_note(profile: &Option<String>) -> String {
    match profile {
        Some(p) => format!(" (AWS profile {p})"),
        None => String::new(),
    }
}

/// Which AWS API issues a registry's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Service {
    /// Amazon ECR (private registries).
    Private,
    /// Amazon ECR Public (`public.ecr.aws`).
    Public,
}

impl std::fmt::Display for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Service::Private => "ECR",
            Service::Public => "ECR Public",
        })
    }
}

/// Which token a cache entry holds: one per service, region, AWS profile and registry id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TokenKey {
    service: Service,
    region: String,
    profile: Option<String>,
    registry_id: String,
}

#[derive(Debug, Clone)]
struct CachedToken {
    username: String,
    password: Secret,
    expires_at: SystemTime,
}

/// ECR registry tokens by (region, AWS profile, registry id), reused until
/// [`REFRESH_BEFORE_EXPIRY`] before they expire. One belongs to each [`crate::Registries`]
/// (no process-wide cache): `ferry watch` keeps one `Registries`, so its later runs reuse the
/// first run's tokens.
#[derive(Default)]
pub struct EcrTokens {
    /// Held across a fetch, so concurrent lookups of one key send one request.
    cache: tokio::sync::Mutex<HashMap<TokenKey, CachedToken>>,
    endpoint_url: Option<String>,
    static_credentials: Option<aws_sdk_ecr::config::Credentials>,
}

impl std::fmt::Debug for EcrTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EcrTokens")
            .field("endpoint_url", &self.endpoint_url)
            .field("static_credentials", &self.static_credentials.is_some())
            .finish_non_exhaustive()
    }
}

impl EcrTokens {
    /// An empty cache that asks the region's ECR API with the AWS credential chain.
    pub fn new() -> Self {
        EcrTokens::default()
    }

    /// Sends ECR API calls to `url` instead of the region's endpoint (a VPC endpoint, a test
    /// double).
    pub fn with_endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint_url = Some(url.into());
        self
    }

    /// Signs ECR API calls with these AWS keys instead of the credential chain's.
    pub fn with_static_credentials(mut self, access_key_id: &str, secret_key: &Secret) -> Self {
        self.static_credentials = Some(aws_sdk_ecr::config::Credentials::new(
            access_key_id,
            secret_key.expose(),
            None,
            None,
            "ferry-static",
        ));
        self
    }

    async fn get(&self, key: &TokenKey) -> Result<Credentials, EcrError> {
        let mut cache = self.cache.lock().await;
        let now = SystemTime::now();
        if let Some(token) = cache.get(key)
            && token
                .expires_at
                .duration_since(now)
                .is_ok_and(|left| left > REFRESH_BEFORE_EXPIRY)
        {
            return Ok(token.credentials());
        }
        let token = self.fetch(key).await?;
        let credentials = token.credentials();
        cache.insert(key.clone(), token);
        Ok(credentials)
    }

    /// The SDK settings of one ECR API call: the region, the profile, no SDK retries, a
    /// timeout, and the endpoint and keys a test or a VPC endpoint set.
    pub(crate) async fn sdk_config(
        &self,
        region: &str,
        profile: Option<&str>,
    ) -> aws_config::SdkConfig {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(region.to_owned()))
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_timeout(CALL_TIMEOUT)
                    .build(),
            );
        if let Some(profile) = profile {
            loader = loader.profile_name(profile);
        }
        if let Some(url) = &self.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let Some(credentials) = &self.static_credentials {
            loader = loader.credentials_provider(credentials.clone());
        }
        loader.load().await
    }

    /// One `GetAuthorizationToken` call. The SDK does not retry it: a failure fails the
    /// registry for this run (ferry retries in one place only, and this is not a registry).
    async fn fetch(&self, key: &TokenKey) -> Result<CachedToken, EcrError> {
        let config = self.sdk_config(&key.region, key.profile.as_deref()).await;
        tracing::debug!(
            service = %key.service,
            region = %key.region,
            profile = ?key.profile,
            "GetAuthorizationToken"
        );
        let api_error = |message: String| EcrError::Api {
            service: key.service,
            region: key.region.clone(),
            profile: key.profile.clone(),
            message,
        };
        let (token, expires_at) = match key.service {
            Service::Private => {
                let output = aws_sdk_ecr::Client::new(&config)
                    .get_authorization_token()
                    .send()
                    .await
                    .map_err(|e| api_error(sdk_error_message(&e)))?;
                output.authorization_data().iter().find_map(|d| {
                    Some((d.authorization_token()?.to_owned(), d.expires_at().copied()))
                })
            }
            Service::Public => {
                let output = aws_sdk_ecrpublic::Client::new(&config)
                    .get_authorization_token()
                    .send()
                    .await
                    .map_err(|e| api_error(sdk_error_message(&e)))?;
                output.authorization_data().and_then(|d| {
                    Some((d.authorization_token()?.to_owned(), d.expires_at().copied()))
                })
            }
        }
        .ok_or_else(|| EcrError::NoToken {
            service: key.service,
            region: key.region.clone(),
        })?;
        let (username, password) = decode_token(&token)?;
        // A token without an expiry is used for this lookup only.
        let expires_at = expires_at
            .and_then(|t| SystemTime::try_from(t).ok())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        Ok(CachedToken {
            username,
            password,
            expires_at,
        })
    }
}

/// An SDK error as `<code>: <message>` when the service sent them, else the error chain.
pub(crate) fn sdk_error_message<E: ProvideErrorMetadata + std::error::Error>(error: &E) -> String {
    match (error.code(), error.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_owned(),
        _ => DisplayErrorContext(error).to_string(),
    }
}

impl CachedToken {
    fn credentials(&self) -> Credentials {
        Credentials::Basic {
            username: self.username.clone(),
            password: self.password.clone(),
        }
    }
}

/// Splits ECR's base64 `AWS:<password>` token into username and password.
pub(crate) fn decode_token(token: &str) -> Result<(String, Secret), EcrError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .map_err(|_| EcrError::BadToken {
            reason: "not base64",
        })?;
    let text = String::from_utf8(bytes).map_err(|_| EcrError::BadToken {
        reason: "not UTF-8",
    })?;
    let (username, password) = text.split_once(':').ok_or(EcrError::BadToken {
        reason: "no `:` between user and password",
    })?;
    if username.is_empty() || password.is_empty() {
        return Err(EcrError::BadToken {
            reason: "empty user or password",
        });
    }
    Ok((username.to_owned(), Secret::new(password)))
}

pub(crate) mod repositories;
#[cfg(test)]
mod tests;
