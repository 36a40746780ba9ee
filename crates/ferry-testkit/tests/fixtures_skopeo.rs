//! The image builder's layouts and archives as another tool reads them: skopeo inspects a built
//! OCI layout, oci-archive and docker-archive and finds the digests the builder reported.

use std::path::Path;
use std::process::Command;

use ferry_testkit::fixtures::images::{Images, digest_of, docker_config, sha256};
use serde_json::Value;

/// `skopeo inspect args… target` as JSON (or raw bytes with `--raw`); the test fails with
/// skopeo's error if it cannot read the image.
fn skopeo(args: &[&str], target: &str) -> Vec<u8> {
    let out = Command::new("skopeo")
        .arg("inspect")
        .args(args)
        .arg(target)
        .output()
        .expect("skopeo runs (Debian package skopeo)");
    assert!(
        out.status.success(),
        "skopeo inspect {target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// Two single-platform images, one tagged `v1` and one `v2`, sharing a layer; returns the
/// images, the two manifest descriptors and v1's layer digests.
fn two_images() -> (Images, Value, Value, Vec<String>) {
    let mut images = Images::new();
    let shared = ferry_testkit::noise(1, 3000);
    let v1 = images.platform_image("amd64", &[&shared, b"v1 only"]);
    let v2 = images.platform_image("arm64", &[&shared, b"v2 only"]);
    images.tag(&v1, Some("v1"));
    images.tag(&v2, Some("v2"));
    let layers = vec![sha256(&shared), sha256(b"v1 only")];
    (images, v1, v2, layers)
}

fn check_oci(target: impl Fn(&str) -> String, v1: &Value, v2: &Value, layers: &[String]) {
    let info = json(&skopeo(&[], &target("v1")));
    assert_eq!(info["Digest"], digest_of(v1));
    assert_eq!(info["Architecture"], "amd64");
    let got: Vec<String> = info["Layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(got, layers);
    // The raw manifest skopeo reads hashes to the digest the index names.
    assert_eq!(sha256(&skopeo(&["--raw"], &target("v2"))), digest_of(v2));
    let info = json(&skopeo(&[], &target("v2")));
    assert_eq!(info["Architecture"], "arm64");
}

#[test]
fn skopeo_reads_a_built_layout_and_oci_archive_with_the_reported_digests() {
    let dir = tempfile::tempdir().unwrap();
    let (images, v1, v2, layers) = two_images();
    let layout = dir.path().join("layout");
    images.write_layout(&layout);
    check_oci(
        |r| format!("oci:{}:{r}", layout.display()),
        &v1,
        &v2,
        &layers,
    );
    let archive = dir.path().join("images.tar");
    images.write_oci_archive(&archive);
    check_oci(
        |r| format!("oci-archive:{}:{r}", archive.display()),
        &v1,
        &v2,
        &layers,
    );
}

fn check_docker(path: &Path, reference: &str, config: &str, layers: &[String]) {
    let target = format!("docker-archive:{}:{reference}", path.display());
    let info = json(&skopeo(&[], &target));
    let got: Vec<&str> = info["Layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(got, layers);
    assert_eq!(info["Architecture"], "arm64");
    assert_eq!(sha256(&skopeo(&["--config", "--raw"], &target)), config);
}

#[test]
fn skopeo_reads_a_built_docker_archive_with_the_reported_digests() {
    let dir = tempfile::tempdir().unwrap();
    let mut images = Images::new();
    let layers: [&[u8]; 2] = [&ferry_testkit::noise(2, 4000), b"top layer"];
    let image = images.docker_image(
        &docker_config("arm64", &layers),
        &layers,
        &["docker.io/myrepo/app:v1"],
    );
    assert_eq!(image.layers, [sha256(layers[0]), sha256(layers[1])]);
    for (name, legacy) in [("plain.tar", false), ("legacy.tar", true)] {
        let path = dir.path().join(name);
        images.write_docker_archive(&path, legacy);
        check_docker(&path, "myrepo/app:v1", &image.config, &image.layers);
        // With one image in it, the archive is read with no reference as well.
        let info = json(&skopeo(&[], &format!("docker-archive:{}", path.display())));
        assert_eq!(info["Layers"].as_array().unwrap().len(), 2, "{name}");
    }
}
