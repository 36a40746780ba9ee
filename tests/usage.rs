//! The command line itself: a config by position or by `-c`, `validate --registries-only` for a
//! site config, and a line ferry cannot read exiting 64 (documented), never 2 ("every image failed").

mod common;

use common::{code, ferry, ferry_env, text};

/// A layout-to-layout config that is valid without any registry.
fn valid_config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("mirror.yaml");
    std::fs::write(
        &path,
        "version: 1\nmappings:\n  - { source: \"oci:./in\", targets: [\"oci:./out\"] }\n",
    )
    .unwrap();
    path
}

#[tokio::test]
async fn the_config_may_be_given_by_position_or_by_flag() {
    let dir = tempfile::tempdir().unwrap();
    let path = valid_config(dir.path());
    let path = path.to_str().unwrap();
    for args in [["validate", "-c", path], ["validate", path, "--quiet"]] {
        let out = ferry(&args).await;
        assert_eq!(code(&out), 0, "{args:?}: {}", text(&out.stderr));
    }
    let out = ferry_env(&["validate"], &[("FERRY_CONFIG", path)]).await;
    assert_eq!(code(&out), 0, "FERRY_CONFIG: {}", text(&out.stderr));
    // A dry run by position reads the same config (the source layout is missing: not a usage error).
    let out = ferry(&["sync", path, "--dry-run"]).await;
    assert_ne!(code(&out), 64, "{}", text(&out.stderr));
    let out = ferry(&["validate", "/nonexistent/mirror.yaml"]).await;
    assert_eq!(code(&out), 3, "{}", text(&out.stderr));
}

