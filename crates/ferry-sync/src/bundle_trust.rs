//! Whether a bundle may be believed before anything of it reaches a target: its record signed
//! under one of the site's keys, or (no key) its record held against the tar, or nothing at all.

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use ferry_store::archive::reader::ArchiveReader;
use ferry_store::bundle::{BUNDLE_ENTRY, BundleRecord, RecordSigner, SIGNATURE_ENTRY};
use ferry_trust::PrivateKey;
pub use ferry_trust::PublicKey;

/// What a bundle was found to be, said in the import's output and, as the JSON report's
/// `authenticity` (`{"status": "signed", "key": "ECDSA P-256 sha256:…"}`, `{"status":
/// "recorded"}`, `{"status": "not_authenticated"}`), in `import --json` and `verify --bundle --json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Authenticity {
    /// Its record is signed by this key (kind and fingerprint), and the tar agrees with it.
    Signed {
        /// `ECDSA P-256 sha256:…`.
        key: String,
    },
    /// It holds a record the tar agrees with, but no key was asked for: anyone could have
    /// written both.
    Recorded,
    /// No `ferry-bundle.json` (skopeo's archive): nothing in it is authenticated.
    NotAuthenticated,
}

/// One line for the output.
impl std::fmt::Display for Authenticity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Authenticity::Signed { key } => write!(
                f,
                "the bundle's record is signed by {key}, and every entry of the tar agrees with it"
            ),
            Authenticity::Recorded => write!(
                f,
                "the bundle's {BUNDLE_ENTRY} agrees with every entry of the tar, but no key was \
                 given (--verify-key, or bundles.keys in the config): it is not authenticated"
            ),
            Authenticity::NotAuthenticated => write!(
                f,
                "the archive has no {BUNDLE_ENTRY}: it is not authenticated; its images go where \
                 its index.json names them"
            ),
        }
    }
}

/// A bundle's record as authentication needs it: parsed, its bytes (what a signature is over)
/// and its signature's text; from an indexed archive or from the head of a one-pass stream.
pub(crate) struct RecordParts<'a> {
    pub record: &'a BundleRecord,
    pub bytes: &'a [u8],
    pub signature: Option<&'a [u8]>,
}

impl<'a> RecordParts<'a> {
    /// The record `reader` indexed, if it holds one.
    pub(crate) fn of(reader: &'a ArchiveReader) -> Option<Self> {
        let (record, raw) = reader.record().zip(reader.raw_record())?;
        Some(RecordParts {
            record,
            bytes: &raw.bytes,
            signature: raw.signature.as_deref(),
        })
    }
}

/// How a bundle (its record's parts, `None` without one) stands under `keys`: with any key, a
/// bundle without a record, without a signature, with a record that does not commit to
/// `index.json` and every entry's size, or whose signature no key verifies, is refused (the
/// error says which); without keys, the record is said to be unauthenticated. Holding the
/// record against the tar is the caller's: an indexed archive did it when it was indexed; a
/// one-pass stream holds `index.json` against it at the head and each blob as it streams.
pub(crate) fn authenticate(
    record: Option<RecordParts<'_>>,
    keys: &[PublicKey],
) -> Result<Authenticity, String> {
    let (record, bytes, signature) = match (record, keys.is_empty()) {
        (None, true) => return Ok(Authenticity::NotAuthenticated),
        (Some(_), true) => return Ok(Authenticity::Recorded),
        (None, false) => {
            return Err(format!(
                "the archive has no {BUNDLE_ENTRY}, and a key is required: only a bundle signed \
                 by `ferry export --sign-key` is imported under --verify-key"
            ));
        }
        (Some(p), false) => (p.record, p.bytes, p.signature),
    };
    let Some(signature) = signature else {
        return Err(format!(
            "the bundle is not signed (no {SIGNATURE_ENTRY}), and a key is required"
        ));
    };
    if record.index.is_none() || (record.sizes.is_empty() && !record.carried.is_empty()) {
        return Err(format!(
            "the bundle's {BUNDLE_ENTRY} does not commit to index.json and every entry's size \
             (written by an older ferry): it cannot be trusted under a key"
        ));
    }
    let text = String::from_utf8_lossy(signature);
    let sig = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| format!("{SIGNATURE_ENTRY} is not base64"))?;
    for key in keys {
        if key.verify(bytes, &sig).is_ok() {
            return Ok(Authenticity::Signed {
                key: format!("{} {}", key.kind(), key.fingerprint()),
            });
        }
    }
    let tried: Vec<String> = keys.iter().map(|k| k.fingerprint().to_string()).collect();
    Err(format!(
        "the signature of the bundle's {BUNDLE_ENTRY} does not verify under the key{} given ({}): \
         the bundle was altered, or signed by another key",
        if keys.len() == 1 { "" } else { "s" },
        tried.join(", ")
    ))
}

/// The signer of `ferry export --sign-key FILE`: a PKCS#8 PEM private key (ECDSA P-256 or
/// Ed25519), a SEC1 P-256 key, or cosign's encrypted key opened with `password`
/// (`COSIGN_PASSWORD`); its signature text is base64, as `cosign sign-blob` prints it.
pub fn signer_from(path: &Path, password: Option<&[u8]>) -> Result<(RecordSigner, String), String> {
    let key = PrivateKey::from_file(path, password)
        .map_err(|e| format!("--sign-key {}: {e}", path.display()))?;
    let public = key.public_key();
    let shown = format!("{} {}", public.kind(), public.fingerprint());
    let key = Arc::new(key);
    let signer = RecordSigner(Arc::new(move |bytes: &[u8]| {
        base64::engine::general_purpose::STANDARD
            .encode(key.sign(bytes))
            .into_bytes()
    }));
    Ok((signer, shown))
}
