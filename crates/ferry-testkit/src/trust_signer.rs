//! A test Sigstore for signature tests: a Fulcio-like CA, a Rekor-like key producing SETs, the
//! trusted root naming both, and signers for cosign `.sig` layers and Sigstore bundles.

use std::collections::BTreeMap;
use std::str::FromStr as _;
use std::time::Duration;

use base64::Engine as _;
use der::{Decode as _, Encode as _};
use ferry_distribution::Digest;
use ferry_trust::tag::{BUNDLE, CERTIFICATE, SIGNATURE};
use ferry_trust::{PrivateKey, TrustedRoot};
use serde_json::json;
use sha2::{Digest as _, Sha256};
use x509_cert::builder::{Builder as _, CertificateBuilder, Profile};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{ExtendedKeyUsage, SubjectAltName};
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::SubjectPublicKeyInfoOwned;
use x509_cert::time::{Time, Validity};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// 2020-01-01T00:00:00Z: the test CA and log are valid from here.
pub const EPOCH: i64 = 1_577_836_800;
/// A signing time inside the test CA's validity (2024-01-01T00:00:00Z).
pub const SIGNED_AT: i64 = 1_704_067_200;

/// Fulcio's OIDC issuer extension (v2, a DER UTF8String).
struct FulcioIssuer(String);

impl der::oid::AssociatedOid for FulcioIssuer {
    const OID: der::oid::ObjectIdentifier =
        der::oid::ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
}

impl der::Encode for FulcioIssuer {
    fn encoded_len(&self) -> der::Result<der::Length> {
        der::asn1::Utf8StringRef::new(&self.0)?.encoded_len()
    }
    fn encode(&self, writer: &mut impl der::Writer) -> der::Result<()> {
        der::asn1::Utf8StringRef::new(&self.0)?.encode(writer)
    }
}

impl x509_cert::ext::AsExtension for FulcioIssuer {
    fn critical(&self, _: &Name, _: &[x509_cert::ext::Extension]) -> bool {
        false
    }
}

fn time(unix: i64) -> Time {
    let d = Duration::from_secs(u64::try_from(unix).unwrap());
    if unix < 2_524_608_000 {
        Time::UtcTime(der::asn1::UtcTime::from_unix_duration(d).unwrap())
    } else {
        Time::GeneralTime(der::asn1::GeneralizedTime::from_unix_duration(d).unwrap())
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    der::pem::encode_string(label, der::pem::LineEnding::LF, der).unwrap()
}

/// A keyless signer's identity and certificate validity, and when the log integrates it.
#[derive(Debug, Clone)]
pub struct Keyless {
    /// The OIDC issuer written into the certificate.
    pub issuer: String,
    /// The SAN: an email if it holds `@` and no `:`, a URI otherwise.
    pub subject: String,
    /// Certificate not-before (Unix seconds).
    pub not_before: i64,
    /// Certificate not-after.
    pub not_after: i64,
    /// The Rekor integrated time.
    pub integrated_time: i64,
}

impl Keyless {
    /// A certificate valid for ten minutes around [`SIGNED_AT`], logged at [`SIGNED_AT`].
    pub fn new(issuer: &str, subject: &str) -> Keyless {
        Keyless {
            issuer: issuer.into(),
            subject: subject.into(),
            not_before: SIGNED_AT - 60,
            not_after: SIGNED_AT + 540,
            integrated_time: SIGNED_AT,
        }
    }
}

/// One `.sig` layer: the payload blob and the descriptor's annotations.
#[derive(Debug, Clone)]
pub struct SignedLayer {
    /// The simple-signing payload.
    pub payload: Vec<u8>,
    /// The descriptor annotations.
    pub annotations: BTreeMap<String, String>,
}

/// A Fulcio-like CA and a Rekor-like log key, and the trusted root naming them.
pub struct TestSigstore {
    ca_key: p256::ecdsa::SigningKey,
    ca_cert_der: Vec<u8>,
    ca_name: Name,
    rekor_key: PrivateKey,
    log_index: std::sync::atomic::AtomicI64,
}

impl Default for TestSigstore {
    fn default() -> Self {
        Self::new()
    }
}

/// The simple-signing payload cosign writes for `digest`.
pub fn simple_signing_payload(digest: &Digest, reference: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "critical": {
            "identity": {"docker-reference": reference},
            "image": {"docker-manifest-digest": digest.to_string()},
            "type": "cosign container image signature"
        },
        "optional": null
    }))
    .unwrap()
}

