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
            ..Personality::default()
        }
    }

    /// Azure Container Registry.
    pub fn acr() -> Self {
        Personality {
            ..Personality::default()
        }
    }

    /// Google Artifact Registry and Container Registry.
    pub fn gar() -> Self {
        Personality {
            ..Personality::default()
        }
    }

    /// Amazon ECR.
    pub fn ecr() -> Self {
        Personality {
            writes_need_existing_repository: true,
            ..Personality::default()
        }
    }

    /// Docker Hub (registry-1.docker.io).
    pub fn docker_hub() -> Self {
        Personality {
            referrers_api_absent: true,
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
