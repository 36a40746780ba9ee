//! The trusted root: the built-in public-good one parses with its logs and CAs, and a file
//! replaces it (a private Sigstore's root verifies its own signatures and nothing else).

use std::sync::Arc;

use ferry_distribution::Digest;
use ferry_testkit::trust_signer::{Keyless, TestSigstore};
use ferry_trust::{
    CosignLayer, Identity, Policy, SubjectMatch, TlogPolicy, TrustError, TrustedRoot,
};

#[test]
fn built_in_public_good_root_has_its_logs_cas_and_tsa() {
    let root = TrustedRoot::public_good().unwrap();
    let urls: Vec<_> = root.tlogs.iter().map(|l| l.base_url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "https://rekor.sigstore.dev",
            "https://log2025-1.rekor.sigstore.dev"
        ]
    );
    assert_eq!(root.tlogs[0].key.kind(), "ECDSA P-256");
    assert_eq!(root.tlogs[1].key.kind(), "Ed25519");
    // Rekor v1's log id is the SHA-256 of its key's SPKI DER.
    assert_eq!(
        root.tlogs[0].log_id,
        root.tlogs[0].key.fingerprint().0.to_vec()
    );
    assert_eq!(root.certificate_authorities.len(), 2);
    // The 2021 CA ended on 2022-12-31; the 2022 one is open-ended with an intermediate.
    assert_eq!(root.certificate_authorities[0].valid.end, Some(1672531199));
    assert_eq!(root.certificate_authorities[1].chain.len(), 2);
    assert_eq!(root.timestamp_authorities.len(), 1);
    assert!(
        root.tlog(&root.tlogs[0].log_id, 1_600_000_000).is_none(),
        "before the key's validFor.start"
    );
}

#[test]
fn a_root_file_replaces_the_built_in_one() {
    let s = TestSigstore::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trusted_root.json");
    std::fs::write(&path, s.root_json()).unwrap();
    let digest = Digest::parse(&format!("sha256:{}", "ab".repeat(32))).unwrap();
    let layer = s.keyless_layer(
        &Keyless::new("https://issuer.test", "dev@ferry.test"),
        &digest,
    );
    let identities = vec![Identity {
        issuer: "https://issuer.test".into(),
        subject: SubjectMatch::Exact("dev@ferry.test".into()),
    }];
    let mut policy = Policy {
        keys: vec![],
        identities,
        root: Arc::new(TrustedRoot::from_file(&path).unwrap()),
        tlog: TlogPolicy::Require,
    };
    let l = CosignLayer {
        payload: &layer.payload,
        annotations: &layer.annotations,
    };
    assert!(policy.verify_cosign_layer(&digest, l).is_ok());
    policy.root = Arc::new(TrustedRoot::public_good().unwrap());
    assert!(matches!(
        policy.verify_cosign_layer(&digest, l).unwrap_err(),
        TrustError::Tlog(_)
    ));
}

#[test]
fn oversize_or_foreign_root_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    std::fs::write(&big, vec![b' '; ferry_trust::root::MAX_ROOT_BYTES + 10]).unwrap();
    assert!(matches!(
        TrustedRoot::from_file(&big).unwrap_err(),
        TrustError::TooLarge { .. }
    ));
    let foreign = br#"{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}"#;
    assert!(matches!(
        TrustedRoot::from_json(foreign).unwrap_err(),
        TrustError::Json { .. }
    ));
    let missing = dir.path().join("missing.json");
    assert!(matches!(
        TrustedRoot::from_file(&missing).unwrap_err(),
        TrustError::Io { .. }
    ));
}
