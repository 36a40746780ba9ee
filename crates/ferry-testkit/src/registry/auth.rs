//! Bearer-token auth of the test registry: the `/token` endpoint that grants scopes, and the
//! per-request check that answers 401 with a `WWW-Authenticate: Bearer` challenge.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use rand::Rng as _;
use tokio::time::Instant;

/// The service name the registry's challenges and tokens use.
pub const TOKEN_SERVICE: &str = "testkit";

/// Token auth settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenAuthConfig {
    /// `(username, password)` pairs granted `pull,push` on any repository.
    pub users: Vec<(String, String)>,
    /// Whether requests without credentials are granted `pull`.
    pub anonymous_pull: bool,
    /// Token lifetime (`expires_in`), on the tokio clock.
    pub token_ttl_secs: u64,
}

/// One access the request needs: `actions` on repository `repo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Need {
    pub(crate) repo: String,
    pub(crate) actions: &'static [&'static str],
}

#[derive(Debug)]
struct Grant {
    scopes: HashMap<String, BTreeSet<String>>,
    expires: Instant,
}

/// Why a token request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenRefusal {
    /// Basic credentials were sent but do not match a user.
    BadCredentials,
}

/// A granted token, ready to be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IssuedToken {
    pub(crate) token: String,
    pub(crate) expires_in: u64,
}

/// Auth state shared by all requests.
#[derive(Debug)]
pub(crate) struct AuthState {
    config: TokenAuthConfig,
    tokens: Mutex<HashMap<String, Grant>>,
}

fn parse_basic(authorization: &str) -> Option<(String, String)> {
    let encoded = authorization
        .strip_prefix("Basic ")
        .or_else(|| authorization.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// Parses `repository:NAME:a,b` into `(NAME, [a, b])`; other scope types are ignored.
fn parse_scope(scope: &str) -> Option<(String, Vec<String>)> {
    let rest = scope.strip_prefix("repository:")?;
    let (name, actions) = rest.rsplit_once(':')?;
    if name.is_empty() {
        return None;
    }
    Some((
        name.to_string(),
        actions
            .split(',')
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect(),
    ))
}

impl AuthState {
    pub(crate) fn new(config: TokenAuthConfig) -> Self {
        AuthState {
            config,
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// Grants the intersection of the requested scopes and what the caller may do.
    pub(crate) fn issue(
        &self,
        authorization: Option<&str>,
        scopes: &[String],
    ) -> Result<IssuedToken, TokenRefusal> {
        let allowed: &[&str] = match authorization.and_then(parse_basic) {
            Some((user, password)) => {
                let known = self
                    .config
                    .users
                    .iter()
                    .any(|(u, p)| *u == user && *p == password);
                if !known {
                    return Err(TokenRefusal::BadCredentials);
                }
                &["pull", "push", "delete"]
            }
            None if authorization.is_some_and(|a| a.starts_with("Basic ")) => {
                return Err(TokenRefusal::BadCredentials);
            }
            None if self.config.anonymous_pull => &["pull"],
            None => &[],
        };
        let mut granted: HashMap<String, BTreeSet<String>> = HashMap::new();
        for scope in scopes.iter().flat_map(|s| s.split(' ')) {
            if let Some((repo, actions)) = parse_scope(scope) {
                let entry = granted.entry(repo).or_default();
                for action in actions {
                    if allowed.contains(&action.as_str()) {
                        entry.insert(action);
                    }
                }
            }
        }
        let token = hex::encode(rand::rng().random::<[u8; 24]>());
        let ttl = self.config.token_ttl_secs;
        let grant = Grant {
            scopes: granted,
            expires: Instant::now() + Duration::from_secs(ttl),
        };
        let mut tokens = match self.tokens.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        tokens.insert(token.clone(), grant);
        Ok(IssuedToken {
            token,
            expires_in: ttl,
        })
    }

    /// `Ok` when the bearer token grants every need; otherwise the `WWW-Authenticate` value.
    pub(crate) fn check(
        &self,
        base_url: &str,
        authorization: Option<&str>,
        needs: &[Need],
    ) -> Result<(), String> {
        let bearer = authorization.and_then(|a| {
            a.strip_prefix("Bearer ")
                .or_else(|| a.strip_prefix("bearer "))
        });
        let error = match bearer {
            None => None,
            Some(token) => {
                let tokens = match self.tokens.lock() {
                    Ok(guard) => guard,
                    Err(poisoned) => poisoned.into_inner(),
                };
                match tokens.get(token.trim()) {
                    None => Some("invalid_token"),
                    Some(grant) if grant.expires <= Instant::now() => Some("invalid_token"),
                    Some(grant) => {
                        let covered = needs.iter().all(|need| {
                            grant
                                .scopes
                                .get(&need.repo)
                                .is_some_and(|have| need.actions.iter().all(|a| have.contains(*a)))
                        });
                        if covered {
                            return Ok(());
                        }
                        Some("insufficient_scope")
                    }
                }
            }
        };
        let mut challenge =
            format!("Bearer realm=\"{base_url}/token\",service=\"{TOKEN_SERVICE}\"");
        if !needs.is_empty() {
            let scope = needs
                .iter()
                .map(|n| format!("repository:{}:{}", n.repo, n.actions.join(",")))
                .collect::<Vec<_>>()
                .join(" ");
            challenge.push_str(&format!(",scope=\"{scope}\""));
        }
        if let Some(error) = error {
            challenge.push_str(&format!(",error=\"{error}\""));
        }
        Err(challenge)
    }
}
