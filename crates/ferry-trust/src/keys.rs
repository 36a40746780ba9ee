//! Public and private keys: PEM and DER parsing, signing, verifying and fingerprints.
//! Private keys never print: their Debug names the kind and the public fingerprint only.

use std::fmt;

use ecdsa::signature::hazmat::{PrehashSigner as _, PrehashVerifier as _};
use ecdsa::signature::{Signer as _, Verifier as _};
use pkcs8::{
    DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _, EncodePublicKey as _,
};
use sha2::{Digest as _, Sha256, Sha384, Sha512};
use zeroize::Zeroizing;

use crate::error::{Result, TrustError};

/// A hash a signature was made over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAlg {
    /// SHA-256.
    Sha256,
    /// SHA-384.
    Sha384,
    /// SHA-512.
    Sha512,
}

impl HashAlg {
    /// The hash of `msg`.
    pub fn hash(self, msg: &[u8]) -> Vec<u8> {
        match self {
            HashAlg::Sha256 => Sha256::digest(msg).to_vec(),
            HashAlg::Sha384 => Sha384::digest(msg).to_vec(),
            HashAlg::Sha512 => Sha512::digest(msg).to_vec(),
        }
    }
}

/// The SHA-256 of a key's SubjectPublicKeyInfo DER: how reports name a key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub [u8; 32]);

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A public key ferry verifies with: ECDSA P-256 or P-384, Ed25519, or RSA.
#[derive(Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// ECDSA over P-256 (cosign's default; signatures over SHA-256).
    P256(p256::ecdsa::VerifyingKey),
    /// ECDSA over P-384 (Fulcio's CA keys; signatures over SHA-384).
    P384(p384::ecdsa::VerifyingKey),
    /// Ed25519.
    Ed25519(ed25519_dalek::VerifyingKey),
    /// RSA (PKCS#1 v1.5 or PSS, SHA-256 by default).
    Rsa(rsa::RsaPublicKey),
}

const OID_EC: &str = "1.2.840.10045.2.1";
const OID_P256: &str = "1.2.840.10045.3.1.7";
const OID_P384: &str = "1.3.132.0.34";
const OID_ED25519: &str = "1.3.101.112";
const OID_RSA: &str = "1.2.840.113549.1.1.1";

/// The most bytes a key file may hold: a key is small, so anything larger is not one and is
/// refused before it is read whole.
pub const MAX_KEY_FILE: u64 = 64 * 1024;

