//! Property tests: arbitrary bytes into every parser and verifier never panic, and a valid
//! bundle altered at any byte never panics (failures are kept in fuzz.proptest-regressions).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use ferry_distribution::Digest;
use ferry_testkit::trust_signer::{Keyless, TestSigstore};
use ferry_trust::tag::{BUNDLE, CERTIFICATE, CHAIN, SIGNATURE};
use ferry_trust::{
    Cert, CosignLayer, Identity, Policy, PrivateKey, PublicKey, SubjectMatch, TlogPolicy,
    TrustedRoot,
};
use proptest::prelude::*;

struct Fixture {
    policy: Policy,
    digest: Digest,
    bundle: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let s = TestSigstore::new();
        let digest = Digest::parse(&format!("sha256:{}", "cd".repeat(32))).unwrap();
        let bundle = s.dsse_bundle(&Keyless::new("https://i.test", "a@b.test"), &digest);
        let policy = Policy {
            keys: vec![PrivateKey::generate_p256().public_key()],
            identities: vec![Identity {
                issuer: "https://i.test".into(),
                subject: SubjectMatch::Exact("a@b.test".into()),
            }],
            root: Arc::new(s.trusted_root()),
            tlog: TlogPolicy::Require,
        };
        Fixture {
            policy,
            digest,
            bundle,
        }
    })
}

fn pem(label: &str, body: &[u8]) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(body);
    format!("-----BEGIN {label}-----\n{b64}\n-----END {label}-----\n").into_bytes()
}

proptest! {
    #[test]
    fn key_and_certificate_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = PublicKey::from_pem(&bytes);
        let _ = PublicKey::from_spki_der(&bytes);
        let _ = PublicKey::from_pem(&pem("PUBLIC KEY", &bytes));
        let _ = PrivateKey::from_pem(&bytes, Some(b""));
        let _ = PrivateKey::from_pem(&pem("PRIVATE KEY", &bytes), None);
        let _ = PrivateKey::from_pem(&pem("EC PRIVATE KEY", &bytes), None);
        let _ = PrivateKey::from_pem(&pem("ENCRYPTED SIGSTORE PRIVATE KEY", &bytes), Some(b"x"));
        let _ = Cert::from_der(&bytes);
        let _ = Cert::chain_from_pem(&bytes);
        let _ = Cert::from_pem(&pem("CERTIFICATE", &bytes));
        prop_assert!(PublicKey::from_pem(&[]).is_err());
    }

    #[test]
    fn json_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = TrustedRoot::from_json(&bytes);
        let _ = ferry_trust::tag::parse_simple_signing(&bytes);
        let _ = ferry_trust::tag::parse_rekor_bundle(&String::from_utf8_lossy(&bytes));
        let f = fixture();
        prop_assert!(f.policy.verify_bundle(&f.digest, &bytes).is_err());
    }

    #[test]
    fn cosign_layer_with_arbitrary_annotations_never_verifies_or_panics(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        sig in ".{0,120}", cert in ".{0,200}", chain in ".{0,200}", bundle in ".{0,200}",
    ) {
        let f = fixture();
        let annotations = BTreeMap::from([
            (SIGNATURE.to_string(), sig), (CERTIFICATE.to_string(), cert),
            (CHAIN.to_string(), chain), (BUNDLE.to_string(), bundle),
        ]);
        let layer = CosignLayer { payload: &payload, annotations: &annotations };
        let refused = f.policy.verify_cosign_layer(&f.digest, layer).is_err();
        prop_assert!(refused);
    }

    #[test]
    fn valid_bundle_altered_at_any_byte_never_panics(at in any::<prop::sample::Index>(), x in 1u8..=255) {
        let f = fixture();
        let mut b = f.bundle.clone();
        let i = at.index(b.len());
        b[i] ^= x;
        let _ = f.policy.verify_bundle(&f.digest, &b);
        prop_assert!(f.policy.verify_bundle(&f.digest, &f.bundle).is_ok());
    }
}
