//! skopeo's flags via the binary (issue 40): --digestfile, inspect --format vs skopeo, --retry-times,
//! per-side authfiles, --cert-dir over mutual TLS, `latest` for a tagless copy, exit 64 for bad arguments.

mod common;

use base64::Engine as _;
use common::{code, ferry, push_one_layer, text};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::{RealRegistry, RealRegistryOptions, RealRegistryTls};
use ferry_testkit::fixtures::Images;
use ferry_testkit::pki::TestPki;
use ferry_testkit::registry::{FaultAction, FaultRule, OpKind, TestRegistry, TokenAuthConfig};

/// `ferry args…` as owned strings.
async fn run(args: &[String]) -> std::process::Output {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    ferry(&a).await
}

fn s(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| (*a).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digestfile_and_inspect_format_say_what_skopeo_says() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let host = registry.host();
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let config = r#"{"architecture":"amd64","os":"linux","created":"2026-11-30T10:00:00Z","config":{"Labels":{"version":"1.2","a.b":"x y"},"Env":["PATH=/bin","HOME=/root"]}}"#;
    push_one_layer(&client, "src/app", "v1", config, b"layer one").await;
    push_one_layer(&client, "src/app", "latest", config, b"layer latest").await;
    let dir = tempfile::tempdir().unwrap();
    let digestfile = dir.path().join("app.digest");
    let target = format!("{host}/dst/app:v1");

    // --digestfile: the digest alone, as skopeo writes it; --preserve-digests is accepted.
    let out = run(&s(&[
        "copy",
        &format!("{host}/src/app:v1"),
        &target,
        "--tls-verify=false",
        "--preserve-digests",
        "--digestfile",
        digestfile.to_str().unwrap(),
    ]))
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&digestfile).unwrap();
    assert!(
        written.starts_with("sha256:") && !written.ends_with('\n'),
        "{written:?}"
    );
    // copy takes --report as sync does: the same JSON report, up to date this time.
    let report = dir.path().join("copy.json");
    let out = run(&s(&[
        "copy",
        &format!("{host}/src/app:v1"),
        &target,
        "--tls-verify=false",
        "--report",
        report.to_str().unwrap(),
    ]))
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["totals"]["images_up_to_date"], 1, "{report:#}");
    assert_eq!(
        report["images"][0]["digest"],
        written.as_str(),
        "{report:#}"
    );

    let inspect = |template: &str| {
        s(&[
            "inspect",
            "--tls-verify=false",
            "--format",
            template,
            &target,
        ])
    };
    let out = run(&inspect("{{.Digest}}")).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("{written}\n"));

    // The same template through skopeo prints the same line.
    let template = "{{.Name}} {{.Digest}} {{.Os}}/{{.Architecture}} {{.Layers}} {{.Labels}} {{.Labels.version}} {{.Env}} {{.RepoTags}}";
    let out = run(&inspect(template)).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let ours = text(&out.stdout);
    assert!(
        ours.starts_with(&format!("{host}/dst/app {written} linux/amd64 [sha256:")),
        "{ours}"
    );
    if let Ok(skopeo) = std::process::Command::new("skopeo")
        .args(["inspect", "--tls-verify=false", "--format", template])
        .arg(format!("docker://{target}"))
        .output()
    {
        assert!(skopeo.status.success(), "{}", text(&skopeo.stderr));
        assert_eq!(
            ours,
            text(&skopeo.stdout),
            "ferry and skopeo print the same"
        );
    }
    let out = run(&inspect("{{json .}}")).await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["Digest"], written.as_str());
    assert_eq!(doc["RepoTags"], serde_json::json!(["v1"]));
    assert_eq!(doc["Labels"]["version"], "1.2");

    // An unknown field is a usage error naming it; nothing is asked of the registry.
    let before = registry.access_log().await.unwrap().len();
    let out = run(&inspect("{{.Digest}} {{.Size}}")).await;
    assert_eq!(code(&out), 64, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(".Size"), "{}", text(&out.stderr));
    assert_eq!(registry.access_log().await.unwrap().len(), before);

    // A tagless source is `latest`, as skopeo takes it.
    let out = run(&s(&[
        "copy",
        &format!("{host}/src/app"),
        &format!("{host}/dst/plain"),
        "--tls-verify=false",
    ]))
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = run(&s(&[
        "tags",
        &format!("{host}/dst/plain"),
        "--tls-verify=false",
    ]))
    .await;
    assert!(
        text(&out.stdout).contains("select  latest"),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test]
