//! Content digests (`sha256:<hex>`, `sha512:<hex>`): parsing, hashing bytes whole or streamed,
//! verifying what arrived against what was promised, and the OCI referrers fallback tag.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256, Sha512};

/// A hash algorithm a registry may name in a digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// SHA-256: what every registry uses by default.
    Sha256,
    /// SHA-512: allowed by the OCI spec, rarely used.
    Sha512,
}

impl Algorithm {
    /// The name used in a digest string, e.g. `sha256`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    /// How many lowercase hex characters an encoded digest of this algorithm has.
    pub(crate) fn hex_len(self) -> usize {
        match self {
            Algorithm::Sha256 => 64,
            Algorithm::Sha512 => 128,
        }
    }

    fn from_name(name: &str) -> Option<Algorithm> {
        match name {
            "sha256" => Some(Algorithm::Sha256),
            "sha512" => Some(Algorithm::Sha512),
            _ => None,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What was wrong with a digest string, or with content checked against a digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// No `:` between algorithm and hex.
    #[error("digest {input:?} has no ':' between algorithm and hex")]
    MissingSeparator {
        /// The digest as given.
        input: String,
    },
    /// An algorithm other than sha256 or sha512.
    #[error("digest {input:?} names algorithm {algorithm:?}; only sha256 and sha512 are supported")]
    UnsupportedAlgorithm {
        /// The digest as given.
        input: String,
        /// The algorithm it names.
        algorithm: String,
    },
    /// The hex part is not the algorithm's length.
    #[error("digest {input:?} has {actual} hex characters; {algorithm} needs {expected}")]
    WrongLength {
        /// The digest as given.
        input: String,
        /// The algorithm it names.
        algorithm: Algorithm,
        /// Hex characters the algorithm needs.
        expected: usize,
        /// Hex characters given.
        actual: usize,
    },
    /// The hex part has characters other than `0-9a-f`: one digest, one spelling.
    #[error("digest {input:?} must be lowercase hex (0-9, a-f) after the ':'")]
    NotLowercaseHex {
        /// The digest as given.
        input: String,
    },
    /// Content hashed to something other than the digest that names it.
    #[error("content digest mismatch: expected {expected}, got {actual}")]
    Mismatch {
        /// The digest that names the content.
        expected: Digest,
        /// What the bytes hashed to.
        actual: Digest,
    },
}

/// A validated content digest: an algorithm and the lowercase hex of the hash.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    algorithm: Algorithm,
    hex: String,
}

impl Digest {
    /// Parses `<algorithm>:<hex>`; the hex must be lowercase and of the algorithm's length.
    pub fn parse(input: &str) -> Result<Digest, DigestError> {
        let Some((name, hex)) = input.split_once(':') else {
            return Err(DigestError::MissingSeparator {
                input: input.to_owned(),
            });
        };
        let algorithm =
            Algorithm::from_name(name).ok_or_else(|| DigestError::UnsupportedAlgorithm {
                input: input.to_owned(),
                algorithm: name.to_owned(),
            })?;
        if !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(DigestError::NotLowercaseHex {
                input: input.to_owned(),
            });
        }
        if hex.len() != algorithm.hex_len() {
            return Err(DigestError::WrongLength {
                input: input.to_owned(),
                algorithm,
                expected: algorithm.hex_len(),
                actual: hex.len(),
            });
        }
        Ok(Digest {
            algorithm,
            hex: hex.to_owned(),
        })
    }

    /// The digest of `bytes` under `algorithm`.
    pub fn of_bytes(algorithm: Algorithm, bytes: &[u8]) -> Digest {
        let mut digester = Digester::new(algorithm);
        digester.update(bytes);
        digester.finish()
    }

    /// The algorithm the digest names.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The encoded hash, lowercase hex without the algorithm prefix.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// A streaming hasher with this digest's algorithm, to check content against it.
    pub fn digester(&self) -> Digester {
        Digester::new(self.algorithm)
    }

