//! The registries people run, as the test kit's registry plays them: each a combination of the
//! personality switches, named after the registry whose documented behaviour it reproduces.

// Each constructor's doc comment names the public sources (issue threads, vendor docs) of every
// behaviour it switches on; docs/registries.md has one row per behaviour and names its test.

use super::Personality;

impl Personality {
    /// Quay (quay.io, Red Hat Quay).
    pub fn quay() -> Self {
        Personality {
            ..Personality::default()
        }
    }

    /// JFrog Artifactory.
    pub fn artifactory() -> Self {
        Personality {
            ..Personality::default()
        }
    }

    /// Sonatype Nexus Repository (a group repository).
    pub fn nexus() -> Self {
        Personality {
            ..Personality::default()
        }
    }

    /// GitHub Container Registry (ghcr.io).
    pub fn ghcr() -> Self {
        Personality {
            // auth task: project-zot/zot #4060.
            referrers_redirect_to_404: true,
            ..Personality::default()
        }
    }

    /// Azure Container Registry.
    pub fn acr() -> Self {
        Personality {
            // auth task: ABAC repository permissions (Azure/acr #751).
            wildcard_scopes_refused: true,
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

    /// Docker Hub (registry-1.docker.io).
    pub fn docker_hub() -> Self {
        Personality {
            referrers_api_absent: true,
            // auth task: the anonymous limit, 100 pulls per 6 hours.
            pull_limit: Some(100),
            ..Personality::default()
        }
    }

    /// Harbor.
    pub fn harbor() -> Self {
        Personality {
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
