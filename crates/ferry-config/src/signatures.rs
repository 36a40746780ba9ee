//! `signatures:` resolved: the keys read and parsed, identities compiled, the trusted root
//! loaded (the built-in one once per config), each problem at its field; no verification here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ferry_trust::{Identity, Policy, PublicKey, SubjectMatch, TlogPolicy, TrustedRoot};

use super::check::Checker;
use super::locate::FieldPath;
use super::raw::{RawSignatures, RawTlog};

/// A mapping's signature policy: what ferry-trust verifies with, and the cooldown.
#[derive(Debug, Clone)]
pub struct SignaturePolicy {
    /// Keys, identities, trusted root and tlog rule.
    pub policy: Arc<Policy>,
    /// Mirror a digest only once its signature is this old (`min_age`); `None` = at once.
    pub min_age: Option<Duration>,
    /// The `trusted_root:` file as resolved, `None` for the built-in public-good root.
    pub trusted_root: Option<PathBuf>,
}

/// Two policies are equal when they name the same keys, identities, root, tlog rule and age.
impl PartialEq for SignaturePolicy {
    fn eq(&self, other: &Self) -> bool {
        let ids = |p: &Policy| -> Vec<(String, String)> {
            p.identities
                .iter()
                .map(|i| {
                    let s = match &i.subject {
                        SubjectMatch::Exact(s) => format!("={s}"),
                        SubjectMatch::Regex(r) => format!("~{}", r.as_str()),
                    };
                    (i.issuer.clone(), s)
                })
                .collect()
        };
        self.policy.keys == other.policy.keys
            && ids(&self.policy) == ids(&other.policy)
            && self.policy.tlog == other.policy.tlog
            && self.min_age == other.min_age
            && self.trusted_root == other.trusted_root
    }
}

/// A path of the config, taken relative to the config file's directory.
fn beside(config: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    match config.parent() {
        Some(dir) => dir.join(path),
        None => path.to_path_buf(),
    }
}

fn read_key(path: &Path) -> Result<PublicKey, String> {
    PublicKey::from_file(path).map_err(|e| format!("{}: {e}", path.display()))
}

impl Checker<'_> {
    /// The public key files at `path` (`signatures.keys`, `bundles.keys`), each relative to the
    /// config file and read by ferry-trust's one key reader; false if any failed, at its index.
    pub fn public_keys(&mut self, path: &FieldPath, files: &[PathBuf]) -> (Vec<PublicKey>, bool) {
        let mut ok = true;
        let mut keys = Vec::new();
        for (i, key) in files.iter().enumerate() {
            match read_key(&beside(self.file, key)) {
                Ok(k) => keys.push(k),
                Err(message) => {
                    self.fail(&path.index(i), message);
                    ok = false;
                }
            }
        }
        (keys, ok)
    }

    /// Resolves `signatures:` at `path`; `public_good` caches the built-in root for the config.
    pub fn signatures(
        &mut self,
        path: &FieldPath,
        raw: &RawSignatures,
        public_good: &mut Option<Arc<TrustedRoot>>,
    ) -> Option<SignaturePolicy> {
        let (keys, mut ok) = self.public_keys(&path.key("keys"), &raw.keys);
        let mut identities = Vec::new();
        for (i, id) in raw.identities.iter().enumerate() {
            let at = path.key("identities").index(i);
            if id.issuer.trim().is_empty() {
                self.fail(&at.key("issuer"), "issuer is empty");
                ok = false;
            }
            let subject = match (&id.subject, &id.subject_regexp) {
                (Some(s), None) if !s.is_empty() => SubjectMatch::Exact(s.clone()),
                (None, Some(r)) => match regex::Regex::new(r) {
                    Ok(re) => SubjectMatch::Regex(re),
                    Err(e) => {
                        self.fail(
                            &at.key("subject_regexp"),
                            format!("not a regular expression: {e}"),
                        );
                        ok = false;
                        continue;
                    }
                },
                (Some(_), Some(_)) => {
                    self.fail(&at, "set either subject or subject_regexp, not both");
                    ok = false;
                    continue;
                }
                (Some(_), None) => {
                    self.fail(&at.key("subject"), "subject is empty");
                    ok = false;
                    continue;
                }
                (None, None) => {
                    self.fail(&at, "needs subject or subject_regexp");
                    ok = false;
                    continue;
                }
            };
            identities.push(Identity {
                issuer: id.issuer.clone(),
                subject,
            });
        }
        if raw.keys.is_empty() && raw.identities.is_empty() {
            self.fail(
                path,
                "names no signer: give keys, identities, or both (an empty policy would refuse \
                 every image)",
            );
            ok = false;
        }
        let tlog = match raw.tlog {
            None | Some(RawTlog::Require) => TlogPolicy::Require,
            Some(RawTlog::Skip) => TlogPolicy::Skip,
        };
        if tlog == TlogPolicy::Skip && raw.keys.is_empty() && !raw.identities.is_empty() {
            self.fail(
                &path.key("tlog"),
                "tlog: skip applies to key signatures only; keyless signatures always need their \
                 Rekor entry",
            );
            ok = false;
        }
        let min_age = self.duration(&path.key("min_age"), raw.min_age.as_deref());
        if raw.min_age.is_some() && min_age.is_none() {
            ok = false;
        }
        let trusted_root = raw.trusted_root.as_ref().map(|p| beside(self.file, p));
        let root = match &trusted_root {
            Some(file) => match TrustedRoot::from_file(file) {
                Ok(r) => Some(Arc::new(r)),
                Err(e) => {
                    self.fail(&path.key("trusted_root"), e.to_string());
                    None
                }
            },
            None => match public_good {
                Some(r) => Some(r.clone()),
                None => match TrustedRoot::public_good() {
                    Ok(r) => {
                        let r = Arc::new(r);
                        *public_good = Some(r.clone());
                        Some(r)
                    }
                    Err(e) => {
                        self.fail(path, format!("the built-in trusted root: {e}"));
                        None
                    }
                },
            },
        };
        let root = root?;
        ok.then(|| SignaturePolicy {
            policy: Arc::new(Policy {
                keys,
                identities,
                root,
                tlog,
            }),
            min_age,
            trusted_root,
        })
    }
}
