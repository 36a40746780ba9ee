//! The cosign tag scheme (`sha256-<hex>.sig`): one layer's simple-signing payload and its
//! annotations (signature, certificate, chain, Rekor bundle), verified against a policy.

use std::collections::BTreeMap;

use ferry_distribution::Digest;
use serde::Deserialize;

use crate::cert::Cert;
use crate::error::{Result, TrustError, b64};
use crate::policy::{Claim, Material, Policy, Signed, Verified};
use crate::rekor::{Entry, sha256};

/// The layer annotation holding the base64 signature.
pub const SIGNATURE: &str = "dev.cosignproject.cosign/signature";
/// The layer annotation holding the signing certificate (PEM), for keyless signatures.
pub const CERTIFICATE: &str = "dev.sigstore.cosign/certificate";
/// The layer annotation holding the certificate chain (PEM).
pub const CHAIN: &str = "dev.sigstore.cosign/chain";
/// The layer annotation holding the Rekor bundle (SET and entry).
pub const BUNDLE: &str = "dev.sigstore.cosign/bundle";
/// The media type of a simple-signing payload layer.
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// `critical.type` as cosign writes it.
pub const COSIGN_TYPE: &str = "cosign container image signature";
/// The largest payload or annotation ferry reads from one layer.
pub const MAX_LAYER_BYTES: usize = 256 * 1024;

/// A simple-signing payload's critical part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleSigning {
    /// `critical.image.docker-manifest-digest`.
    pub manifest_digest: String,
    /// `critical.identity.docker-reference`, if present.
    pub docker_reference: Option<String>,
}

#[derive(Deserialize)]
struct RawPayload {
    critical: RawCritical,
}

#[derive(Deserialize)]
struct RawCritical {
    #[serde(rename = "type")]
    kind: String,
    image: RawImage,
    identity: Option<RawIdentity>,
}

#[derive(Deserialize)]
struct RawImage {
    #[serde(rename = "docker-manifest-digest")]
    digest: String,
}

#[derive(Deserialize)]
struct RawIdentity {
    #[serde(rename = "docker-reference")]
    reference: Option<String>,
}

/// Parses a simple-signing payload; refuses one whose `critical.type` is not cosign's.
pub fn parse_simple_signing(payload: &[u8]) -> Result<SimpleSigning> {
    if payload.len() > MAX_LAYER_BYTES {
        return Err(TrustError::TooLarge {
            what: "simple-signing payload",
            limit: MAX_LAYER_BYTES as u64,
        });
    }
    let raw: RawPayload = serde_json::from_slice(payload).map_err(|e| TrustError::Json {
        what: "simple-signing payload",
        reason: e.to_string(),
    })?;
    if raw.critical.kind != COSIGN_TYPE {
        return Err(TrustError::Unsupported(format!(
            "simple-signing type {:?}",
            raw.critical.kind
        )));
    }
    Ok(SimpleSigning {
        manifest_digest: raw.critical.image.digest,
        docker_reference: raw.critical.identity.and_then(|i| i.reference),
    })
}

/// One layer of a `.sig` manifest: its payload blob and its descriptor's annotations.
#[derive(Debug, Clone, Copy)]
pub struct CosignLayer<'a> {
    /// The payload blob (the caller fetched it by digest, so it matches the descriptor).
    pub payload: &'a [u8],
    /// The layer descriptor's annotations.
    pub annotations: &'a BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct RawRekorBundle {
    #[serde(rename = "SignedEntryTimestamp")]
    set: String,
    #[serde(rename = "Payload")]
    payload: RawRekorPayload,
}

#[derive(Deserialize)]
struct RawRekorPayload {
    body: String,
    #[serde(rename = "integratedTime")]
    integrated_time: i64,
    #[serde(rename = "logIndex")]
    log_index: i64,
    #[serde(rename = "logID")]
    log_id: String,
}

/// Parses the `dev.sigstore.cosign/bundle` annotation into a log entry.
pub fn parse_rekor_bundle(text: &str) -> Result<Entry> {
    if text.len() > MAX_LAYER_BYTES {
        return Err(TrustError::TooLarge {
            what: "Rekor bundle annotation",
            limit: MAX_LAYER_BYTES as u64,
        });
    }
    let raw: RawRekorBundle = serde_json::from_str(text).map_err(|e| TrustError::Json {
        what: "Rekor bundle annotation",
        reason: e.to_string(),
    })?;
    Ok(Entry {
        body_b64: raw.payload.body,
        integrated_time: raw.payload.integrated_time,
        log_index: raw.payload.log_index,
        log_id: hex::decode(&raw.payload.log_id).map_err(|_| TrustError::Json {
            what: "Rekor bundle annotation",
            reason: "logID is not hex".into(),
        })?,
        set: Some(b64("Rekor SET", &raw.set)?),
    })
}

impl Policy {
    /// Verifies one `.sig` layer for the image `digest`: the payload names `digest`, the
    /// signature verifies under a policy key or a trusted certificate, and the tlog rule holds.
    pub fn verify_cosign_layer(&self, digest: &Digest, layer: CosignLayer<'_>) -> Result<Verified> {
        let ss = parse_simple_signing(layer.payload)?;
        if !ss.manifest_digest.eq_ignore_ascii_case(&digest.to_string()) {
            return Err(TrustError::DigestMismatch {
                expected: digest.to_string(),
                found: ss.manifest_digest,
            });
        }
        let sig_text = layer.annotations.get(SIGNATURE).ok_or_else(|| {
            TrustError::Unsupported(format!("a layer without the {SIGNATURE} annotation"))
        })?;
        let signature = b64("cosign signature annotation", sig_text)?;
        let material = match layer
            .annotations
            .get(CERTIFICATE)
            .filter(|c| !c.trim().is_empty())
        {
            Some(pem) => Material::Certificate(Box::new(Cert::from_pem(pem.as_bytes())?)),
            None => Material::Keys,
        };
        if let Some(chain) = layer
            .annotations
            .get(CHAIN)
            .filter(|c| !c.trim().is_empty())
        {
            // Parsed so malformed input is refused; trust comes from the root, not from here.
            Cert::chain_from_pem(chain.as_bytes())?;
        }
        let entries = match layer.annotations.get(BUNDLE) {
            Some(text) => vec![parse_rekor_bundle(text)?],
            None => Vec::new(),
        };
        self.verify_claim(Claim {
            signed: Signed::Message(layer.payload),
            signature: &signature,
            material,
            entries,
            logged_sha256: sha256(layer.payload),
        })
    }
}
