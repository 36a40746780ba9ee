//! OCI image layouts written by hand, the way other tools (skopeo, buildkit) write them, for
//! tests that read a layout as a source or check one ferry wrote.

use std::path::{Path, PathBuf};

use ferry_distribution::{Algorithm, Digest, media};
use serde_json::json;

/// A layout written by hand, the way other tools write one.
pub struct HandLayout {
    pub dir: PathBuf,
    /// (descriptor, ref.name) of each index entry.
    pub entries: Vec<(serde_json::Value, Option<String>)>,
}

impl HandLayout {
    /// An empty layout at `dir` (its `oci-layout` file and an empty index).
    pub fn new(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        let layout = HandLayout {
            dir: dir.to_path_buf(),
            entries: Vec::new(),
        };
        layout.write_index();
        layout
    }

    /// Writes `bytes` as a blob; returns its descriptor (digest and size).
    pub fn blob(&self, bytes: &[u8]) -> serde_json::Value {
        let d = Digest::of_bytes(Algorithm::Sha256, bytes);
        let path = self.dir.join("blobs/sha256").join(d.hex());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        json!({"digest": d.to_string(), "size": bytes.len()})
    }

    /// An image manifest over `layers` (its config names `arch`); returns its descriptor.
    pub fn image(&self, arch: &str, layers: &[&[u8]]) -> serde_json::Value {
        let mut config =
            self.blob(format!(r#"{{"architecture":"{arch}","os":"linux"}}"#).as_bytes());
        config["mediaType"] = json!(media::OCI_CONFIG);
        let layers: Vec<_> = layers
            .iter()
            .map(|l| {
                let mut d = self.blob(l);
                d["mediaType"] = json!(media::OCI_LAYER_TAR);
                d
            })
            .collect();
        let manifest = json!({"schemaVersion": 2, "mediaType": media::OCI_MANIFEST, "config": config, "layers": layers});
        let mut d = self.blob(&serde_json::to_vec(&manifest).unwrap());
        d["mediaType"] = json!(media::OCI_MANIFEST);
        d
    }

    /// An index over `children` with linux platforms in order amd64, arm64.
    pub fn index(&self, children: &[serde_json::Value]) -> serde_json::Value {
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
        let index = json!({"schemaVersion": 2, "manifests": manifests});
        let mut d = self.blob(&serde_json::to_vec(&index).unwrap());
        d["mediaType"] = json!(media::OCI_INDEX);
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
        self.entries
            .push((descriptor.clone(), ref_name.map(str::to_owned)));
        self.write_index();
    }

    /// Removes the index entry named `ref_name`.
    pub fn untag(&mut self, ref_name: &str) {
        self.entries.retain(|(_, r)| r.as_deref() != Some(ref_name));
        self.write_index();
    }

    /// Writes `index.json` over the entries.
    pub fn write_index(&self) {
        let manifests: Vec<_> = self
            .entries
            .iter()
            .map(|(d, r)| {
                let mut d = d.clone();
                if let Some(r) = r {
                    d["annotations"] = json!({"org.opencontainers.image.ref.name": r});
                }
                d
            })
            .collect();
        let index =
            json!({"schemaVersion": 2, "mediaType": media::OCI_INDEX, "manifests": manifests});
        std::fs::write(
            self.dir.join("index.json"),
            serde_json::to_vec(&index).unwrap(),
        )
        .unwrap();
    }
}

/// The `digest` of a descriptor.
pub fn digest_of(d: &serde_json::Value) -> String {
    d["digest"].as_str().unwrap().to_owned()
}

/// The bytes of the blob `digest` in the layout at `dir`.
pub fn read_blob(dir: &Path, digest: &str) -> Vec<u8> {
    let d = Digest::parse(digest).unwrap();
    std::fs::read(dir.join("blobs/sha256").join(d.hex())).unwrap()
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
