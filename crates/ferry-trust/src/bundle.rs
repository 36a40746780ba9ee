//! Sigstore bundles v0.1 to v0.3 attached as OCI referrers: a message signature over the
//! manifest digest or a DSSE in-toto statement whose subject is the digest, with its tlog entries.

use std::io::Read;

use ferry_distribution::Digest;
use serde::Deserialize;
use serde_json::Value;

use crate::cert::Cert;
use crate::error::{Result, TrustError, b64};
use crate::policy::{Claim, Material, Policy, Signed, Verified};
use crate::rekor::{Entry, sha256};

/// The artifact type of a v0.3 bundle referrer.
pub const BUNDLE_V03_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The largest bundle ferry reads (4 MiB): anything larger is refused before it is parsed.
pub const MAX_BUNDLE_BYTES: u64 = 4 << 20;
/// The DSSE payload type of in-toto statements.
pub const IN_TOTO: &str = "application/vnd.in-toto+json";

/// Refuses a bundle whose declared size (its descriptor's) is over the bound, before any read.
pub fn check_declared_size(size: u64) -> Result<()> {
    if size > MAX_BUNDLE_BYTES {
        return Err(TrustError::TooLarge {
            what: "Sigstore bundle",
            limit: MAX_BUNDLE_BYTES,
        });
    }
    Ok(())
}

