//! What a registry showed about tokens, manifest commits and tags (issue 31's auth task): a token
//! for several scopes refused, manifest PUTs lagging the blobs ferry just committed, tags immutable.

// Kept apart from `capabilities.rs` (the upload flow and features) and reached through its
// `auth` field, so the two can be changed side by side. Each is learned from an answer that is
// about the behaviour, never from a host name; docs/registries.md names the answer and the test.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use serde::Serialize;

use crate::support::Support;

/// The digests a registry repository got from ferry's own writes in this run, past this many the
/// oldest half is forgotten (a lag is about the last few seconds, not the whole run).
const COMMITTED_LIMIT: usize = 65_536;

/// One registry's learned auth and manifest behaviour. Shared by every clone of its client.
#[derive(Debug, Default)]
pub struct AuthCapabilities {
    multi_scope_tokens: AtomicU8,
    manifest_commit_lag: AtomicBool,
    tag_overwrite: AtomicU8,
    /// `(repository, digest)` of every blob and manifest ferry committed here in this run.
    committed: Mutex<HashSet<(String, String)>>,
}

/// The auth capabilities as the report shows them (flattened into the registry's capabilities).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AuthSnapshot {
    /// One token for several scopes (a cross-repository mount's): `refused` means tokens are
    /// asked for one scope at a time and mounts are not tried.
    pub multi_scope_tokens: Support,
    /// A manifest PUT was refused for a blob ferry had just committed, and taken after a wait.
    pub manifest_commit_lag: bool,
    /// Pushing a tag the repository already holds: `refused` on an immutable registry (tags are
    /// then HEADed before a push, never overwritten).
    pub tag_overwrite: Support,
}

fn support(v: u8) -> Support {
    match v {
        1 => Support::Works,
        2 => Support::Refused,
        _ => Support::Unknown,
    }
}

impl AuthCapabilities {
    /// The token service refused a token for several scopes.
    pub fn learn_multi_scope_refused(&self) -> bool {
        self.multi_scope_tokens.swap(2, Ordering::AcqRel) != 2
    }

    /// Whether tokens for several scopes are known to be refused.
    pub fn multi_scope_refused(&self) -> bool {
        self.multi_scope_tokens.load(Ordering::Acquire) == 2
    }

    /// A token for several scopes was granted (kept as `works` unless refused later).
    pub fn learn_multi_scope_works(&self) {
        let _ = self
            .multi_scope_tokens
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The registry made a manifest PUT wait for blobs ferry had committed.
    pub fn learn_commit_lag(&self) -> bool {
        !self.manifest_commit_lag.swap(true, Ordering::AcqRel)
    }

    /// Whether a manifest commit lag has been seen.
    pub fn commit_lag(&self) -> bool {
        self.manifest_commit_lag.load(Ordering::Acquire)
    }

    /// The registry refused to overwrite a tag it holds (immutable).
    pub fn learn_tags_immutable(&self) -> bool {
        self.tag_overwrite.swap(2, Ordering::AcqRel) != 2
    }

    /// Whether tags are known to be immutable here.
    pub fn tags_immutable(&self) -> bool {
        self.tag_overwrite.load(Ordering::Acquire) == 2
    }

    /// Records that ferry committed `digest` (a blob or a manifest) into `repository`.
    pub fn committed(&self, repository: &str, digest: &str) {
        let mut set = self.committed.lock().unwrap_or_else(|p| p.into_inner());
        if set.len() >= COMMITTED_LIMIT {
            let keep: Vec<_> = set.iter().take(COMMITTED_LIMIT / 2).cloned().collect();
            set.clear();
            set.extend(keep);
        }
        set.insert((repository.to_owned(), digest.to_owned()));
    }

    /// Whether ferry committed every one of `digests` into `repository` in this run (false for
    /// none: a manifest that names nothing has nothing to lag behind).
    pub fn all_committed<'a>(
        &self,
        repository: &str,
        mut digests: impl Iterator<Item = &'a str>,
    ) -> bool {
        let set = self.committed.lock().unwrap_or_else(|p| p.into_inner());
        let mut any = false;
        let all = digests.all(|d| {
            any = true;
            set.contains(&(repository.to_owned(), d.to_owned()))
        });
        any && all
    }

