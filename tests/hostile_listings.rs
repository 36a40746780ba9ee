//! The `ferry` binary against listings built to fill memory and the terminal, or to forge report
//! lines: rejected names are cut and bounded in `ferry tags` and the catalog dry run, a listing
//! over its byte budget is a clear error, and registry text cannot start a line of its own.

mod common;

use common::{code, ferry, text};
use ferry_testkit::fixtures::mirror_yaml;

use ferry_testkit::registry::{HostileRule, Hostility, OpKind, TestRegistry};

/// A name of 100 KiB that is neither a tag nor a repository name.
fn huge_name(i: usize) -> String {
    format!("B{i}{}", "B".repeat(100 * 1024))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_tags_reports_a_bounded_number_of_cut_rejected_names() {
    // Four pages, each with 50 names of 100 KiB: 200 rejected names, 20 MiB of listing.
    let reg = TestRegistry::builder().page_size(1).start().await.unwrap();
    for i in 0..4 {
        reg.seed_image("src/app", &format!("v{i}"), &[b"layer"]);
    }
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("src/app"),
        vec![Hostility::ExtraTags((0..50).map(huge_name).collect())],
    ));
    let repo = format!("{}/src/app", reg.host());

    let out = ferry(&["tags", &repo, "--insecure"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.len() < 64 * 1024, "{} bytes printed", stdout.len());
    let invalid: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("invalid "))
        .collect();
    assert_eq!(invalid.len(), 51, "50 names and one count:\n{stdout:.2000}");
    assert!(
        invalid[50].contains("and 150 more names left out"),
        "{}",
        invalid[50]
    );
    assert!(stdout.contains("select  v0"), "the good tags still listed");

    let out = ferry(&["tags", &repo, "--insecure", "--json"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(out.stdout.len() < 64 * 1024, "{} bytes", out.stdout.len());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rejected = json["rejected_names"].as_array().unwrap();
    assert_eq!(rejected.len(), 50);
    assert_eq!(rejected[49]["more"], 150);
    assert!(rejected[0]["name"].as_str().unwrap().len() <= 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_tags_refuses_a_listing_over_its_byte_budget_naming_the_repository() {
    // Four pages of 12 MiB: the third takes the listing past its 32 MiB.
    let reg = TestRegistry::builder().page_size(1).start().await.unwrap();
    for i in 0..4 {
        reg.seed_image("big/app", &format!("v{i}"), &[b"layer"]);
    }
    let page = format!("{{\"tags\":[\"{}\"]}}", "B".repeat(12 << 20));
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("big/app"),
        vec![Hostility::Body(page.into())],
    ));
    let out = ferry(&["tags", &format!("{}/big/app", reg.host()), "--insecure"]).await;
    assert_ne!(code(&out), 0);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}/big/app: tag list: tag list (all pages) larger than the 33554432-byte limit",
            reg.host()
        )),
        "{stderr:.2000}"
    );
    assert!(out.stdout.len() + stderr.len() < 4096, "{stderr:.2000}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_dry_run_reports_a_bounded_number_of_cut_rejected_names() {
    let reg = TestRegistry::builder().page_size(1).start().await.unwrap();
    for i in 0..4 {
        reg.seed_image(&format!("team/r{i}"), "v1", &[b"layer"]);
    }
    // Every catalog page: one real repository and 50 names of 100 KiB under team/.
    let mut names = vec!["team/r0".to_owned()];
    names.extend((0..50).map(|i| format!("team/{}", huge_name(i))));
    let page = serde_json::json!({ "repositories": names }).to_string();
    reg.hostile().add(HostileRule {
        op: Some(OpKind::Catalog),
        repo: None,
        answer: vec![Hostility::Body(page.into())],
        times: None,
        skip: 0,
    });
    let dir = tempfile::tempdir().unwrap();
    let h = reg.host();
    let config = mirror_yaml()
        .registry(&reg, &[])
        .mapping(format!("{h}/team/*"), &[format!("{h}/mirror")], &[])
        .write(dir.path());
    let config = config.to_str().unwrap();

    let out = ferry(&["sync", "-c", config, "--dry-run", "--json"]).await;
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    assert!(out.stdout.len() < 128 * 1024, "{} bytes", out.stdout.len());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let glob = json["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["rejected_names"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        })
        .expect("the glob's entry lists its rejected names");
    let rejected = glob["rejected_names"].as_array().unwrap();
    assert_eq!(rejected.len(), 50, "{:.2000}", text(&out.stdout));
    assert_eq!(rejected[49]["more"], 150);
    assert!(
        rejected
            .iter()
            .all(|r| r["name"].as_str().unwrap().len() <= 303)
    );

    let out = ferry(&["sync", "-c", config, "--dry-run"]).await;
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.len() < 64 * 1024, "{} bytes", stdout.len());
    assert!(
        stdout.contains("invalid and 150 more names left out"),
        "{stdout:.3000}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_error_code_with_a_newline_cannot_forge_a_report_line() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("src/app"),
        vec![Hostility::OciError {
            status: 400,
            code: format!("{}\nFORGED  synced  everything", "C".repeat(15 * 1024)),
            message: "x\nFORGED  too".into(),
        }],
    ));
    let dir = tempfile::tempdir().unwrap();
    let h = reg.host();
    let config = mirror_yaml()
        .registry(&reg, &[])
        .mapping(format!("{h}/src/app"), &[format!("{h}/dst/app")], &[])
        .write(dir.path());
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]).await;
    assert_ne!(code(&out), 0);
    for stream in [text(&out.stdout), text(&out.stderr)] {
        assert!(
            stream.lines().all(|l| !l.starts_with("FORGED")),
            "a registry's text printed a line of its own:\n{stream:.3000}"
        );
        assert!(
            stream.len() < 8 * 1024,
            "{} bytes:\n{stream:.3000}",
            stream.len()
        );
    }
    assert!(
        text(&out.stderr).contains("HTTP 400"),
        "{}",
        text(&out.stderr)
    );
}
