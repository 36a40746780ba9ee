//! `events:` resolved: who may post push notifications to `ferry watch` (a bearer token, a path
//! secret, per-sender HMAC keys, OIDC issuers with their keys) and how many events may wait.
//!
//! Every secret is held as a [`Secret`] of at least 16 characters (a shorter one is an error at
//! its field, never quoted); an OIDC sender's `jwks_file` is read and parsed here (bounded,
//! relative to the config file), so a bad key set is reported at its field when the config is
//! read; a `jwks_url` is only checked to be a URL, and fetched by the watch.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use ferry_distribution::Secret;
use ferry_trust::JwkSet;
use schemars::JsonSchema;
use serde::Deserialize;

use super::check::Checker;
use super::locate::FieldPath;
use super::raw::RawEvents;

/// `events.hmac:`: the keys senders that sign the body use.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawEventsHmac {
    /// GitHub's webhook secret: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`.
    #[serde(default)]
    pub github: Option<String>,
    /// JFrog's webhook secret token: `X-JFrog-Event-Auth`, the token itself or (with "use
    /// secret for payload signing") the hex HMAC-SHA256 of the body.
    #[serde(default)]
    pub jfrog: Option<String>,
    /// Nexus's webhook secret key: `X-Nexus-Webhook-Signature`, the hex HMAC-SHA1 of the body.
    #[serde(default)]
    pub nexus: Option<String>,
}

/// One `events.oidc:` sender: a JWT in `Authorization: Bearer` from this issuer, for this
/// audience, naming this subject.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOidc {
    /// The token's `iss`, exactly (`https://accounts.google.com`, `https://issuer.enforce.dev`).
    pub issuer: String,
    /// One of the token's `aud` (Pub/Sub push: the audience set on the subscription).
    pub audience: String,
    /// The token's `email` or `sub`, exactly (Pub/Sub: the push service account's email).
    pub subject: String,
    /// A JWK Set file (`{"keys": [...]}`), relative to the config file: keys read offline.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// A JWK Set URL (https), fetched by `ferry watch` and cached.
    #[serde(default)]
    pub jwks_url: Option<String>,
}

/// `events:` as the watch uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventsSettings {
    /// `Authorization: Bearer <token>`.
    pub token: Option<Secret>,
    /// `POST /v1/events/<path_secret>`, for senders that cannot set a header.
    pub path_secret: Option<Secret>,
    /// GitHub's HMAC key (`X-Hub-Signature-256`).
    pub github: Option<Secret>,
    /// JFrog's secret token (`X-JFrog-Event-Auth`).
    pub jfrog: Option<Secret>,
    /// Nexus's secret key (`X-Nexus-Webhook-Signature`).
    pub nexus: Option<Secret>,
    /// OIDC senders, in file order.
    pub oidc: Vec<OidcSender>,
    /// Events waiting to be synced at most.
    pub queue: usize,
}

/// One OIDC sender, its keys read or to be fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OidcSender {
    /// `iss`.
    pub issuer: String,
    /// `aud`.
    pub audience: String,
    /// `email` or `sub`.
    pub subject: String,
    /// Where the keys come from.
    pub keys: OidcKeys,
}

/// An OIDC sender's keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OidcKeys {
    /// Read from `jwks_file` when the config was loaded.
    File { path: PathBuf, set: JwkSet },
    /// To be fetched from `jwks_url`.
    Url(String),
}

/// The largest JWK Set file read.
pub const MAX_JWKS_FILE: u64 = 256 * 1024;

const SHORT: &str =
    "must be at least 16 characters (write it as \"${VAR}\" and set a long random value there)";

