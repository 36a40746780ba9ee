//! X.509 for keyless signatures: parsing Fulcio certificates, chains to a root's CAs, identities.
//! The identity is Fulcio's issuer extension (OID .1.8, legacy .1.1) and the SAN URI or email.

use der::{Decode as _, Encode as _};
use x509_cert::Certificate;
use x509_cert::ext::pkix::{ExtendedKeyUsage, SubjectAltName, name::GeneralName};

use crate::error::{Result, TrustError};
use crate::keys::{HashAlg, PublicKey, pem_blocks};
use crate::root::{Authority, TrustedRoot};

const OID_ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";
const OID_ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";
const OID_SAN: &str = "2.5.29.17";
const OID_EKU: &str = "2.5.29.37";
const OID_CODE_SIGNING: &str = "1.3.6.1.5.5.7.3.3";

/// The most certificates ferry reads from one chain annotation or field.
pub const MAX_CHAIN: usize = 10;

/// A certificate with its DER and public key.
#[derive(Debug, Clone)]
pub struct Cert {
    /// The parsed certificate.
    pub cert: Certificate,
    /// Its DER, as signed into Rekor entries.
    pub der: Vec<u8>,
    /// Its subject public key.
    pub key: PublicKey,
}

/// Who a Fulcio certificate says signed: the OIDC issuer and the subject (SAN URI or email).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertIdentity {
    /// The OIDC issuer, from the Fulcio extension (empty if the certificate has none).
    pub issuer: String,
    /// The SAN URI or email (the first one).
    pub subject: String,
}

impl Cert {
    /// A certificate in DER.
    pub fn from_der(der: &[u8]) -> Result<Cert> {
        let cert = Certificate::from_der(der).map_err(|e| TrustError::Der {
            what: "certificate",
            reason: e.to_string(),
        })?;
        let spki = cert
            .tbs_certificate
            .subject_public_key_info
            .to_der()
            .map_err(|e| TrustError::Der {
                what: "certificate key",
                reason: e.to_string(),
            })?;
        let key = PublicKey::from_spki_der(&spki)?;
        Ok(Cert {
            cert,
            der: der.to_vec(),
            key,
        })
    }

    /// The first certificate of a PEM text.
    pub fn from_pem(text: &[u8]) -> Result<Cert> {
        let mut all = Cert::chain_from_pem(text)?;
        Ok(all.swap_remove(0))
    }

    /// Every certificate of a PEM text (at most [`MAX_CHAIN`]).
    pub fn chain_from_pem(text: &[u8]) -> Result<Vec<Cert>> {
        pem_blocks(text, "certificate", MAX_CHAIN)?
            .into_iter()
            .map(|(label, der)| {
                if label != "CERTIFICATE" {
                    return Err(TrustError::Pem {
                        what: "certificate",
                        reason: format!("label {label:?}, expected \"CERTIFICATE\""),
                    });
                }
                Cert::from_der(&der)
            })
            .collect()
    }

    /// Its validity in Unix seconds: (not before, not after).
    pub fn validity(&self) -> (i64, i64) {
        unix_validity(&self.cert)
    }

    /// Refuses the certificate unless `at` lies in its validity.
    pub fn check_valid_at(&self, at: i64) -> Result<()> {
        let (not_before, not_after) = self.validity();
        if at < not_before || at > not_after {
            return Err(TrustError::CertificateExpired {
                at,
                not_before,
                not_after,
            });
        }
        Ok(())
    }

    /// The Fulcio identity: issuer extension and SAN.
    pub fn identity(&self) -> Result<CertIdentity> {
        let mut issuer_v1 = None;
        let mut issuer_v2 = None;
        let mut subject = None;
        for ext in self.cert.tbs_certificate.extensions.iter().flatten() {
            let value = ext.extn_value.as_bytes();
            match ext.extn_id.to_string().as_str() {
                OID_ISSUER_V2 => {
                    let s =
                        der::asn1::Utf8StringRef::from_der(value).map_err(|e| TrustError::Der {
                            what: "Fulcio issuer extension",
                            reason: e.to_string(),
                        })?;
                    issuer_v2 = Some(s.as_str().to_string());
                }
                OID_ISSUER_V1 => {
                    issuer_v1 = Some(String::from_utf8_lossy(value).into_owned());
                }
                OID_SAN => {
                    let san = SubjectAltName::from_der(value).map_err(|e| TrustError::Der {
                        what: "subject alternative name",
                        reason: e.to_string(),
                    })?;
                    subject = san.0.iter().find_map(|name| match name {
                        GeneralName::UniformResourceIdentifier(uri) => {
                            Some(uri.as_str().to_string())
                        }
                        GeneralName::Rfc822Name(email) => Some(email.as_str().to_string()),
                        _ => None,
                    });
                }
                _ => {}
            }
        }
        // Fulcio's certificates of early 2021 carry no issuer extension: their issuer is empty,
        // which only an identity with an empty issuer accepts.
        let issuer = issuer_v2.or(issuer_v1).unwrap_or_default();
        let subject = subject
            .ok_or_else(|| TrustError::UntrustedCertificate("no SAN URI or email".into()))?;
        Ok(CertIdentity { issuer, subject })
    }

