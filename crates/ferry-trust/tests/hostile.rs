//! Hostile and mismatched signatures, each refused by name: another digest, another identity,
//! a foreign CA or log, an expired certificate, malformed base64, PEM and DER, oversize bundles.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use ferry_distribution::Digest;
use ferry_testkit::trust_signer::{
    Keyless, SIGNED_AT, SignedLayer, TestSigstore, key_signed_layer, simple_signing_payload,
};
use ferry_trust::bundle::{MAX_BUNDLE_BYTES, check_declared_size, read_bounded};
use ferry_trust::tag::{BUNDLE, CERTIFICATE, SIGNATURE};
use ferry_trust::{
    CosignLayer, Identity, Policy, PrivateKey, SubjectMatch, TlogPolicy, TrustError, TrustedRoot,
};

const GHA: &str = "https://token.actions.githubusercontent.com";
const WORKFLOW: &str = "https://github.com/acme/app/.github/workflows/release.yml@refs/heads/main";

fn image() -> Digest {
    Digest::parse("sha256:1111111111111111111111111111111111111111111111111111111111111111")
        .unwrap()
}

fn other_image() -> Digest {
    Digest::parse("sha256:2222222222222222222222222222222222222222222222222222222222222222")
        .unwrap()
}

fn policy_with(root: TrustedRoot, keys: Vec<ferry_trust::PublicKey>) -> Policy {
    Policy {
        keys,
        identities: vec![Identity {
            issuer: GHA.into(),
            subject: SubjectMatch::Exact(WORKFLOW.into()),
        }],
        root: Arc::new(root),
        tlog: TlogPolicy::Require,
    }
}

fn verify(p: &Policy, layer: &SignedLayer) -> Result<ferry_trust::Verified, TrustError> {
    p.verify_cosign_layer(
        &image(),
        CosignLayer {
            payload: &layer.payload,
            annotations: &layer.annotations,
        },
    )
}

#[test]
fn payload_naming_another_digest_is_refused() {
    let s = TestSigstore::new();
    let layer = s.keyless_layer(&Keyless::new(GHA, WORKFLOW), &other_image());
    let err = verify(&policy_with(s.trusted_root(), vec![]), &layer).unwrap_err();
    assert_eq!(
        err,
        TrustError::DigestMismatch {
            expected: image().to_string(),
            found: other_image().to_string()
        }
    );
    // The same in a bundle: the statement's subject is another image.
    let bundle = s.dsse_bundle(&Keyless::new(GHA, WORKFLOW), &other_image());
    let err = policy_with(s.trusted_root(), vec![])
        .verify_bundle(&image(), &bundle)
        .unwrap_err();
    assert!(matches!(err, TrustError::DigestMismatch { .. }), "{err:?}");
}

#[test]
fn certificate_for_another_identity_is_refused() {
    let s = TestSigstore::new();
    let p = policy_with(s.trusted_root(), vec![]);
    let wrong_subject = s.keyless_layer(
        &Keyless::new(GHA, "https://github.com/evil/app/x.yml@refs/heads/main"),
        &image(),
    );
    assert!(matches!(
        verify(&p, &wrong_subject).unwrap_err(),
        TrustError::IdentityMismatch { .. }
    ));
    let wrong_issuer = s.keyless_layer(
        &Keyless::new("https://accounts.google.com", WORKFLOW),
        &image(),
    );
    let err = verify(&p, &wrong_issuer).unwrap_err();
    assert_eq!(
        err,
        TrustError::IdentityMismatch {
            issuer: "https://accounts.google.com".into(),
            subject: WORKFLOW.into()
        }
    );
    // A regexp that is not anchored by the policy author still only matches what it says.
    let mut anchored = p.clone();
    anchored.identities = vec![Identity {
        issuer: GHA.into(),
        subject: SubjectMatch::Regex(regex::Regex::new("^https://github.com/acme/").unwrap()),
    }];
    assert!(verify(&anchored, &wrong_subject).is_err());
    assert!(
        verify(
            &anchored,
            &s.keyless_layer(&Keyless::new(GHA, WORKFLOW), &image())
        )
        .is_ok()
    );
}

