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
    /// `Link` without the repository key (renovate #15080, RTFACT-18971).
    pub fn artifactory() -> Self {
        Personality {
            digest_entries_listed: true,
            tag_link_drops_repository_key: true,
            ..Personality::default()
        }
    }

    /// Sonatype Nexus Repository (a group repository): tag pages cut without a `Link`
    /// (nexus-public #117, #209; renovate #18447).
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

    /// GitHub Container Registry (ghcr.io): no catalog (vscode-docker #1525).
    pub fn ghcr() -> Self {
        Personality {
            // auth task: project-zot/zot #4060.
            referrers_redirect_to_404: true,
            catalog_absent: true,
            ..Personality::default()
        }
    }

    /// Azure Container Registry: the catalog pages at 100 (regclient #404).
    pub fn acr() -> Self {
        Personality {
            // auth task: ABAC repository permissions (Azure/acr #751).
            wildcard_scopes_refused: true,
            catalog_pages_at_100: true,
            ..Personality::default()
        }
    }

    /// Google Artifact Registry and Container Registry.
    pub fn gar() -> Self {
        Personality {
            // auth task: regclient #149, containerd #4379.
            multi_scope_tokens_refused: true,
            insufficient_scope_forbidden: true,
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