/// A `.sig` layer signed with `key`, without a log entry.
pub fn key_signed_layer(key: &PrivateKey, digest: &Digest) -> SignedLayer {
    let payload = simple_signing_payload(digest, "registry.test/image");
    let sig = key.sign(&payload);
    SignedLayer {
        payload,
        annotations: BTreeMap::from([(SIGNATURE.to_string(), B64.encode(sig))]),
    }
}

impl TestSigstore {
    /// A fresh CA (valid 2020 to 2099) and log key.
    pub fn new() -> TestSigstore {
        let ca_key = p256::ecdsa::SigningKey::random(&mut rand_core::OsRng);
        let ca_name = Name::from_str("CN=ferry test fulcio,O=ferry.test").unwrap();
        let spki = SubjectPublicKeyInfoOwned::from_key(*ca_key.verifying_key()).unwrap();
        let validity = Validity {
            not_before: time(EPOCH),
            not_after: time(4_070_908_800),
        };
        let builder = CertificateBuilder::new(
            Profile::Root,
            SerialNumber::from(1u32),
            validity,
            ca_name.clone(),
            spki,
            &ca_key,
        )
        .unwrap();
        let cert = builder.build::<p256::ecdsa::DerSignature>().unwrap();
        TestSigstore {
            ca_key,
            ca_cert_der: cert.to_der().unwrap(),
            ca_name,
            rekor_key: PrivateKey::generate_p256(),
            log_index: std::sync::atomic::AtomicI64::new(1000),
        }
    }

    /// The log id: SHA-256 of the log key's SPKI DER, as Rekor v1's.
    pub fn log_id(&self) -> [u8; 32] {
        Sha256::digest(self.rekor_key.public_key().to_spki_der()).into()
    }

    /// The CA certificate in DER.
    pub fn ca_der(&self) -> &[u8] {
        &self.ca_cert_der
    }

