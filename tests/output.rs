//! What a run says on stderr through the real `ferry` binary: `-q` (errors only), the progress
//! display's bars and ETA, and the report's lines, against in-process test registries.

mod common;

use common::{FERRY, code, ferry, text};
use ferry_testkit::fixtures::{ALL_TAGS, MirrorYaml, QUICK_RETRY, mirror_yaml};

use std::time::Duration;

use ferry_testkit::registry::TestRegistry;

/// mirror.yaml naming `reg` (two quick attempts), for mappings between its repositories.
fn with_registry(reg: &TestRegistry) -> MirrorYaml {
    mirror_yaml().registry(reg, &[QUICK_RETRY])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_prints_no_progress_and_of_the_report_only_its_failures() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer one"]);
    let dir = tempfile::tempdir().unwrap();
    let h = reg.host();
    let config = with_registry(&reg)
        .within(&h, "src/app", "dst/app", &[ALL_TAGS])
        .within(&h, "src/absent", "dst/absent", &[ALL_TAGS])
        .write(dir.path());
    let config = config.to_str().unwrap();
    // Without -q (and no terminal): plain progress lines and the whole report.
    let out = ferry(&["sync", "-c", config]).await;
    let loud = text(&out.stderr);
    assert_eq!(code(&out), 1, "{loud}");
    assert!(loud.contains("sync images_done="), "{loud}");
    assert!(loud.contains("synced  "), "{loud}");
    // The global flag before the command and the flag after it alike.
    for args in [
        ["-q", "sync", "-c", config, "--json"],
        ["sync", "-q", "-c", config, "--json"],
    ] {
        let out = ferry(&args).await;
        let err = text(&out.stderr);
        assert_eq!(code(&out), 1, "{err}");
        let lines: Vec<&str> = err.lines().collect();
        assert!(!lines.is_empty(), "the failure is still said");
        assert!(
            lines.iter().all(|l| l.starts_with("FAILED")),
            "{args:?}: {err}"
        );
        assert!(err.contains("src/absent"), "{err}");
        // --json on stdout is the same report as without -q.
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
        assert_eq!(json["totals"]["mappings_failed"], 1);
        assert_eq!(json["images"].as_array().map(Vec::len), Some(1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_nothing_to_copy_draws_no_full_bar_for_0_of_0() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    reg.seed_image("dst/app", "v1", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();
    let config = with_registry(&reg)
        .within(&reg.host(), "src/app", "dst/app", &[ALL_TAGS])
        .write(dir.path());
    // Up to date: the copy phase counts 0 of 0 images from start to end.
    let command = format!("{FERRY} sync -c {} --progress bars", config.display());
    let child = tokio::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("RUST_LOG")
        .env("TERM", "xterm")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), child)
        .await
        .expect("script finished")
        .expect("script (util-linux) runs");
    let screen = text(&out.stdout);
    assert_eq!(code(&out), 0, "{screen}");
    assert!(screen.contains("0 synced, 1 up to date"), "{screen:?}");
    assert!(screen.contains("0/0 images"), "{screen:?}");
    // The bar's colours taken out: `[\x1b[36m===\x1b[34m\x1b[0m\x1b[0m] 0/0`.
    let mut plain = String::new();
    let mut chars = screen.chars();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                let _ = chars.by_ref().find(|c| c.is_ascii_alphabetic());
            }
            c => plain.push(c),
        }
    }
    assert!(plain.contains("0/0 images"), "{plain:?}");
    assert!(!plain.contains("=] 0/0"), "a full bar for 0/0: {plain:?}");
    assert!(screen.contains("ETA -"), "{screen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_run_reports_missing_exact_tags_and_a_filter_that_selected_nothing() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer one"]);
    reg.seed_image("src/other", "v1", &[b"layer two"]);
    let dir = tempfile::tempdir().unwrap();
    let h = reg.host();
    const NOTHING: &str = r#"tags: { include: ["nomatch*"] }"#;
    let config = with_registry(&reg)
        .within(
            &h,
            "src/app",
            "dst/app",
            &[r#"tags: { exact: ["v1", "v9"] }"#],
        )
        .within(&h, "src/other", "dst/other", &[NOTHING])
        .write(dir.path());
    let config = config.to_str().unwrap();
    let report = dir.path().join("report.json");
    let report_arg = report.to_str().unwrap();
    let out = ferry(&[
        "sync",
        "-c",
        config,
        "--progress",
        "none",
        "--report",
        report_arg,
    ])
    .await;
    let err = text(&out.stderr);
    // A missing pinned tag is a failure (exit 1: v1 was synced).
    assert_eq!(code(&out), 1, "{err}");
    assert_eq!(reg.tags("dst/app"), ["v1"]);
    assert!(
        err.lines().any(|l| l.starts_with("MISSING  mapping 0 (")
            && l.ends_with("src/app): exact tag v9 is not in the source")),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l.starts_with("WARNING  mapping 1 (")
            && l.ends_with("src/other): the tag filter selected nothing")),
        "{err}"
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let selections = json["selections"]
        .as_array()
        .expect("selections in the JSON report");
    assert_eq!(selections.len(), 2, "{json:#}");
    assert_eq!(selections[0]["mapping"], 0);
    assert_eq!(selections[0]["missing_exact"], serde_json::json!(["v9"]));
    assert_eq!(selections[1]["mapping"], 1);
    assert_eq!(selections[1]["selected_nothing"], true);
    // The dry run agrees on the exit code.
    let out = ferry(&["sync", "-c", config, "--progress", "none", "--dry-run"]).await;
    assert_eq!(code(&out), 1, "{}", text(&out.stdout));

    // A filter that selects nothing alone is a warning: exit 0.
    let config = with_registry(&reg)
        .within(&h, "src/other", "dst/other", &[NOTHING])
        .write(dir.path());
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("the tag filter selected nothing"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_runs_estimate_counts_mounts_apart_as_the_real_run_does_them() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[&vec![b'a'; 3000]]);
    let dst = TestRegistry::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Two repositories of another registry: the second gets each blob by a mount from the
    // first. (Within the source's own registry both would mount from the source: issue 42.)
    let (h, d) = (reg.host(), dst.host());
    let config = with_registry(&reg)
        .registry(&dst, &[QUICK_RETRY])
        .mapping(
            format!("{h}/src/app"),
            &[format!("{d}/dst/a"), format!("{d}/dst/b")],
            &[ALL_TAGS],
        )
        .write(dir.path());
    let config = config.to_str().unwrap();
    let out = ferry(&[
        "sync",
        "-c",
        config,
        "--progress",
        "none",
        "--dry-run",
        "--json",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let dry: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let out = ferry(&["sync", "-c", config, "--progress", "none", "--dry-run"]).await;
    let dry_text = text(&out.stdout);

    let report = dir.path().join("report.json");
    let report_arg = report.to_str().unwrap();
    let out = ferry(&[
        "sync",
        "-c",
        config,
        "--progress",
        "none",
        "--report",
        report_arg,
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let real: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(real["totals"]["blobs_mounted"], 2, "{real:#}");
    assert_eq!(
        dry["totals"]["blobs_to_transfer"],
        real["totals"]["blobs_copied"]
    );
    assert_eq!(
        dry["totals"]["blobs_to_mount"],
        real["totals"]["blobs_mounted"]
    );
    assert!(
        dry_text.contains("would transfer 2 blobs, 3.1 KiB, and mount 2 from another repository"),
        "{dry_text}"
    );
}

/// Issue 27: with `--log-format json` the end-of-run summary lines were plain text, and nothing
/// was logged per image while the run went on. Every stderr line is now a JSON record, each
/// image's end is one (`ferry::image`), and the summary's lines are too (`ferry::output`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_make_every_stderr_line_a_record_with_one_per_image() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer one"]);
    reg.seed_image("src/app", "v2", &[b"layer two"]);
    let dir = tempfile::tempdir().unwrap();
    let h = reg.host();
    let config = with_registry(&reg)
        .within(&h, "src/app", "dst/app", &[ALL_TAGS])
        .within(&h, "src/absent", "dst/absent", &[ALL_TAGS])
        .write(dir.path());
    let config = config.to_str().unwrap();
    let out = ferry(&[
        "--log-format",
        "json",
        "sync",
        "-c",
        config,
        "--progress",
        "plain",
    ])
    .await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 1, "{err}");
    let records: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    let of = |target: &str| {
        records
            .iter()
            .filter(|r| r["target"] == target)
            .collect::<Vec<_>>()
    };
    let images = of("ferry::image");
    assert_eq!(images.len(), 2, "{err}");
    assert!(images.iter().all(|r| {
        r["fields"]["message"] == "synced"
            && r["fields"]["destination"]
                .as_str()
                .is_some_and(|d| d.ends_with("/dst/app"))
    }));
    let output: Vec<&str> = of("ferry::output")
        .iter()
        .filter_map(|r| r["fields"]["message"].as_str())
        .collect();
    assert!(
        output.iter().any(|l| l.starts_with("sync images_done=")),
        "{err}"
    );
    assert!(output.iter().any(|l| l.starts_with("FAILED")), "{err}");
    assert!(output.iter().any(|l| l.contains("2 synced")), "{err}");
}
