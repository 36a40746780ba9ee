//! Answers a registry's challenge: learns the scheme from the ping, mints bearer tokens per scope
//! set through the one retry shape, caches them until shortly before expiry, and drops stale ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use base64::Engine;
use reqwest::header::HeaderValue;
use tokio::time::Instant;
use url::Url;

use crate::auth::{Credentials, Scopes};
use crate::challenge::Challenge;
use crate::error::{Error, ErrorKind, redact_url};
use crate::gate::RegistryGate;
use crate::operation::Operation;
use crate::retry::{Call, Failure, with_retry};
use crate::secret::Secret;

/// How the registry wants to be authenticated, learned from its `/v2/` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthScheme {
    /// `/v2/` answered 200: no authentication.
    None,
    /// `/v2/` asked for Basic: credentials go on every request as they are.
    Basic,
    /// `/v2/` asked for a bearer token from a realm.
    Bearer {
        /// The token endpoint, checked safe (https, or the configured insecure host).
        realm: Url,
        /// The `service` parameter the endpoint expects, when the challenge named one.
        service: Option<String>,
    },
}

#[derive(Debug, Clone)]
struct Token {
    value: Secret,
    refresh_at: Instant,
}

type Slot = Arc<tokio::sync::Mutex<Option<Token>>>;

/// The authentication state for one registry.
#[derive(Debug)]
pub struct Authenticator {
    registry: String,
    credentials: Credentials,
    /// Where found credentials are stored for: realms elsewhere are asked anonymously.
    bound_to: Option<String>,
    /// The host of a registry configured insecure: a realm there may use http and unverified
    /// TLS. A realm on any other host must be https and is always verified.
    insecure_host: Option<String>,
    scheme: RwLock<Option<AuthScheme>>,
    tokens: Mutex<HashMap<String, Slot>>,
    /// Token endpoints are a service of their own: their requests are paced and guarded apart
    /// from the registry's, so a token fetch inside a registry attempt never waits on itself.
    gate: RegistryGate,
}

#[derive(serde::Deserialize)]
struct TokenResponse {
    token: Option<String>,
    access_token: Option<String>,
    /// Seconds; anything but a whole non-negative number (a string, `-1`, `1e300`) counts as
    /// absent rather than failing the exchange.
    expires_in: Option<serde_json::Value>,
}

impl Authenticator {
    /// The state for `registry`; token requests go through `gate`, apart from the registry's own.
    pub fn new(
        registry: &str,
        credentials: Credentials,
        insecure_host: Option<&str>,
        gate: RegistryGate,
    ) -> Self {
        Authenticator {
            registry: registry.to_owned(),
            credentials,
            bound_to: None,
            insecure_host: insecure_host.map(str::to_owned),
            scheme: RwLock::new(None),
            tokens: Mutex::new(HashMap::new()),
            gate,
        }
    }

    /// Limits the credentials to token realms on `host`'s port and on that host or its domain
    /// (credentials found in a user's login files rather than configured for this registry).
    pub(crate) fn bound_to(mut self, host: Option<String>) -> Self {
        self.bound_to = host;
        self
    }

    /// The credentials a token request to `realm` carries: all of them, unless they are bound to
    /// a host the realm is not on.
    fn credentials_for(&self, realm: &Url) -> &Credentials {
        match &self.bound_to {
            Some(host) if !crate::auth::discover::realm_may_receive(host, realm) => {
                tracing::warn!(
                    registry = %self.registry,
                    realm = %redact_url(realm.as_str()),
                    "token realm is on another host or port than the one the found credentials are stored for: asking it anonymously"
                );
                &Credentials::Anonymous
            }
            _ => &self.credentials,
        }
    }

