//! Signatures made by cosign itself (tests/vectors/README.md names their sources), verified,
//! then each altered by one byte (payload, digest, signature) and seen refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_distribution::Digest;
use ferry_trust::tag::{BUNDLE, CERTIFICATE, SIGNATURE};
use ferry_trust::{
    CosignLayer, Identity, Policy, PublicKey, Signer, SubjectMatch, TlogPolicy, TrustError,
    TrustedRoot,
};

fn vector(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/vectors/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn text(name: &str) -> String {
    String::from_utf8(vector(name)).unwrap().trim().to_string()
}

fn digest(s: &str) -> Digest {
    Digest::parse(s).unwrap()
}

fn flip(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at] ^= 0x01;
    out
}

fn key_policy() -> Policy {
    Policy {
        keys: vec![PublicKey::from_pem(&vector("sigstore-rs-key-sig.pub")).unwrap()],
        identities: vec![],
        root: Arc::new(TrustedRoot::public_good().unwrap()),
        tlog: TlogPolicy::Skip,
    }
}

const KEY_DIGEST: &str = "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b";
const KEYLESS_DIGEST: &str =
    "sha256:5f481572d088dc4023afb35fced9530ced3d9b03bf7299c6f492163cb9f0452e";
const BUNDLE_DIGEST: &str =
    "sha256:732112270d7e59418a8c080b134b24cabd67d250d0d0147a97ed95ba5c280aa4";

#[test]
fn key_signed_sig_layer_verifies_and_names_the_key() {
    let policy = key_policy();
    let payload = vector("sigstore-rs-key-sig.payload.json");
    let annotations = BTreeMap::from([(
        SIGNATURE.to_string(),
        text("sigstore-rs-key-sig.signature.b64"),
    )]);
    let got = policy
        .verify_cosign_layer(
            &digest(KEY_DIGEST),
            CosignLayer {
                payload: &payload,
                annotations: &annotations,
            },
        )
        .unwrap();
    assert_eq!(got.signer, Signer::Key(policy.keys[0].fingerprint()));
    assert_eq!(got.integrated_time, None);
}

#[test]
fn key_signed_sig_layer_refuses_each_one_byte_change() {
    let policy = key_policy();
    let payload = vector("sigstore-rs-key-sig.payload.json");
    let sig = text("sigstore-rs-key-sig.signature.b64");
    let annotations = BTreeMap::from([(SIGNATURE.to_string(), sig.clone())]);
    // A payload byte outside the digest (in the docker-reference).
    let at = payload.windows(7).position(|w| w == b"busybox").unwrap();
    let err = policy
        .verify_cosign_layer(
            &digest(KEY_DIGEST),
            CosignLayer {
                payload: &flip(&payload, at),
                annotations: &annotations,
            },
        )
        .unwrap_err();
    assert_eq!(err, TrustError::WrongKey);
    // The digest being copied differs from the one signed.
    let other = KEY_DIGEST.replace("f3cf", "f3ce");
    let err = policy
        .verify_cosign_layer(
            &digest(&other),
            CosignLayer {
                payload: &payload,
                annotations: &annotations,
            },
        )
        .unwrap_err();
    assert!(matches!(err, TrustError::DigestMismatch { .. }), "{err:?}");
    // One byte of the signature.
    use base64::Engine as _;
    let std = base64::engine::general_purpose::STANDARD;
    let bad = std.encode(flip(&std.decode(&sig).unwrap(), 20));
    let annotations = BTreeMap::from([(SIGNATURE.to_string(), bad)]);
    let err = policy
        .verify_cosign_layer(
            &digest(KEY_DIGEST),
            CosignLayer {
                payload: &payload,
                annotations: &annotations,
            },
        )
        .unwrap_err();
    assert_eq!(err, TrustError::WrongKey);
}

fn keyless_policy(subject: &str) -> Policy {
    Policy {
        keys: vec![],
        // This 2021 certificate predates Fulcio's issuer extension: its issuer is empty.
        identities: vec![Identity {
            issuer: String::new(),
            subject: SubjectMatch::Exact(subject.into()),
        }],
        root: Arc::new(TrustedRoot::public_good().unwrap()),
        tlog: TlogPolicy::Require,
    }
}

