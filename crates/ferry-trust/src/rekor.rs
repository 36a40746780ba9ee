//! Rekor evidence checked offline: the SET (signed entry timestamp) over an entry, and the
//! entry's body matching the signature it claims to log (hashedrekord, rekord, dsse).

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::error::{Result, TrustError, b64};
use crate::root::{Log, TrustedRoot};

/// One transparency-log entry as a signature carries it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The entry body, base64 as the log returned it (the SET covers this text).
    pub body_b64: String,
    /// When the log integrated the entry (Unix seconds).
    pub integrated_time: i64,
    /// The entry's index in the log.
    pub log_index: i64,
    /// The log's id.
    pub log_id: Vec<u8>,
    /// The signed entry timestamp, if the signature carries one.
    pub set: Option<Vec<u8>>,
}

/// What a body must name: the hash of what was signed, the signature, and the verifier's DER
/// (a certificate or a public key's SPKI).
pub struct Expect<'a> {
    /// SHA-256 of the signed payload (or the message digest of a message signature).
    pub payload_sha256: &'a [u8],
    /// The signature bytes.
    pub signature: &'a [u8],
    /// DER of the certificate or SPKI that verified the signature.
    pub verifier_der: &'a [u8],
}

/// Verifies the entry's SET with a log of the root; returns that log.
pub fn verify_set<'r>(root: &'r TrustedRoot, entry: &Entry) -> Result<&'r Log> {
    let set = entry
        .set
        .as_deref()
        .ok_or_else(|| TrustError::Tlog("the entry has no signed entry timestamp".into()))?;
    let log = root
        .tlog(&entry.log_id, entry.integrated_time)
        .ok_or_else(|| {
            TrustError::Tlog(format!(
                "log id {} is not a log of the trusted root",
                hex::encode(&entry.log_id)
            ))
        })?;
    // RFC 8785 canonical JSON of the four fields: keys sorted, no spaces; the strings are
    // base64 and hex, which need no escaping.
    let canonical = format!(
        "{{\"body\":{},\"integratedTime\":{},\"logID\":\"{}\",\"logIndex\":{}}}",
        Value::String(entry.body_b64.clone()),
        entry.integrated_time,
        hex::encode(&entry.log_id),
        entry.log_index
    );
    log.key.verify(canonical.as_bytes(), set).map_err(|_| {
        TrustError::Tlog(format!(
            "the SET does not verify under the key of {}",
            log.base_url
        ))
    })?;
    Ok(log)
}

fn field<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn str_at<'v>(v: &'v Value, path: &[&str]) -> Result<&'v str> {
    field(v, path)
        .and_then(Value::as_str)
        .ok_or_else(|| TrustError::Tlog(format!("the entry body has no {}", path.join("."))))
}

/// A PEM or DER verifier in a body, as DER.
fn verifier_der(b64_text: &str) -> Result<Vec<u8>> {
    let raw = b64("Rekor entry verifier", b64_text)?;
    if raw.starts_with(b"-----BEGIN") {
        Ok(crate::keys::pem_block(&raw, "Rekor entry verifier")?.1)
    } else {
        Ok(raw)
    }
}

/// Refuses an entry whose body does not log exactly this signature.
pub fn check_body(entry: &Entry, expect: &Expect<'_>) -> Result<()> {
    let body = b64("Rekor entry body", &entry.body_b64)?;
    let body: Value = serde_json::from_slice(&body).map_err(|e| TrustError::Json {
        what: "Rekor entry body",
        reason: e.to_string(),
    })?;
    let kind = str_at(&body, &["kind"])?;
    let mismatch = |what: &str| TrustError::Tlog(format!("the entry logs another {what}"));
    match kind {
        "hashedrekord" | "rekord" => {
            let alg = str_at(&body, &["spec", "data", "hash", "algorithm"])?;
            let value = str_at(&body, &["spec", "data", "hash", "value"])?;
            if alg != "sha256" || !value.eq_ignore_ascii_case(&hex::encode(expect.payload_sha256)) {
                return Err(mismatch("payload"));
            }
            let sig = b64(
                "Rekor entry signature",
                str_at(&body, &["spec", "signature", "content"])?,
            )?;
            if sig != expect.signature {
                return Err(mismatch("signature"));
            }
            let key = verifier_der(str_at(
                &body,
                &["spec", "signature", "publicKey", "content"],
            )?)?;
            if key != expect.verifier_der {
                return Err(mismatch("signer"));
            }
            Ok(())
        }
        "dsse" => {
            let value = str_at(&body, &["spec", "payloadHash", "value"])?;
            if !value.eq_ignore_ascii_case(&hex::encode(expect.payload_sha256)) {
                return Err(mismatch("payload"));
            }
            let sigs = field(&body, &["spec", "signatures"])
                .and_then(Value::as_array)
                .ok_or_else(|| TrustError::Tlog("the entry body has no spec.signatures".into()))?;
            for s in sigs {
                let (Some(sig), Some(ver)) = (
                    s.get("signature").and_then(Value::as_str),
                    s.get("verifier").and_then(Value::as_str),
                ) else {
                    continue;
                };
                if b64("Rekor entry signature", sig)? == expect.signature
                    && verifier_der(ver)? == expect.verifier_der
                {
                    return Ok(());
                }
            }
            Err(mismatch("signature or signer"))
        }
        other => Err(TrustError::Unsupported(format!(
            "Rekor entry kind {other:?}"
        ))),
    }
}

/// SHA-256 of bytes, for [`Expect::payload_sha256`].
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}