    /// The OCI referrers fallback tag `<alg>-<hex>`: algorithm cut to 32 chars, hex to 64.
    pub fn fallback_tag(&self) -> String {
        let name: String = self.algorithm.name().chars().take(32).collect();
        let hex: String = self.hex.chars().take(64).collect();
        format!("{name}-{hex}")
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm.name(), self.hex)
    }
}

impl FromStr for Digest {
    type Err = DigestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Digest::parse(s)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Digest::parse(&text).map_err(serde::de::Error::custom)
    }
}

enum Hasher {
    Sha256(Sha256),
    Sha512(Sha512),
}

/// Hashes content as it streams past, counting the bytes seen.
pub struct Digester {
    hasher: Hasher,
    bytes_seen: u64,
}

impl Digester {
    /// A digester with nothing hashed yet.
    pub fn new(algorithm: Algorithm) -> Digester {
        let hasher = match algorithm {
            Algorithm::Sha256 => Hasher::Sha256(Sha256::new()),
            Algorithm::Sha512 => Hasher::Sha512(Sha512::new()),
        };
        Digester {
            hasher,
            bytes_seen: 0,
        }
    }

    /// The algorithm it hashes with.
    pub fn algorithm(&self) -> Algorithm {
        match self.hasher {
            Hasher::Sha256(_) => Algorithm::Sha256,
            Hasher::Sha512(_) => Algorithm::Sha512,
        }
    }

    /// Hashes `bytes` after what came before.
    pub fn update(&mut self, bytes: &[u8]) {
        match &mut self.hasher {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
        self.bytes_seen = self.bytes_seen.saturating_add(bytes.len() as u64);
    }

    /// How many bytes have been fed to [`Digester::update`] so far.
    pub fn bytes_seen(&self) -> u64 {
        self.bytes_seen
    }

    /// The digest of every byte fed in.
    pub fn finish(self) -> Digest {
        let (algorithm, hex) = match self.hasher {
            Hasher::Sha256(h) => (Algorithm::Sha256, hex::encode(h.finalize())),
            Hasher::Sha512(h) => (Algorithm::Sha512, hex::encode(h.finalize())),
        };
        Digest { algorithm, hex }
    }

    /// Finishes and checks the result against `expected`.
    pub fn verify(self, expected: &Digest) -> Result<(), DigestError> {
        let actual = self.finish();
        if &actual == expected {
            Ok(())
        } else {
            Err(DigestError::Mismatch {
                expected: expected.clone(),
                actual,
            })
        }
    }
}

impl fmt::Debug for Digester {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Digester")
            .field("algorithm", &self.algorithm())
            .field("bytes_seen", &self.bytes_seen)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EMPTY_SHA256: &str =
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn hashes_known_content() {
        assert_eq!(
            Digest::of_bytes(Algorithm::Sha256, b"").to_string(),
            EMPTY_SHA256
        );
        let abc = Digest::of_bytes(Algorithm::Sha512, b"abc");
        assert_eq!(
            abc.hex(),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
             2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        );
        assert_eq!(abc.algorithm(), Algorithm::Sha512);
    }

    #[test]
    fn parses_valid_digests() {
        let d = Digest::parse(EMPTY_SHA256).unwrap();
        assert_eq!(d.algorithm(), Algorithm::Sha256);
        assert_eq!(d.to_string(), EMPTY_SHA256);
        assert_eq!(EMPTY_SHA256.parse::<Digest>().unwrap(), d);
        let long = format!("sha512:{}", "a".repeat(128));
        assert_eq!(Digest::parse(&long).unwrap().hex().len(), 128);
    }

