//! What one registry turned out to accept, learned from its own answers during the run and never
//! assumed from its name: the blob upload flow, mounts, referrers API, tag listing and deletion.

// Learning is not failing: an answer that teaches a capability is handled inside the attempt
// that got it (a fallback request, a different flow), so it spends neither the retry budget nor
// the breaker. `quirks` keeps what is known by host; this keeps what each registry showed.
// docs/registries.md lists every capability, the answer that teaches it, and what ferry does.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use serde::Serialize;

/// How blobs are uploaded to a registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UploadFlow {
    /// The cheapest: POST, then one PUT carrying the bytes (chunked PATCHes with
    /// `Content-Range` for blobs above the monolithic limit, then an empty PUT).
    Monolithic,
    /// Docker's and skopeo's: POST, one PATCH carrying the whole blob (no `Content-Range`),
    /// then a PUT with an empty body. Used once a registry refused a PUT carrying bytes, or
    /// chunked PATCHes. Blobs above the monolithic limit stay chunked (and resumable chunk by
    /// chunk) unless `chunked_patch` is refused too.
    Docker,
}

pub use crate::support::Support;

/// The features whose support is learned per registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// `POST …/uploads/?mount=D&from=REPO`.
    Mount,
    /// `GET /v2/NAME/referrers/D`.
    ReferrersApi,
    /// `GET /v2/NAME/tags/list`.
    TagList,
    /// `DELETE /v2/NAME/manifests/TAG`.
    TagDelete,
    /// Repository names without a `/` (`host/app`).
    OneComponentNames,
    /// PATCHes with `Content-Range` (chunked uploads, resumable chunk by chunk).
    ChunkedPatch,
}

const FEATURES: usize = 6;

impl Feature {
    fn slot(self) -> usize {
        match self {
            Feature::Mount => 0,
            Feature::ReferrersApi => 1,
            Feature::TagList => 2,
            Feature::TagDelete => 3,
            Feature::OneComponentNames => 4,
            Feature::ChunkedPatch => 5,
        }
    }
}

/// One registry's learned capabilities. Shared by every clone of its client.
#[derive(Debug, Default)]
pub struct Capabilities {
    docker_flow: AtomicU8,
    features: [AtomicU8; FEATURES],
    // Auth task (issue 31): tokens, manifest commits, tags.
    /// Tokens for several scopes, manifest commit lag, immutable tags (`auth::learned`).
    pub auth: crate::auth::learned::AuthCapabilities,
    /// The largest request body the registry takes, once it refused a larger one (0: none).
    max_patch: AtomicU64,
}

/// The capabilities as the report shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CapabilitiesSnapshot {
    /// The flow blobs go up with.
    pub upload_flow: UploadFlow,
    /// Cross-repository blob mounts.
    pub mount: Support,
    /// The referrers API (`GET /v2/<name>/referrers/<digest>`).
    pub referrers_api: Support,
    /// Listing tags.
    pub tag_list: Support,
    /// Deleting a manifest by tag.
    pub tag_delete: Support,
    /// Repository names of one component (`alpine`, not `library/alpine`).
    pub one_component_names: Support,
    /// Refused: blobs above the monolithic limit go up in one PATCH too (docker's flow).
    pub chunked_patch: Support,
    // Auth task (issue 31).
    /// Tokens for several scopes, manifest commit lag, immutable tags.
    #[serde(flatten)]
    pub auth: crate::auth::learned::AuthSnapshot,
    /// The largest upload request body (PATCH or PUT) in bytes, learned from a refusal of a
    /// larger one (413, or 416 naming a limit); `None` while none was refused.
    pub max_patch: Option<u64>,
}

impl Capabilities {
    /// The flow blobs go up with now.
    pub fn upload_flow(&self) -> UploadFlow {
        if self.docker_flow.load(Ordering::Acquire) == 1 {
            UploadFlow::Docker
        } else {
            UploadFlow::Monolithic
        }
    }

    /// The registry refused the cheapest flow and took docker's: use docker's from now on.
    /// True the first time (for the caller to say so once).
    pub fn learn_docker_flow(&self) -> bool {
        self.docker_flow.swap(1, Ordering::AcqRel) == 0
    }

    /// The largest upload request body the registry has shown it takes, if it refused one.
    pub fn max_patch(&self) -> Option<u64> {
        match self.max_patch.load(Ordering::Acquire) {
            0 => None,
            n => Some(n),
        }
    }

