//! The `ferry` binary against a source whose tag list holds names that are not tags: they are
//! left out with their reason in the text and JSON of sync, dry run and `ferry tags`, printed
//! escaped, the good tag still syncs, and the exit code is 1.

mod common;

use common::{ferry, text};

use std::process::Output;

use ferry_testkit::registry::{HostileRule, Hostility, OpKind, TestRegistry};

const BAD: [&str; 3] = ["..", "x/../../other/manifests/v0", "red\u{1b}[31mtag"];

fn assert_no_raw_escape(out: &Output) {
    for stream in [&out.stdout, &out.stderr] {
        assert!(
            !stream.contains(&0x1b),
            "a raw ESC reached the output:\n{}",
            text(stream)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_listed_names_are_left_out_reported_escaped_and_exit_1() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    reg.seed_image("other", "v0", &[b"not to be touched"]);
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("src/app"),
        vec![Hostility::ExtraTags(
            BAD.iter().map(|s| s.to_string()).collect(),
        )],
    ));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mirror.yaml");
    std::fs::write(
        &config,
        format!(
            "version: 1\nregistries:\n  - host: \"{h}\"\n    url: \"{u}\"\n    insecure: true\nmappings:\n  - source: \"{h}/src/app\"\n    targets: [\"{h}/dst/app\"]\n    tags: {{ include: [\"*\"] }}\n",
            h = reg.host(),
            u = reg.url()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let dry = ferry(&["sync", "-c", config, "--dry-run", "--json"]).await;
    assert_eq!(dry.status.code(), Some(1), "{}", text(&dry.stderr));
    let json: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    let names: Vec<&str> = json["mappings"][0]["rejected_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, BAD);

    let out = ferry(&["sync", "-c", config, "--progress", "none"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(reg.tags("dst/app"), ["v1"], "the good tag is mirrored");
    assert_eq!(reg.tags("other"), ["v0"]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("LEFT OUT") && stderr.contains("\"..\""),
        "{stderr}"
    );
    assert!(stderr.contains("red\\u{1b}[31mtag"), "escaped: {stderr}");
    assert_no_raw_escape(&out);

    let tags = ferry(&["tags", &format!("{}/src/app", reg.host()), "--insecure"]).await;
    assert_eq!(tags.status.code(), Some(0), "{}", text(&tags.stderr));
    let stdout = text(&tags.stdout);
    assert!(stdout.contains("select  v1"), "{stdout}");
    assert!(stdout.contains("invalid \"..\""), "{stdout}");
    assert_no_raw_escape(&tags);
}
