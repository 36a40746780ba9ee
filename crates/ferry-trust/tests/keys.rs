//! Keys: PEM parsing of cosign's public and private keys, sign and verify, fingerprints.
//! Vectors from sigstore-rs (see tests/vectors/README.md); secrets never appear in Debug.

use ferry_trust::{PrivateKey, PublicKey, TrustError};

fn vector(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/vectors/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn cosign_generated_encrypted_key_opens_with_its_empty_password_and_signs() {
    let key = PrivateKey::from_pem(
        &vector("sigstore-rs-cosign_generated_encrypted_empty_private.key"),
        Some(b""),
    )
    .unwrap();
    let public = key.public_key();
    assert_eq!(public.kind(), "ECDSA P-256");
    let sig = key.sign(b"payload");
    public.verify(b"payload", &sig).unwrap();
    assert!(matches!(
        public.verify(b"payloaD", &sig),
        Err(TrustError::BadSignature { .. })
    ));
}

#[test]
fn encrypted_key_refuses_a_wrong_password_without_printing_it() {
    let err = PrivateKey::from_pem(
        &vector("sigstore-rs-ecdsa_encrypted_private.key"),
        Some(b"hunter2"),
    )
    .unwrap_err();
    assert_eq!(err, TrustError::Decrypt);
    assert!(!err.to_string().contains("hunter2"));
    let key = PrivateKey::from_pem(
        &vector("sigstore-rs-ecdsa_encrypted_private.key"),
        Some(b"123"),
    )
    .unwrap();
    let sig = key.sign(b"m");
    key.public_key().verify(b"m", &sig).unwrap();
    let plain = PrivateKey::from_pem(&vector("sigstore-rs-ecdsa_private.key"), None).unwrap();
    assert!(
        plain.public_key().verify(b"m", &sig).is_err(),
        "another key must not verify"
    );
}

#[test]
fn encrypted_key_without_a_password_is_refused() {
    let err =
        PrivateKey::from_pem(&vector("sigstore-rs-ecdsa_encrypted_private.key"), None).unwrap_err();
    assert!(
        matches!(err, TrustError::UnsupportedKey(ref m) if m.contains("password")),
        "{err}"
    );
}

#[test]
fn pkcs8_ed25519_key_signs_and_its_public_pem_round_trips() {
    let key = PrivateKey::from_pem(&vector("sigstore-rs-ed25519_private.key"), None).unwrap();
    let public = key.public_key();
    assert_eq!(public.kind(), "Ed25519");
    let again = PublicKey::from_pem(public.to_pem().as_bytes()).unwrap();
    assert_eq!(again, public);
    let sig = key.sign(b"bundle record");
    assert_eq!(sig.len(), 64);
    again.verify(b"bundle record", &sig).unwrap();
    assert!(again.verify(b"bundle recorD", &sig).is_err());
}

#[test]
fn own_keys_seal_and_open_as_cosign_does() {
    for key in [PrivateKey::generate_p256(), PrivateKey::generate_ed25519()] {
        let der = key.to_pkcs8_der().unwrap();
        let sealed = ferry_trust::cosign_key::encrypt_pkcs8(&der, b"s3cret", 10).unwrap();
        assert!(sealed.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"));
        let opened = PrivateKey::from_pem(sealed.as_bytes(), Some(b"s3cret")).unwrap();
        assert_eq!(opened.public_key(), key.public_key());
        assert_eq!(
            PrivateKey::from_pem(sealed.as_bytes(), Some(b"s3creT")).unwrap_err(),
            TrustError::Decrypt
        );
        let pem = key.to_pkcs8_pem().unwrap();
        assert_eq!(
            PrivateKey::from_pem(pem.as_bytes(), None)
                .unwrap()
                .public_key(),
            key.public_key()
        );
    }
}

#[test]
fn private_key_debug_shows_only_the_public_fingerprint() {
    let key = PrivateKey::generate_p256();
    let secret_hex = hex::encode(&key.to_pkcs8_der().unwrap()[..]);
    let debug = format!("{key:?}");
    assert!(
        debug.contains(&key.public_key().fingerprint().to_string()),
        "{debug}"
    );
    // No 8-byte window of the secret DER shows up in the Debug text.
    for i in (0..secret_hex.len() - 16).step_by(2) {
        assert!(!debug.contains(&secret_hex[i..i + 16]), "{debug}");
    }
}

#[test]
fn fingerprint_is_sha256_of_the_spki_der() {
    use sha2::Digest as _;
    let key = PrivateKey::generate_p256().public_key();
    let want = hex::encode(sha2::Sha256::digest(key.to_spki_der()));
    assert_eq!(key.fingerprint().to_string(), format!("sha256:{want}"));
    assert_eq!(key.to_spki_der().len(), 91, "P-256 SPKI DER is 91 bytes");
}

#[test]
fn rsa_public_key_pem_verifies_pkcs1v15() {
    // Built from a fixed RSA-2048 key in the vectors (cosign's RSA keys are SPKI PEM too).
    let pem = vector("rsa-2048.pub");
    let key = PublicKey::from_pem(&pem).unwrap();
    assert_eq!(key.kind(), "RSA");
    let sig = hex::decode(
        String::from_utf8(vector("rsa-2048.sig.hex"))
            .unwrap()
            .trim(),
    )
    .unwrap();
    key.verify(b"ferry rsa vector\n", &sig).unwrap();
    assert!(key.verify(b"ferry rsa vector!", &sig).is_err());
}

#[test]
fn malformed_pem_is_refused_by_name() {
    let cases: [&[u8]; 5] = [
        b"",
        b"-----BEGIN PUBLIC KEY-----\nnot base64!\n-----END PUBLIC KEY-----\n",
        b"-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n",
        b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        &[0xff, 0xfe, 0x00],
    ];
    for case in cases {
        let err = PublicKey::from_pem(case).unwrap_err();
        assert!(
            matches!(err, TrustError::Pem { .. } | TrustError::Der { .. }),
            "{err:?}"
        );
    }
}
