//! Media type names for the manifests, indexes, configs and layers registries serve, the
//! manifest `Accept` value, and predicates that classify a `Content-Type` as index or manifest.

/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index (multi-platform).
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker image manifest, schema 2.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker manifest list (multi-platform).
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// The OCI empty JSON descriptor type (`{}`), used as config of artifacts.
pub const OCI_EMPTY_JSON: &str = "application/vnd.oci.empty.v1+json";
/// OCI image config.
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// Docker image config.
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";

/// OCI uncompressed layer.
pub const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
/// OCI gzip layer.
pub const OCI_LAYER_TAR_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// OCI zstd layer.
pub const OCI_LAYER_TAR_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
/// OCI non-distributable gzip layer (deprecated by OCI, still seen on Windows images).
pub const OCI_LAYER_NONDISTRIBUTABLE_TAR_GZIP: &str =
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip";
/// Docker gzip layer.
pub const DOCKER_LAYER_TAR_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
/// Docker foreign layer (Windows base layers served from elsewhere).
pub const DOCKER_FOREIGN_LAYER_TAR_GZIP: &str =
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";

/// The four manifest types ferry reads, comma-joined for an `Accept` header.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json,\
application/vnd.oci.image.index.v1+json,\
application/vnd.docker.distribution.manifest.v2+json,\
application/vnd.docker.distribution.manifest.list.v2+json";

/// The media type without parameters (`; charset=…`) or surrounding whitespace.
fn essence(media_type: &str) -> &str {
    media_type.split(';').next().unwrap_or_default().trim()
}

/// An OCI index or Docker manifest list. Parameters and letter case are ignored.
pub fn is_index(media_type: &str) -> bool {
    let essence = essence(media_type);
    [OCI_INDEX, DOCKER_MANIFEST_LIST]
        .iter()
        .any(|known| essence.eq_ignore_ascii_case(known))
}

/// A single-image OCI or Docker schema 2 manifest. Parameters and letter case are ignored.
pub fn is_manifest(media_type: &str) -> bool {
    let essence = essence(media_type);
    [OCI_MANIFEST, DOCKER_MANIFEST]
        .iter()
        .any(|known| essence.eq_ignore_ascii_case(known))
}

/// Any of the four manifest types in [`MANIFEST_ACCEPT`].
pub fn is_known_manifest_type(media_type: &str) -> bool {
    is_index(media_type) || is_manifest(media_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_lists_the_four_manifest_types() {
        assert_eq!(
            MANIFEST_ACCEPT,
            [
                OCI_MANIFEST,
                OCI_INDEX,
                DOCKER_MANIFEST,
                DOCKER_MANIFEST_LIST
            ]
            .join(",")
        );
        for media_type in MANIFEST_ACCEPT.split(',') {
            assert!(is_known_manifest_type(media_type), "{media_type}");
        }
    }

    #[test]
    fn classifies_indexes_and_manifests() {
        assert!(is_index(OCI_INDEX) && is_index(DOCKER_MANIFEST_LIST));
        assert!(!is_index(OCI_MANIFEST) && !is_index(DOCKER_MANIFEST));
        assert!(is_manifest(OCI_MANIFEST) && is_manifest(DOCKER_MANIFEST));
        assert!(!is_manifest(OCI_INDEX) && !is_manifest(DOCKER_MANIFEST_LIST));
        for other in [
            OCI_CONFIG,
            DOCKER_CONFIG,
            OCI_EMPTY_JSON,
            OCI_LAYER_TAR_GZIP,
            "application/vnd.docker.distribution.manifest.v1+prettyjws",
            "",
        ] {
            assert!(!is_known_manifest_type(other), "{other}");
        }
    }

    #[test]
    fn ignores_parameters_and_case() {
        assert!(is_manifest(
            " application/vnd.OCI.image.manifest.v1+json; charset=utf-8"
        ));
        assert!(is_index("application/vnd.oci.image.index.v1+json;x=y"));
        assert!(!is_index("application/vnd.oci.image.index.v1+json+x"));
    }
}
