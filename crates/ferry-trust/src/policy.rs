//! A signature policy (keys, keyless identities, trusted root, tlog rule) and the checks every
//! signature scheme shares: which key or identity signed, and the Rekor evidence for it.

use std::sync::Arc;

use crate::cert::{Cert, chain_to_root};
use crate::error::{Result, TrustError};
use crate::keys::{Fingerprint, HashAlg, PublicKey};
use crate::rekor::{self, Entry, Expect};
use crate::root::TrustedRoot;

/// Must a transparency-log entry prove the signature?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlogPolicy {
    /// A SET from a log of the trusted root must cover the signature.
    Require,
    /// No log entry needed (keys only: keyless signatures always need one).
    Skip,
}

/// How a certificate subject is matched.
#[derive(Debug, Clone)]
pub enum SubjectMatch {
    /// Exactly this SAN URI or email.
    Exact(String),
    /// A regular expression over the SAN URI or email (anchor it yourself).
    Regex(regex::Regex),
}

/// A keyless identity: an OIDC issuer and a subject.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The OIDC issuer, matched exactly.
    pub issuer: String,
    /// The subject.
    pub subject: SubjectMatch,
}

impl Identity {
    fn accepts(&self, issuer: &str, subject: &str) -> bool {
        self.issuer == issuer
            && match &self.subject {
                SubjectMatch::Exact(s) => s == subject,
                SubjectMatch::Regex(r) => r.is_match(subject),
            }
    }
}

/// Who signed, for reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signer {
    /// A key of the policy, by fingerprint.
    Key(Fingerprint),
    /// A Fulcio certificate's identity.
    Certificate {
        /// The OIDC issuer.
        issuer: String,
        /// The SAN URI or email.
        subject: String,
    },
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Signer::Key(fp) => write!(f, "key {fp}"),
            Signer::Certificate { issuer, subject } => write!(f, "{subject} (issuer {issuer})"),
        }
    }
}

/// A signature that verified under the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Who signed.
    pub signer: Signer,
    /// The Rekor integrated time, if a log entry proved the signature (Unix seconds).
    pub integrated_time: Option<i64>,
    /// The Rekor log index, if any.
    pub log_index: Option<i64>,
}

/// What the signature was made with.
pub(crate) enum Material {
    /// A certificate (keyless), with the chain the signature carried (untrusted; the root decides).
    Certificate(Box<Cert>),
    /// No verification material: try the policy's keys.
    Keys,
}

/// How the signed bytes are given.
pub(crate) enum Signed<'a> {
    /// The message itself (verified with the key's usual hash).
    Message(&'a [u8]),
    /// A SHA-256 digest of the message (message signatures of bundles).
    Sha256(&'a [u8]),
}

/// Everything `verify_signature` checks, gathered by a scheme.
pub(crate) struct Claim<'a> {
    pub signed: Signed<'a>,
    pub signature: &'a [u8],
    pub material: Material,
    pub entries: Vec<Entry>,
    /// SHA-256 of what the log entry should record as the payload.
    pub logged_sha256: [u8; 32],
}

/// A mapping's signature policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Public keys any of which may sign.
    pub keys: Vec<PublicKey>,
    /// Keyless identities any of which may sign.
    pub identities: Vec<Identity>,
    /// The trusted root: Fulcio CAs and Rekor keys.
    pub root: Arc<TrustedRoot>,
    /// Whether a log entry must prove the signature.
    pub tlog: TlogPolicy,
}

impl Policy {
    pub(crate) fn verify_claim(&self, claim: Claim<'_>) -> Result<Verified> {
        // The log evidence first: keyless certificates are checked at its time.
        let mut evidence = None;
        let mut why = None;
        for entry in &claim.entries {
            match rekor::verify_set(&self.root, entry) {
                Ok(_) => {
                    evidence = Some(entry);
                    break;
                }
                Err(e) => why = Some(e),
            }
        }
        let needs_log =
            self.tlog == TlogPolicy::Require || matches!(claim.material, Material::Certificate(_));
        if evidence.is_none() && needs_log {
            return Err(
                why.unwrap_or_else(|| TrustError::Tlog("the signature has no Rekor entry".into()))
            );
        }
        let (signer, verifier_der) = match &claim.material {
            Material::Certificate(leaf) => {
                let at = evidence.map(|e| e.integrated_time).unwrap_or_default();
                chain_to_root(leaf, &self.root, at)?;
                leaf.check_valid_at(at)?;
                leaf.check_code_signing()?;
                let id = leaf.identity()?;
                if !self
                    .identities
                    .iter()
                    .any(|i| i.accepts(&id.issuer, &id.subject))
                {
                    return Err(TrustError::IdentityMismatch {
                        issuer: id.issuer,
                        subject: id.subject,
                    });
                }
                check(&leaf.key, &claim.signed, claim.signature)?;
                (
                    Signer::Certificate {
                        issuer: id.issuer,
                        subject: id.subject,
                    },
                    leaf.der.clone(),
                )
            }
            Material::Keys => {
                let key = self
                    .keys
                    .iter()
                    .find(|k| check(k, &claim.signed, claim.signature).is_ok())
                    .ok_or(TrustError::WrongKey)?;
                (Signer::Key(key.fingerprint()), key.to_spki_der())
            }
        };
        if let Some(entry) = evidence {
            rekor::check_body(
                entry,
                &Expect {
                    payload_sha256: &claim.logged_sha256,
                    signature: claim.signature,
                    verifier_der: &verifier_der,
                },
            )?;
        }
        Ok(Verified {
            signer,
            integrated_time: evidence.map(|e| e.integrated_time),
            log_index: evidence.map(|e| e.log_index),
        })
    }
}

fn check(key: &PublicKey, signed: &Signed<'_>, sig: &[u8]) -> Result<()> {
    match signed {
        Signed::Message(m) => key.verify(m, sig),
        Signed::Sha256(d) => key.verify_prehash(HashAlg::Sha256, d, sig),
    }
}