    #[test]
    fn rejects_malformed_digests() {
        let upper = EMPTY_SHA256.to_uppercase().replace("SHA256", "sha256");
        assert!(matches!(
            Digest::parse(&upper),
            Err(DigestError::NotLowercaseHex { .. })
        ));
        assert!(matches!(
            Digest::parse("sha256e3b0"),
            Err(DigestError::MissingSeparator { .. })
        ));
        assert!(matches!(
            Digest::parse(&EMPTY_SHA256.replace("sha256", "md5")),
            Err(DigestError::UnsupportedAlgorithm { .. })
        ));
        assert!(matches!(
            Digest::parse(&EMPTY_SHA256[..EMPTY_SHA256.len() - 1]),
            Err(DigestError::WrongLength {
                expected: 64,
                actual: 63,
                ..
            })
        ));
        assert!(matches!(
            Digest::parse(&format!("sha512:{}", "a".repeat(64))),
            Err(DigestError::WrongLength { expected: 128, .. })
        ));
        assert!(matches!(
            Digest::parse(&format!("sha256:{}g", &"a".repeat(63))),
            Err(DigestError::NotLowercaseHex { .. })
        ));
        let err = Digest::parse("sha256:xyz").unwrap_err().to_string();
        assert!(err.contains("sha256:xyz"), "{err}");
    }

    #[test]
    fn serde_uses_the_string_form() {
        let d = Digest::parse(EMPTY_SHA256).unwrap();
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, format!("\"{EMPTY_SHA256}\""));
        assert_eq!(serde_json::from_str::<Digest>(&json).unwrap(), d);
        assert!(serde_json::from_str::<Digest>("\"sha256:abc\"").is_err());
    }

    #[test]
    fn fallback_tag_follows_the_referrers_tag_schema() {
        let d = Digest::parse(EMPTY_SHA256).unwrap();
        assert_eq!(d.fallback_tag(), format!("sha256-{}", d.hex()));
        let long = Digest::of_bytes(Algorithm::Sha512, b"x");
        assert_eq!(long.fallback_tag(), format!("sha512-{}", &long.hex()[..64]));
    }

    #[test]
    fn verify_reports_both_digests_on_mismatch() {
        let expected = Digest::of_bytes(Algorithm::Sha256, b"good");
        let mut ok = expected.digester();
        ok.update(b"go");
        ok.update(b"od");
        assert_eq!(ok.bytes_seen(), 4);
        ok.verify(&expected).unwrap();

        let mut bad = expected.digester();
        bad.update(b"evil");
        match bad.verify(&expected) {
            Err(DigestError::Mismatch {
                expected: e,
                actual,
            }) => {
                assert_eq!(e, expected);
                assert_eq!(actual, Digest::of_bytes(Algorithm::Sha256, b"evil"));
            }
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }

    #[test]
    fn digester_keeps_the_digest_algorithm() {
        let d = Digest::of_bytes(Algorithm::Sha512, b"");
        assert_eq!(d.digester().algorithm(), Algorithm::Sha512);
    }

    fn algorithm() -> impl Strategy<Value = Algorithm> {
        prop_oneof![Just(Algorithm::Sha256), Just(Algorithm::Sha512)]
    }

    proptest! {
        #[test]
        fn parse_and_display_round_trip(alg in algorithm(), seed in any::<Vec<u8>>()) {
            let d = Digest::of_bytes(alg, &seed);
            let text = d.to_string();
            prop_assert_eq!(Digest::parse(&text).unwrap(), d.clone());
            prop_assert_eq!(Digest::parse(&text).unwrap().to_string(), text);
        }

        #[test]
        fn streaming_equals_whole(
            alg in algorithm(),
            data in proptest::collection::vec(any::<u8>(), 0..2048),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let mut positions: Vec<usize> =
                cuts.iter().map(|c| if data.is_empty() { 0 } else { c % (data.len() + 1) }).collect();
            positions.push(0);
            positions.push(data.len());
            positions.sort_unstable();
            let mut digester = Digester::new(alg);
            for pair in positions.windows(2) {
                digester.update(&data[pair[0]..pair[1]]);
            }
            prop_assert_eq!(digester.bytes_seen(), data.len() as u64);
            prop_assert_eq!(digester.finish(), Digest::of_bytes(alg, &data));
        }

        #[test]
        fn parse_never_panics(s in "\\PC*") {
            let _ = Digest::parse(&s);
        }
    }
}
