//! The one error type of ferry-trust: what was wrong with which input, never a secret.
//! Every refusal a policy can give is a variant here, so the run can report it by name.

use thiserror::Error;

/// Why a key, certificate, signature or bundle was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TrustError {
    /// Text that should hold PEM does not (no block, wrong label, bad base64 inside).
    #[error("{what}: not PEM: {reason}")]
    Pem { what: &'static str, reason: String },
    /// DER that does not parse as what it should be.
    #[error("{what}: malformed DER: {reason}")]
    Der { what: &'static str, reason: String },
    /// A base64 field that does not decode.
    #[error("{what}: malformed base64")]
    Base64 { what: &'static str },
    /// JSON that does not parse or lacks a field.
    #[error("{what}: malformed JSON: {reason}")]
    Json { what: &'static str, reason: String },
    /// A key of a kind ferry does not verify with.
    #[error("unsupported key: {0}")]
    UnsupportedKey(String),
    /// An encrypted private key that does not open (wrong password, or altered).
    #[error("the encrypted private key does not open: wrong password or altered key")]
    Decrypt,
    /// A signature that does not verify under the key it was checked with.
    #[error("{what}: signature does not verify")]
    BadSignature { what: &'static str },
    /// A signature made for another image.
    #[error("digest mismatch: the signature names {found}, the image is {expected}")]
    DigestMismatch { expected: String, found: String },
    /// No signature verified under any key of the policy.
    #[error("no key of the policy verifies the signature")]
    WrongKey,
    /// A certificate that does not chain to a certificate authority of the trusted root.
    #[error("certificate not trusted: {0}")]
    UntrustedCertificate(String),
    /// A certificate outside its validity at the time the signature was logged.
    #[error("certificate not valid at the signing time {at} (valid {not_before} to {not_after})")]
    CertificateExpired {
        at: i64,
        not_before: i64,
        not_after: i64,
    },
    /// A certificate whose identity no identity of the policy accepts.
    #[error("identity mismatch: issuer {issuer:?}, subject {subject:?}")]
    IdentityMismatch { issuer: String, subject: String },
    /// A transparency-log proof that is missing, from an unknown log, or does not verify.
    #[error("Rekor entry not trusted: {0}")]
    Tlog(String),
    /// A signature kind or field this verifier does not handle.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Input larger than the bound set for it, refused before it was read whole.
    #[error("{what} larger than {limit} bytes")]
    TooLarge { what: &'static str, limit: u64 },
    /// A JSON Web Token whose claims the caller's expectations refuse (issuer, audience,
    /// subject, expiry), or whose form is not a signed compact JWS.
    #[error("token refused: {0}")]
    Token(String),
    /// An I/O error while reading bounded input.
    #[error("reading {what}: {reason}")]
    Io { what: &'static str, reason: String },
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, TrustError>;

pub(crate) fn b64(what: &'static str, text: &str) -> Result<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| TrustError::Base64 { what })
}
