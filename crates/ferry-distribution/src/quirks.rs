//! The one place that knows registries' quirks: which hosts meter reads and writes apart, which
//! mishandle several PATCHes per session. docs/registries.md carries the evidence for each.

/// Registries that throttle reads and writes with separate quotas get a window per class.
pub fn split_read_write(host: &str) -> bool {
    is_ecr(host) || host.ends_with(".azurecr.io")
}

/// Registries reported to keep only the last PATCH of a session (GHCR) or to have no chunked
/// uploads (Google Artifact Registry): blobs go up in one request there.
pub fn single_request_uploads(host: &str) -> bool {
    host == "ghcr.io"
        || host.ends_with("-docker.pkg.dev")
        || host == "gcr.io"
        || host.ends_with(".gcr.io")
}

/// Azure Container Registry is reported to fail streaming PUTs of large blobs: chunk there.
pub fn needs_chunked_uploads(host: &str) -> bool {
    host.ends_with(".azurecr.io")
}

/// The largest request body a registry is known to take in one streamed request, where it is
/// smaller than ferry's chunk size: Azure Container Registry (see `needs_chunked_uploads`).
pub fn max_chunk(host: &str) -> Option<u64> {
    needs_chunked_uploads(host).then_some(16 << 20)
}

/// `<account>.dkr.ecr.<region>.amazonaws.com`.
pub fn is_ecr(host: &str) -> bool {
    let h = host.split(':').next().unwrap_or(host);
    h.contains(".dkr.ecr.") && (h.ends_with(".amazonaws.com") || h.ends_with(".amazonaws.com.cn"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecr_and_acr_split_their_windows() {
        assert!(split_read_write(
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
        ));
        assert!(split_read_write("myreg.azurecr.io"));
        assert!(!split_read_write("ghcr.io"));
        assert!(!split_read_write("docker.io"));
    }

    #[test]
    fn ghcr_and_gar_upload_in_one_request() {
        assert!(single_request_uploads("ghcr.io"));
        assert!(single_request_uploads("europe-docker.pkg.dev"));
        assert!(!single_request_uploads("quay.io"));
        assert!(needs_chunked_uploads("x.azurecr.io"));
        assert_eq!(max_chunk("x.azurecr.io"), Some(16 << 20));
        assert_eq!(max_chunk("ghcr.io"), None);
    }
}