    /// `trusted_root.json` naming this CA and this log.
    pub fn root_json(&self) -> String {
        json!({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [{
                "baseUrl": "https://rekor.ferry.test",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": B64.encode(self.rekor_key.public_key().to_spki_der()),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": "2020-01-01T00:00:00Z"}
                },
                "logId": {"keyId": B64.encode(self.log_id())}
            }],
            "certificateAuthorities": [{
                "subject": {"organization": "ferry.test", "commonName": "ferry test fulcio"},
                "uri": "https://fulcio.ferry.test",
                "certChain": {"certificates": [{"rawBytes": B64.encode(&self.ca_cert_der)}]},
                "validFor": {"start": "2020-01-01T00:00:00Z"}
            }],
            "ctlogs": [],
            "timestampAuthorities": []
        })
        .to_string()
    }

    /// The parsed trusted root.
    pub fn trusted_root(&self) -> TrustedRoot {
        TrustedRoot::from_json(self.root_json().as_bytes()).unwrap()
    }

    /// A leaf certificate for `who`, issued by this CA: its key and DER.
    pub fn leaf(&self, who: &Keyless) -> (PrivateKey, Vec<u8>) {
        let key = p256::ecdsa::SigningKey::random(&mut rand_core::OsRng);
        let spki = SubjectPublicKeyInfoOwned::from_key(*key.verifying_key()).unwrap();
        let validity = Validity {
            not_before: time(who.not_before),
            not_after: time(who.not_after),
        };
        let profile = Profile::Leaf {
            issuer: self.ca_name.clone(),
            enable_key_agreement: false,
            enable_key_encipherment: false,
        };
        let serial =
            SerialNumber::from(u32::try_from(who.not_before.rem_euclid(1 << 30)).unwrap() + 2);
        let mut builder = CertificateBuilder::new(
            profile,
            serial,
            validity,
            Name::default(),
            spki,
            &self.ca_key,
        )
        .unwrap();
        let name = if who.subject.contains('@') && !who.subject.contains(':') {
            GeneralName::Rfc822Name(der::asn1::Ia5String::new(&who.subject).unwrap())
        } else {
            GeneralName::UniformResourceIdentifier(der::asn1::Ia5String::new(&who.subject).unwrap())
        };
        builder.add_extension(&SubjectAltName(vec![name])).unwrap();
        let code_signing = der::oid::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");
        builder
            .add_extension(&ExtendedKeyUsage(vec![code_signing]))
            .unwrap();
        builder
            .add_extension(&FulcioIssuer(who.issuer.clone()))
            .unwrap();
        let cert = builder.build::<p256::ecdsa::DerSignature>().unwrap();
        (PrivateKey::P256(key), cert.to_der().unwrap())
    }

    fn next_index(&self) -> i64 {
        self.log_index
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// A SET over the canonical entry, by this log's key.
    pub fn set(&self, body_b64: &str, integrated_time: i64, log_index: i64) -> Vec<u8> {
        let canonical = format!(
            "{{\"body\":\"{body_b64}\",\"integratedTime\":{integrated_time},\"logID\":\"{}\",\"logIndex\":{log_index}}}",
            hex::encode(self.log_id())
        );
        self.rekor_key.sign(canonical.as_bytes())
    }

    /// A base64 hashedrekord body logging this payload hash, signature and verifier PEM.
    pub fn hashedrekord_body(
        payload_sha256: &[u8],
        signature: &[u8],
        verifier_pem: &str,
    ) -> String {
        B64.encode(
            json!({
                "apiVersion": "0.0.1",
                "kind": "hashedrekord",
                "spec": {
                    "data": {"hash": {"algorithm": "sha256", "value": hex::encode(payload_sha256)}},
                    "signature": {"content": B64.encode(signature), "publicKey": {"content": B64.encode(verifier_pem)}}
                }
            })
            .to_string(),
        )
    }

    /// The `dev.sigstore.cosign/bundle` annotation for an entry.
    pub fn rekor_annotation(&self, body_b64: &str, integrated_time: i64) -> String {
        let index = self.next_index();
        json!({
            "SignedEntryTimestamp": B64.encode(self.set(body_b64, integrated_time, index)),
            "Payload": {
                "body": body_b64,
                "integratedTime": integrated_time,
                "logIndex": index,
                "logID": hex::encode(self.log_id())
            }
        })
        .to_string()
    }

    /// A `.sig` layer signed with `key` and logged at `integrated_time`.
    pub fn key_signed_layer_logged(
        &self,
        key: &PrivateKey,
        digest: &Digest,
        integrated_time: i64,
    ) -> SignedLayer {
        let mut layer = key_signed_layer(key, digest);
        let sig = key.sign(&layer.payload);
        layer.annotations.insert(SIGNATURE.into(), B64.encode(&sig));
        let body = Self::hashedrekord_body(
            &Sha256::digest(&layer.payload),
            &sig,
            &key.public_key().to_pem(),
        );
        layer
            .annotations
            .insert(BUNDLE.into(), self.rekor_annotation(&body, integrated_time));
        layer
    }

    /// A keyless `.sig` layer for `digest`: certificate for `who`, signature, SET.
    pub fn keyless_layer(&self, who: &Keyless, digest: &Digest) -> SignedLayer {
        let payload = simple_signing_payload(digest, "registry.test/image");
        self.keyless_layer_over(who, payload)
    }

    /// A keyless `.sig` layer over any payload (to sign one naming another digest).
    pub fn keyless_layer_over(&self, who: &Keyless, payload: Vec<u8>) -> SignedLayer {
        let (key, cert_der) = self.leaf(who);
        let sig = key.sign(&payload);
        let cert_pem = pem("CERTIFICATE", &cert_der);
        let body = Self::hashedrekord_body(&Sha256::digest(&payload), &sig, &cert_pem);
        let annotations = BTreeMap::from([
            (SIGNATURE.to_string(), B64.encode(&sig)),
            (CERTIFICATE.to_string(), cert_pem),
            (
                ferry_trust::tag::CHAIN.to_string(),
                pem("CERTIFICATE", &self.ca_cert_der),
            ),
            (
                BUNDLE.to_string(),
                self.rekor_annotation(&body, who.integrated_time),
            ),
        ]);
        SignedLayer {
            payload,
            annotations,
        }
    }

    fn tlog_entry(&self, body_b64: &str, integrated_time: i64, kind: &str) -> serde_json::Value {
        let index = self.next_index();
        json!({
            "logIndex": index.to_string(),
            "logId": {"keyId": B64.encode(self.log_id())},
            "kindVersion": {"kind": kind, "version": "0.0.1"},
            "integratedTime": integrated_time.to_string(),
            "inclusionPromise": {"signedEntryTimestamp": B64.encode(self.set(body_b64, integrated_time, index))},
            "canonicalizedBody": body_b64
        })
    }

    /// A v0.3 bundle with a DSSE in-toto statement whose subject is `digest`, signed keyless.
    pub fn dsse_bundle(&self, who: &Keyless, digest: &Digest) -> Vec<u8> {
        let statement = json!({
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": "registry.test/image", "digest": {"sha256": digest.hex()}}],
            "predicateType": "https://sigstore.dev/cosign/sign/v1",
            "predicate": {}
        })
        .to_string()
        .into_bytes();
        let (key, cert_der) = self.leaf(who);
        let sig = key.sign(&ferry_trust::bundle::pae(
            ferry_trust::bundle::IN_TOTO,
            &statement,
        ));
        let body = B64.encode(
            json!({
                "apiVersion": "0.0.1",
                "kind": "dsse",
                "spec": {
                    "payloadHash": {"algorithm": "sha256", "value": hex::encode(Sha256::digest(&statement))},
                    "signatures": [{"signature": B64.encode(&sig), "verifier": B64.encode(pem("CERTIFICATE", &cert_der))}]
                }
            })
            .to_string(),
        );
        json!({
            "mediaType": ferry_trust::bundle::BUNDLE_V03_MEDIA_TYPE,
            "verificationMaterial": {
                "certificate": {"rawBytes": B64.encode(&cert_der)},
                "tlogEntries": [self.tlog_entry(&body, who.integrated_time, "dsse")]
            },
            "dsseEnvelope": {
                "payload": B64.encode(&statement),
                "payloadType": ferry_trust::bundle::IN_TOTO,
                "signatures": [{"sig": B64.encode(&sig), "keyid": ""}]
            }
        })
        .to_string()
        .into_bytes()
    }

    /// A v0.3 bundle with a message signature over `digest` by `key` (P-256), logged.
    pub fn key_message_bundle(
        &self,
        key: &PrivateKey,
        digest: &Digest,
        integrated_time: i64,
    ) -> Vec<u8> {
        let raw = hex::decode(digest.hex()).unwrap();
        let sig = key.sign_prehash(&raw).unwrap();
        let body = Self::hashedrekord_body(&raw, &sig, &key.public_key().to_pem());
        json!({
            "mediaType": ferry_trust::bundle::BUNDLE_V03_MEDIA_TYPE,
            "verificationMaterial": {
                "publicKey": {"hint": key.public_key().fingerprint().to_string()},
                "tlogEntries": [self.tlog_entry(&body, integrated_time, "hashedrekord")]
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": B64.encode(&raw)},
                "signature": B64.encode(&sig)
            }
        })
        .to_string()
        .into_bytes()
    }
}

/// Parses a DER certificate (for tests that alter one).
pub fn parse_cert(der: &[u8]) -> x509_cert::Certificate {
    x509_cert::Certificate::from_der(der).unwrap()
}
