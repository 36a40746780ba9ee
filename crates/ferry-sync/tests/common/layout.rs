//! OCI image layouts on disk for tests that read a layout as a source or check one ferry wrote:
//! `HandLayout` writes through the test kit's image builder after every change.

use std::path::{Path, PathBuf};

use ferry_distribution::{Digest, media};
pub use ferry_testkit::fixtures::images::digest_of;
use ferry_testkit::fixtures::images::{Images, blob_path};
use serde_json::json;

/// A layout on disk, the way other tools (skopeo, buildkit) write one, rewritten after every
/// change (a blob already on disk is left as it is).
pub struct HandLayout {
    pub dir: PathBuf,
    images: Images,
}

impl HandLayout {
    /// An empty layout at `dir` (its `oci-layout` file and an empty index).
    pub fn new(dir: &Path) -> Self {
        let layout = HandLayout {
            dir: dir.to_path_buf(),
            images: Images::new(),
        };
        layout.write_index();
        layout
    }

    /// Writes `bytes` as a blob; returns its descriptor (digest and size).
    pub fn blob(&mut self, bytes: &[u8]) -> serde_json::Value {
        let d = self.images.blob(bytes);
        self.write_index();
        d
    }

    /// An image manifest over `layers` (its config names `arch`); returns its descriptor.
    pub fn image(&mut self, arch: &str, layers: &[&[u8]]) -> serde_json::Value {
        let d = self.images.platform_image(arch, layers);
        self.write_index();
        d
    }

    /// An index over `children` with linux platforms in order amd64, arm64.
    pub fn index(&mut self, children: &[serde_json::Value]) -> serde_json::Value {
        let manifests: Vec<_> = children
            .iter()
            .zip(["amd64", "arm64"])
            .map(|(c, arch)| {
                let mut c = c.clone();
                c["platform"] = json!({"os": "linux", "architecture": arch});
                c
            })
            .collect();
        // No mediaType field: it is optional in an OCI index.
        let d = self.images.manifest(
            media::OCI_INDEX,
            &json!({"schemaVersion": 2, "manifests": manifests}),
        );
        self.write_index();
        d
    }

    /// amd64 and arm64 images (layers "amd layer", "arm layer") under an index tagged `tag`;
    /// returns the three descriptors.
    pub fn multi_arch(
        &mut self,
        tag: &str,
    ) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
        let amd = self.image("amd64", &[b"amd layer"]);
        let arm = self.image("arm64", &[b"arm layer"]);
        let index = self.index(&[amd.clone(), arm.clone()]);
        self.tag(&index, Some(tag));
        (amd, arm, index)
    }

    /// Adds `descriptor` to the index, named `ref_name` when given.
    pub fn tag(&mut self, descriptor: &serde_json::Value, ref_name: Option<&str>) {
        self.images.tag(descriptor, ref_name);
        self.write_index();
    }

    /// Removes the index entry named `ref_name`.
    pub fn untag(&mut self, ref_name: &str) {
        self.images.untag(ref_name);
        self.write_index();
    }

    /// Writes the layout: `oci-layout`, the blobs not yet on disk and `index.json`.
    pub fn write_index(&self) {
        self.images.write_layout(&self.dir);
    }
}

/// The bytes of the blob `digest` in the layout at `dir`.
pub fn read_blob(dir: &Path, digest: &str) -> Vec<u8> {
    Digest::parse(digest).unwrap();
    std::fs::read(blob_path(dir, digest)).unwrap()
}

/// Every `(ref.name, digest)` that the layout at `dir` tags, sorted.
pub fn layout_tags(dir: &Path) -> Vec<(String, String)> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    let mut out: Vec<(String, String)> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| {
            let tag = m["annotations"]["org.opencontainers.image.ref.name"].as_str()?;
            Some((tag.to_owned(), digest_of(m)))
        })
        .collect();
    out.sort();
    out
}
