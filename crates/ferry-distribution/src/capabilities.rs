//! What one registry turned out to accept, learned from its own answers during the run and never
//! assumed from its name: the blob upload flow, mounts, referrers API, tag listing and deletion.

// Learning is not failing: an answer that teaches a capability is handled inside the attempt
// that got it (a fallback request, a different flow), so it spends neither the retry budget nor
// the breaker. `quirks` keeps what is known by host; this keeps what each registry showed.
// docs/registries.md lists every capability, the answer that teaches it, and what ferry does.

use std::sync::atomic::{AtomicU8, Ordering};

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

/// What a registry showed about one feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Support {
    /// Not used in this run, so not known.
    Unknown,
    /// Used, and it worked.
    Works,
    /// The registry answered that it does not do this.
    Refused,
    /// The registry accepted the request and did something else (a mount answered with an
    /// upload session for a blob the source repository holds).
    Ignored,
}

impl Support {
    fn to_u8(self) -> u8 {
        match self {
            Support::Unknown => 0,
            Support::Works => 1,
            Support::Refused => 2,
            Support::Ignored => 3,
        }
    }

    fn from_u8(v: u8) -> Support {
        match v {
            1 => Support::Works,
            2 => Support::Refused,
            3 => Support::Ignored,
            _ => Support::Unknown,
        }
    }

    /// Refused or ignored: not worth asking again this run.
    pub fn is_unavailable(self) -> bool {
        matches!(self, Support::Refused | Support::Ignored)
    }
}

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
        }
    }
}

/// A refused upload request that is about the flow, not about load: a PUT carrying the bytes, or
/// the first chunked PATCH of a session the registry had just accepted, answered with one of
/// these. Anything else (429, 502, 503, 504, a reset) stays the retry loop's to judge.
pub fn refuses_flow(status: u16) -> bool {
    matches!(status, 400 | 405 | 413 | 415 | 416 | 500 | 501)
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
            assert!(!refuses_flow(s), "{s}");
        }
        for s in [400, 405, 413, 415, 500, 501] {
            assert!(refuses_flow(s), "{s}");
        }
        assert!(!refuses_tag_list(404));
        assert!(refuses_name(400, Some("NAME_INVALID")));
        assert!(!refuses_name(400, Some("DIGEST_INVALID")));
        assert!(is_one_component("app") && !is_one_component("team/app"));
    }
}