/// A key file's bytes, bounded by [`MAX_KEY_FILE`] (the caller names the file in its error).
fn read_key_file(path: &std::path::Path, what: &'static str) -> Result<Zeroizing<Vec<u8>>> {
    use std::io::Read as _;
    let io = |e: std::io::Error| TrustError::Io {
        what,
        reason: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut out = Zeroizing::new(Vec::new());
    file.take(MAX_KEY_FILE + 1)
        .read_to_end(&mut out)
        .map_err(io)?;
    if out.len() as u64 > MAX_KEY_FILE {
        return Err(TrustError::Io {
            what,
            reason: format!("larger than {MAX_KEY_FILE} bytes, not a key"),
        });
    }
    Ok(out)
}

impl PublicKey {
    /// A `PUBLIC KEY` PEM file (`cosign.pub`): the one way ferry reads a public key from disk,
    /// for `signatures.keys`, `bundles.keys` and `--verify-key` alike.
    pub fn from_file(path: &std::path::Path) -> Result<PublicKey> {
        PublicKey::from_pem(&read_key_file(path, "public key")?)
    }

    /// A `PUBLIC KEY` PEM block (SubjectPublicKeyInfo), as `cosign generate-key-pair` writes it.
    pub fn from_pem(text: &[u8]) -> Result<PublicKey> {
        let (label, der) = pem_block(text, "public key")?;
        if label != "PUBLIC KEY" {
            return Err(TrustError::Pem {
                what: "public key",
                reason: format!("label {label:?}, expected \"PUBLIC KEY\""),
            });
        }
        PublicKey::from_spki_der(&der)
    }

    /// A SubjectPublicKeyInfo in DER.
    pub fn from_spki_der(der: &[u8]) -> Result<PublicKey> {
        let info = spki::SubjectPublicKeyInfoRef::try_from(der).map_err(|e| TrustError::Der {
            what: "public key",
            reason: e.to_string(),
        })?;
        let bad = |e: spki::Error| TrustError::Der {
            what: "public key",
            reason: e.to_string(),
        };
        match info.algorithm.oid.to_string().as_str() {
            OID_EC => {
                let curve = info.algorithm.parameters_oid().map_err(|_| {
                    TrustError::UnsupportedKey("EC key without a named curve".into())
                })?;
                match curve.to_string().as_str() {
                    OID_P256 => p256::ecdsa::VerifyingKey::from_public_key_der(der)
                        .map(PublicKey::P256)
                        .map_err(bad),
                    OID_P384 => p384::ecdsa::VerifyingKey::from_public_key_der(der)
                        .map(PublicKey::P384)
                        .map_err(bad),
                    other => Err(TrustError::UnsupportedKey(format!("EC curve {other}"))),
                }
            }
            OID_ED25519 => ed25519_dalek::VerifyingKey::from_public_key_der(der)
                .map(PublicKey::Ed25519)
                .map_err(bad),
            OID_RSA => {
                let key = rsa::RsaPublicKey::from_public_key_der(der).map_err(bad)?;
                if rsa::traits::PublicKeyParts::size(&key) < 256 {
                    return Err(TrustError::UnsupportedKey("RSA key under 2048 bits".into()));
                }
                Ok(PublicKey::Rsa(key))
            }
            other => Err(TrustError::UnsupportedKey(format!("algorithm {other}"))),
        }
    }

    /// The SubjectPublicKeyInfo DER.
    pub fn to_spki_der(&self) -> Vec<u8> {
        let doc = match self {
            PublicKey::P256(k) => k.to_public_key_der(),
            PublicKey::P384(k) => k.to_public_key_der(),
            PublicKey::Ed25519(k) => k.to_public_key_der(),
            PublicKey::Rsa(k) => k.to_public_key_der(),
        };
        // Encoding a key that was decoded or generated cannot fail; an empty DER never matches.
        doc.map(|d| d.as_bytes().to_vec()).unwrap_or_default()
    }

    /// The key as a `PUBLIC KEY` PEM block.
    pub fn to_pem(&self) -> String {
        der::pem::encode_string("PUBLIC KEY", der::pem::LineEnding::LF, &self.to_spki_der())
            .unwrap_or_default()
    }

    /// The SHA-256 of the SubjectPublicKeyInfo DER.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint(Sha256::digest(self.to_spki_der()).into())
    }

    /// The kind of key, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            PublicKey::P256(_) => "ECDSA P-256",
            PublicKey::P384(_) => "ECDSA P-384",
            PublicKey::Ed25519(_) => "Ed25519",
            PublicKey::Rsa(_) => "RSA",
        }
    }

    /// Verifies `sig` over `msg` with the key's usual hash (P-256 and RSA: SHA-256; P-384: SHA-384).
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<()> {
        let hash = match self {
            PublicKey::P384(_) => HashAlg::Sha384,
            _ => HashAlg::Sha256,
        };
        self.verify_with(hash, msg, sig)
    }

    /// Verifies `sig` over `msg` hashed with `hash` (Ed25519 signs `msg` itself).
    pub fn verify_with(&self, hash: HashAlg, msg: &[u8], sig: &[u8]) -> Result<()> {
        if let PublicKey::Ed25519(k) = self {
            let sig = ed25519_dalek::Signature::from_slice(sig).map_err(|_| bad_sig())?;
            return k.verify(msg, &sig).map_err(|_| bad_sig());
        }
        self.verify_prehash(hash, &hash.hash(msg), sig)
    }

    /// Verifies `sig` over a message given by its `hash` (not for Ed25519, which cannot).
    pub fn verify_prehash(&self, hash: HashAlg, digest: &[u8], sig: &[u8]) -> Result<()> {
        let ok = match self {
            PublicKey::P256(k) => p256::ecdsa::Signature::from_der(sig)
                .or_else(|_| p256::ecdsa::Signature::from_slice(sig))
                .ok()
                .is_some_and(|s| k.verify_prehash(digest, &s).is_ok()),
            PublicKey::P384(k) => p384::ecdsa::Signature::from_der(sig)
                .or_else(|_| p384::ecdsa::Signature::from_slice(sig))
                .ok()
                .is_some_and(|s| k.verify_prehash(digest, &s).is_ok()),
            PublicKey::Rsa(k) => {
                let scheme = match hash {
                    HashAlg::Sha256 => rsa::Pkcs1v15Sign::new::<Sha256>(),
                    HashAlg::Sha384 => rsa::Pkcs1v15Sign::new::<Sha384>(),
                    HashAlg::Sha512 => rsa::Pkcs1v15Sign::new::<Sha512>(),
                };
                let pss = match hash {
                    HashAlg::Sha256 => rsa::Pss::new::<Sha256>(),
                    HashAlg::Sha384 => rsa::Pss::new::<Sha384>(),
                    HashAlg::Sha512 => rsa::Pss::new::<Sha512>(),
                };
                k.verify(scheme, digest, sig).is_ok() || k.verify(pss, digest, sig).is_ok()
            }
            PublicKey::Ed25519(_) => {
                return Err(TrustError::Unsupported(
                    "an Ed25519 signature over a digest".into(),
                ));
            }
        };
        if ok { Ok(()) } else { Err(bad_sig()) }
    }
}