    /// Whether a `MANIFEST_BLOB_UNKNOWN` for a manifest naming `digests` in `repository` can be
    /// the registry catching up with ferry's own writes: the digests the refusal's `message`
    /// names (`sha256:…`) are all ones ferry committed here; a message naming none needs every
    /// one the manifest names to be ferry's (blobs the registry held before are not lagging).
    pub fn may_lag(&self, repository: &str, digests: &[String], message: Option<&str>) -> bool {
        let named: Vec<&str> = message
            .unwrap_or("")
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == ':'))
            .filter(|w| w.starts_with("sha256:") && w.len() == 71)
            .collect();
        if named.is_empty() {
            self.all_committed(repository, digests.iter().map(String::as_str))
        } else {
            self.all_committed(repository, named.into_iter())
        }
    }

    /// Every auth capability now, for the report.
    pub fn snapshot(&self) -> AuthSnapshot {
        AuthSnapshot {
            multi_scope_tokens: support(self.multi_scope_tokens.load(Ordering::Acquire)),
            manifest_commit_lag: self.commit_lag(),
            tag_overwrite: support(self.tag_overwrite.load(Ordering::Acquire)),
        }
    }
}

/// The digests a manifest names (config and layers, or an index's children, and a subject),
/// for the commit-lag check; unparsable bytes name none.
pub(crate) fn referenced_digests(bytes: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Descriptor {
        digest: String,
    }
    #[derive(serde::Deserialize)]
    struct Document {
        config: Option<Descriptor>,
        #[serde(default)]
        layers: Vec<Descriptor>,
        #[serde(default)]
        manifests: Vec<Descriptor>,
    }
    let Ok(doc) = serde_json::from_slice::<Document>(bytes) else {
        return Vec::new();
    };
    doc.config
        .into_iter()
        .chain(doc.layers)
        .chain(doc.manifests)
        .map(|d| d.digest)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_digest_must_be_ferrys_own_commit() {
        let c = AuthCapabilities::default();
        c.committed("app", "sha256:a");
        c.committed("app", "sha256:b");
        assert!(c.all_committed("app", ["sha256:a", "sha256:b"].into_iter()));
        assert!(!c.all_committed("app", ["sha256:a", "sha256:c"].into_iter()));
        assert!(!c.all_committed("other", ["sha256:a"].into_iter()));
        assert!(!c.all_committed("app", std::iter::empty()));
    }

    #[test]
    fn a_refusal_naming_a_digest_lags_only_for_ferrys_own() {
        let c = AuthCapabilities::default();
        let mine = format!("sha256:{}", "a".repeat(64));
        let theirs = format!("sha256:{}", "b".repeat(64));
        c.committed("app", &mine);
        let names = [mine.clone(), theirs.clone()];
        let about = |d: &str| format!("blob unknown to registry: {d}");
        assert!(c.may_lag("app", &names, Some(&about(&mine))));
        assert!(!c.may_lag("app", &names, Some(&about(&theirs))));
        assert!(
            !c.may_lag("app", &names, None),
            "unnamed: all must be ferry's"
        );
        assert!(c.may_lag("app", &names[..1], Some("blob unknown")));
    }

    /// A registry's message is outside input: control characters, a foreign digest glued to
    /// ferry's, a name with `..`, a huge body never make a refusal look like ferry's own lag.
    #[test]
    fn a_hostile_refusal_message_or_name_never_passes_for_ferrys_lag() {
        let c = AuthCapabilities::default();
        let mine = format!("sha256:{}", "a".repeat(64));
        let theirs = format!("sha256:{}", "b".repeat(64));
        c.committed("app", &mine);
        let names = [mine.clone()];
        let glued = format!("{mine}\u{1b}{theirs}\r\n");
        assert!(
            !c.may_lag("app", &names, Some(&glued)),
            "both named, one foreign"
        );
        for other in ["app/../app", "APP", "app%2f", "app/"] {
            assert!(!c.may_lag(other, &names, Some(&mine)), "{other}");
        }
        // 65 hex digits name no digest: the manifest's own (ferry's) decide.
        let long = format!("sha256:{}", "b".repeat(65));
        assert!(
            c.may_lag("app", &names, Some(&long)),
            "65 hex digits is no digest"
        );
        let huge = "x".repeat(1 << 20);
        assert!(
            c.may_lag("app", &names, Some(&huge)),
            "none named: the manifest's own"
        );
    }

    #[test]
    fn a_refusal_is_kept_and_reported() {
        let c = AuthCapabilities::default();
        assert_eq!(c.snapshot().multi_scope_tokens, Support::Unknown);
        c.learn_multi_scope_works();
        assert_eq!(c.snapshot().multi_scope_tokens, Support::Works);
        assert!(c.learn_multi_scope_refused());
        assert!(!c.learn_multi_scope_refused());
        c.learn_multi_scope_works();
        assert!(c.multi_scope_refused());
        assert!(c.learn_tags_immutable());
        assert_eq!(c.snapshot().tag_overwrite, Support::Refused);
    }

    #[test]
    fn a_manifest_names_its_blobs_and_children() {
        let m = br#"{"config":{"digest":"sha256:c"},"layers":[{"digest":"sha256:l"}]}"#;
        assert_eq!(referenced_digests(m), ["sha256:c", "sha256:l"]);
        assert!(referenced_digests(b"[1,2]").is_empty());
    }
}
