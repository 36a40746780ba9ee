//! cosign's encrypted private key (`ENCRYPTED SIGSTORE PRIVATE KEY`): scrypt and NaCl secretbox.
//! The password is only borrowed; the opened key is held zeroized and never printed.

use base64::Engine as _;
use crypto_secretbox::aead::{Aead as _, KeyInit as _};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::error::{Result, TrustError, b64};

/// The largest scrypt cost ferry accepts from a key file (2^20; cosign writes 2^15 or 2^16), so
/// that a hostile key cannot ask for gigabytes of memory.
const MAX_LOG_N: u8 = 20;

#[derive(Deserialize, Serialize)]
struct Envelope {
    kdf: Kdf,
    cipher: Cipher,
    ciphertext: String,
}

#[derive(Deserialize, Serialize)]
struct Kdf {
    name: String,
    params: KdfParams,
    salt: String,
}

#[derive(Deserialize, Serialize)]
#[allow(non_snake_case)]
struct KdfParams {
    N: u64,
    r: u32,
    p: u32,
}

#[derive(Deserialize, Serialize)]
struct Cipher {
    name: String,
    nonce: String,
}

fn key_from(password: &[u8], salt: &[u8], n: u64, r: u32, p: u32) -> Result<Zeroizing<[u8; 32]>> {
    if !n.is_power_of_two() || n < 2 {
        return Err(TrustError::UnsupportedKey(
            "scrypt N is not a power of two".into(),
        ));
    }
    let log_n = n.trailing_zeros() as u8;
    if log_n > MAX_LOG_N || r == 0 || r > 32 || p == 0 || p > 16 {
        return Err(TrustError::UnsupportedKey(format!(
            "scrypt cost N={n} r={r} p={p} beyond ferry's bound"
        )));
    }
    let params = scrypt::Params::new(log_n, r, p, 32)
        .map_err(|_| TrustError::UnsupportedKey("scrypt parameters".into()))?;
    let mut key = Zeroizing::new([0u8; 32]);
    scrypt::scrypt(password, salt, &params, key.as_mut())
        .map_err(|_| TrustError::UnsupportedKey("scrypt parameters".into()))?;
    Ok(key)
}

/// Opens the JSON envelope inside the PEM block: the PKCS#8 DER of the private key.
pub(crate) fn decrypt(envelope: &[u8], password: &[u8]) -> Result<Zeroizing<Vec<u8>>> {
    let env: Envelope = serde_json::from_slice(envelope).map_err(|e| TrustError::Json {
        what: "encrypted private key",
        reason: e.to_string(),
    })?;
    if env.kdf.name != "scrypt" || env.cipher.name != "nacl/secretbox" {
        return Err(TrustError::UnsupportedKey(format!(
            "encrypted key with kdf {:?} and cipher {:?}",
            env.kdf.name, env.cipher.name
        )));
    }
    let salt = b64("encrypted key salt", &env.kdf.salt)?;
    let nonce = b64("encrypted key nonce", &env.cipher.nonce)?;
    let ciphertext = b64("encrypted key ciphertext", &env.ciphertext)?;
    if nonce.len() != 24 {
        return Err(TrustError::UnsupportedKey(
            "secretbox nonce is not 24 bytes".into(),
        ));
    }
    let key = key_from(
        password,
        &salt,
        env.kdf.params.N,
        env.kdf.params.r,
        env.kdf.params.p,
    )?;
    let cipher = crypto_secretbox::XSalsa20Poly1305::new(key.as_ref().into());
    let plain = cipher
        .decrypt(
            crypto_secretbox::Nonce::from_slice(&nonce),
            ciphertext.as_ref(),
        )
        .map_err(|_| TrustError::Decrypt)?;
    Ok(Zeroizing::new(plain))
}

/// Seals a PKCS#8 DER private key as cosign does, with scrypt cost 2^`log_n` (cosign: 15),
/// and returns the `ENCRYPTED SIGSTORE PRIVATE KEY` PEM block.
pub fn encrypt_pkcs8(pkcs8_der: &[u8], password: &[u8], log_n: u8) -> Result<Zeroizing<String>> {
    use rand_core::RngCore as _;
    let mut salt = [0u8; 32];
    let mut nonce = [0u8; 24];
    rand_core::OsRng.fill_bytes(&mut salt);
    rand_core::OsRng.fill_bytes(&mut nonce);
    let n = 1u64 << log_n.min(MAX_LOG_N);
    let key = key_from(password, &salt, n, 8, 1)?;
    let cipher = crypto_secretbox::XSalsa20Poly1305::new(key.as_ref().into());
    let sealed = cipher
        .encrypt(crypto_secretbox::Nonce::from_slice(&nonce), pkcs8_der)
        .map_err(|_| TrustError::Decrypt)?;
    let std = base64::engine::general_purpose::STANDARD;
    let env = Envelope {
        kdf: Kdf {
            name: "scrypt".into(),
            params: KdfParams { N: n, r: 8, p: 1 },
            salt: std.encode(salt),
        },
        cipher: Cipher {
            name: "nacl/secretbox".into(),
            nonce: std.encode(nonce),
        },
        ciphertext: std.encode(sealed),
    };
    let json = serde_json::to_vec(&env).map_err(|e| TrustError::Json {
        what: "encrypted private key",
        reason: e.to_string(),
    })?;
    der::pem::encode_string(
        "ENCRYPTED SIGSTORE PRIVATE KEY",
        der::pem::LineEnding::LF,
        &json,
    )
    .map(Zeroizing::new)
    .map_err(|_| TrustError::UnsupportedKey("the key does not encode".into()))
}