    /// The registry refused a request body of `refused` bytes as too large, naming `named` as
    /// its limit when it did: keeps the smaller of what was known and the limit this shows (the
    /// named one, else half the refused size, never under `MIN_PATCH`). Returns the limit now
    /// in force when it is below `refused` (the request can be sent again smaller), `None`
    /// when shrinking cannot help (the refused body was already at the floor or the limit).
    pub fn learn_max_patch(&self, refused: u64, named: Option<u64>) -> Option<u64> {
        let shown = match named {
            Some(limit) if limit < refused => limit,
            _ => refused / 2,
        }
        .max(MIN_PATCH);
        let _ = self
            .max_patch
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now == 0 || shown < now).then_some(shown)
            });
        self.max_patch().filter(|&limit| limit < refused)
    }

    /// What the registry has shown about `feature` so far.
    pub fn support(&self, feature: Feature) -> Support {
        Support::from_u8(self.features[feature.slot()].load(Ordering::Acquire))
    }

    /// Records what the registry showed. A refusal or an ignored request is final for the run; a
    /// success does not overwrite it.
    pub fn learn(&self, feature: Feature, support: Support) {
        let slot = &self.features[feature.slot()];
        let _ = slot.fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            (!Support::from_u8(now).is_unavailable()).then_some(support.to_u8())
        });
    }

    /// Every capability now, for the report.
    pub fn snapshot(&self) -> CapabilitiesSnapshot {
        CapabilitiesSnapshot {
            upload_flow: self.upload_flow(),
            mount: self.support(Feature::Mount),
            referrers_api: self.support(Feature::ReferrersApi),
            tag_list: self.support(Feature::TagList),
            tag_delete: self.support(Feature::TagDelete),
            one_component_names: self.support(Feature::OneComponentNames),
            chunked_patch: self.support(Feature::ChunkedPatch),
            auth: self.auth.snapshot(),
            max_patch: self.max_patch(),
        }
    }
}

/// The smallest request body limit ferry learns: a registry naming less (or refusing bodies
/// this small) gets its refusal back as the error rather than a flood of tiny PATCHes.
pub const MIN_PATCH: u64 = 64 << 10;

/// What a refused upload request (a PUT carrying the bytes, or a chunked PATCH) teaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadRefusal {
    /// About the flow and nothing else (404 BLOB_UNKNOWN to a PUT carrying the blob, 405, 415,
    /// 501): docker's flow is learned at once.
    Flow,
    /// Maybe about the flow, maybe a fault a retry would clear (400, 500, a 416 naming no
    /// limit): learned only when a fresh session is refused the same way.
    MaybeFlow,
    /// The body was too large (413, or a 416 naming a size): the limit, when the answer names
    /// one. The session goes on with smaller PATCHes.
    TooLarge(Option<u64>),
}

/// What a refused upload request is about, from its status, error code and message; `None`
/// for anything else (429, 502, 503, 504, a 404 lost session): the retry loop's to judge.
pub fn upload_refusal(
    status: u16,
    code: Option<&str>,
    message: Option<&str>,
) -> Option<UploadRefusal> {
    match status {
        405 | 415 | 501 => Some(UploadRefusal::Flow),
        404 if code == Some("BLOB_UNKNOWN") => Some(UploadRefusal::Flow),
        413 => Some(UploadRefusal::TooLarge(message.and_then(named_size))),
        416 => match message.and_then(named_size) {
            Some(limit) => Some(UploadRefusal::TooLarge(Some(limit))),
            None => Some(UploadRefusal::MaybeFlow),
        },
        400 | 500 => Some(UploadRefusal::MaybeFlow),
        _ => None,
    }
}