    /// Refuses a leaf without the code-signing extended key usage.
    pub fn check_code_signing(&self) -> Result<()> {
        for ext in self.cert.tbs_certificate.extensions.iter().flatten() {
            if ext.extn_id.to_string() == OID_EKU {
                let eku = ExtendedKeyUsage::from_der(ext.extn_value.as_bytes()).map_err(|e| {
                    TrustError::Der {
                        what: "extended key usage",
                        reason: e.to_string(),
                    }
                })?;
                if eku.0.iter().any(|oid| oid.to_string() == OID_CODE_SIGNING) {
                    return Ok(());
                }
            }
        }
        Err(TrustError::UntrustedCertificate(
            "no code-signing extended key usage".into(),
        ))
    }
}

fn unix_validity(cert: &Certificate) -> (i64, i64) {
    let v = &cert.tbs_certificate.validity;
    let secs = |t: &x509_cert::time::Time| {
        i64::try_from(t.to_unix_duration().as_secs()).unwrap_or(i64::MAX)
    };
    (secs(&v.not_before), secs(&v.not_after))
}

/// Verifies that `issuer` signed `child` (names match and the signature verifies).
pub fn verify_issued_by(child: &Certificate, issuer: &Certificate) -> Result<()> {
    if child.tbs_certificate.issuer != issuer.tbs_certificate.subject {
        return Err(TrustError::UntrustedCertificate(
            "issuer name does not match".into(),
        ));
    }
    let spki = issuer
        .tbs_certificate
        .subject_public_key_info
        .to_der()
        .map_err(|e| TrustError::Der {
            what: "issuer key",
            reason: e.to_string(),
        })?;
    let key = PublicKey::from_spki_der(&spki)?;
    let tbs = child
        .tbs_certificate
        .to_der()
        .map_err(|e| TrustError::Der {
            what: "certificate",
            reason: e.to_string(),
        })?;
    let sig = child.signature.as_bytes().ok_or_else(|| TrustError::Der {
        what: "certificate signature",
        reason: "unused bits".into(),
    })?;
    let hash = match child.signature_algorithm.oid.to_string().as_str() {
        "1.2.840.10045.4.3.2" | "1.2.840.113549.1.1.11" => HashAlg::Sha256,
        "1.2.840.10045.4.3.3" | "1.2.840.113549.1.1.12" => HashAlg::Sha384,
        "1.2.840.10045.4.3.4" | "1.2.840.113549.1.1.13" => HashAlg::Sha512,
        "1.3.101.112" => HashAlg::Sha512,
        other => {
            return Err(TrustError::Unsupported(format!(
                "certificate signature algorithm {other}"
            )));
        }
    };
    key.verify_with(hash, &tbs, sig).map_err(|_| {
        TrustError::UntrustedCertificate("certificate signature does not verify".into())
    })
}

/// Finds the root's CA that issued `leaf`, its whole chain valid at `at`; refuses otherwise.
pub fn chain_to_root<'r>(leaf: &Cert, root: &'r TrustedRoot, at: i64) -> Result<&'r Authority> {
    let mut why = String::from("no certificate authority in the trusted root issued it");
    for ca in &root.certificate_authorities {
        if !ca.valid.contains(at) {
            continue;
        }
        let Some(first) = ca.chain.first() else {
            continue;
        };
        if verify_issued_by(&leaf.cert, first).is_err() {
            continue;
        }
        let links_ok = ca
            .chain
            .windows(2)
            .all(|w| verify_issued_by(&w[0], &w[1]).is_ok());
        let times_ok = ca.chain.iter().all(|c| {
            let (nb, na) = unix_validity(c);
            at >= nb && at <= na
        });
        if links_ok && times_ok {
            return Ok(ca);
        }
        why = format!("the chain of {} is broken or not valid at {at}", ca.name);
    }
    Err(TrustError::UntrustedCertificate(why))
}
