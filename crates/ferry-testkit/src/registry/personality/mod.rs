//! Personalities of the test registry: switches that make it behave like registries in the field
//! (docker's upload flow only, no mounts, no chunked PATCH, no tag listing or deletion, ...).

pub(crate) mod auth;
mod field;
pub(crate) mod listing;

pub use listing::MalformedListing;

use std::time::Duration;

mod uploads;

use axum::body::Body;
use axum::http::header;

use super::metrics::OpKind;
use super::reply::{Reply, oci_error};
use super::routes::{BodyCut, Incoming};

/// What the registry refuses or ignores. The default refuses nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Personality {
    /// A closing PUT that carries bytes is answered 500 (only docker's flow works: POST, PATCH
    /// with the bytes, PUT with an empty body).
    pub put_with_body_refused: bool,
    /// A PATCH with `Content-Range` is answered 400; a PATCH without one appends as usual.
    pub chunked_patch_refused: bool,
    /// `?mount=` is ignored: a plain upload session (202) is opened instead.
    pub mount_ignored: bool,
    /// `?mount=` is refused with 405 UNSUPPORTED.
    pub mount_refused: bool,
    /// `GET /v2/NAME/tags/list` is answered 403 DENIED (a token that may pull but not list).
    pub tag_list_refused: bool,
    /// `GET /v2/NAME/referrers/D` is answered 404 and no `OCI-Subject` is sent.
    pub referrers_api_absent: bool,
    /// `DELETE /v2/NAME/manifests/TAG` is answered 405 UNSUPPORTED (digests still delete).
    pub tag_delete_refused: bool,
    /// Any write to a repository name without a `/` is answered 400 NAME_INVALID.
    pub one_component_names_refused: bool,
    /// An index is stored without checking that its child manifests are there (the default,
    /// like distribution 2.8, answers 400 MANIFEST_BLOB_UNKNOWN).
    pub index_children_unchecked: bool,
    /// A write to a repository the registry does not hold is answered 404 NAME_UNKNOWN (as
    /// ECR answers a push to a repository nobody created); see `TestRegistry::create_repository`.
    pub writes_need_existing_repository: bool,

    // Auth, manifests and politeness (issue 31, the auth task): answered in auth.rs.
    /// A token request naming more than one scope is answered 403 DENIED instead of a token
    /// for the scopes it may have (Google Container Registry and Artifact Registry: regclient
    /// #149, containerd #4379). A cross-repository mount needs two scopes in one token.
    pub multi_scope_tokens_refused: bool,
    /// A bearer token that lacks a scope the request needs is answered 403 DENIED without a
    /// challenge, where a registry following the token spec answers 401 with the scope to ask
    /// for (Google Container Registry: regclient #149, "GCR doesn't return a challenge when auth
    /// token has insufficient scope").
    pub insufficient_scope_forbidden: bool,
    /// A token request naming a wildcard repository scope (`repository:team/*:pull`,
    /// `repository:app:*`) is answered 401 (Azure Container Registry with ABAC repository
    /// permissions, whose role conditions name repositories, not patterns; Azure/acr #751).
    pub wildcard_scopes_refused: bool,
    /// A manifest PUT naming a blob or child manifest committed less than this long ago (by an
    /// upload's closing PUT, a one-POST upload, a mount or a manifest PUT) is answered 400
    /// MANIFEST_BLOB_UNKNOWN: the registry's manifest check reads a view that lags its blob
    /// store (Amazon ECR, ocync PR #104: a few hundred ms).
    pub manifest_commit_lag: Option<Duration>,
    /// With `manifest_commit_lag`: each commit lags a time of its own between that and this
    /// (fixed by its digest), a registry whose lag varies from write to write (issue 39: ECR
    /// lagging "a few hundred ms", ocync PR #104, more under load).
    pub manifest_commit_lag_max: Option<Duration>,
    /// A manifest PUT by a tag the repository already holds is answered 400 TAG_INVALID ("The
    /// image tag '…' already exists in the '…' repository and cannot be overwritten because the
    /// repository is immutable."), the same digest included (Amazon ECR immutable repositories;
    /// aws/containers-roadmap #2380).
    pub tags_immutable: bool,
    /// Manifest GETs are counted against a pull limit, HEADs are not; past this many GETs each
    /// is answered 429 TOOMANYREQUESTS with Docker Hub's documented message (docs.docker.com,
    /// "Docker Hub usage and limits").
    pub pull_limit: Option<u32>,
    /// `GET /v2/NAME/referrers/D` is answered 303 to a page that answers 404 (GitHub Container
    /// Registry; project-zot/zot #4060).
    pub referrers_redirect_to_404: bool,
    /// `GET /v2/NAME/referrers/D` is answered 302 to Google's sign-in flow, whose page is HTML
    /// with a 200 (Google Artifact Registry: awslabs/soci-snapshotter#512, docs/registry.md,
    /// "Artifact Registry appears to always redirect requests to the referrers API to an auth
    /// flow"; the client read `invalid character '<' looking for beginning of value`). The test
    /// kit serves the sign-in page on its own origin (any path it does not route).
    pub referrers_redirect_to_signin: bool,

    // --- listing (issue 31): tag lists and catalogs as the field registries answer them; the
    // answers are built in `listing.rs`, each switch's public source named on it.
    /// Quay: `tags/list` serves 50 tags a page whatever `n` asks, ignores `last`, and links
    /// the next page with an opaque `next_page` token (regclient #272/#274,
    /// deitch/docker_registry2 #56: `Link: </v2/…/tags/list?next_page=gAAAAABg…%3D&n=50>`).
    pub tag_pages_opaque: bool,
    /// With `tag_pages_opaque`: the token carries `/`, `..`, `%2f` and encoded control
    /// characters (hostile; a client must send it back as written).
    pub tag_token_hostile: bool,
    /// Artifactory: the digests of manifests no tag names (an index's children) are listed
    /// among the tags as `sha256:<hex>` (skopeo #2346, #1740; containers/image PR #2440).
    pub digest_entries_listed: bool,
    /// Artifactory: the tag list's `Link` leaves out the repository key, the path's first
    /// component (renovate #15030/#15080, PR #20745: JFrog RTFACT-18971).
    pub tag_link_drops_repository_key: bool,
    /// Nexus group repositories: `tags/list` is cut at a page without a `Link` header
    /// (nexus-public #117, #209; renovate #18447). On the wire, as those reports show it: `200`,
    /// `{"name":…,"tags":[…]}` in lexical order, and never a `Link`, whether more tags remain or
    /// not. With `?n=N` the answer holds the first N tags (after `last`) and stops there
    /// (renovate #18447: `GET …/renovate/renovate/tags/list?n=10000` answered tags `0` …
    /// `32.209.0-slim` and no Link; #117: the same proxy repository outside the group links
    /// `?n=10&last=0.0.4-slim`). Without `n` it holds the registry's `page_size` (the first
    /// page a proxy member got from its remote, NEXUS-26037: "NXRM will return only a partial
    /// list of tags, those on the first page"). `last` is honoured as the distribution spec's
    /// cursor: the group's members page with `n`/`last` (#117, #1011); what a group answers to
    /// `last` is not in the reports.
    pub tag_link_absent: bool,
    /// Nexus behind a connector port: the absolute `Link` keeps the internal
    /// `/repository/<name>/` path prefix, which the port does not serve (nexus-public #1011).
    pub tag_link_wrong_prefix: bool,
    /// GHCR: no `/v2/_catalog`, a plain-text 404 (vscode-docker #1525, oras-go #621).
    pub catalog_absent: bool,
    /// ACR: `/v2/_catalog` pages at 100 whatever `n` asks (regclient #404, acr-cli #93).
    pub catalog_pages_at_100: bool,
    /// Harbor: `/v2/_catalog` needs a system administrator; anyone else gets 401
    /// `unauthorized to list catalog` (harbor #18414, #21291, #7898).
    pub catalog_admin_only: bool,
    /// Docker Hub: a 429 (the anti-abuse limit) has a plain-text body, not an OCI error, and
    /// keeps its `Retry-After` (docker/hub-feedback #1907: "Too Many Requests (HAP429)").
    pub throttle_body_text: bool,
    /// A malformed tag-list answer (see [`MalformedListing`]).
    pub tag_list_malformed: Option<MalformedListing>,

    // uploads (issue 31): how field registries answer blob uploads (answered in uploads.rs).
    /// A closing PUT carrying bytes is answered 404 BLOB_UNKNOWN, while POST, PATCH, empty PUT
    /// works: JFrog Artifactory as docker/buildx#196 captured it.
    pub put_with_body_blob_unknown: bool,
    /// An upload request (PATCH or PUT) carrying more than this many bytes is answered 416
    /// REQUESTED_RANGE_NOT_SATISFIABLE "the request body is too large and exceeds the maximum
    /// permissible limit of 4.00MiB": GHCR as wasmCloud/wash-archive#268 and ocx-sh/ocx#237
    /// quote it (4 MiB there).
    pub upload_request_limit_416: Option<u64>,
    /// An upload request (PATCH or PUT) carrying more than this many bytes is answered 413
    /// with a non-JSON page naming AzureContainerRegistry: ACR as goharbor/harbor#23015 logs it
    /// ("rejects uploads above ~20MB").
    pub upload_request_limit_413: Option<u64>,
    /// The container-registry crate's binary (0.3.1, `upload_finalize`/`upload_add_chunk`): a
    /// PUT declaring a non-zero `Content-Length` is answered 500 "feature not supported"
    /// before its body is read (above 256 KiB unread, the connection is reset instead, as the
    /// kernel answers a close with unread bytes), a PATCH with a `Range` header 500, and a GET or DELETE on an
    /// upload session 405 (its session route has PATCH and PUT only).
    pub container_registry_uploads: bool,
}