fn keyless_annotations() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            SIGNATURE.to_string(),
            text("sigstore-rs-keyless.signature.b64"),
        ),
        (
            CERTIFICATE.to_string(),
            text("sigstore-rs-keyless.cert.pem"),
        ),
        (BUNDLE.to_string(), text("sigstore-rs-keyless.bundle.json")),
    ])
}

#[test]
fn keyless_sig_layer_verifies_under_the_public_good_root() {
    let policy = keyless_policy("flavio@castelli.me");
    let payload = vector("sigstore-rs-keyless.payload.json");
    let annotations = keyless_annotations();
    let got = policy
        .verify_cosign_layer(
            &digest(KEYLESS_DIGEST),
            CosignLayer {
                payload: &payload,
                annotations: &annotations,
            },
        )
        .unwrap();
    assert_eq!(
        got.signer,
        Signer::Certificate {
            issuer: String::new(),
            subject: "flavio@castelli.me".into()
        }
    );
    assert_eq!(got.integrated_time, Some(1634714717));
    assert_eq!(got.log_index, Some(783607));
}

#[test]
fn keyless_sig_layer_refuses_each_one_byte_change_and_another_identity() {
    let policy = keyless_policy("flavio@castelli.me");
    let payload = vector("sigstore-rs-keyless.payload.json");
    let annotations = keyless_annotations();
    let layer = |p: &[u8], a: &BTreeMap<String, String>| {
        policy
            .verify_cosign_layer(
                &digest(KEYLESS_DIGEST),
                CosignLayer {
                    payload: p,
                    annotations: a,
                },
            )
            .map(|_| ())
    };
    let at = payload.windows(9).position(|w| w == b"kubewarde").unwrap();
    let err = layer(&flip(&payload, at), &annotations).unwrap_err();
    assert!(matches!(err, TrustError::BadSignature { .. }), "{err:?}");
    let err = policy
        .verify_cosign_layer(
            &digest(&KEYLESS_DIGEST.replace("5f48", "5f49")),
            CosignLayer {
                payload: &payload,
                annotations: &annotations,
            },
        )
        .unwrap_err();
    assert!(matches!(err, TrustError::DigestMismatch { .. }), "{err:?}");
    // The SET, altered, no longer verifies.
    let mut a = annotations.clone();
    let bundle = a[BUNDLE].replace("\"logIndex\":783607", "\"logIndex\":783608");
    a.insert(BUNDLE.into(), bundle);
    assert!(matches!(
        layer(&payload, &a).unwrap_err(),
        TrustError::Tlog(_)
    ));
    // No SET at all under tlog: require.
    let mut a = annotations.clone();
    a.remove(BUNDLE);
    assert!(matches!(
        layer(&payload, &a).unwrap_err(),
        TrustError::Tlog(_)
    ));
    let other = keyless_policy("someone@else.example");
    let err = other
        .verify_cosign_layer(
            &digest(KEYLESS_DIGEST),
            CosignLayer {
                payload: &payload,
                annotations: &annotations,
            },
        )
        .unwrap_err();
    assert!(
        matches!(err, TrustError::IdentityMismatch { ref subject, .. } if subject == "flavio@castelli.me"),
        "{err:?}"
    );
}

fn bundle_policy(root: &str) -> Policy {
    Policy {
        keys: vec![],
        identities: vec![Identity {
            issuer: "https://github.com/login/oauth".into(),
            subject: SubjectMatch::Regex(regex::Regex::new("^cody@soyland\\.com$").unwrap()),
        }],
        root: Arc::new(TrustedRoot::from_json(&vector(root)).unwrap()),
        tlog: TlogPolicy::Require,
    }
}

#[test]
fn cosign_v03_bundle_verifies_under_its_root_and_the_built_in_one() {
    let bundle = vector("cosign-oci-attestation.sigstore.json");
    for policy in [bundle_policy("cosign-trusted_root_pgi.json"), {
        let mut p = bundle_policy("cosign-trusted_root_pgi.json");
        p.root = Arc::new(TrustedRoot::public_good().unwrap());
        p
    }] {
        let got = policy
            .verify_bundle(&digest(BUNDLE_DIGEST), &bundle)
            .unwrap();
        assert_eq!(
            got.signer,
            Signer::Certificate {
                issuer: "https://github.com/login/oauth".into(),
                subject: "cody@soyland.com".into()
            }
        );
        assert_eq!(got.integrated_time, Some(1740770291));
    }
}

