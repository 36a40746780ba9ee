//! JSON Web Tokens (RFC 7519) in compact JWS form (RFC 7515), signed RS256 or ES256 (RFC 7518),
//! verified offline against a JWK Set (RFC 7517); then their claims held to what the caller expects.
//!
//! Only `RS256` (RSASSA-PKCS1-v1_5 with SHA-256, a key of 2048 bits or more) and `ES256` (ECDSA
//! P-256 with SHA-256, the 64-byte `r || s` signature of RFC 7518 §3.4) are accepted; `none`,
//! HMAC and every other algorithm are refused, whatever the key set holds.

use base64::Engine as _;
use ecdsa::signature::Verifier as _;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::error::{Result, TrustError};
use crate::keys::PublicKey;

/// The longest token read; anything longer is refused before it is decoded.
pub const MAX_TOKEN: usize = 16 * 1024;
/// The most keys one set may hold.
pub const MAX_KEYS: usize = 64;

/// One verification key of a set, with the `kid` it is chosen by.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Jwk {
    kid: Option<String>,
    key: PublicKey,
}

/// The keys a token may be signed with: RSA (`kty: RSA`, `n`, `e`) and P-256 (`kty: EC`,
/// `crv: P-256`, `x`, `y`) keys of a JWK Set; keys of other kinds or marked `use: enc` are
/// skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwkSet {
    keys: Vec<Jwk>,
}

/// What a token's claims must say.
#[derive(Debug, Clone, Copy)]
pub struct TokenExpectations<'a> {
    /// `iss`, exactly.
    pub issuer: &'a str,
    /// One of `aud` (a string or a list).
    pub audience: &'a str,
    /// `email` or `sub`, exactly.
    pub subject: &'a str,
    /// Now, in seconds since the epoch.
    pub now: i64,
    /// The clock skew allowed on `exp` and `nbf`, in seconds.
    pub skew: i64,
}

fn b64url(what: &'static str, text: &str) -> Result<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| TrustError::Base64 { what })
}

fn refused(reason: impl Into<String>) -> TrustError {
    TrustError::Token(reason.into())
}