fn bad_sig() -> TrustError {
    TrustError::BadSignature { what: "signature" }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({}, {})", self.kind(), self.fingerprint())
    }
}

/// A private key ferry signs with: ECDSA P-256 or Ed25519. It never prints.
pub enum PrivateKey {
    /// ECDSA over P-256, signatures over SHA-256 in ASN.1 DER (as cosign writes them).
    P256(p256::ecdsa::SigningKey),
    /// Ed25519.
    Ed25519(ed25519_dalek::SigningKey),
}

impl PrivateKey {
    /// A new random P-256 key.
    pub fn generate_p256() -> PrivateKey {
        PrivateKey::P256(p256::ecdsa::SigningKey::random(&mut rand_core::OsRng))
    }

    /// A new random Ed25519 key.
    pub fn generate_ed25519() -> PrivateKey {
        PrivateKey::Ed25519(ed25519_dalek::SigningKey::generate(&mut rand_core::OsRng))
    }

    /// A private key PEM file (`cosign.key`, a PKCS#8 or SEC1 key), read as [`from_pem`] reads
    /// its text.
    ///
    /// [`from_pem`]: PrivateKey::from_pem
    pub fn from_file(path: &std::path::Path, password: Option<&[u8]>) -> Result<PrivateKey> {
        PrivateKey::from_pem(&read_key_file(path, "private key")?, password)
    }

    /// A private key in PEM: `PRIVATE KEY` (PKCS#8), `EC PRIVATE KEY` (SEC1, P-256), or cosign's
    /// `ENCRYPTED SIGSTORE PRIVATE KEY` (also the older `ENCRYPTED COSIGN PRIVATE KEY`), which
    /// opens with `password` (cosign's `COSIGN_PASSWORD`; empty if the key was made without one).
    pub fn from_pem(text: &[u8], password: Option<&[u8]>) -> Result<PrivateKey> {
        let (label, der) = pem_block(text, "private key")?;
        let der = Zeroizing::new(der);
        match label.as_str() {
            "PRIVATE KEY" => PrivateKey::from_pkcs8_der(&der),
            "EC PRIVATE KEY" => p256::SecretKey::from_sec1_der(&der)
                .map(|k| PrivateKey::P256(k.into()))
                .map_err(|_| {
                    TrustError::UnsupportedKey("an EC private key that is not P-256".into())
                }),
            "ENCRYPTED SIGSTORE PRIVATE KEY" | "ENCRYPTED COSIGN PRIVATE KEY" => {
                let password = password.ok_or_else(|| {
                    TrustError::UnsupportedKey("an encrypted cosign key needs a password".into())
                })?;
                let plain = crate::cosign_key::decrypt(&der, password)?;
                PrivateKey::from_pkcs8_der(&plain)
            }
            other => Err(TrustError::Pem {
                what: "private key",
                reason: format!("label {other:?} is not a private key ferry reads"),
            }),
        }
    }

    /// A PKCS#8 private key in DER (P-256 or Ed25519).
    pub fn from_pkcs8_der(der: &[u8]) -> Result<PrivateKey> {
        let info = pkcs8::PrivateKeyInfo::try_from(der).map_err(|_| TrustError::Der {
            what: "private key",
            reason: "not a PKCS#8 PrivateKeyInfo".into(),
        })?;
        let oid = info.algorithm.oid.to_string();
        let bad = |_| TrustError::Der {
            what: "private key",
            reason: "the key does not decode".into(),
        };
        match oid.as_str() {
            OID_EC => p256::SecretKey::from_pkcs8_der(der)
                .map(|k| PrivateKey::P256(k.into()))
                .map_err(|_| {
                    TrustError::UnsupportedKey("an EC private key that is not P-256".into())
                }),
            OID_ED25519 => ed25519_dalek::SigningKey::from_pkcs8_der(der)
                .map(PrivateKey::Ed25519)
                .map_err(bad),
            other => Err(TrustError::UnsupportedKey(format!(
                "private key algorithm {other}"
            ))),
        }
    }