/// Reads a bundle from `reader`, stopping with an error once it passes the bound.
pub fn read_bounded(reader: impl Read) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    reader
        .take(MAX_BUNDLE_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| TrustError::Io {
            what: "Sigstore bundle",
            reason: e.to_string(),
        })?;
    if out.len() as u64 > MAX_BUNDLE_BYTES {
        return Err(TrustError::TooLarge {
            what: "Sigstore bundle",
            limit: MAX_BUNDLE_BYTES,
        });
    }
    Ok(out)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBundle {
    media_type: String,
    verification_material: RawMaterial,
    message_signature: Option<RawMessageSignature>,
    dsse_envelope: Option<RawEnvelope>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMaterial {
    certificate: Option<RawCert>,
    x509_certificate_chain: Option<RawChain>,
    public_key: Option<Value>,
    #[serde(default)]
    tlog_entries: Vec<RawTlogEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCert {
    raw_bytes: String,
}

#[derive(Deserialize)]
struct RawChain {
    certificates: Vec<RawCert>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTlogEntry {
    log_index: Value,
    log_id: RawLogId,
    integrated_time: Value,
    inclusion_promise: Option<RawPromise>,
    inclusion_proof: Option<RawProof>,
    canonicalized_body: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawProof {
    log_index: Value,
    root_hash: String,
    tree_size: Value,
    #[serde(default)]
    hashes: Vec<String>,
    checkpoint: RawCheckpoint,
}

#[derive(Deserialize)]
struct RawCheckpoint {
    envelope: String,
}

fn proof(raw: &RawProof) -> Result<crate::inclusion::Proof> {
    let unsigned = |what, v| {
        u64::try_from(int(what, v)?).map_err(|_| TrustError::Json {
            what,
            reason: "negative".into(),
        })
    };
    Ok(crate::inclusion::Proof {
        log_index: unsigned("inclusion proof logIndex", &raw.log_index)?,
        tree_size: unsigned("inclusion proof treeSize", &raw.tree_size)?,
        root_hash: b64("inclusion proof root hash", &raw.root_hash)?,
        hashes: raw
            .hashes
            .iter()
            .map(|h| b64("inclusion proof hash", h))
            .collect::<Result<_>>()?,
        checkpoint: raw.checkpoint.envelope.clone(),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawLogId {
    key_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPromise {
    signed_entry_timestamp: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMessageSignature {
    message_digest: Option<RawHash>,
    signature: String,
}

#[derive(Deserialize)]
struct RawHash {
    algorithm: String,
    digest: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEnvelope {
    payload: String,
    payload_type: String,
    signatures: Vec<RawDsseSig>,
}

#[derive(Deserialize)]
struct RawDsseSig {
    sig: String,
}

/// Proto JSON writes int64 as a string; older writers as a number.
fn int(what: &'static str, v: &Value) -> Result<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| TrustError::Json {
        what,
        reason: "not an integer".into(),
    })
}

/// The DSSE pre-authentication encoding the envelope's signature covers.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// Whether an in-toto statement names `digest` among its subjects.
fn statement_names(statement: &[u8], digest: &Digest) -> Result<()> {
    let v: Value = serde_json::from_slice(statement).map_err(|e| TrustError::Json {
        what: "in-toto statement",
        reason: e.to_string(),
    })?;
    let kind = v.get("_type").and_then(Value::as_str).unwrap_or_default();
    if !kind.starts_with("https://in-toto.io/Statement/") {
        return Err(TrustError::Unsupported(format!(
            "in-toto statement type {kind:?}"
        )));
    }
    let subjects = v
        .get("subject")
        .and_then(Value::as_array)
        .ok_or_else(|| TrustError::Json {
            what: "in-toto statement",
            reason: "no subject".into(),
        })?;
    let alg = digest.algorithm().to_string();
    let mut found = Vec::new();
    for s in subjects {
        if let Some(h) = s
            .get("digest")
            .and_then(|d| d.get(alg.as_str()))
            .and_then(Value::as_str)
        {
            if h.eq_ignore_ascii_case(digest.hex()) {
                return Ok(());
            }
            found.push(format!("{alg}:{h}"));
        }
    }
    Err(TrustError::DigestMismatch {
        expected: digest.to_string(),
        found: if found.is_empty() {
            "no subject digest".into()
        } else {
            found.join(", ")
        },
    })
}

impl Policy {
    /// Verifies a Sigstore bundle (v0.1 to v0.3) for the image `digest`. The caller bounds the
    /// read with [`check_declared_size`] and [`read_bounded`]; this refuses longer input too.
    pub fn verify_bundle(&self, digest: &Digest, bytes: &[u8]) -> Result<Verified> {
        if bytes.len() as u64 > MAX_BUNDLE_BYTES {
            return Err(TrustError::TooLarge {
                what: "Sigstore bundle",
                limit: MAX_BUNDLE_BYTES,
            });
        }
        let raw: RawBundle = serde_json::from_slice(bytes).map_err(|e| TrustError::Json {
            what: "Sigstore bundle",
            reason: e.to_string(),
        })?;
        if !raw
            .media_type
            .starts_with("application/vnd.dev.sigstore.bundle")
        {
            return Err(TrustError::Unsupported(format!(
                "bundle media type {:?}",
                raw.media_type
            )));
        }
        let vm = &raw.verification_material;
        let material = if let Some(cert) = &vm.certificate {
            Material::Certificate(Box::new(Cert::from_der(&b64(
                "bundle certificate",
                &cert.raw_bytes,
            )?)?))
        } else if let Some(chain) = &vm.x509_certificate_chain {
            let first = chain.certificates.first().ok_or_else(|| TrustError::Json {
                what: "Sigstore bundle",
                reason: "empty certificate chain".into(),
            })?;
            Material::Certificate(Box::new(Cert::from_der(&b64(
                "bundle certificate",
                &first.raw_bytes,
            )?)?))
        } else if vm.public_key.is_some() {
            Material::Keys
        } else {
            return Err(TrustError::Json {
                what: "Sigstore bundle",
                reason: "no verification material".into(),
            });
        };
        let mut entries = Vec::new();
        for e in &vm.tlog_entries {
            if let Some(raw) = &e.inclusion_proof {
                // A proof that is present must hold, SET or not.
                let body = b64("tlog entry body", &e.canonicalized_body)?;
                let at = int("tlog entry integratedTime", &e.integrated_time)?;
                let log_id = b64("tlog entry log id", &e.log_id.key_id)?;
                crate::inclusion::verify(&self.root, &log_id, at, &body, &proof(raw)?)?;
            }
            entries.push(Entry {
                body_b64: e.canonicalized_body.clone(),
                integrated_time: int("tlog entry integratedTime", &e.integrated_time)?,
                log_index: int("tlog entry logIndex", &e.log_index)?,
                log_id: b64("tlog entry log id", &e.log_id.key_id)?,
                set: match &e.inclusion_promise {
                    Some(p) => Some(b64("tlog entry SET", &p.signed_entry_timestamp)?),
                    None => None,
                },
            });
        }
        match (&raw.message_signature, &raw.dsse_envelope) {
            (Some(ms), None) => {
                let hash = ms.message_digest.as_ref().ok_or_else(|| TrustError::Json {
                    what: "Sigstore bundle",
                    reason: "no messageDigest".into(),
                })?;
                if hash.algorithm != "SHA2_256" {
                    return Err(TrustError::Unsupported(format!(
                        "message digest {:?}",
                        hash.algorithm
                    )));
                }
                let got = b64("bundle message digest", &hash.digest)?;
                if hex::encode(&got) != digest.hex().to_ascii_lowercase() {
                    return Err(TrustError::DigestMismatch {
                        expected: digest.to_string(),
                        found: format!("sha256:{}", hex::encode(&got)),
                    });
                }
                let signature = b64("bundle signature", &ms.signature)?;
                let mut logged = [0u8; 32];
                logged.copy_from_slice(&got);
                self.verify_claim(Claim {
                    signed: Signed::Sha256(&got),
                    signature: &signature,
                    material,
                    entries,
                    logged_sha256: logged,
                })
            }
            (None, Some(env)) => {
                if env.payload_type != IN_TOTO {
                    return Err(TrustError::Unsupported(format!(
                        "DSSE payload type {:?}",
                        env.payload_type
                    )));
                }
                let [sig] = env.signatures.as_slice() else {
                    return Err(TrustError::Unsupported(
                        "a DSSE envelope without exactly one signature".into(),
                    ));
                };
                let payload = b64("DSSE payload", &env.payload)?;
                statement_names(&payload, digest)?;
                let signature = b64("DSSE signature", &sig.sig)?;
                let signed = pae(&env.payload_type, &payload);
                self.verify_claim(Claim {
                    signed: Signed::Message(&signed),
                    signature: &signature,
                    material,
                    entries,
                    logged_sha256: sha256(&payload),
                })
            }
            _ => Err(TrustError::Json {
                what: "Sigstore bundle",
                reason: "neither exactly a messageSignature nor a dsseEnvelope".into(),
            }),
        }
    }
}
