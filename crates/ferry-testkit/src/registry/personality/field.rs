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

    /// JFrog Artifactory. Uploads: a PUT carrying the blob is answered 404 BLOB_UNKNOWN,
    /// POST + PATCH + empty PUT works (docker/buildx#196).
    pub fn artifactory() -> Self {
        Personality {
            put_with_body_blob_unknown: true,
            ..Personality::default()
        }
    }

    /// Sonatype Nexus Repository (a group repository).
    pub fn nexus() -> Self {
        Personality {
            ..Personality::default()
        }
    }

    /// GitHub Container Registry (ghcr.io). Uploads: a request body over 4 MiB is answered 416
    /// "exceeds the maximum permissible limit of 4.00MiB" (wasmCloud/wash-archive#268,
    /// ocx-sh/ocx#237, whose fix, PATCHes under 4 MiB with `Content-Range`, works there).
    pub fn ghcr() -> Self {
        Personality {
            upload_request_limit_416: Some(4 << 20),
            ..Personality::default()
        }
    }

    /// Azure Container Registry. Uploads: a request body above about 20 MB is answered 413
    /// (goharbor/harbor#23015: a 29 MB monolithic PUT refused; 20 MiB here).
    pub fn acr() -> Self {
        Personality {
            upload_request_limit_413: Some(20 << 20),
            ..Personality::default()
        }
    }

    /// Google Artifact Registry and Container Registry. Uploads: a cross-repository mount is
    /// answered 202 with an upload session, never 201 (google/go-containerregistry#1846).
    pub fn gar() -> Self {
        Personality {
            mount_ignored: true,
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