impl JwkSet {
    /// A JWK Set (`{"keys": [...]}`) in JSON; an error if it holds no key ferry can verify with.
    pub fn from_json(bytes: &[u8]) -> Result<JwkSet> {
        let json = |reason: String| TrustError::Json {
            what: "JWK set",
            reason,
        };
        let value: Value = serde_json::from_slice(bytes).map_err(|e| json(e.to_string()))?;
        let keys = value
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| json("no \"keys\" list".into()))?;
        if keys.len() > MAX_KEYS {
            return Err(json(format!("{} keys, more than {MAX_KEYS}", keys.len())));
        }
        let mut out = Vec::new();
        for k in keys {
            if k.get("use").and_then(Value::as_str) == Some("enc") {
                continue;
            }
            let field = |name: &str| k.get(name).and_then(Value::as_str);
            let key = match (field("kty"), field("crv")) {
                (Some("RSA"), _) => {
                    let (Some(n), Some(e)) = (field("n"), field("e")) else {
                        return Err(json("an RSA key without n or e".into()));
                    };
                    let n = rsa::BigUint::from_bytes_be(&b64url("JWK n", n)?);
                    let e = rsa::BigUint::from_bytes_be(&b64url("JWK e", e)?);
                    let key = rsa::RsaPublicKey::new(n, e)
                        .map_err(|e| TrustError::UnsupportedKey(format!("JWK RSA key: {e}")))?;
                    if rsa::traits::PublicKeyParts::size(&key) < 256 {
                        return Err(TrustError::UnsupportedKey("RSA key under 2048 bits".into()));
                    }
                    PublicKey::Rsa(key)
                }
                (Some("EC"), Some("P-256")) => {
                    let (Some(x), Some(y)) = (field("x"), field("y")) else {
                        return Err(json("an EC key without x or y".into()));
                    };
                    let (x, y) = (b64url("JWK x", x)?, b64url("JWK y", y)?);
                    if x.len() != 32 || y.len() != 32 {
                        return Err(json("a P-256 coordinate not 32 bytes".into()));
                    }
                    let point = p256::EncodedPoint::from_affine_coordinates(
                        x.as_slice().into(),
                        y.as_slice().into(),
                        false,
                    );
                    let key =
                        p256::ecdsa::VerifyingKey::from_encoded_point(&point).map_err(|_| {
                            TrustError::UnsupportedKey("JWK P-256 point off the curve".into())
                        })?;
                    PublicKey::P256(key)
                }
                _ => continue,
            };
            out.push(Jwk {
                kid: field("kid").map(str::to_owned),
                key,
            });
        }
        if out.is_empty() {
            return Err(json("no RSA or P-256 signing key".into()));
        }
        Ok(JwkSet { keys: out })
    }

    /// How many keys the set holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the set holds no key (never true of a set [`JwkSet::from_json`] returned).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The claims of `token` once its signature verifies under a key of the set (the one its
    /// `kid` names, or any of the algorithm's kind when it names none). Claims are not checked.
    pub fn verify(&self, token: &str) -> Result<Map<String, Value>> {
        if token.len() > MAX_TOKEN {
            return Err(TrustError::TooLarge {
                what: "token",
                limit: MAX_TOKEN as u64,
            });
        }
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(refused("not a compact JWS (three dot-separated parts)"));
        };
        let header: Value = serde_json::from_slice(&b64url("JWS header", header)?)
            .map_err(|e| refused(format!("header is not JSON: {e}")))?;
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kid = header.get("kid").and_then(Value::as_str);
        let signature = b64url("JWS signature", signature)?;
        let signed = token.rsplit_once('.').map_or("", |(s, _)| s).as_bytes();
        let verifies = |key: &PublicKey| match (alg, key) {
            ("RS256", PublicKey::Rsa(k)) => k
                .verify(
                    rsa::Pkcs1v15Sign::new::<Sha256>(),
                    &Sha256::digest(signed),
                    &signature,
                )
                .is_ok(),
            ("ES256", PublicKey::P256(k)) => p256::ecdsa::Signature::from_slice(&signature)
                .is_ok_and(|s| k.verify(signed, &s).is_ok()),
            _ => false,
        };
        if !matches!(alg, "RS256" | "ES256") {
            return Err(refused(format!("algorithm {alg:?} (only RS256 and ES256)")));
        }
        let ok = self
            .keys
            .iter()
            .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
            .any(|k| verifies(&k.key));
        if !ok {
            return Err(TrustError::BadSignature { what: "token" });
        }
        let claims: Value = serde_json::from_slice(&b64url("JWT claims", payload)?)
            .map_err(|e| refused(format!("claims are not JSON: {e}")))?;
        match claims {
            Value::Object(map) => Ok(map),
            _ => Err(refused("claims are not a JSON object")),
        }
    }
}

/// Whether `claims` say what `expected` asks: `iss` equal, `aud` holding the audience, `exp`
/// present and not past (with the skew), `nbf` (when present) not ahead, and `email` or `sub`
/// equal to the subject.
pub fn check_claims(claims: &Map<String, Value>, expected: &TokenExpectations<'_>) -> Result<()> {
    let text = |name: &str| claims.get(name).and_then(Value::as_str);
    if text("iss") != Some(expected.issuer) {
        return Err(refused("issuer (iss) is not the one configured"));
    }
    let audience_ok = match claims.get("aud") {
        Some(Value::String(a)) => a == expected.audience,
        Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(expected.audience)),
        _ => false,
    };
    if !audience_ok {
        return Err(refused("audience (aud) is not the one configured"));
    }
    let time = |name: &str| claims.get(name).and_then(Value::as_i64);
    match time("exp") {
        Some(exp) if expected.now <= exp.saturating_add(expected.skew) => {}
        Some(_) => return Err(refused("expired (exp)")),
        None => return Err(refused("no expiry (exp)")),
    }
    if time("nbf").is_some_and(|nbf| expected.now < nbf.saturating_sub(expected.skew)) {
        return Err(refused("not yet valid (nbf)"));
    }
    if text("email") != Some(expected.subject) && text("sub") != Some(expected.subject) {
        return Err(refused("subject (email or sub) is not the one configured"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
