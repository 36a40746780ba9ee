//! ferry's own test Sigstore (ferry_testkit::trust_signer) against the verifier: every kind of
//! signature it makes verifies, so later integration tests can sign images with it.

use std::sync::Arc;

use ferry_distribution::Digest;
use ferry_testkit::trust_signer::{Keyless, SIGNED_AT, TestSigstore, key_signed_layer};
use ferry_trust::{
    CosignLayer, Identity, Policy, PrivateKey, Signer, SubjectMatch, TlogPolicy, TrustError,
};

fn image() -> Digest {
    Digest::parse("sha256:1111111111111111111111111111111111111111111111111111111111111111")
        .unwrap()
}

const GHA: &str = "https://token.actions.githubusercontent.com";
const WORKFLOW: &str = "https://github.com/acme/app/.github/workflows/release.yml@refs/heads/main";

fn policy(sigstore: &TestSigstore, keys: Vec<ferry_trust::PublicKey>, tlog: TlogPolicy) -> Policy {
    Policy {
        keys,
        identities: vec![Identity {
            issuer: GHA.into(),
            subject: SubjectMatch::Regex(regex::Regex::new("^https://github.com/acme/.+").unwrap()),
        }],
        root: Arc::new(sigstore.trusted_root()),
        tlog,
    }
}

#[test]
fn key_signed_layers_verify_with_p256_and_ed25519_keys() {
    let sigstore = TestSigstore::new();
    for key in [PrivateKey::generate_p256(), PrivateKey::generate_ed25519()] {
        let p = policy(&sigstore, vec![key.public_key()], TlogPolicy::Skip);
        let layer = key_signed_layer(&key, &image());
        let got = p
            .verify_cosign_layer(
                &image(),
                CosignLayer {
                    payload: &layer.payload,
                    annotations: &layer.annotations,
                },
            )
            .unwrap();
        assert_eq!(got.signer, Signer::Key(key.public_key().fingerprint()));
        assert_eq!(got.integrated_time, None);
    }
}

#[test]
fn key_signed_layer_needs_a_set_under_tlog_require_and_gives_its_time() {
    let sigstore = TestSigstore::new();
    let key = PrivateKey::generate_p256();
    let p = policy(&sigstore, vec![key.public_key()], TlogPolicy::Require);
    let bare = key_signed_layer(&key, &image());
    let err = p
        .verify_cosign_layer(
            &image(),
            CosignLayer {
                payload: &bare.payload,
                annotations: &bare.annotations,
            },
        )
        .unwrap_err();
    assert!(matches!(err, TrustError::Tlog(_)), "{err:?}");
    let logged = sigstore.key_signed_layer_logged(&key, &image(), SIGNED_AT + 5);
    let got = p
        .verify_cosign_layer(
            &image(),
            CosignLayer {
                payload: &logged.payload,
                annotations: &logged.annotations,
            },
        )
        .unwrap();
    assert_eq!(got.integrated_time, Some(SIGNED_AT + 5));
    assert!(got.log_index.is_some_and(|i| i >= 1000));
}

#[test]
fn keyless_layer_verifies_and_names_the_identity() {
    let sigstore = TestSigstore::new();
    let p = policy(&sigstore, vec![], TlogPolicy::Require);
    let layer = sigstore.keyless_layer(&Keyless::new(GHA, WORKFLOW), &image());
    let got = p
        .verify_cosign_layer(
            &image(),
            CosignLayer {
                payload: &layer.payload,
                annotations: &layer.annotations,
            },
        )
        .unwrap();
    assert_eq!(
        got.signer,
        Signer::Certificate {
            issuer: GHA.into(),
            subject: WORKFLOW.into()
        }
    );
    assert_eq!(got.integrated_time, Some(SIGNED_AT));
}

#[test]
fn bundles_verify_dsse_keyless_and_message_signature_by_key() {
    let sigstore = TestSigstore::new();
    let key = PrivateKey::generate_p256();
    let p = policy(&sigstore, vec![key.public_key()], TlogPolicy::Require);
    let dsse = sigstore.dsse_bundle(&Keyless::new(GHA, WORKFLOW), &image());
    let got = p.verify_bundle(&image(), &dsse).unwrap();
    assert_eq!(
        got.signer,
        Signer::Certificate {
            issuer: GHA.into(),
            subject: WORKFLOW.into()
        }
    );
    let message = sigstore.key_message_bundle(&key, &image(), SIGNED_AT + 9);
    let got = p.verify_bundle(&image(), &message).unwrap();
    assert_eq!(got.signer, Signer::Key(key.public_key().fingerprint()));
    assert_eq!(got.integrated_time, Some(SIGNED_AT + 9));
}
