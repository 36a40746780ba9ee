//! Who may post an event: the config's `events:` schemes, tried in turn on one request, each
//! secret compared in constant time and never logged.
//!
//! A request to `/v1/events/<segment>` is judged by the path secret alone (a wrong one is 404,
//! as if nothing were there); one to `/v1/events` must carry one of: `Authorization: Bearer
//! <token>`; GitHub's `X-Hub-Signature-256` (HMAC-SHA256 of the body with `hmac.github`, or
//! with `token` when `hmac.github` is not set, as ferry documented before per-sender keys);
//! JFrog's `X-JFrog-Event-Auth` (the secret token itself, or the hex HMAC-SHA256 of the body
//! when JFrog signs the payload with it); Nexus's `X-Nexus-Webhook-Signature` (hex HMAC-SHA1 of
//! the body); or `Authorization: Bearer <JWT>` verified against an `oidc:` sender's keys.

use ferry_config::{EventsSettings, OidcKeys};
use ferry_distribution::Secret;
use ferry_trust::{JwkSet, TokenExpectations};
use hmac::{Hmac, Mac as _};
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

/// The clock skew allowed on a token's `exp` and `nbf`.
pub const SKEW_SECONDS: i64 = 60;

/// What a request presents.
#[derive(Debug, Default, Clone, Copy)]
pub struct Presented<'a> {
    /// The segment after `/v1/events/`, when the request was sent there.
    pub path_secret: Option<&'a str>,
    /// `Authorization`.
    pub authorization: Option<&'a [u8]>,
    /// `X-Hub-Signature-256`.
    pub github: Option<&'a [u8]>,
    /// `X-JFrog-Event-Auth`.
    pub jfrog: Option<&'a [u8]>,
    /// `X-Nexus-Webhook-Signature`.
    pub nexus: Option<&'a [u8]>,
    /// The body, as received.
    pub body: &'a [u8],
}

/// The scheme a request was let in by (for the debug log and the tests; never the secret).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Token,
    PathSecret,
    GitHub,
    JFrog,
    Nexus,
    Oidc,
}

/// The verdict on a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let in.
    Allowed(Scheme),
    /// A path secret that is not the configured one (or none is configured): 404.
    NotFound,
    /// No scheme matched: 401.
    Unauthorized,
}

/// Whether two byte strings are equal, in time independent of where they differ (both hashed
/// first, so their lengths do not show either).
fn same(given: &[u8], secret: &Secret) -> bool {
    let (a, b) = (Sha256::digest(given), Sha256::digest(secret.expose()));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

fn hmac_sha256_ok(key: &Secret, body: &[u8], hex_given: &[u8]) -> bool {
    let Ok(expected) = hex::decode(hex_given) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key.expose().as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn hmac_sha1_ok(key: &Secret, body: &[u8], hex_given: &[u8]) -> bool {
    let Ok(expected) = hex::decode(hex_given) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(key.expose().as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

/// Judges a request against `settings`; `fetched` gives the keys of a `jwks_url` sender (by its
/// index in `settings.oidc`) when the watch has them; `now` is seconds since the epoch.
pub fn judge(
    settings: &EventsSettings,
    p: &Presented<'_>,
    fetched: &dyn Fn(usize) -> Option<JwkSet>,
    now: i64,
) -> Verdict {
    if let Some(segment) = p.path_secret {
        return match &settings.path_secret {
            Some(secret) if same(segment.as_bytes(), secret) => {
                Verdict::Allowed(Scheme::PathSecret)
            }
            _ => Verdict::NotFound,
        };
    }
    let bearer = p
        .authorization
        .and_then(|a| a.strip_prefix(b"Bearer ".as_slice()))
        .filter(|b| !b.is_empty());
    if let (Some(given), Some(token)) = (bearer, &settings.token)
        && same(given, token)
    {
        return Verdict::Allowed(Scheme::Token);
    }
    if let Some(hex) = p.github.and_then(|s| s.strip_prefix(b"sha256=".as_slice()))
        && let Some(key) = settings.github.as_ref().or(settings.token.as_ref())
        && hmac_sha256_ok(key, p.body, hex)
    {
        return Verdict::Allowed(Scheme::GitHub);
    }
    if let (Some(given), Some(key)) = (p.jfrog, &settings.jfrog)
        && (same(given, key) || hmac_sha256_ok(key, p.body, given))
    {
        return Verdict::Allowed(Scheme::JFrog);
    }
    if let (Some(given), Some(key)) = (p.nexus, &settings.nexus)
        && hmac_sha1_ok(key, p.body, given)
    {
        return Verdict::Allowed(Scheme::Nexus);
    }
    if let Some(jwt) = bearer.and_then(|b| std::str::from_utf8(b).ok())
        && jwt.matches('.').count() == 2
    {
        for (i, sender) in settings.oidc.iter().enumerate() {
            let keys = match &sender.keys {
                OidcKeys::File { set, .. } => Some(set.clone()),
                OidcKeys::Url(_) => fetched(i),
            };
            let Some(keys) = keys else { continue };
            let expected = TokenExpectations {
                issuer: &sender.issuer,
                audience: &sender.audience,
                subject: &sender.subject,
                now,
                skew: SKEW_SECONDS,
            };
            match keys.verify(jwt) {
                Ok(claims) => match ferry_trust::jwt::check_claims(&claims, &expected) {
                    Ok(()) => return Verdict::Allowed(Scheme::Oidc),
                    Err(e) => tracing::debug!("watch: an event's token was refused: {e}"),
                },
                Err(e) => tracing::debug!("watch: an event's token did not verify: {e}"),
            }
        }
    }
    Verdict::Unauthorized
}

#[cfg(test)]
mod tests;