impl Personality {
    /// Accepts only docker's upload flow.
    pub fn docker_flow_only() -> Self {
        Personality {
            put_with_body_refused: true,
            ..Personality::default()
        }
    }

    /// Refuses chunked PATCHes.
    pub fn no_chunked_patch() -> Self {
        Personality {
            chunked_patch_refused: true,
            ..Personality::default()
        }
    }

    /// Ignores cross-repository mounts.
    pub fn no_mount() -> Self {
        Personality {
            mount_ignored: true,
            ..Personality::default()
        }
    }

    /// Refuses cross-repository mounts.
    pub fn mount_refused() -> Self {
        Personality {
            mount_refused: true,
            ..Personality::default()
        }
    }

    /// Refuses tag listing.
    pub fn no_tag_list() -> Self {
        Personality {
            tag_list_refused: true,
            ..Personality::default()
        }
    }

    /// Has no referrers API.
    pub fn no_referrers_api() -> Self {
        Personality {
            referrers_api_absent: true,
            ..Personality::default()
        }
    }

    /// Refuses tag deletes.
    pub fn no_tag_delete() -> Self {
        Personality {
            tag_delete_refused: true,
            ..Personality::default()
        }
    }

    /// Refuses one-component repository names.
    pub fn no_one_component_names() -> Self {
        Personality {
            one_component_names_refused: true,
            ..Personality::default()
        }
    }