#[test]
fn chain_to_a_ca_not_in_the_root_is_refused() {
    let ours = TestSigstore::new();
    let theirs = TestSigstore::new();
    // Their log is trusted (so the SET passes), their CA is not.
    let mut root = ours.trusted_root();
    root.tlogs = theirs.trusted_root().tlogs;
    let layer = theirs.keyless_layer(&Keyless::new(GHA, WORKFLOW), &image());
    let err = verify(&policy_with(root, vec![]), &layer).unwrap_err();
    assert!(
        matches!(err, TrustError::UntrustedCertificate(_)),
        "{err:?}"
    );
    // Their CA's certificate in the chain annotation changes nothing.
    assert!(layer.annotations.contains_key(ferry_trust::tag::CHAIN));
}

#[test]
fn set_from_a_key_not_in_the_root_is_refused() {
    let ours = TestSigstore::new();
    let theirs = TestSigstore::new();
    let mut root = ours.trusted_root();
    root.certificate_authorities = theirs.trusted_root().certificate_authorities;
    let layer = theirs.keyless_layer(&Keyless::new(GHA, WORKFLOW), &image());
    let err = verify(&policy_with(root, vec![]), &layer).unwrap_err();
    assert!(
        matches!(err, TrustError::Tlog(ref m) if m.contains("not a log of the trusted root")),
        "{err:?}"
    );
    // A SET signed by another key but claiming our log id does not verify either.
    let key = PrivateKey::generate_p256();
    let mut forged = theirs.key_signed_layer_logged(&key, &image(), SIGNED_AT);
    let ours_id = hex::encode(ours.log_id());
    let theirs_id = hex::encode(theirs.log_id());
    let b = forged.annotations[BUNDLE].replace(&theirs_id, &ours_id);
    forged.annotations.insert(BUNDLE.into(), b);
    let err = verify(
        &policy_with(ours.trusted_root(), vec![key.public_key()]),
        &forged,
    )
    .unwrap_err();
    assert!(
        matches!(err, TrustError::Tlog(ref m) if m.contains("does not verify")),
        "{err:?}"
    );
}

#[test]
fn set_over_another_entry_is_refused() {
    let s = TestSigstore::new();
    let key = PrivateKey::generate_p256();
    let p = policy_with(s.trusted_root(), vec![key.public_key()]);
    // A genuine SET, but over the entry of another signature by the same key.
    let donor = s.key_signed_layer_logged(&key, &other_image(), SIGNED_AT);
    let mut layer = key_signed_layer(&key, &image());
    layer
        .annotations
        .insert(BUNDLE.into(), donor.annotations[BUNDLE].clone());
    let err = verify(&p, &layer).unwrap_err();
    assert!(
        matches!(err, TrustError::Tlog(ref m) if m.contains("another payload")),
        "{err:?}"
    );
}

#[test]
fn certificate_expired_or_not_yet_valid_at_the_integrated_time_is_refused() {
    let s = TestSigstore::new();
    let p = policy_with(s.trusted_root(), vec![]);
    let mut who = Keyless::new(GHA, WORKFLOW);
    who.integrated_time = who.not_after + 1;
    let err = verify(&p, &s.keyless_layer(&who, &image())).unwrap_err();
    assert_eq!(
        err,
        TrustError::CertificateExpired {
            at: who.not_after + 1,
            not_before: who.not_before,
            not_after: who.not_after
        }
    );
    who.integrated_time = who.not_before - 1;
    assert!(matches!(
        verify(&p, &s.keyless_layer(&who, &image())).unwrap_err(),
        TrustError::CertificateExpired { .. }
    ));
    who.integrated_time = who.not_after;
    assert!(
        verify(&p, &s.keyless_layer(&who, &image())).is_ok(),
        "the last second is still valid"
    );
}

#[test]
fn keyless_without_a_log_entry_is_refused_even_under_tlog_skip() {
    let s = TestSigstore::new();
    let mut p = policy_with(s.trusted_root(), vec![]);
    p.tlog = TlogPolicy::Skip;
    let mut layer = s.keyless_layer(&Keyless::new(GHA, WORKFLOW), &image());
    layer.annotations.remove(BUNDLE);
    assert!(matches!(
        verify(&p, &layer).unwrap_err(),
        TrustError::Tlog(_)
    ));
}