#[tokio::test]
async fn a_command_line_ferry_cannot_read_exits_64_and_help_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let path = valid_config(dir.path());
    let path = path.to_str().unwrap();
    for args in [
        vec!["sync", "-c", path, "--no-such-flag"],
        vec!["sync"],
        vec!["sync", "-c", path, path],
        vec!["no-such-command"],
        vec!["watch", "-c", path, "--interval", "soon"],
    ] {
        let out = ferry(&args).await;
        assert_eq!(code(&out), 64, "{args:?}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).is_empty(), "{args:?} says what is wrong");
    }
    for args in [vec!["--help"], vec!["sync", "--help"], vec!["--version"]] {
        let out = ferry(&args).await;
        assert_eq!(code(&out), 0, "{args:?}");
        assert!(!text(&out.stdout).is_empty(), "{args:?} prints on stdout");
    }
    let help = text(&ferry(&["--help"]).await.stdout);
    assert!(help.contains("64 the command line is wrong"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v_logs_each_request_with_its_status_and_no_secret() {
    let password = "request-log-Pa55-41";
    let reg = locked("alice", password).await;
    reg.seed_image("src/app", "v1", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();
    let config = common::write_config(
        dir.path(),
        &format!(
            "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    auth: {{ type: basic, username: alice, password: \"{password}\" }}\n",
            reg.host(),
            reg.url()
        ),
        "",
    );
    let (source, target) = (
        format!("{}/src/app:v1", reg.host()),
        format!("{}/dst/app", reg.host()),
    );
    let args = |v: bool| {
        let mut a = vec!["copy", &source, &target, "-c", config.to_str().unwrap()];
        if v {
            a.push("-v");
        }
        a.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| async move {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        ferry(&a).await
    };
    let out = run(args(true)).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(
        stderr.contains("GET /v2/src/app/manifests/v1 200"),
        "{stderr}"
    );
    assert!(
        stderr.contains("PUT /v2/dst/app/manifests/v1 201"),
        "{stderr}"
    );
    assert!(!stderr.contains(password) && !text(&out.stdout).contains(password));
    assert!(
        !stderr.to_ascii_lowercase().contains("authorization"),
        "{stderr}"
    );
    // Without -v there is no request log.
    reg.seed_image("src/app", "v2", &[b"other"]);
    let quiet = run(args(false)).await;
    assert!(
        !text(&quiet.stderr).contains("/manifests/"),
        "{}",
        text(&quiet.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_into_oci_dir_colon_tag_writes_that_tag_into_that_directory() {
    let reg = ferry_testkit::registry::TestRegistry::builder()
        .start()
        .await
        .unwrap();
    reg.seed_image("src/app", "3.21", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("lay");
    let source = format!("{}/src/app:3.21", reg.host());
    let target = format!("oci:{}:stable", layout.display());
    let out = ferry(&["copy", &source, &target, "--insecure"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        !dir.path().join("lay:stable").exists(),
        "no directory named lay:stable"
    );
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let names: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["annotations"]["org.opencontainers.image.ref.name"].as_str())
        .collect();
    assert_eq!(names, ["stable"], "{index}");
}

/// A registry that needs `user`'s `password` for everything (token auth, no anonymous pull).
async fn locked(user: &str, password: &str) -> ferry_testkit::registry::TestRegistry {
    ferry_testkit::registry::TestRegistry::builder()
        .token_auth(ferry_testkit::registry::TokenAuthConfig {
            users: vec![(user.into(), password.into())],
            anonymous_pull: false,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_takes_each_sides_credentials_and_tls_choice_as_skopeo_does() {
    let (src_pass, dst_pass) = ("src-Pa55-side-61", "dst-Pa55-side-62");
    let src = locked("reader", src_pass).await;
    let dst = locked("writer", dst_pass).await;
    src.seed_image("src/app", "v1", &[b"layer"]);
    let source = format!("docker://{}/src/app:v1", src.host());
    let target = format!("docker://{}/dst/app", dst.host());
    let src_creds = format!("reader:{src_pass}");
    let dst_creds = format!("writer:{dst_pass}");
    let no = "--src-tls-verify=false";
    let run = |args: Vec<&str>| {
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        async move {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            ferry(&a).await
        }
    };
    // Each side's password swapped: refused (exit 4), nothing said of either password.
    let out = run(vec![
        "copy",
        &source,
        &target,
        no,
        "--dest-tls-verify=false",
        "--src-creds",
        &dst_creds,
        "--dest-creds",
        &src_creds,
    ])
    .await;
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 4, "{all}");
    assert!(!all.contains(src_pass) && !all.contains(dst_pass), "{all}");
    // Only the source allowed plain HTTP: the target (plain HTTP) is not reached.
    let out = run(vec![
        "copy",
        &source,
        &target,
        no,
        "--src-creds",
        &src_creds,
        "--dest-creds",
        &dst_creds,
    ])
    .await;
    assert_ne!(code(&out), 0, "{}", text(&out.stderr));
    assert!(dst.manifest("dst/app", "v1").is_none());
    // Each side its own: copied.
    let out = run(vec![
        "copy",
        &source,
        &target,
        no,
        "--dest-tls-verify=false",
        "--src-creds",
        &src_creds,
        "--dest-creds",
        &dst_creds,
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        dst.manifest("dst/app", "v1").is_some(),
        "the image is on the target"
    );
    // tags takes --creds and --tls-verify the same way.
    let creds = format!("--creds={src_creds}");
    let out = run(vec![
        "tags",
        &format!("{}/src/app", src.host()),
        &creds,
        "--tls-verify=false",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("v1"), "{}", text(&out.stdout));
}

/// A site config of `registries:` alone (docs/airgap.md's, its `auth:` without a type):
/// `validate` refuses it as a mirror config with a hint, `validate --registries-only` accepts
/// it, and still reports a broken one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_registries_only_checks_a_site_config() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site.yaml");
    std::fs::write(
        &site,
        "version: 1\nregistries:\n  - host: registry.internal\n    auth:\n      username: mirror\n      password: ${MIRROR_PASSWORD}\n",
    )
    .unwrap();
    let site = site.to_str().unwrap();
    let env = [("MIRROR_PASSWORD", "site-Pa55-never-shown")];
    let out = common::ferry_env(&["validate", "-c", site], &env).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 3, "{err}");
    assert!(err.contains("no mappings: nothing to mirror"), "{err}");
    assert!(err.contains("ferry validate --registries-only"), "{err}");

    let out = common::ferry_env(&["validate", "--registries-only", "-c", site], &env).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("valid site config (1 registries configured"),
        "{stdout}"
    );
    assert!(!stdout.contains("site-Pa55-never-shown"));

    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        "version: 1\nregistries:\n  - host: registry.internal\n    auth: { username: mirror }\n",
    )
    .unwrap();
    let out = ferry(&["validate", "--registries-only", broken.to_str().unwrap()]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 3, "{err}");
    assert!(
        err.contains("registries[0] (host registry.internal): auth"),
        "{err}"
    );
    assert!(err.contains("missing field `password`"), "{err}");
    assert!(
        !err.contains("--registries-only`"),
        "no hint when the flag is given: {err}"
    );
}