    /// The credentials this registry is authenticated with.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The scheme learned from the registry, or `None` before its first challenge or ping.
    pub fn scheme(&self) -> Option<AuthScheme> {
        self.scheme
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records how the registry wants to be authenticated, from the challenges of a 401 (or
    /// `None` after a 200 ping). A challenge whose realm is unsafe is refused.
    pub fn learn(&self, challenges: &[Challenge]) -> Result<AuthScheme, ErrorKind> {
        let scheme = choose_scheme(challenges, self.insecure_host.as_deref())?;
        *self.scheme.write().unwrap_or_else(|p| p.into_inner()) = Some(scheme.clone());
        Ok(scheme)
    }

    /// Records that `/v2/` answered 200: requests go without authentication.
    pub(crate) fn learn_none(&self) {
        *self.scheme.write().unwrap_or_else(|p| p.into_inner()) = Some(AuthScheme::None);
    }

    /// The `Authorization` header for a request needing `scopes`, minting a token if needed.
    pub async fn header(
        &self,
        client: &crate::RegistryClient,
        scopes: &Scopes,
    ) -> Result<Option<HeaderValue>, Failure> {
        if let Credentials::Bearer { token } = &self.credentials {
            return Ok(Some(bearer(token)?));
        }
        match self.scheme() {
            None | Some(AuthScheme::None) => Ok(None),
            Some(AuthScheme::Basic) => match &self.credentials {
                Credentials::Basic { username, password } => Ok(Some(basic(username, password)?)),
                _ => Ok(None),
            },
            Some(AuthScheme::Bearer { realm, service }) => {
                let http = client.http_for(&realm);
                let learned = &client.capabilities().auth;
                // A token service that refused a token for several scopes gets one scope per
                // token: the widest (push before pull) of the operation's own.
                let single;
                let scopes = if scopes.as_slice().len() > 1 && learned.multi_scope_refused() {
                    single = scopes.widest();
                    &single
                } else {
                    scopes
                };
                let token = self
                    .token(http, &realm, service.as_deref(), scopes, learned)
                    .await;
                if scopes.as_slice().len() > 1 {
                    match &token {
                        Ok(_) => learned.learn_multi_scope_works(),
                        Err(Failure::Inner(e)) if matches!(e.kind, ErrorKind::Auth(_)) => {
                            if learned.learn_multi_scope_refused() {
                                tracing::info!(
                                    registry = %self.registry,
                                    "the token service refused a token for several scopes: \
                                     one scope per token from now on, no cross-repository mounts"
                                );
                            }
                        }
                        Err(_) => {}
                    }
                }
                Ok(Some(bearer(&token?)?))
            }
        }
    }

    /// The token minted for `scopes`, if one is cached and not being refreshed (for `ferry
    /// doctor` to read the access it grants; never printed).
    pub(crate) fn cached_token(&self, scopes: &Scopes) -> Option<Secret> {
        let slot = {
            let tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(tokens.get(&scopes.key())?)
        };
        let cached = slot.try_lock().ok()?;
        cached.as_ref().map(|t| t.value.clone())
    }

    /// Forgets the token for `scopes` (after a 401 with it).
    pub(crate) fn invalidate(&self, scopes: &Scopes) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        tokens.remove(&scopes.key());
    }

    async fn token(
        &self,
        http: &reqwest::Client,
        realm: &Url,
        service: Option<&str>,
        scopes: &Scopes,
        learned: &crate::auth::learned::AuthCapabilities,
    ) -> Result<Secret, Failure> {
        let slot = {
            let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(tokens.entry(scopes.key()).or_default())
        };
        // One exchange per scope set at a time; the others wait and take its token.
        let mut cached = slot.lock().await;
        if let Some(t) = cached.as_ref()
            && Instant::now() < t.refresh_at
        {
            return Ok(t.value.clone());
        }
        // Learned while this one waited for the exchange before it: not asked again.
        if scopes.as_slice().len() > 1 && learned.multi_scope_refused() {
            return Err(Failure::Final(ErrorKind::Auth(
                "the token service refuses tokens for several scopes".into(),
            )));
        }
        let fresh = self
            .exchange(http, realm, service, scopes)
            .await
            .map_err(|e| Failure::Inner(Box::new(e)))?;
        let value = fresh.value.clone();
        *cached = Some(fresh);
        Ok(value)
    }

    /// One token exchange, retried through the one retry shape. Its failure reaches the caller
    /// as a final error, so the caller's own retry loop does not multiply these attempts.
    async fn exchange(
        &self,
        http: &reqwest::Client,
        realm: &Url,
        service: Option<&str>,
        scopes: &Scopes,
    ) -> Result<Token, Error> {
        let budget = self.gate.policy.budget();
        let call = Call::new(Operation::TokenExchange, None);
        let credentials = self.credentials_for(realm);
        with_retry(&self.gate, call, &budget, |_attempt| async {
            let request = match credentials {
                Credentials::IdentityToken { token } => {
                    let mut form = vec![
                        ("grant_type", "refresh_token".to_owned()),
                        ("refresh_token", token.expose().to_owned()),
                        ("client_id", "ferry".to_owned()),
                        ("scope", scopes.as_slice().join(" ")),
                    ];
                    if let Some(s) = service {
                        form.push(("service", s.to_owned()));
                    }
                    let body = form
                        .iter()
                        .map(|(k, v)| format!("{k}={}", urlencode(v)))
                        .collect::<Vec<_>>()
                        .join("&");
                    http.post(realm.clone())
                        .header(
                            reqwest::header::CONTENT_TYPE,
                            "application/x-www-form-urlencoded",
                        )
                        .body(body)
                }
                other => {
                    let mut url = realm.clone();
                    {
                        let mut q = url.query_pairs_mut();
                        if let Some(s) = service {
                            q.append_pair("service", s);
                        }
                        for scope in scopes.as_slice() {
                            q.append_pair("scope", scope);
                        }
                    }
                    let r = http.get(url);
                    match other {
                        Credentials::Basic { username, password } => {
                            r.header(reqwest::header::AUTHORIZATION, basic(username, password)?)
                        }
                        _ => r,
                    }
                }
            };
            let response = request
                .send()
                .await
                .map_err(|e| Failure::from_transport(&e))?;
            if !response.status().is_success() {
                let status = response.status().as_u16();
                let failure = Failure::from_response(response).await;
                return Err(match status {
                    401 | 403 => Failure::Final(ErrorKind::Auth(format!(
                        "the token service at {} refused the credentials ({})",
                        redact_url(realm.as_str()),
                        failure.reason()
                    ))),
                    _ => failure,
                });
            }
            let body = read_limited(response, 64 * 1024).await?;
            let parsed: TokenResponse = serde_json::from_slice(&body).map_err(|e| {
                Failure::Final(ErrorKind::InvalidResponse(format!(
                    "token response is not JSON: {e}"
                )))
            })?;
            let value = parsed
                .token
                .filter(|t| !t.is_empty())
                .or(parsed.access_token.filter(|t| !t.is_empty()))
                .ok_or_else(|| {
                    Failure::Final(ErrorKind::InvalidResponse(
                        "token response has neither token nor access_token".into(),
                    ))
                })?;
            Ok(Token {
                value: Secret::new(value),
                refresh_at: refresh_at(
                    Instant::now(),
                    parsed
                        .expires_in
                        .as_ref()
                        .and_then(serde_json::Value::as_u64),
                ),
            })
        })
        .await
        .map_err(|mut e| {
            e.registry = self.registry.clone();
            e
        })
    }
}

/// No token is trusted for longer than this, whatever `expires_in` says.
const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// When a token issued at `now` with `expires_in` seconds (60 when absent) is refreshed: at 90%
/// of its lifetime and at least 5 s early. The lifetime is capped, so no `expires_in` a token
/// service sends can overflow the clock.
fn refresh_at(now: Instant, expires_in: Option<u64>) -> Instant {
    let ttl = Duration::from_secs(expires_in.unwrap_or(60).max(1)).min(MAX_TOKEN_LIFETIME);
    let early = (ttl / 10).max(Duration::from_secs(5)).min(ttl);
    now.checked_add(ttl.saturating_sub(early)).unwrap_or(now)
}

/// Picks Bearer over Basic when both are offered, and checks the realm: https, or http only on
/// the host of a registry configured insecure.
fn choose_scheme(
    challenges: &[Challenge],
    insecure_host: Option<&str>,
) -> Result<AuthScheme, ErrorKind> {
    if let Some(Challenge::Bearer { realm, service, .. }) = challenges
        .iter()
        .find(|c| matches!(c, Challenge::Bearer { .. }))
    {
        let url = Url::parse(realm).map_err(|e| {
            ErrorKind::InvalidResponse(format!("token realm {realm:?} is not a URL: {e}"))
        })?;
        match url.scheme() {
            "https" => {}
            "http" if insecure_host.is_some() && url.host_str() == insecure_host => {}
            other => {
                return Err(ErrorKind::Refused(format!(
                    "token realm {} uses {other}: credentials go only over https (http only to \
                     the host of a registry configured insecure)",
                    redact_url(realm)
                )));
            }
        }
        return Ok(AuthScheme::Bearer {
            realm: url,
            service: service.clone(),
        });
    }
    if challenges
        .iter()
        .any(|c| matches!(c, Challenge::Basic { .. }))
    {
        return Ok(AuthScheme::Basic);
    }
    Err(ErrorKind::Auth(
        "the registry asked for authentication in a scheme ferry does not speak".into(),
    ))
}

fn basic(username: &str, password: &Secret) -> Result<HeaderValue, Failure> {
    let raw = format!("{username}:{}", password.expose());
    let encoded = base64::engine::general_purpose::STANDARD.encode(raw);
    header_value(&format!("Basic {encoded}"))
}

fn bearer(token: &Secret) -> Result<HeaderValue, Failure> {
    header_value(&format!("Bearer {}", token.expose()))
}

fn header_value(text: &str) -> Result<HeaderValue, Failure> {
    let mut v = HeaderValue::from_str(text).map_err(|_| {
        Failure::Final(ErrorKind::Auth(
            "credential contains characters not allowed in a header".into(),
        ))
    })?;
    v.set_sensitive(true);
    Ok(v)
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Reads a response body of at most `limit` bytes.
pub(crate) async fn read_limited(
    response: reqwest::Response,
    limit: u64,
) -> Result<Vec<u8>, Failure> {
    use futures::StreamExt;
    if let Some(len) = response.content_length()
        && len > limit
    {
        return Err(Failure::Final(ErrorKind::TooLarge {
            what: "response body",
            limit,
        }));
    }
    // Sized from what the registry declares (never past the limit, nor a hostile size in
    // advance), and trimmed at the end: a run keeps every manifest body it reads (issue 42).
    let declared = response
        .content_length()
        .unwrap_or(0)
        .min(limit)
        .min(1 << 20);
    let mut body = Vec::with_capacity(declared as usize);
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Failure::from_transport(&e))?;
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Err(Failure::Final(ErrorKind::TooLarge {
                what: "response body",
                limit,
            }));
        }
        body.extend_from_slice(&chunk);
    }
    body.shrink_to_fit();
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response whose body arrives in `chunks` of unknown total length (no size hint).
    fn streamed(chunks: Vec<Vec<u8>>) -> reqwest::Response {
        let stream = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
        reqwest::Response::from(http::Response::new(reqwest::Body::wrap_stream(stream)))
    }

    /// A real HTTP answer from a server that declares `length` and sends `body`, then closes.
    async fn served(length: &str, body: &'static [u8]) -> reqwest::Result<reqwest::Response> {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let head =
            format!("HTTP/1.1 200 OK\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n");
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut request).await;
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body).await;
            let _ = socket.shutdown().await;
        });
        reqwest::get(format!("http://{addr}/")).await
    }

    /// A hostile declared length never sizes the body in advance past what is read: at the
    /// limit with ten bytes sent it fails as a broken body (no 4 MiB kept), past the limit it is
    /// refused before a byte is read, the largest number never gets past hyper's own parser; an
    /// honest one reads whole.
    #[tokio::test]
    async fn a_declared_length_that_lies_or_overflows_is_refused_without_sizing_the_body_to_it() {
        let short = served("4194304", b"0123456789").await.unwrap();
        assert!(read_limited(short, 4 << 20).await.is_err());
        let over = served("4194305", b"0123456789").await.unwrap();
        let refused = read_limited(over, 4 << 20).await.unwrap_err();
        assert!(format!("{refused:?}").contains("TooLarge"), "{refused:?}");
        let huge = served("18446744073709551615", b"0123456789").await;
        assert!(huge.is_err(), "hyper refuses a length it cannot hold");
        let honest = served("10", b"0123456789").await.unwrap();
        let read = read_limited(honest, 4 << 20).await.unwrap();
        assert_eq!(read, b"0123456789");
        assert_eq!(read.capacity(), 10);
    }

    /// Issue 42's memory: a body kept for the run (a manifest) holds no spare capacity, whether
    /// its length was declared or it came in chunks; the limit still refuses one byte more,
    /// however the body arrives.
    #[tokio::test]
    async fn a_body_is_read_whole_up_to_its_limit_and_kept_without_spare_room() {
        let declared = reqwest::Response::from(http::Response::new(vec![7u8; 3000]));
        let read = read_limited(declared, 3000).await.unwrap();
        assert_eq!(read, vec![7u8; 3000]);
        assert_eq!(read.capacity(), read.len());

        let chunked = streamed(vec![vec![1u8; 1000], vec![2u8; 1000], vec![3u8; 700]]);
        let read = read_limited(chunked, 3000).await.unwrap();
        assert_eq!(read.len(), 2700);
        assert_eq!(&read[999..1001], &[1, 2]);
        assert_eq!(read.capacity(), read.len(), "doubling left room behind");

        let declared = reqwest::Response::from(http::Response::new(vec![7u8; 3001]));
        assert!(read_limited(declared, 3000).await.is_err());
        let chunked = streamed(vec![vec![1u8; 2000], vec![2u8; 1001]]);
        assert!(read_limited(chunked, 3000).await.is_err());
    }

    fn bearer_challenge(realm: &str) -> Challenge {
        Challenge::Bearer {
            realm: realm.into(),
            service: Some("svc".into()),
            scope: None,
            error: None,
        }
    }

    #[test]
    fn an_http_realm_is_refused_unless_it_is_the_insecure_registrys_own_origin() {
        let registry = "auth.example";
        let elsewhere = "other.example";
        let c = [bearer_challenge("http://auth.example/token")];
        assert!(matches!(
            choose_scheme(&c, None),
            Err(ErrorKind::Refused(_))
        ));
        assert!(matches!(
            choose_scheme(&c, Some(registry)),
            Ok(AuthScheme::Bearer { .. })
        ));
        assert!(matches!(
            choose_scheme(&c, Some(elsewhere)),
            Err(ErrorKind::Refused(_))
        ));
        let c = [bearer_challenge("file:///etc/passwd")];
        assert!(matches!(
            choose_scheme(&c, Some(registry)),
            Err(ErrorKind::Refused(_))
        ));
    }

    #[test]
    fn bearer_is_preferred_over_basic() {
        let c = [
            Challenge::Basic { realm: None },
            bearer_challenge("https://auth.example/token"),
        ];
        assert!(matches!(
            choose_scheme(&c, None),
            Ok(AuthScheme::Bearer { .. })
        ));
        assert_eq!(
            choose_scheme(&[Challenge::Basic { realm: None }], None),
            Ok(AuthScheme::Basic)
        );
    }

    #[test]
    fn any_expires_in_gives_a_refresh_time_without_overflow() {
        let now = Instant::now();
        for (expires_in, after) in [
            (None, 54),
            (Some(0), 0),
            (Some(1), 0),
            (Some(3600), 3240),
            (Some(18_446_744_073_709_549_568), 77_760),
            (Some(u64::MAX), 77_760),
        ] {
            let at = refresh_at(now, expires_in);
            assert_eq!(at - now, Duration::from_secs(after), "{expires_in:?}");
        }
    }

    #[test]
    fn headers_are_marked_sensitive() {
        let h = bearer(&Secret::new("tok")).unwrap();
        assert!(h.is_sensitive());
        assert!(!format!("{h:?}").contains("tok"));
    }
}
