//! The Sigstore TrustedRoot (`trusted_root.json`): Fulcio CAs, Rekor logs, timestamp authorities.
//! The public-good root is built in (see the crate doc for its version); a file replaces it.

use der::Decode as _;
use serde::Deserialize;
use x509_cert::Certificate;

use crate::error::{Result, TrustError, b64};
use crate::keys::PublicKey;

/// The largest trusted root ferry reads (the public-good one is under 8 KiB).
pub const MAX_ROOT_BYTES: usize = 1 << 20;

/// The public-good Sigstore trusted root, from sigstore/root-signing (see the crate doc).
pub const PUBLIC_GOOD_JSON: &str = include_str!("../data/public_good_trusted_root.json");

/// A time window in Unix seconds; `end` None is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First second of validity.
    pub start: i64,
    /// Last second of validity, if it ends.
    pub end: Option<i64>,
}

impl Window {
    /// Whether `at` lies in the window.
    pub fn contains(&self, at: i64) -> bool {
        at >= self.start && self.end.is_none_or(|end| at <= end)
    }
}

/// A certificate authority (Fulcio) or timestamp authority of the root.
#[derive(Debug, Clone)]
pub struct Authority {
    /// Its subject as the root names it, for messages.
    pub name: String,
    /// Its chain, issuing certificate first, self-signed root last.
    pub chain: Vec<Certificate>,
    /// When the root says it may be used.
    pub valid: Window,
}

/// A transparency log (Rekor) of the root.
#[derive(Debug, Clone)]
pub struct Log {
    /// Its base URL, for messages only: ferry never queries it.
    pub base_url: String,
    /// Its key: SETs and checkpoints are signed by it.
    pub key: PublicKey,
    /// Its log id (the SHA-256 of its key's SPKI DER for Rekor v1).
    pub log_id: Vec<u8>,
    /// When the root says it may be used.
    pub valid: Window,
}

/// A parsed TrustedRoot.
#[derive(Debug, Clone)]
pub struct TrustedRoot {
    /// Fulcio certificate authorities.
    pub certificate_authorities: Vec<Authority>,
    /// Rekor transparency logs.
    pub tlogs: Vec<Log>,
    /// RFC 3161 timestamp authorities (parsed; timestamps are not verified yet).
    pub timestamp_authorities: Vec<Authority>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRoot {
    media_type: Option<String>,
    #[serde(default)]
    tlogs: Vec<RawLog>,
    #[serde(default)]
    certificate_authorities: Vec<RawAuthority>,
    #[serde(default)]
    timestamp_authorities: Vec<RawAuthority>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawLog {
    #[serde(default)]
    base_url: String,
    public_key: RawKey,
    log_id: RawLogId,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawKey {
    raw_bytes: String,
    valid_for: Option<RawWindow>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawLogId {
    key_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAuthority {
    #[serde(default)]
    subject: serde_json::Value,
    cert_chain: RawChain,
    valid_for: Option<RawWindow>,
}

#[derive(Deserialize)]
struct RawChain {
    certificates: Vec<RawCert>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCert {
    raw_bytes: String,
}

#[derive(Deserialize)]
struct RawWindow {
    start: Option<String>,
    end: Option<String>,
}

fn time(what: &'static str, text: &str) -> Result<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp())
        .map_err(|e| TrustError::Json {
            what,
            reason: format!("time {text:?}: {e}"),
        })
}

fn window(raw: Option<&RawWindow>) -> Result<Window> {
    let start = match raw.and_then(|w| w.start.as_deref()) {
        Some(s) => time("trusted root validFor.start", s)?,
        None => i64::MIN,
    };
    let end = match raw.and_then(|w| w.end.as_deref()) {
        Some(s) => Some(time("trusted root validFor.end", s)?),
        None => None,
    };
    Ok(Window { start, end })
}

fn authority(raw: &RawAuthority) -> Result<Authority> {
    let mut chain = Vec::new();
    for cert in &raw.cert_chain.certificates {
        let der = b64("trusted root certificate", &cert.raw_bytes)?;
        chain.push(Certificate::from_der(&der).map_err(|e| TrustError::Der {
            what: "trusted root certificate",
            reason: e.to_string(),
        })?);
    }
    if chain.is_empty() {
        return Err(TrustError::Json {
            what: "trusted root",
            reason: "an authority with no certificate".into(),
        });
    }
    let name = match &raw.subject {
        serde_json::Value::Object(m) => m
            .get("commonName")
            .and_then(|v| v.as_str())
            .unwrap_or("(unnamed)")
            .to_string(),
        _ => "(unnamed)".to_string(),
    };
    Ok(Authority {
        name,
        chain,
        valid: window(raw.valid_for.as_ref())?,
    })
}

impl TrustedRoot {
    /// Parses `trusted_root.json` (media type `application/vnd.dev.sigstore.trustedroot+json`).
    pub fn from_json(bytes: &[u8]) -> Result<TrustedRoot> {
        if bytes.len() > MAX_ROOT_BYTES {
            return Err(TrustError::TooLarge {
                what: "trusted root",
                limit: MAX_ROOT_BYTES as u64,
            });
        }
        let raw: RawRoot = serde_json::from_slice(bytes).map_err(|e| TrustError::Json {
            what: "trusted root",
            reason: e.to_string(),
        })?;
        if let Some(media) = &raw.media_type
            && !media.starts_with("application/vnd.dev.sigstore.trustedroot")
        {
            return Err(TrustError::Json {
                what: "trusted root",
                reason: format!("media type {media:?}"),
            });
        }
        let mut tlogs = Vec::new();
        for log in &raw.tlogs {
            let der = b64("trusted root tlog key", &log.public_key.raw_bytes)?;
            tlogs.push(Log {
                base_url: log.base_url.clone(),
                key: PublicKey::from_spki_der(&der)?,
                log_id: b64("trusted root log id", &log.log_id.key_id)?,
                valid: window(log.public_key.valid_for.as_ref())?,
            });
        }
        let certificate_authorities = raw
            .certificate_authorities
            .iter()
            .map(authority)
            .collect::<Result<Vec<_>>>()?;
        let timestamp_authorities = raw
            .timestamp_authorities
            .iter()
            .map(authority)
            .collect::<Result<Vec<_>>>()?;
        Ok(TrustedRoot {
            certificate_authorities,
            tlogs,
            timestamp_authorities,
        })
    }

    /// Reads a `trusted_root.json` file (refused past [`MAX_ROOT_BYTES`] before it is read whole).
    pub fn from_file(path: &std::path::Path) -> Result<TrustedRoot> {
        use std::io::Read as _;
        let file = std::fs::File::open(path).map_err(|e| TrustError::Io {
            what: "trusted root",
            reason: format!("{}: {e}", path.display()),
        })?;
        let mut bytes = Vec::new();
        file.take(MAX_ROOT_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| TrustError::Io {
                what: "trusted root",
                reason: format!("{}: {e}", path.display()),
            })?;
        TrustedRoot::from_json(&bytes)
    }

    /// The public-good Sigstore root built into ferry.
    pub fn public_good() -> Result<TrustedRoot> {
        TrustedRoot::from_json(PUBLIC_GOOD_JSON.as_bytes())
    }

    /// The log with this id whose key was valid at `at`.
    pub fn tlog(&self, log_id: &[u8], at: i64) -> Option<&Log> {
        self.tlogs
            .iter()
            .find(|l| l.log_id == log_id && l.valid.contains(at))
    }
}
