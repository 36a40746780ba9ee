//! A reader that closes stdout early (`ferry tags REPO | head -1`): every command that prints ends
//! quietly, as ripgrep does (no panic, the exit code its work earned), 20 times each through the binary.

mod common;

use std::process::Output;

use common::{code, command, text};
use ferry_testkit::registry::TestRegistry;
use tokio::io::AsyncBufReadExt as _;

/// Runs `ferry args…` with its stdout read by a reader that closes the pipe: at once (before
/// ferry writes anything) when `read_first_line` is false, else after the first line.
async fn with_closed_stdout(args: &[&str], read_first_line: bool) -> Output {
    let mut child = command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ferry starts");
    let stdout = child.stdout.take().expect("stdout piped");
    if read_first_line {
        let mut line = String::new();
        let _ = tokio::io::BufReader::new(stdout).read_line(&mut line).await;
    } else {
        drop(stdout);
    }
    tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("ferry finished within a minute")
        .expect("ferry ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_that_prints_ends_quietly_when_its_reader_goes_away() {
    let reg = TestRegistry::builder().start().await.unwrap();
    // Enough tags that the listing outgrows a pipe's buffer (64 KiB) after the first line.
    for i in 0..2500 {
        reg.seed_image(
            "src/app",
            &format!("1.0.{i}-with-a-long-enough-suffix"),
            &[b"l"],
        );
    }
    reg.seed_image("src/app", "latest", &[b"layer"]);
    let repo = format!("{}/src/app", reg.host());
    let image = format!("{repo}:latest");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mirror.yaml");
    std::fs::write(
        &config,
        "version: 1\nmappings:\n  - { source: \"oci:./in\", targets: [\"oci:./out\"] }\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    // A registry mapping for pull-config, and a regsync file for convert.
    let mirror = dir.path().join("registry.yaml");
    std::fs::write(
        &mirror,
        "version: 1\nmappings:\n  - { source: \"quay.io/org/app\", targets: [\"mirror.local/org/app\"] }\n",
    )
    .unwrap();
    let mirror = mirror.to_str().unwrap();
    let regsync = dir.path().join("regsync.yml");
    std::fs::write(
        &regsync,
        "version: 1\nsync:\n  - { source: quay.io/org/app, target: mirror.local/org/app, type: repository }\n",
    )
    .unwrap();
    let regsync = regsync.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["pull-config", "-c", mirror, "--format", "registries-conf"],
        vec!["pull-config", "-c", mirror, "--format", "idms", "--json"],
        vec!["convert", "regsync", regsync],
        vec!["tags", &repo, "--tls-verify=false"],
        vec!["tags", &repo, "--tls-verify=false", "--json"],
        vec!["inspect", &image, "--tls-verify=false"],
        vec!["inspect", &image, "--tls-verify=false", "--json"],
        vec!["inspect", &image, "--tls-verify=false", "--raw"],
        vec!["validate", config],
        vec!["completions", "bash"],
        vec!["--help"],
    ];
    for args in &commands {
        let open = common::ferry(args).await;
        for round in 0..20 {
            let out = with_closed_stdout(args, round % 2 == 1).await;
            let stderr = text(&out.stderr);
            assert!(
                !stderr.contains("panicked") && !stderr.to_lowercase().contains("broken pipe"),
                "{args:?} round {round}: {stderr}"
            );
            assert_eq!(
                out.status.code(),
                Some(code(&open)),
                "{args:?} round {round} exits as it does with its reader there: {stderr}"
            );
        }
    }
}