    /// The key as PKCS#8 DER (secret: kept zeroized).
    pub fn to_pkcs8_der(&self) -> Result<Zeroizing<Vec<u8>>> {
        let doc = match self {
            PrivateKey::P256(k) => k.to_pkcs8_der(),
            PrivateKey::Ed25519(k) => k.to_pkcs8_der(),
        }
        .map_err(|_| TrustError::UnsupportedKey("the key does not encode".into()))?;
        Ok(Zeroizing::new(doc.as_bytes().to_vec()))
    }

    /// The key as a `PRIVATE KEY` PEM block (secret: kept zeroized).
    pub fn to_pkcs8_pem(&self) -> Result<Zeroizing<String>> {
        let der = self.to_pkcs8_der()?;
        der::pem::encode_string("PRIVATE KEY", der::pem::LineEnding::LF, &der)
            .map(Zeroizing::new)
            .map_err(|_| TrustError::UnsupportedKey("the key does not encode".into()))
    }

    /// The public half.
    pub fn public_key(&self) -> PublicKey {
        match self {
            PrivateKey::P256(k) => PublicKey::P256(*k.verifying_key()),
            PrivateKey::Ed25519(k) => PublicKey::Ed25519(k.verifying_key()),
        }
    }

    /// Signs `msg` (P-256: SHA-256, DER signature; Ed25519: 64 bytes).
    pub fn sign(&self, msg: &[u8]) -> Vec<u8> {
        match self {
            PrivateKey::P256(k) => {
                let sig: p256::ecdsa::Signature = k.sign(msg);
                sig.to_der().as_bytes().to_vec()
            }
            PrivateKey::Ed25519(k) => k.sign(msg).to_bytes().to_vec(),
        }
    }

    /// Signs a SHA-256 digest (P-256 only: Ed25519 cannot sign a digest).
    pub fn sign_prehash(&self, digest: &[u8]) -> Result<Vec<u8>> {
        match self {
            PrivateKey::P256(k) => {
                let sig: p256::ecdsa::Signature = k
                    .sign_prehash(digest)
                    .map_err(|_| TrustError::Unsupported("a digest of this length".into()))?;
                Ok(sig.to_der().as_bytes().to_vec())
            }
            PrivateKey::Ed25519(_) => Err(TrustError::Unsupported(
                "an Ed25519 signature over a digest".into(),
            )),
        }
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let public = self.public_key();
        write!(
            f,
            "PrivateKey({}, public {})",
            public.kind(),
            public.fingerprint()
        )
    }
}

/// The first PEM block of `text`: its label and DER. Text before the block is ignored.
pub(crate) fn pem_block(text: &[u8], what: &'static str) -> Result<(String, Vec<u8>)> {
    pem_blocks(text, what, 1)?
        .into_iter()
        .next()
        .ok_or_else(|| TrustError::Pem {
            what,
            reason: "no BEGIN line".into(),
        })
}

/// Up to `max` PEM blocks of `text`, in order; more than `max` is an error.
pub(crate) fn pem_blocks(
    text: &[u8],
    what: &'static str,
    max: usize,
) -> Result<Vec<(String, Vec<u8>)>> {
    let text = std::str::from_utf8(text).map_err(|_| TrustError::Pem {
        what,
        reason: "not UTF-8 text".into(),
    })?;
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        if blocks.len() == max {
            if max == 1 {
                break;
            }
            return Err(TrustError::Pem {
                what,
                reason: format!("more than {max} PEM blocks"),
            });
        }
        rest = &rest[start..];
        let end = rest
            .find("-----END ")
            .and_then(|e| rest[e + 9..].find("-----").map(|c| e + 9 + c + 5))
            .ok_or_else(|| TrustError::Pem {
                what,
                reason: "no END line".into(),
            })?;
        let (label, der) =
            der::pem::decode_vec(&rest.as_bytes()[..end]).map_err(|e| TrustError::Pem {
                what,
                reason: e.to_string(),
            })?;
        blocks.push((label.to_string(), der));
        rest = &rest[end..];
    }
    if blocks.is_empty() {
        return Err(TrustError::Pem {
            what,
            reason: "no BEGIN line".into(),
        });
    }
    Ok(blocks)
}
