//! The registries people run, as the test kit's registry plays them: each a combination of the
//! personality switches, named after the registry whose documented behaviour it reproduces.

// Each constructor's doc comment names the public sources (issue threads, vendor docs) of every
// behaviour it switches on; docs/registries.md has one row per behaviour and names its test.

use super::Personality;

impl Personality {
    /// Quay (quay.io, Red Hat Quay): tag pages of 50 linked by an opaque `next_page` token,
    /// `n` and `last` ignored (regclient #272/#274).
    pub fn quay() -> Self {
        Personality {
            tag_pages_opaque: true,
            ..Personality::default()
        }
    }

    /// JFrog Artifactory: child manifests' digests among the tags (skopeo #2346), and a tag
    /// `Link` without the repository key (renovate #15080, RTFACT-18971). Uploads: a PUT
    /// carrying the blob is answered 404 BLOB_UNKNOWN, POST + PATCH + empty PUT works
    /// (docker/buildx#196).
    pub fn artifactory() -> Self {
        Personality {
            digest_entries_listed: true,
            tag_link_drops_repository_key: true,
            put_with_body_blob_unknown: true,
            ..Personality::default()
        }
    }

    /// Sonatype Nexus Repository (a group repository): tag pages cut without a `Link`
    /// (nexus-public #117, #209; renovate #18447; NEXUS-26037), at `n` when asked with one and
    /// at the registry's `page_size` without (see `tag_link_absent`).
    pub fn nexus() -> Self {
        Personality {
            tag_link_absent: true,
            ..Personality::default()
        }
    }

    /// Sonatype Nexus behind a Docker connector port: the tag `Link` keeps the internal
    /// `/repository/<name>/` prefix (nexus-public #1011).
    pub fn nexus_connector() -> Self {
        Personality {
            tag_link_wrong_prefix: true,
            ..Personality::default()
        }
    }

    /// GitHub Container Registry (ghcr.io): no catalog (vscode-docker #1525); the referrers
    /// endpoint redirects to a 404 (project-zot/zot #4060). Uploads: a request body over 4 MiB
    /// is answered 416 "exceeds the maximum permissible limit of 4.00MiB"
    /// (wasmCloud/wash-archive#268, ocx-sh/ocx#237, whose fix, PATCHes under 4 MiB with
    /// `Content-Range`, works there).
    pub fn ghcr() -> Self {
        Personality {
            referrers_redirect_to_404: true,
            catalog_absent: true,
            upload_request_limit_416: Some(4 << 20),
            ..Personality::default()
        }
    }

    /// Azure Container Registry: the catalog pages at 100 (regclient #404); wildcard scopes
    /// refused under ABAC repository permissions (Azure/acr #751). Uploads: a request body
    /// above about 20 MB is answered 413 (goharbor/harbor#23015: a 29 MB monolithic PUT
    /// refused; 20 MiB here).
    pub fn acr() -> Self {
        Personality {
            wildcard_scopes_refused: true,
            catalog_pages_at_100: true,
            upload_request_limit_413: Some(20 << 20),
            ..Personality::default()
        }
    }

    /// Google Artifact Registry and Container Registry: a token request with several scopes
    /// answered 403 (regclient #149, containerd #4379). Uploads: a cross-repository mount is
    /// answered 202 with an upload session, never 201 (google/go-containerregistry#1846).
    /// Referrers: the endpoint redirects to Google's sign-in page, HTML, not an image index
    /// (awslabs/soci-snapshotter#512; the status of the redirect is not in the report: 302).
    pub fn gar() -> Self {
        Personality {
            referrers_redirect_to_signin: true,
            // auth: regclient #149, containerd #4379.
            multi_scope_tokens_refused: true,
            insufficient_scope_forbidden: true,
            mount_ignored: true,
            ..Personality::default()
        }
    }

    /// Amazon ECR.
    pub fn ecr() -> Self {
        Personality {
            writes_need_existing_repository: true,
            // auth task: ocync PR #104 (a few hundred ms).
            manifest_commit_lag: Some(std::time::Duration::from_millis(300)),
            ..Personality::default()
        }
    }

    /// Amazon ECR with tag immutability switched on for the repository (ECR's repositories are
    /// mutable unless made immutable; aws/containers-roadmap #2380).
    pub fn ecr_immutable() -> Self {
        Personality {
            tags_immutable: true,
            ..Personality::ecr()
        }
    }

    /// Docker Hub (registry-1.docker.io): no referrers API; a 429 with a plain-text body
    /// (docker/hub-feedback #1907).
    pub fn docker_hub() -> Self {
        Personality {
            throttle_body_text: true,
            referrers_api_absent: true,
            // auth task: the anonymous limit, 100 pulls per 6 hours.
            pull_limit: Some(100),
            ..Personality::default()
        }
    }

    /// Harbor: the catalog needs a system administrator (harbor #18414).
    pub fn harbor() -> Self {
        Personality {
            catalog_admin_only: true,
            ..Personality::default()
        }
    }

    /// The container-registry crate's binary (0.3.1, docker's flow only): a PUT carrying bytes
    /// is answered 500 before its body is read, there is no session status (GET 405) or cancel
    /// (DELETE 405), and a mount is a plain upload start (the POST handler ignores `mount=`).
    pub fn container_registry() -> Self {
        Personality {
            container_registry_uploads: true,
            mount_ignored: true,
            ..Personality::default()
        }
    }

    /// Every field registry, named (for tests and benches that run under each).
    pub fn field() -> Vec<(&'static str, Personality)> {
        vec![
            ("quay", Personality::quay()),
            ("artifactory", Personality::artifactory()),
            ("nexus", Personality::nexus()),
            ("ghcr", Personality::ghcr()),
            ("acr", Personality::acr()),
            ("gar", Personality::gar()),
            ("ecr", Personality::ecr()),
            ("docker_hub", Personality::docker_hub()),
            ("harbor", Personality::harbor()),
        ]
    }
}