#[test]
fn wrong_key_is_refused() {
    let s = TestSigstore::new();
    let mut p = policy_with(
        s.trusted_root(),
        vec![PrivateKey::generate_p256().public_key()],
    );
    p.tlog = TlogPolicy::Skip;
    let layer = key_signed_layer(&PrivateKey::generate_p256(), &image());
    assert_eq!(verify(&p, &layer).unwrap_err(), TrustError::WrongKey);
}

#[test]
fn malformed_base64_pem_and_der_are_refused_by_name() {
    let s = TestSigstore::new();
    let p = policy_with(s.trusted_root(), vec![]);
    let good = s.keyless_layer(&Keyless::new(GHA, WORKFLOW), &image());
    let with = |k: &str, v: &str| {
        let mut l = good.clone();
        l.annotations.insert(k.into(), v.into());
        verify(&p, &l).unwrap_err()
    };
    assert!(matches!(
        with(SIGNATURE, "not*base64"),
        TrustError::Base64 { .. }
    ));
    assert!(matches!(
        with(CERTIFICATE, "garbage"),
        TrustError::Pem { .. }
    ));
    let bad_der = "-----BEGIN CERTIFICATE-----\nMIIBAAAA\n-----END CERTIFICATE-----\n";
    assert!(matches!(with(CERTIFICATE, bad_der), TrustError::Der { .. }));
    assert!(matches!(
        with(BUNDLE, "{\"SignedEntryTimestamp\":"),
        TrustError::Json { .. }
    ));
    let payload = simple_signing_payload(&image(), "x");
    let layer = CosignLayer {
        payload: &payload[..payload.len() - 1],
        annotations: &good.annotations,
    };
    assert!(matches!(
        p.verify_cosign_layer(&image(), layer).unwrap_err(),
        TrustError::Json { .. }
    ));
    let no_sig = BTreeMap::new();
    let err = p
        .verify_cosign_layer(
            &image(),
            CosignLayer {
                payload: &payload,
                annotations: &no_sig,
            },
        )
        .unwrap_err();
    assert!(matches!(err, TrustError::Unsupported(_)));
}

/// A reader of `len` bytes of `{` that counts what was taken from it.
struct Huge {
    len: u64,
    read: u64,
}

impl Read for Huge {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.len - self.read).min(buf.len() as u64) as usize;
        buf[..n].fill(b'{');
        self.read += n as u64;
        Ok(n)
    }
}

#[test]
fn oversize_bundle_is_refused_without_being_read_whole() {
    const HUNDRED_MIB: u64 = 100 << 20;
    assert!(matches!(
        check_declared_size(HUNDRED_MIB),
        Err(TrustError::TooLarge { .. })
    ));
    assert!(check_declared_size(MAX_BUNDLE_BYTES).is_ok());
    let mut huge = Huge {
        len: HUNDRED_MIB,
        read: 0,
    };
    let err = read_bounded(&mut huge).unwrap_err();
    assert!(
        matches!(
            err,
            TrustError::TooLarge {
                limit: MAX_BUNDLE_BYTES,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        huge.read > MAX_BUNDLE_BYTES,
        "read up to the bound: {}",
        huge.read
    );
    assert!(
        huge.read <= MAX_BUNDLE_BYTES + 64 * 1024,
        "read {} of 100 MiB",
        huge.read
    );
    let s = TestSigstore::new();
    let p = policy_with(s.trusted_root(), vec![]);
    let big = vec![b' '; MAX_BUNDLE_BYTES as usize + 1];
    assert!(matches!(
        p.verify_bundle(&image(), &big).unwrap_err(),
        TrustError::TooLarge { .. }
    ));
    // At the bound it is read (and then refused for what it is, not for its size).
    let ok_size = read_bounded(Huge { len: 1000, read: 0 }).unwrap();
    assert_eq!(ok_size.len(), 1000);
}