impl Checker<'_> {
    /// `events:`: each secret long enough not to be guessed, at least one way in, each OIDC
    /// sender's keys, and a queue of at least one.
    pub fn resolve_events(&mut self, path: &FieldPath, raw: RawEvents) -> Option<EventsSettings> {
        let before = self.problems.len();
        let secret = |checker: &mut Self, at: FieldPath, value: Option<String>| {
            let value = value?;
            let value = value.trim();
            if value.chars().count() < 16 {
                checker.fail(&at, format!("the secret {SHORT}"));
                return None;
            }
            Some(Secret::new(value))
        };
        let token = secret(self, path.key("token"), raw.token);
        let path_secret = secret(self, path.key("path_secret"), raw.path_secret);
        if let Some(p) = &path_secret
            && !p
                .expose()
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b))
        {
            self.fail(
                &path.key("path_secret"),
                "the path secret may hold only letters, digits and - _ . ~ (it is a URL path segment)",
            );
        }
        let hmac = raw.hmac.unwrap_or_default();
        let at = path.key("hmac");
        let github = secret(self, at.key("github"), hmac.github);
        let jfrog = secret(self, at.key("jfrog"), hmac.jfrog);
        let nexus = secret(self, at.key("nexus"), hmac.nexus);
        let oidc: Vec<OidcSender> = raw
            .oidc
            .into_iter()
            .enumerate()
            .filter_map(|(i, o)| self.oidc_sender(&path.key("oidc").index(i), o))
            .collect();
        let queue = self.at_least_one(&path.key("queue"), raw.queue, super::DEFAULT_EVENTS_QUEUE);
        if self.problems.len() != before {
            return None;
        }
        if token.is_none()
            && path_secret.is_none()
            && github.is_none()
            && jfrog.is_none()
            && nexus.is_none()
            && oidc.is_empty()
        {
            self.fail(
                path,
                "events: needs at least one way in: token, path_secret, hmac or oidc",
            );
            return None;
        }
        Some(EventsSettings {
            token,
            path_secret,
            github,
            jfrog,
            nexus,
            oidc,
            queue,
        })
    }

    fn oidc_sender(&mut self, path: &FieldPath, raw: RawOidc) -> Option<OidcSender> {
        let mut ok = true;
        for (field, value) in [
            ("issuer", &raw.issuer),
            ("audience", &raw.audience),
            ("subject", &raw.subject),
        ] {
            if value.trim().is_empty() {
                self.fail(&path.key(field), format!("{field} must not be empty"));
                ok = false;
            }
        }
        let keys = match (raw.jwks_file, raw.jwks_url) {
            (Some(file), None) => {
                let full = beside(self.file, &file);
                match read_jwks(&full) {
                    Ok(set) => Some(OidcKeys::File { path: full, set }),
                    Err(message) => {
                        self.fail(&path.key("jwks_file"), message);
                        None
                    }
                }
            }
            (None, Some(url)) => {
                let loopback = ["http://127.0.0.1", "http://[::1]", "http://localhost"]
                    .iter()
                    .any(|p| url.starts_with(p));
                if url.starts_with("https://") || loopback {
                    Some(OidcKeys::Url(url))
                } else {
                    self.fail(
                        &path.key("jwks_url"),
                        "jwks_url must be an https:// URL (http:// only on loopback)",
                    );
                    None
                }
            }
            _ => {
                self.fail(path, "give exactly one of jwks_file and jwks_url");
                None
            }
        };
        let keys = keys.filter(|_| ok)?;
        Some(OidcSender {
            issuer: raw.issuer,
            audience: raw.audience,
            subject: raw.subject,
            keys,
        })
    }
}

/// A path of the config, taken relative to the config file's directory.
fn beside(config: &Path, path: &Path) -> PathBuf {
    match (path.is_absolute(), config.parent()) {
        (false, Some(dir)) => dir.join(path),
        _ => path.to_path_buf(),
    }
}

/// A JWK Set file, bounded, parsed by ferry-trust.
fn read_jwks(path: &Path) -> Result<JwkSet, String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_JWKS_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > MAX_JWKS_FILE {
        return Err(format!(
            "{shown}: larger than {MAX_JWKS_FILE} bytes, not a key set"
        ));
    }
    JwkSet::from_json(&bytes).map_err(|e| format!("{shown}: {e}"))
}