async fn a_malformed_command_line_exits_64_and_names_what_is_wrong() {
    for (args, says) in [
        (vec!["copy", "127.0.0.1:1/app:v1"], "TARGET"),
        (
            vec![
                "copy",
                "--all-tags",
                "127.0.0.1:1/app:v1",
                "127.0.0.1:1/dst",
            ],
            "--all-tags",
        ),
        (vec!["copy", "dir:/tmp/app", "127.0.0.1:1/dst"], "oci:"),
        (vec!["copy", "127.0.0.1:1/app:v1", "dir:/tmp/app"], "oci:"),
        (vec!["tags", "containers-storage:app"], "oci:"),
        (vec!["inspect", "docker-daemon:app:v1"], "oci:"),
        (
            vec![
                "tags",
                "127.0.0.1:1/app",
                "--cert-dir",
                "/nonexistent/certs",
            ],
            "--cert-dir",
        ),
    ] {
        let out = ferry(&args).await;
        let err = text(&out.stderr);
        assert_eq!(code(&out), 64, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_times_is_the_attempt_budget_of_the_one_retry_layer() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    let image = format!("{}/src/app:v1", reg.host());
    let gets = |reg: &TestRegistry| {
        reg.requests()
            .iter()
            .filter(|r| r.op == OpKind::ManifestGet)
            .count()
    };
    let fail_next = |n: u32| {
        FaultRule::on(
            OpKind::ManifestGet,
            FaultAction::Status {
                code: 500,
                retry_after: None,
            },
        )
        .times(n)
    };
    // Two failures, --retry-times 1: two attempts, both refused.
    reg.faults().push(fail_next(2));
    let out = ferry(&[
        "inspect",
        &image,
        "--tls-verify=false",
        "--retry-times",
        "1",
    ])
    .await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert_eq!(gets(&reg), 2, "one retry: {}", text(&out.stderr));
    // Two failures, --retry-times 2: the third attempt gets through.
    reg.faults().clear_rules();
    reg.faults().push(fail_next(2));
    let before = gets(&reg);
    let out = ferry(&[
        "inspect",
        &image,
        "--tls-verify=false",
        "--retry-times",
        "2",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(gets(&reg) - before, 3, "two retries");
    // --retry-times 0: one attempt.
    reg.faults().push(fail_next(1));
    let before = gets(&reg);
    let out = ferry(&[
        "inspect",
        &image,
        "--tls-verify=false",
        "--retry-times",
        "0",
    ])
    .await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert_eq!(gets(&reg) - before, 1, "no retry");
}

async fn locked(user: &str, password: &str) -> TestRegistry {
    TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![(user.into(), password.into())],
            anonymous_pull: false,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap()
}

/// A containers `auth.json` holding `user:password` for `host`.
fn authfile(dir: &std::path::Path, name: &str, host: &str, user: &str, password: &str) -> String {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let path = dir.join(name);
    std::fs::write(
        &path,
        serde_json::json!({"auths": {host: {"auth": auth}}}).to_string(),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_side_takes_its_own_authfile() {
    let src = locked("reader", "src-Pa55-61").await;
    let dst = locked("writer", "dst-Pa55-62").await;
    src.seed_image("src/app", "v1", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();
    let src_file = authfile(dir.path(), "src.json", &src.host(), "reader", "src-Pa55-61");
    let dst_file = authfile(dir.path(), "dst.json", &dst.host(), "writer", "dst-Pa55-62");
    let source = format!("{}/src/app:v1", src.host());
    let target = format!("{}/dst/app:v1", dst.host());
    let copy = |src_auth: &str, dst_auth: &str| {
        s(&[
            "copy",
            &source,
            &target,
            "--tls-verify=false",
            "--src-authfile",
            src_auth,
            "--dest-authfile",
            dst_auth,
        ])
    };
    // Swapped: each file names the other registry, so neither side has a login.
    let out = run(&copy(&dst_file, &src_file)).await;
    assert_eq!(code(&out), 4, "{}", text(&out.stderr));
    assert!(dst.manifest("dst/app", "v1").is_none());
    let out = run(&copy(&src_file, &dst_file)).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(dst.manifest("dst/app", "v1").is_some());
    // doctor takes --creds as tags and inspect do, and says where its login came from.
    let probe = format!("{}/src/app", src.host());
    let doctor = |creds: &str| {
        s(&[
            "doctor",
            &probe,
            "--tls-verify=false",
            "--json",
            "--creds",
            creds,
        ])
    };
    let out = run(&doctor("reader:src-Pa55-61")).await;
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found["credentials"]["source"], "creds", "{found:#}");
    assert_ne!(code(&out), 4, "{found:#}");
    let out = run(&doctor("reader:wrong")).await;
    assert_eq!(code(&out), 4, "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_dir_gives_the_ca_and_the_client_certificate_as_skopeo_reads_it() {
    let pki = TestPki::new().expect("test CA");
    let Some(registry) = RealRegistry::start_for_test_with(RealRegistryOptions {
        tls: Some(RealRegistryTls {
            certificate: pki.server_cert(),
            key: pki.server_key(),
            client_cas: vec![pki.ca()],
        }),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("registry") else {
        return;
    };
    let host = registry.host();
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    std::fs::copy(pki.ca(), certs.join("ca.crt")).unwrap();
    let layout = dir.path().join("layout");
    let mut images = Images::new();
    let image = images.platform_image("amd64", &[b"over mutual TLS"]);
    images.tag(&image, Some("v1"));
    images.write_layout(&layout);
    let source = format!("oci:{}:v1", layout.display());
    let target = format!("{host}/app:v1");
    let certs_arg = certs.to_str().unwrap().to_owned();

    // The CA alone: the registry asks for a client certificate and gets none.
    let out = run(&s(&[
        "copy",
        &source,
        &target,
        "--dest-cert-dir",
        &certs_arg,
    ]))
    .await;
    assert_ne!(code(&out), 0, "{}", text(&out.stderr));
    // A client certificate without its key is refused before any request.
    std::fs::copy(pki.client_cert(), certs.join("client.cert")).unwrap();
    let out = run(&s(&[
        "copy",
        &source,
        &target,
        "--dest-cert-dir",
        &certs_arg,
    ]))
    .await;
    assert_eq!(code(&out), 64, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("client.key"),
        "{}",
        text(&out.stderr)
    );
    // CA, certificate and key: copied, and listed back with --cert-dir.
    std::fs::copy(pki.client_key(), certs.join("client.key")).unwrap();
    let out = run(&s(&[
        "copy",
        &source,
        &target,
        "--dest-cert-dir",
        &certs_arg,
    ]))
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = run(&s(&[
        "tags",
        &format!("{host}/app"),
        "--cert-dir",
        &certs_arg,
    ]))
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("select  v1"),
        "{}",
        text(&out.stdout)
    );
    // Without it: the registry's CA is not trusted.
    let out = run(&s(&["tags", &format!("{host}/app")])).await;
    assert_ne!(code(&out), 0, "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configs_sources_and_targets_take_their_own_creds_and_the_hint_names_them() {
    let src = locked("reader", "src-Pa55-71").await;
    let dst = locked("writer", "dst-Pa55-72").await;
    src.seed_image("src/app", "v1", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();
    let config = ferry_testkit::fixtures::mirror_yaml()
        .mapping(
            format!("{}/src/app", src.host()),
            &[format!("{}/dst/app", dst.host())],
            &[ferry_testkit::fixtures::ALL_TAGS],
        )
        .write(dir.path());
    let config = config.to_str().unwrap().to_owned();
    let sync = |extra: &[&str]| {
        let mut args = s(&["sync", "-c", &config, "--no-lock", "--tls-verify=false"]);
        args.extend(s(extra));
        args
    };
    // No login: refused, and the hint names sync's own credential flags.
    let out = run(&sync(&[])).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 4, "{err}");
    let hint = err
        .lines()
        .find(|l| l.starts_with("hint: log in"))
        .unwrap_or_else(|| panic!("a credentials hint: {err}"));
    assert!(
        hint.contains("--src-creds") && hint.contains("--dest-creds"),
        "{hint}"
    );
    assert!(!hint.contains("--creds "), "sync takes no --creds: {hint}");
    // Each side's login swapped: still refused; each its own: synced.
    let out = run(&sync(&[
        "--src-creds",
        "writer:dst-Pa55-72",
        "--dest-creds",
        "reader:src-Pa55-71",
    ]))
    .await;
    assert_eq!(code(&out), 4, "{}", text(&out.stderr));
    assert!(dst.manifest("dst/app", "v1").is_none());
    let out = run(&sync(&[
        "--src-creds",
        "reader:src-Pa55-71",
        "--dest-creds",
        "writer:dst-Pa55-72",
    ]))
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(dst.manifest("dst/app", "v1").is_some());
    // One registry on both sides with two different logins: a usage error, nothing sent.
    let within_dir = dir.path().join("within");
    std::fs::create_dir(&within_dir).unwrap();
    let within = ferry_testkit::fixtures::mirror_yaml()
        .within(
            &src.host(),
            "src/app",
            "copy/app",
            &[ferry_testkit::fixtures::ALL_TAGS],
        )
        .write(&within_dir);
    let out = run(&s(&[
        "sync",
        "-c",
        within.to_str().unwrap(),
        "--no-lock",
        "--tls-verify=false",
        "--src-creds",
        "reader:a",
        "--dest-creds",
        "writer:b",
    ]))
    .await;
    assert_eq!(code(&out), 64, "{}", text(&out.stderr));
}
