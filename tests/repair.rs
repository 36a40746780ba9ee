//! `ferry sync --repair` through the real binary against the real distribution registry (issue
//! 40): a blob deleted from the target's storage after a sync is found by `verify --deep`, not
//! by a plain sync (it compares manifest digests), and put back by `sync --repair`.

mod common;

use common::{code, ferry, push_one_layer, text};
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::fixtures::mirror_yaml;
use serde_json::Value;

/// `ferry --progress none ARGS…` with its exit code, stdout and stderr.
async fn run(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["--progress", "none"];
    all.extend_from_slice(args);
    let out = ferry(&all).await;
    (code(&out), text(&out.stdout), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_repair_puts_back_a_blob_deleted_from_the_target_that_verify_deep_found() {
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&real.url())).unwrap();
    let lost: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let lost_digest = Digest::of_bytes(Algorithm::Sha256, &lost);
    push_one_layer(&c, "src/app", "v1", "{\"repair\":1}", &lost).await;
    push_one_layer(&c, "src/app", "v2", "{\"repair\":2}", b"kept layer").await;
    let dir = tempfile::tempdir().unwrap();
    let h = real.host();
    let config = mirror_yaml()
        .registry(&real, &[])
        .mapping(
            format!("{h}/src/app"),
            &[format!("{h}/dst/app")],
            &[r#"tags: { exact: ["v1", "v2"] }"#],
        )
        .write(dir.path());
    let config = config.to_str().unwrap();
    let (synced, _, err) = run(&["sync", "-c", config]).await;
    assert_eq!(synced, 0, "{err}");

    // The layer of v1 goes from the target repository (its link in distribution's storage).
    let link = real
        .storage_dir()
        .join("docker/registry/v2/repositories/dst/app/_layers")
        .join("sha256")
        .join(lost_digest.hex());
    std::fs::remove_dir_all(&link).expect("the target's layer link");

    let (verified, out, err) = run(&["verify", "-c", config, "--deep"]).await;
    assert_eq!(verified, 1, "{out}{err}");
    assert!(
        out.contains(&format!("MISSING   blob {lost_digest} of v1")),
        "{out}"
    );
    assert!(
        err.contains(&format!(
            "hint: `ferry sync -c {config} --repair` puts back"
        )),
        "verify points at the repair:\n{err}"
    );

    // A plain sync compares manifest digests: both tags are up to date, nothing is written.
    let (plain, _, err) = run(&["sync", "-c", config]).await;
    assert_eq!(plain, 0, "{err}");
    assert!(err.contains("0 synced, 2 up to date"), "{err}");

    let report = dir.path().join("repair.json");
    let (repaired, _, err) = run(&[
        "sync",
        "-c",
        config,
        "--repair",
        "--report",
        report.to_str().unwrap(),
    ])
    .await;
    assert_eq!(repaired, 0, "{err}");
    assert!(
        err.contains(&format!(
            "repaired  {h}/src/app:v1 -> {h}/dst/app: put back blob {lost_digest}"
        )),
        "{err}"
    );
    assert!(
        err.contains("1 synced, 1 up to date, 0 failed, 1 repaired"),
        "{err}"
    );
    let json: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(json["totals"]["images_repaired"], 1, "{json:#}");
    assert_eq!(json["repaired"][0]["image"], "v1", "{json:#}");
    assert_eq!(
        json["repaired"][0]["put_back"][0],
        format!("blob {lost_digest}"),
        "{json:#}"
    );
    // Only the lost layer went back, by a mount from the source repository: source and target
    // are one registry here (issue 42), so no byte is read or uploaded.
    assert_eq!(json["totals"]["blobs_mounted"], 1, "{json:#}");
    assert_eq!(json["totals"]["blobs_copied"], 0, "{json:#}");
    assert_eq!(json["totals"]["bytes_copied"], 0, "{json:#}");

    let (again, out, err) = run(&["verify", "-c", config, "--deep"]).await;
    assert_eq!(again, 0, "{out}{err}");
    assert!(!err.contains("--repair"), "{err}");
}

#[test]
fn the_binary_is_built() {
    assert!(std::path::Path::new(common::FERRY).exists());
}
