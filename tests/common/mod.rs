//! What the binary-level tests share: running the built `ferry` with a clean environment and a
//! bound, reading its output, and writing a mirror.yaml. Each test file uses part of it.
#![allow(dead_code)]

pub mod containers;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// The `ferry` binary cargo built for these tests.
pub const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// `ferry args…`, with no `RUST_LOG`, `FERRY_CONFIG` or `JOB_COMPLETION_INDEX` inherited from
/// the environment the tests run in, and killed if the test is dropped.
pub fn command(args: &[&str]) -> tokio::process::Command {
    command_under(&[], args)
}

/// [`command`] run through `wrapper` (`["prlimit", "--nofile=64:64", "--"]`), scrubbed alike.
pub fn command_under(wrapper: &[String], args: &[&str]) -> tokio::process::Command {
    let mut c = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = tokio::process::Command::new(program);
            c.args(rest).arg(FERRY);
            c
        }
        None => tokio::process::Command::new(FERRY),
    };
    c.args(args)
        .env_remove("RUST_LOG")
        .env_remove("FERRY_CONFIG")
        .env_remove("JOB_COMPLETION_INDEX")
        .kill_on_drop(true);
    c
}

/// Runs `ferry args…` with `env` added, to completion (at most two minutes).
pub async fn ferry_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = command(args);
    for (k, v) in env {
        c.env(k, v);
    }
    tokio::time::timeout(Duration::from_secs(120), c.output())
        .await
        .expect("ferry finished within two minutes")
        .expect("ferry ran")
}

/// Runs `ferry args…` to completion (at most two minutes).
pub async fn ferry(args: &[&str]) -> Output {
    ferry_env(args, &[]).await
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The exit code (a test fails if ferry was killed by a signal).
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("ferry exited with a code")
}

/// Writes `dir/mirror.yaml` with the given `registries:` and `mappings:` entries.
pub fn write_config(dir: &Path, registries: &str, mappings: &str) -> PathBuf {
    let path = dir.join("mirror.yaml");
    let text = format!("version: 1\nregistries:\n{registries}mappings:\n{mappings}");
    std::fs::write(&path, text).unwrap();
    path
}

/// Pushes an image of `config` (JSON text) and one `layer` under `tag` through ferry's own
/// client: what the tests that need content on the real registry seed it with.
pub async fn push_one_layer(
    client: &ferry_distribution::RegistryClient,
    repo: &str,
    tag: &str,
    config: &str,
    layer: &[u8],
) {
    use ferry_distribution::{Algorithm, Digest, ops::Manifest};
    let mut descriptors = Vec::new();
    for bytes in [config.as_bytes(), layer] {
        let digest = Digest::of_bytes(Algorithm::Sha256, bytes);
        client
            .push_blob_bytes(repo, &digest, bytes.to_vec().into())
            .await
            .unwrap();
        descriptors.push(serde_json::json!({"digest": digest.to_string(), "size": bytes.len()}));
    }
    let mut config_descriptor = descriptors.remove(0);
    config_descriptor["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    descriptors[0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
    let bytes = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_descriptor,
        "layers": descriptors,
    }))
    .unwrap();
    let manifest = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes: bytes.into(),
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
    };
    client.put_manifest(repo, tag, &manifest).await.unwrap();
}
