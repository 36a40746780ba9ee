//! `ferry auth check` proves what a sync needs: each source can be read and each target can be
//! written. A wrong password on a target fails here (exit 4), not in the first sync, and a
//! right one leaves nothing behind on the target.

mod common;

use common::{code, ferry, text, write_config};
use ferry_testkit::distribution::{RealRegistry, RealRegistryOptions};
use ferry_testkit::registry::TestRegistry;

const USER: &str = "mirror";
const PASSWORD: &str = "right-Pa55-target-17";

fn config(
    dir: &std::path::Path,
    source: &TestRegistry,
    target: &RealRegistry,
    password: &str,
) -> std::path::PathBuf {
    let registries = format!(
        "  - host: \"{sh}\"\n    url: \"{su}\"\n    insecure: true\n\
         \x20 - host: \"{th}\"\n    url: \"{tu}\"\n    insecure: true\n    retry: {{ attempts: 2, base: 10ms }}\n\
         \x20   auth: {{ type: basic, username: {USER}, password: \"{password}\" }}\n",
        sh = source.host(),
        su = source.url(),
        th = target.host(),
        tu = target.url(),
    );
    let mappings = format!(
        "  - source: \"{}/src/app\"\n    targets: [\"{}/mirror/app\"]\n",
        source.host(),
        target.host()
    );
    write_config(dir, &registries, &mappings)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_target_password_fails_the_check_and_a_right_one_writes_nothing() {
    let Some(target) = RealRegistry::start_for_test_with(RealRegistryOptions {
        htpasswd: Some((USER.into(), PASSWORD.into())),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("registry") else {
        return;
    };
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();

    let wrong = "wrong-Pa55-target-99";
    let path = config(dir.path(), &source, &target, wrong);
    let out = ferry(&["auth", "check", "-c", path.to_str().unwrap()]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 4, "{stdout}{stderr}");
    let target_line = stdout
        .lines()
        .find(|l| l.starts_with(&target.host()))
        .unwrap_or_default();
    assert!(target_line.contains("FAILED"), "{stdout}");
    assert!(!stdout.contains(wrong) && !stderr.contains(wrong));

    let path = config(dir.path(), &source, &target, PASSWORD);
    let out = ferry(&["auth", "check", "-c", path.to_str().unwrap()]).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}{}", text(&out.stderr));
    let line = |host: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(host))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(line(&target.host()).contains("write ok"), "{stdout}");
    assert!(
        line(&source.host()).contains("read ok (listed src/app)"),
        "{stdout}"
    );
    // The probe opened a session and cancelled it: no blob, no manifest, nothing left to write.
    let log = target.access_log().await.unwrap();
    let writes: Vec<String> = log
        .entries
        .iter()
        .filter(|e| e.status < 400 && !matches!(e.method.as_str(), "GET" | "HEAD"))
        .map(|e| format!("{} {} {}", e.method, e.path, e.status))
        .collect();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert!(
        writes[0].starts_with("POST /v2/mirror/app/blobs/uploads/"),
        "{writes:?}"
    );
    assert!(
        writes[1].starts_with("DELETE /v2/mirror/app/blobs/uploads/"),
        "{writes:?}"
    );
}

/// A site config of `registries:` alone, its `auth:` written without a type as
/// docs/airgap.md's is: `auth check` takes it (it used to want mappings) and checks each
/// registry it lists, with those credentials read as basic. (With no repository named, the
/// check proves the registry answers, not that the password is right.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registries_only_site_config_is_checked_with_its_untyped_basic_auth() {
    let Some(target) = RealRegistry::start_for_test_with(RealRegistryOptions {
        htpasswd: Some((USER.into(), PASSWORD.into())),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("registry") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site.yaml");
    std::fs::write(
        &site,
        format!(
            "version: 1\nregistries:\n  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    retry: {{ attempts: 2, base: 10ms }}\n    auth:\n      username: {USER}\n      password: ${{MIRROR_PASSWORD}}\n",
            target.host(),
            target.url()
        ),
    )
    .unwrap();
    let out = common::ferry_env(
        &["auth", "check", "-c", site.to_str().unwrap()],
        &[("MIRROR_PASSWORD", PASSWORD)],
    )
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}{}", text(&out.stderr));
    let line = stdout.lines().next().unwrap_or_default();
    assert!(line.starts_with(&target.host()), "{stdout}");
    assert!(
        line.contains(&format!("credentials: basic as {USER}")),
        "{stdout}"
    );
    assert!(line.contains("answers"), "{stdout}");
    assert!(!stdout.contains(PASSWORD));
}