#[test]
fn cosign_v03_bundle_refuses_each_one_byte_change() {
    let policy = bundle_policy("cosign-trusted_root_pgi.json");
    let bundle = vector("cosign-oci-attestation.sigstore.json");
    let err = policy
        .verify_bundle(&digest(&BUNDLE_DIGEST.replace("7321", "7320")), &bundle)
        .unwrap_err();
    assert!(matches!(err, TrustError::DigestMismatch { .. }), "{err:?}");
    let v: serde_json::Value = serde_json::from_slice(&bundle).unwrap();
    use base64::Engine as _;
    let std = base64::engine::general_purpose::STANDARD;
    // One byte of the DSSE payload (its predicate, not the subject).
    let mut payload = std
        .decode(v["dsseEnvelope"]["payload"].as_str().unwrap())
        .unwrap();
    let at = payload.windows(9).position(|w| w == b"predicate").unwrap();
    payload[at] ^= 0x01;
    let mut altered = v.clone();
    altered["dsseEnvelope"]["payload"] = std.encode(&payload).into();
    let err = policy
        .verify_bundle(
            &digest(BUNDLE_DIGEST),
            &serde_json::to_vec(&altered).unwrap(),
        )
        .unwrap_err();
    assert!(matches!(err, TrustError::BadSignature { .. }), "{err:?}");
    // One byte of the DSSE signature.
    let sig = std
        .decode(v["dsseEnvelope"]["signatures"][0]["sig"].as_str().unwrap())
        .unwrap();
    let mut altered = v.clone();
    altered["dsseEnvelope"]["signatures"][0]["sig"] = std.encode(flip(&sig, 12)).into();
    let err = policy
        .verify_bundle(
            &digest(BUNDLE_DIGEST),
            &serde_json::to_vec(&altered).unwrap(),
        )
        .unwrap_err();
    assert!(matches!(err, TrustError::BadSignature { .. }), "{err:?}");
    // One byte of the SET.
    let set = std
        .decode(
            v["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]["signedEntryTimestamp"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    let mut altered = v.clone();
    altered["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]["signedEntryTimestamp"] =
        std.encode(flip(&set, 30)).into();
    let err = policy
        .verify_bundle(
            &digest(BUNDLE_DIGEST),
            &serde_json::to_vec(&altered).unwrap(),
        )
        .unwrap_err();
    assert!(matches!(err, TrustError::Tlog(_)), "{err:?}");
}

#[test]
fn cosign_v03_bundle_inclusion_proof_and_checkpoint_are_checked() {
    let policy = bundle_policy("cosign-trusted_root_pgi.json");
    let bundle = vector("cosign-oci-attestation.sigstore.json");
    let v: serde_json::Value = serde_json::from_slice(&bundle).unwrap();
    let proof = &v["verificationMaterial"]["tlogEntries"][0]["inclusionProof"];
    assert_eq!(proof["hashes"].as_array().unwrap().len(), 16);
    use base64::Engine as _;
    let std = base64::engine::general_purpose::STANDARD;
    // One byte of one audit-path hash.
    let h = std.decode(proof["hashes"][3].as_str().unwrap()).unwrap();
    let mut altered = v.clone();
    altered["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["hashes"][3] =
        std.encode(flip(&h, 0)).into();
    let err = policy
        .verify_bundle(
            &digest(BUNDLE_DIGEST),
            &serde_json::to_vec(&altered).unwrap(),
        )
        .unwrap_err();
    assert!(
        matches!(err, TrustError::Tlog(ref m) if m.contains("root hash")),
        "{err:?}"
    );
    // An extra line in the checkpoint's note: its signature no longer holds.
    let cp = proof["checkpoint"]["envelope"].as_str().unwrap();
    let mut altered = v.clone();
    altered["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["checkpoint"]["envelope"] =
        cp.replacen("\n\n", "\nextra\n\n", 1).into();
    let err = policy
        .verify_bundle(
            &digest(BUNDLE_DIGEST),
            &serde_json::to_vec(&altered).unwrap(),
        )
        .unwrap_err();
    assert!(
        matches!(err, TrustError::Tlog(ref m) if m.contains("not signed")),
        "{err:?}"
    );
}