/// The size a refusal's message names as a limit (`… maximum permissible limit of 4.00MiB`):
/// the first number followed by a size unit (B, KB, KiB, MB, MiB, GB, GiB, bytes) after the
/// word "limit". `None` when there is none, or it does not fit in a u64.
pub fn named_size(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    let at = lower.find("limit")?;
    let rest = &lower[at..];
    let start = rest.find(|c: char| c.is_ascii_digit())?;
    let rest = &rest[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let number: f64 = rest[..end].parse().ok()?;
    let unit = rest[end..].trim_start();
    let unit: String = unit.chars().take_while(char::is_ascii_alphabetic).collect();
    let scale: f64 = match unit.as_str() {
        "b" | "bytes" | "byte" => 1.0,
        "kb" => 1e3,
        "kib" | "k" => 1024.0,
        "mb" => 1e6,
        "mib" | "m" => 1_048_576.0,
        "gb" => 1e9,
        "gib" | "g" => 1_073_741_824.0,
        _ => return None,
    };
    let bytes = number * scale;
    (bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// A mount answered with one of these is refused (the registry does not mount, or not from
/// there): the blob is uploaded instead.
pub fn refuses_mount(status: u16) -> bool {
    matches!(status, 400 | 403 | 404 | 405 | 501)
}

/// A tag listing answered with one of these is refused (not served, or the token may pull but
/// not list); a 404 means the repository does not exist.
pub fn refuses_tag_list(status: u16) -> bool {
    matches!(status, 401 | 403 | 405 | 501)
}

/// A write to a one-component repository name (`host/app`) answered with one of these (and
/// the error code naming the name) means the registry wants a namespace.
pub fn refuses_name(status: u16, code: Option<&str>) -> bool {
    matches!(
        (status, code),
        (400, Some("NAME_INVALID")) | (404, Some("NAME_UNKNOWN")) | (403, Some("DENIED"))
    )
}

/// `app` has one component; `team/app` has two.
pub fn is_one_component(repository: &str) -> bool {
    !repository.contains('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_final_and_a_later_success_does_not_undo_it() {
        let c = Capabilities::default();
        assert_eq!(c.support(Feature::Mount), Support::Unknown);
        c.learn(Feature::Mount, Support::Works);
        assert_eq!(c.support(Feature::Mount), Support::Works);
        c.learn(Feature::Mount, Support::Ignored);
        c.learn(Feature::Mount, Support::Works);
        assert_eq!(c.support(Feature::Mount), Support::Ignored);
        assert_eq!(c.support(Feature::TagList), Support::Unknown);
    }

    #[test]
    fn the_flow_starts_cheapest_and_moves_to_docker_once() {
        let c = Capabilities::default();
        assert_eq!(c.upload_flow(), UploadFlow::Monolithic);
        assert!(c.learn_docker_flow());
        assert!(!c.learn_docker_flow());
        assert_eq!(c.snapshot().upload_flow, UploadFlow::Docker);
    }

    #[test]
    fn load_is_never_read_as_a_flow_refusal() {
        for s in [408, 429, 502, 503, 504, 401, 404] {
            assert_eq!(upload_refusal(s, None, None), None, "{s}");
        }
        assert_eq!(
            upload_refusal(404, Some("BLOB_UPLOAD_UNKNOWN"), None),
            None,
            "a lost session is the retry loop's"
        );
        for s in [405, 415, 501] {
            assert_eq!(
                upload_refusal(s, None, None),
                Some(UploadRefusal::Flow),
                "{s}"
            );
        }
        assert_eq!(
            upload_refusal(404, Some("BLOB_UNKNOWN"), None),
            Some(UploadRefusal::Flow)
        );
        // One 500 or 400 could be a fault a retry clears: it teaches only when it repeats.
        for s in [400, 500] {
            assert_eq!(
                upload_refusal(s, None, None),
                Some(UploadRefusal::MaybeFlow),
                "{s}"
            );
        }
        assert_eq!(
            upload_refusal(416, None, Some("range starts at 3")),
            Some(UploadRefusal::MaybeFlow)
        );
        assert_eq!(
            upload_refusal(413, None, None),
            Some(UploadRefusal::TooLarge(None))
        );
        assert!(!refuses_tag_list(404));
        assert!(refuses_name(400, Some("NAME_INVALID")));
        assert!(!refuses_name(400, Some("DIGEST_INVALID")));
        assert!(is_one_component("app") && !is_one_component("team/app"));
    }

    #[test]
    fn a_size_limit_is_read_from_the_message_that_names_it() {
        let ghcr =
            "the request body is too large and exceeds the maximum permissible limit of 4.00MiB";
        assert_eq!(named_size(ghcr), Some(4 << 20));
        assert_eq!(
            upload_refusal(416, Some("REQUESTED_RANGE_NOT_SATISFIABLE"), Some(ghcr)),
            Some(UploadRefusal::TooLarge(Some(4 << 20)))
        );
        assert_eq!(named_size("limit is 512 KiB per request"), Some(512 << 10));
        assert_eq!(named_size("limit: 10MB"), Some(10_000_000));
        // Hostile or empty: nothing named.
        for m in [
            "",
            "limit",
            "limit of 4.00",
            "limit of 1e400MiB",
            "limit of .MiB",
            "4 MiB limit",
        ] {
            assert_eq!(named_size(m), None, "{m:?}");
        }
    }

    #[test]
    fn a_learned_limit_only_shrinks_and_never_below_the_floor() {
        let c = Capabilities::default();
        assert_eq!(c.max_patch(), None);
        assert_eq!(c.learn_max_patch(10 << 20, Some(4 << 20)), Some(4 << 20));
        // A larger limit named later does not raise it; an unnamed refusal halves.
        assert_eq!(c.learn_max_patch(10 << 20, Some(8 << 20)), Some(4 << 20));
        assert_eq!(c.learn_max_patch(4 << 20, None), Some(2 << 20));
        assert_eq!(c.snapshot().max_patch, Some(2 << 20));
        // At the floor, shrinking cannot help.
        let d = Capabilities::default();
        assert_eq!(d.learn_max_patch(MIN_PATCH, Some(1)), None);
        assert_eq!(d.max_patch(), Some(MIN_PATCH));
    }
}