    /// Every personality with one switch on, named (for tests that run under each).
    pub fn each() -> Vec<(&'static str, Personality)> {
        vec![
            ("docker_flow_only", Personality::docker_flow_only()),
            ("no_chunked_patch", Personality::no_chunked_patch()),
            ("no_mount", Personality::no_mount()),
            ("mount_refused", Personality::mount_refused()),
            ("no_tag_list", Personality::no_tag_list()),
            ("no_referrers_api", Personality::no_referrers_api()),
            ("no_tag_delete", Personality::no_tag_delete()),
            (
                "no_one_component_names",
                Personality::no_one_component_names(),
            ),
        ]
    }
}

fn is_write(op: OpKind) -> bool {
    matches!(
        op,
        OpKind::UploadStart
            | OpKind::UploadMonolithic
            | OpKind::Mount
            | OpKind::UploadPatch
            | OpKind::UploadPut
            | OpKind::ManifestPut
            | OpKind::ManifestDelete
    )
}

/// ECR's answer to a write into a repository that was never created, when the personality
/// asks for it.
pub(crate) fn refuse_missing_repository(
    personality: &Personality,
    op: OpKind,
    repo: Option<&str>,
    exists: impl Fn(&str) -> bool,
) -> Option<Reply> {
    let repo = repo?;
    (personality.writes_need_existing_repository && is_write(op) && !exists(repo)).then(|| {
        oci_error(
            404,
            "NAME_UNKNOWN",
            format!("The repository with name '{repo}' does not exist in the registry"),
        )
    })
}

/// The personality's answer to a request, when it has one; `None` lets the registry answer as
/// usual. A mount to be ignored is turned into a plain upload start by the caller (`op`).
pub(crate) async fn intercept(
    personality: &Personality,
    op: &mut OpKind,
    incoming: &mut Incoming,
) -> Result<Option<Reply>, BodyCut> {
    let repo = incoming.route.repo().unwrap_or_default().to_owned();
    if personality.one_component_names_refused && is_write(*op) && !repo.contains('/') {
        return Ok(Some(oci_error(
            400,
            "NAME_INVALID",
            format!("repository name {repo:?} must have a namespace"),
        )));
    }
    if let Some(reply) = uploads::intercept(personality, *op, incoming).await? {
        return Ok(Some(reply));
    }
    let reply = match *op {
        OpKind::Mount if personality.mount_refused => Some(oci_error(
            405,
            "UNSUPPORTED",
            "cross-repository mounts are not supported",
        )),
        OpKind::Mount if personality.mount_ignored => {
            *op = OpKind::UploadStart;
            None
        }
        OpKind::TagList if personality.tag_list_refused => Some(oci_error(
            403,
            "DENIED",
            "this token may pull but not list tags",
        )),
        OpKind::ManifestDelete if personality.tag_delete_refused => {
            let by_tag = match &incoming.route {
                super::routes::Route::Manifest { reference, .. } => {
                    !super::state::is_digest(reference)
                }
                _ => false,
            };
            by_tag.then(|| oci_error(405, "UNSUPPORTED", "tags cannot be deleted"))
        }
        OpKind::UploadPatch
            if personality.chunked_patch_refused
                && incoming.headers.contains_key(header::CONTENT_RANGE) =>
        {
            // Read the body first, as a registry does, so the client sees the answer.
            incoming.read_body().await?;
            Some(oci_error(
                400,
                "BLOB_UPLOAD_INVALID",
                "chunked uploads are not supported",
            ))
        }
        OpKind::UploadPut if personality.put_with_body_refused => {
            let body = incoming.read_body().await?;
            if body.is_empty() {
                incoming.body = Body::from(body);
                None
            } else {
                Some(oci_error(500, "UNKNOWN", "unknown error"))
            }
        }
        _ => None,
    };
    Ok(reply)
}
