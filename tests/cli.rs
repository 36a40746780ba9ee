//! The `ferry` binary end to end: run as a subprocess against in-process test registries,
//! checking exit codes, output (text, JSON, progress with and without a terminal) and secrecy.

mod common;

use common::{FERRY, code, ferry, text};
use ferry_testkit::fixtures::{ALL_TAGS, MirrorYaml, QUICK_RETRY, mirror_yaml};

use std::time::Duration;

use ferry_testkit::registry::{OpKind, TestRegistry, TokenAuthConfig};

/// Runs ferry with `args` (stdout and stderr piped, so not a terminal).
/// mirror.yaml naming `reg` (two quick attempts, then each of `fields`).
fn with_registry(reg: &TestRegistry, fields: &[&str]) -> MirrorYaml {
    let fields: Vec<&str> = std::iter::once(QUICK_RETRY)
        .chain(fields.iter().copied())
        .collect();
    mirror_yaml().registry(reg, &fields)
}

/// mirror.yaml naming `reg` with one mapping between two of its repositories with `tags`.
fn within(reg: &TestRegistry, source: &str, target: &str, tags: &str) -> MirrorYaml {
    with_registry(reg, &[]).within(&reg.host(), source, target, &[&format!("tags: {tags}")])
}

/// Writes a config for `reg` and returns its path (inside `dir`).
fn writes(reg: &TestRegistry) -> Vec<String> {
    reg.requests()
        .into_iter()
        .filter(|r| r.method != "GET" && r.method != "HEAD")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_prints_every_problem_with_file_line_col_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "version: 1\nconcurrency: 0\nmappings:\n  - source: docker.io/library/alpine\n",
    )
    .unwrap();
    let out = ferry(&["validate", "-c", path.to_str().unwrap()]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 3, "{err}");
    let file = path.display().to_string();
    assert!(err.contains(&format!("{file}:2:14: concurrency:")), "{err}");
    assert!(err.contains(&format!("{file}:4:")), "{err}");
    assert!(err.contains("needs targets or target_group"), "{err}");

    // A sync with the same config stops before any network work, with the same code.
    let out = ferry(&["sync", "-c", path.to_str().unwrap()]).await;
    assert_eq!(code(&out), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_copies_exits_0_and_a_rerun_is_up_to_date() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer one"]);
    let dir = tempfile::tempdir().unwrap();
    let config = within(&reg, "src/app", "dst/app", "{ include: [\"*\"] }").write(dir.path());
    let report = dir.path().join("report.json");
    let out = ferry(&[
        "sync",
        "-c",
        config.to_str().unwrap(),
        "--progress",
        "none",
        "--report",
        report.to_str().unwrap(),
    ])
    .await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 0, "{err}");
    assert_eq!(reg.tags("dst/app"), ["v1"]);
    assert!(err.contains("1 synced, 0 up to date, 0 failed"), "{err}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(json["totals"]["images_synced"], 1);

    reg.reset_stats();
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("0 synced, 1 up to date, 0 failed"), "{err}");
    assert!(writes(&reg).is_empty(), "{:?}", writes(&reg));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_report_on_stdout_parses_and_partial_failure_exits_1() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer one"]);
    let dir = tempfile::tempdir().unwrap();
    let config = within(&reg, "src/app", "dst/app", "{ include: [\"*\"] }")
        .within(&reg.host(), "src/absent", "dst/absent", &[ALL_TAGS])
        .write(dir.path());
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--json"]).await;
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(json["totals"]["images_synced"], 1);
    assert_eq!(json["totals"]["mappings_failed"], 1);
    assert_eq!(json["failed_mappings"][0]["http_status"], 404);

    // Every mapping failing (and not on auth) is exit 2.
    let config = within(&reg, "src/absent", "dst/absent", "{ include: [\"*\"] }").write(dir.path());
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]).await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_shows_tags_reasons_and_bytes_and_sends_no_write() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let layer_a = vec![b'a'; 3000];
    let layer_b = vec![b'b'; 500];
    reg.seed_image("src/app", "v1", &[&layer_a]);
    reg.seed_image("src/app", "v2", &[&layer_a, &layer_b]);
    reg.seed_image("src/app", "v3-rc", &[b"rc"]);
    // The existing target already holds layer_a (through its own v0).
    reg.seed_image("old/app", "v0", &[&layer_a]);
    let dir = tempfile::tempdir().unwrap();
    let auth = "auth: { type: basic, username: alice, password: \"plan-secret-91\" }";
    let no_rc = "tags: { exclude: [\"*-rc\"] }";
    let config = with_registry(&reg, &[auth])
        .within(&reg.host(), "src/app", "new/app", &[no_rc])
        .within(&reg.host(), "src/app", "old/app", &[no_rc])
        .write(dir.path());
    reg.reset_stats();

    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--dry-run", "-vv"]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(
        stdout.contains("target repository does not exist yet"),
        "{stdout}"
    );
    assert!(stdout.contains("target lacks it"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("v3-rc") && l.contains("excluded by glob \"*-rc\"")),
        "{stdout}"
    );
    assert!(stdout.contains("4 to copy"), "{stdout}");
    assert!(
        writes(&reg).is_empty(),
        "a dry run wrote: {:?}",
        writes(&reg)
    );
    assert!(!stdout.contains("plan-secret-91") && !stderr.contains("plan-secret-91"));

    let out = ferry(&[
        "sync",
        "-c",
        config.to_str().unwrap(),
        "--dry-run",
        "--json",
    ])
    .await;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("dry run JSON");
    assert_eq!(json["totals"]["copies"], 4);
    assert_eq!(json["mappings"][0]["filtered_out"][0]["tag"], "v3-rc");
    // new/app lacks every blob; old/app has layer_a, so only layer_b and the configs count.
    let new_v2 = &json["mappings"][0]["to_copy"][1]["targets"][0];
    let old_v2 = &json["mappings"][1]["to_copy"][1]["targets"][0];
    let new_bytes = new_v2["bytes_missing"].as_u64().unwrap();
    let old_bytes = old_v2["bytes_missing"].as_u64().unwrap();
    assert_eq!(new_bytes - old_bytes, 3000, "{json:#}");
    assert_eq!(old_v2["blobs_missing"], 2, "{json:#}");
    assert!(
        writes(&reg).is_empty(),
        "a dry run wrote: {:?}",
        writes(&reg)
    );
    assert!(
        reg.stats().op(OpKind::BlobHead) > 0,
        "the existing target was asked which blobs it holds"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_basic_credentials_exit_4_and_the_password_appears_nowhere() {
    let reg = TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![("alice".into(), "right-password".into())],
            anonymous_pull: false,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();
    let password = "wrong-Pa55word-7731";
    let auth = format!("auth: {{ type: basic, username: alice, password: \"{password}\" }}");
    let config = with_registry(&reg, &[&auth])
        .within(&reg.host(), "src/app", "dst/app", &[ALL_TAGS])
        .write(dir.path());
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "-vv", "--json"]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 4, "{stderr}");
    assert!(!stdout.contains(password), "password on stdout");
    assert!(!stderr.contains(password), "password on stderr");
    assert!(stderr.contains("authentication failed") || stdout.contains("authentication failed"));

    let out = ferry(&["auth", "check", "-c", config.to_str().unwrap(), "-vv"]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 4, "{stdout}{stderr}");
    assert!(stdout.contains("basic as alice"), "{stdout}");
    assert!(!stdout.contains(password) && !stderr.contains(password));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_progress_is_plain_lines_with_no_escape_codes() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    // Another registry as the target: within one, the blobs are mounted and nothing is read.
    let dst = TestRegistry::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = with_registry(&reg, &[])
        .registry(&dst, &[QUICK_RETRY])
        .mapping(
            format!("{}/src/app", reg.host()),
            &[format!("{}/dst/app", dst.host())],
            &["tags: { include: [\"*\"] }"],
        )
        .write(dir.path());
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "-v"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("prepare done=1 total=1 in_flight=0")),
        "{stderr}"
    );
    assert!(
        stderr.lines().any(|l| l.starts_with("sync images_done=")),
        "{stderr}"
    );
    // The final line: everything expected was read, nothing left to wait for.
    let last = stderr
        .lines()
        .rfind(|l| l.starts_with("sync images_done="))
        .unwrap_or_default();
    let field = |name: &str| {
        last.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        field("bytes_total").parse::<u64>().unwrap_or(0) > 0,
        "{last}"
    );
    assert_eq!(field("bytes_read"), field("bytes_total"), "{last}");
    assert_eq!(field("eta_secs"), "-", "{last}");
    assert!(!out.stderr.contains(&0x1b), "escape code in: {stderr:?}");
    assert!(!out.stdout.contains(&0x1b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_progress_draws_bars() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();
    let config = within(&reg, "src/app", "dst/app", "{ include: [\"*\"] }").write(dir.path());
    let command = format!("{FERRY} sync -c {} --progress auto", config.display());
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
    assert!(out.stdout.contains(&0x1b), "no escape codes: {screen:?}");
    assert!(screen.contains("resolving"), "{screen:?}");
    assert!(screen.contains("1/1 mappings"), "{screen:?}");
    assert!(
        !screen.contains("prepare done="),
        "plain lines on a terminal: {screen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_shows_what_the_filter_selects_and_why_the_rest_is_out() {
    let reg = TestRegistry::builder().start().await.unwrap();
    for tag in ["1.0.0", "1.1.0", "2.0.0", "edge", "latest"] {
        reg.seed_image("src/app", tag, &[tag.as_bytes()]);
    }
    let repo = format!("{}/src/app", reg.host());
    let out = ferry(&[
        "tags",
        &repo,
        "--insecure",
        "--semver",
        ">=1.1",
        "--exact",
        "edge",
        "--exact",
        "nightly",
    ])
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let selected: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("select  "))
        .collect();
    assert_eq!(selected, ["edge", "1.1.0", "2.0.0"], "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("skip    1.0.0") && l.contains("outside range")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("skip    latest") && l.contains("not a version")),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("missing nightly")),
        "{stdout}"
    );

    // A bad range is a usage/config error.
    let out = ferry(&["tags", &repo, "--insecure", "--semver", "not a range"]).await;
    assert_eq!(code(&out), 3, "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_moves_one_tag_to_a_registry_and_to_an_oci_layout() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"one"]);
    reg.seed_image("src/app", "v2", &[b"two"]);
    let source = format!("{}/src/app:v2", reg.host());
    let target = format!("{}/dst/app", reg.host());
    let out = ferry(&["copy", &source, &target, "--insecure", "--progress", "none"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(reg.tags("dst/app"), ["v2"], "only the named tag is copied");

    let dir = tempfile::tempdir().unwrap();
    let layout = format!("oci:{}", dir.path().join("layout").display());
    let out = ferry(&["copy", &source, &layout, "--insecure", "--json"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["totals"]["images_synced"], 1);
    let index = std::fs::read_to_string(dir.path().join("layout/index.json")).unwrap();
    assert!(index.contains("\"v2\""), "{index}");
}

/// `ferry copy --platform` copies only that child of an index, as skopeo's `--override-arch`
/// and crane's `--platform` do; a platform that is not `os/arch[/variant]` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_with_platform_copies_only_that_child_of_an_index() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let amd = reg.seed_image("src/multi", "1-amd64", &[b"amd layer"]);
    let arm = reg.seed_image("src/multi", "1-arm64", &[b"arm layer"]);
    reg.seed_index("src/multi", "1", &[amd.clone(), arm.clone()]);
    let source = format!("{}/src/multi:1", reg.host());
    let target = format!("{}/dst/multi", reg.host());
    let out = ferry(&[
        "copy",
        &source,
        &target,
        "--platform",
        "linux/amd64",
        "--insecure",
        "--progress",
        "none",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let (_, bytes) = reg.manifest("dst/multi", "1").expect("the tag is there");
    let index: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let children: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["digest"].as_str().unwrap())
        .collect();
    assert_eq!(children, [amd.as_str()], "only linux/amd64");
    assert!(
        reg.manifest("dst/multi", &arm).is_none(),
        "arm64 not copied"
    );

    let out = ferry(&[
        "copy",
        &source,
        &target,
        "--platform",
        "linux//amd64",
        "--insecure",
    ])
    .await;
    assert_ne!(code(&out), 0);
    assert!(
        text(&out.stderr).contains("--platform"),
        "{}",
        text(&out.stderr)
    );
    let out = ferry(&[
        "copy",
        &source,
        &target,
        "--all",
        "--platform",
        "linux/amd64",
    ])
    .await;
    assert_ne!(code(&out), 0, "--all and --platform conflict");
}

/// skopeo's `docker://` transport prefix is accepted on both sides of `ferry copy` and by
/// `ferry tags`, so a skopeo command line carries over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_and_tags_take_skopeos_docker_transport_prefix() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"one"]);
    let source = format!("docker://{}/src/app:v1", reg.host());
    let target = format!("docker://{}/dst/app", reg.host());
    let out = ferry(&["copy", &source, &target, "--insecure", "--progress", "none"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(reg.tags("dst/app"), ["v1"]);

    let repo = format!("docker://{}/dst/app", reg.host());
    let out = ferry(&["tags", &repo, "--insecure"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("1 listed, 1 selected"),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_needs_no_listing_and_gets_through_a_docker_flow_only_registry() {
    use ferry_testkit::registry::Personality;
    let src = TestRegistry::builder()
        .personality(Personality::no_tag_list())
        .start()
        .await
        .unwrap();
    let dst = TestRegistry::builder()
        .personality(Personality::docker_flow_only())
        .start()
        .await
        .unwrap();
    src.seed_image("lib/app", "v2", &[b"layer one", b"layer two"]);
    let source = format!("{}/lib/app:v2", src.host());
    let target = format!("{}/mirror/app", dst.host());
    let out = ferry(&["copy", &source, &target, "--insecure", "--json"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(
        dst.manifest("mirror/app", "v2"),
        src.manifest("lib/app", "v2")
    );
    assert_eq!(
        src.stats().op(OpKind::TagList),
        0,
        "the named tag needs no listing"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flow = |host: String| {
        json["registries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["registry"] == host.as_str())
            .map(|r| r["capabilities"]["upload_flow"].clone())
    };
    assert_eq!(flow(dst.host()), Some(serde_json::json!("docker")));
    assert!(
        text(&out.stderr).contains(&format!("registry {}: upload flow docker", dst.host())),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once_with_code_2_and_says_what_is_known() {
    use tokio::io::AsyncBufReadExt as _;

    let reg = TestRegistry::builder()
        .repo_latency("slow/", Duration::from_secs(600))
        .start()
        .await
        .unwrap();
    reg.seed_image("slow/app", "v1", &[b"one"]);
    let dir = tempfile::tempdir().unwrap();
    let config = within(&reg, "slow/app", "dst/app", "{ include: [\"*\"] }").write(dir.path());
    let mut child = common::command(&[])
        .args([
            "sync",
            "-c",
            config.to_str().unwrap(),
            "--progress",
            "plain",
        ])
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    // The first plain line means the prepare phase is under way (and signals are watched).
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line.clone());
        if line.starts_with("prepare done=0") {
            break;
        }
    }
    let kill = |pid: String| async move {
        let status = tokio::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .await
            .unwrap();
        assert!(status.success());
    };
    kill(pid.clone()).await;
    // The first signal is logged; then the second ends the run.
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line.clone());
        if line.contains("signal received") {
            break;
        }
    }
    assert!(
        seen.iter().any(|l| l.contains("signal received")),
        "the first signal only stops new work: {seen:#?}"
    );
    kill(pid).await;
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("ferry exited after the second signal")
        .unwrap();
    assert_eq!(status.code(), Some(2), "{seen:#?}");
    // It ended there and then: no phase finished and no summary was written.
    assert!(
        !seen
            .iter()
            .any(|l| l.starts_with("prepare done=1") || l.contains(" up to date, ")),
        "{seen:#?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.contains("interrupted twice") && l.contains("0/1 mappings resolved")),
        "{seen:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_is_a_source_for_copy_tags_and_sync() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"one"]);
    reg.seed_image("src/app", "v2", &[b"two"]);
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    for tag in ["v1", "v2"] {
        let source = format!("{}/src/app:{tag}", reg.host());
        let out = ferry(&[
            "copy",
            &source,
            &format!("oci:{}", first.display()),
            "--insecure",
        ])
        .await;
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    }
    // `tags` lists a layout as it lists a repository.
    let out = ferry(&["tags", &format!("oci:{}", first.display()), "--json"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["selected"], serde_json::json!(["v1", "v2"]));

    // skopeo's spelling: oci:<dir>:<tag>.
    let out = ferry(&[
        "copy",
        &format!("oci:{}:v2", first.display()),
        &format!("{}/copied/app", reg.host()),
        "--insecure",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(reg.tags("copied/app"), ["v2"]);
    assert_eq!(
        reg.manifest("copied/app", "v2"),
        reg.manifest("src/app", "v2"),
        "the layout round trip changed the manifest"
    );

    // A sync from the layout: the dry run says what would go, the run copies it.
    let config = with_registry(&reg, &[])
        .mapping(
            format!("oci:{}", first.display()),
            &[format!("{}/synced/app", reg.host())],
            &[ALL_TAGS],
        )
        .write(dir.path());
    let config = config.to_str().unwrap();
    let out = ferry(&["sync", "-c", config, "--dry-run"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("mapping 0 oci:{}", first.display())),
        "{stdout}"
    );
    assert!(stdout.contains("2 to copy"), "{stdout}");
    assert!(reg.tags("synced/app").is_empty(), "a dry run wrote");
    let out = ferry(&["sync", "-c", config, "--progress", "none"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(reg.tags("synced/app"), ["v1", "v2"]);
}

/// `ferry copy src:a dst:b` pushes the source's image under `b` on a real registry (a retag, as
/// skopeo does); a rerun is up to date; a target with a digest or an invalid tag is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_retags_onto_a_real_registry() {
    let Some(real) = ferry_testkit::distribution::RealRegistry::start_for_test()
        .await
        .expect("registry")
    else {
        return;
    };
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"one"]);
    let source = format!("{}/src/app:v1", reg.host());
    let target = format!("{}/mirror/app:stable", real.host());
    for _ in 0..2 {
        let out = ferry(&["copy", &source, &target, "--insecure", "--progress", "none"]).await;
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    }
    let log = real.access_log().await.unwrap();
    let puts: Vec<_> = log
        .entries
        .iter()
        .filter(|e| e.method == "PUT" && e.path.contains("/manifests/"))
        .map(|e| (e.path.clone(), e.status))
        .collect();
    assert_eq!(
        puts,
        [("/v2/mirror/app/manifests/stable".to_owned(), 201)],
        "one push, under the target's tag; the rerun is up to date"
    );

    // A digest source can be given a tag on the target too.
    let digest = reg.seed_image("src/app", "v2", &[b"two"]);
    let pinned = format!("{}/src/app@{digest}", reg.host());
    let target = format!("{}/mirror/app:pinned", real.host());
    let out = ferry(&["copy", &pinned, &target, "--insecure", "--progress", "none"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let log = real.access_log().await.unwrap();
    assert_eq!(log.count("PUT", "/v2/mirror/app/manifests/pinned"), 1);

    let hex = "c".repeat(64);
    for (bad, says) in [
        (
            format!("{}/mirror/app@sha256:{hex}", real.host()),
            "under a tag",
        ),
        (format!("{}/mirror/app:-bad", real.host()), "-bad"),
    ] {
        let out = ferry(&["copy", &source, &bad, "--insecure", "--progress", "none"]).await;
        assert_ne!(code(&out), 0);
        assert!(text(&out.stderr).contains(says), "{}", text(&out.stderr));
    }
}

/// `requests` means one thing: HTTP requests as the registries' access logs count them, in the
/// report's totals, in each registry's entry, in the progress line and in the text summary
/// (token endpoints not counted; operation attempts are `attempts`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_the_report_and_the_progress_line_are_what_the_registries_saw() {
    let src = TestRegistry::builder().start().await.unwrap();
    let dst = TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![("alice".into(), "right-password".into())],
            anonymous_pull: false,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap();
    src.seed_image("src/app", "v1", &[b"layer one", b"layer two"]);
    let dir = tempfile::tempdir().unwrap();
    let auth = "auth: { type: basic, username: alice, password: \"right-password\" }";
    let config = with_registry(&src, &[])
        .registry(&dst, &[QUICK_RETRY, auth])
        .mapping(
            format!("{}/src/app", src.host()),
            &[format!("{}/dst/app", dst.host())],
            &[ALL_TAGS],
        )
        .write(dir.path());
    let config = config.to_str().unwrap();
    let out = ferry(&["sync", "-c", config, "--json", "--progress", "plain"]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The token endpoint is a realm, not the registry's API: not counted.
    let seen = |reg: &TestRegistry| {
        let stats = reg.stats();
        stats.ops.values().sum::<u64>() - stats.op(OpKind::Token)
    };
    let entry = |reg: &TestRegistry| {
        json["registries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["registry"] == reg.host())
            .cloned()
            .unwrap_or_default()
    };
    assert!(dst.stats().op(OpKind::UploadStart) > 0, "blobs went up");
    assert_eq!(entry(&src)["requests"], seen(&src), "{json:#}");
    assert_eq!(entry(&dst)["requests"], seen(&dst), "{json:#}");
    assert!(entry(&dst)["attempts"].as_u64() > Some(0), "{json:#}");
    assert_eq!(
        json["totals"]["requests"],
        seen(&src) + seen(&dst),
        "{json:#}"
    );
    let line = err
        .lines()
        .rfind(|l| l.starts_with("sync images_done="))
        .unwrap_or_default();
    let requests = format!("requests={} ", seen(&src) + seen(&dst));
    assert!(line.contains(&requests), "{requests}: {err}");
    let total = format!("; {} requests,", seen(&src) + seen(&dst));
    assert!(err.contains(&total), "{total}: {err}");
}

/// The copy phase's progress ends with the engine, before pruning: its last plain line shows
/// the report's figures, not the prune's DELETE on top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_progress_line_is_the_engines_even_when_pruning_follows() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"one"]);
    reg.seed_image("dst/app", "v0", &[b"zero"]);
    let dir = tempfile::tempdir().unwrap();
    let config = within(&reg, "src/app", "dst/app", "{ include: [\"v*\"] }").write(dir.path());
    let config = config.to_str().unwrap();
    let out = ferry(&[
        "sync",
        "-c",
        config,
        "--prune",
        "--json",
        "--progress",
        "plain",
    ])
    .await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 0, "{err}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["prune"]["deleted"], 1, "{json:#}");
    assert_eq!(reg.tags("dst/app"), ["v1"]);
    let line = err
        .lines()
        .rfind(|l| l.starts_with("sync images_done="))
        .unwrap_or_default();
    let requests = format!("requests={} ", json["totals"]["requests"]);
    assert!(line.contains(&requests), "{requests}: {err}");
    // The line came before pruning's report.
    let (at_line, at_prune) = (err.rfind(line), err.find("pruned"));
    assert!(at_prune.is_some() && at_line < at_prune, "{err}");
}
