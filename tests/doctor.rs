//! `ferry doctor` through the real binary: against the real distribution registry with htpasswd
//! (no secret at -vv, everything pushed cleaned up) and under each test-kit personality, where
//! its capabilities must be what a sync into the same kind of registry reports.

mod common;

use common::{code, ferry, text, write_config};
use ferry_testkit::distribution::{RealRegistry, RealRegistryOptions};
use ferry_testkit::registry::{Personality, TestRegistry};
use serde_json::Value;

const USER: &str = "doctor";
const PASSWORD: &str = "s3cret-Doctor-Pa55-41";

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed JSON ({e}): {}{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

fn probe<'a>(found: &'a Value, name: &str) -> &'a Value {
    found["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == name)
        .unwrap_or_else(|| panic!("probe {name:?} in {found:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_the_real_registry_it_reads_writes_cleans_up_and_never_shows_the_password() {
    let Some(reg) = RealRegistry::start_for_test_with(RealRegistryOptions {
        htpasswd: Some((USER.into(), PASSWORD.into())),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("registry") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n\
         \x20   auth: {{ type: basic, username: {USER}, password: \"{PASSWORD}\" }}\n",
        reg.host(),
        reg.url()
    );
    let path = write_config(dir.path(), &registries, "");
    let target = format!("{}/team/app", reg.host());
    let config = path.to_str().unwrap();
    let out = ferry(&[
        "doctor", &target, "-c", config, "--write", "team/app", "--json", "-vv",
    ])
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        !stdout.contains(PASSWORD) && !stderr.contains(PASSWORD),
        "the password was printed"
    );
    let found = json(&out);
    assert_eq!(found["credentials"]["source"], "config", "{found:#}");
    assert_eq!(
        found["credentials"]["description"],
        format!("basic as {USER}")
    );
    assert_eq!(found["auth"]["scheme"], "basic", "{found:#}");
    assert_eq!(probe(&found, "ping")["outcome"], "ok");
    let caps = &found["capabilities"];
    assert_eq!(caps["upload_flow"], "monolithic", "{found:#}");
    assert_eq!(caps["mount"], "works", "{found:#}");
    for flow in [
        "flow: monolithic (POST, PUT with the bytes)",
        "flow: docker (POST, PATCH, empty PUT)",
        "flow: chunked (POST, PATCH with Content-Range..., empty PUT)",
    ] {
        assert_eq!(probe(&found, flow)["outcome"], "ok", "{found:#}");
    }
    assert_eq!(
        probe(&found, "manifest right after its blobs")["outcome"],
        "ok"
    );
    assert_eq!(probe(&found, "tag overwrite")["outcome"], "ok");
    assert_eq!(
        probe(&found, "delete by digest")["outcome"],
        "ok",
        "{found:#}"
    );
    // Distribution deletes what it holds: only the mount's repository stays (no API deletes one).
    assert_eq!(found["cleanup"]["left"], serde_json::json!([]), "{found:#}");
    assert_eq!(
        found["cleanup"]["repositories"],
        serde_json::json!(["team/app-doctor"])
    );
    assert!(stderr.contains("doctor: scratch push to"), "{stderr}");
    // Nothing of the scratch push is still tagged.
    let log = reg.access_log().await.unwrap();
    assert!(log.count("PUT", "/v2/team/app/manifests/ferry-doctor-") >= 1);
    assert!(log.count("DELETE", "/v2/team/app/manifests/sha256:") >= 2);

    // The text form says the same, and a wrong password is exit 4 without the password.
    let out = ferry(&["doctor", &target, "-c", config]).await;
    let stdout = text(&out.stdout);
    assert!(stdout.contains("capabilities ferry will use"), "{stdout}");
    assert!(stdout.contains("upload_flow"), "{stdout}");
    let wrong = "wrong-Pa55-doctor-99";
    let path = write_config(dir.path(), &registries.replace(PASSWORD, wrong), "");
    let out = ferry(&["doctor", &target, "-c", path.to_str().unwrap(), "-vv"]).await;
    assert_eq!(code(&out), 4, "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!text(&out.stdout).contains(wrong) && !text(&out.stderr).contains(wrong));
}

/// A sync of a two-image mapping (a layer above the 1 MiB monolithic limit) into `personality`,
/// and `ferry doctor --write` against another registry of the same personality.
async fn sync_and_doctor(personality: Personality) -> (Value, Value, String) {
    let src = TestRegistry::builder().start().await.unwrap();
    let dst = TestRegistry::builder()
        .personality(personality)
        .start()
        .await
        .unwrap();
    let doc = TestRegistry::builder()
        .personality(personality)
        .start()
        .await
        .unwrap();
    let big = vec![7u8; 1536 * 1024];
    src.seed_image("lib/app", "v1", &[b"base layer", &big]);
    src.seed_image("lib/app", "v2", &[b"base layer", b"v2 layer"]);
    for reg in [&dst, &doc] {
        reg.create_repository("mirror/app");
        reg.create_repository("mirror/app-doctor");
    }
    doc.seed_image("mirror/app", "v1", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();
    let registries: String = [&src, &dst, &doc]
        .iter()
        .map(|r| {
            format!(
                "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n",
                r.host(),
                r.url()
            )
        })
        .collect();
    let mappings = format!(
        "  - source: \"{}/lib/app\"\n    targets: [\"{}/mirror/app\"]\n",
        src.host(),
        dst.host()
    );
    let path = write_config(dir.path(), &registries, &mappings);
    let text_config = std::fs::read_to_string(&path).unwrap().replace(
        "version: 1\n",
        "version: 1\nengine: { chunk_size: \"1MiB\", monolithic_limit: \"1MiB\" }\n",
    );
    std::fs::write(&path, text_config).unwrap();
    let config = path.to_str().unwrap();
    let out = ferry(&["sync", "-c", config, "--json", "--no-lock"]).await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));
    let report = json(&out);
    let synced = report["registries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["registry"] == dst.host().as_str())
        .map(|r| r["capabilities"].clone())
        .expect("the target is in the report");
    let target = format!("{}/mirror/app", doc.host());
    let out = ferry(&[
        "doctor",
        &target,
        "-c",
        config,
        "--write",
        "mirror/app",
        "--json",
    ])
    .await;
    let found = json(&out);
    assert!(matches!(code(&out), 0 | 1), "{found:#}");
    (synced, found["capabilities"].clone(), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_each_personality_doctor_reports_what_a_sync_learns() {
    let all = Personality::each()
        .into_iter()
        .chain(Personality::field())
        .chain([("default", Personality::default())]);
    // Four personalities at a time: each runs a sync and a doctor process.
    let mut runs = tokio::task::JoinSet::new();
    let mut results = Vec::new();
    for (name, personality) in all {
        if runs.len() == 4
            && let Some(done) = runs.join_next().await
        {
            results.push(done.expect("a personality's run finished"));
        }
        runs.spawn(async move { (name, sync_and_doctor(personality).await) });
    }
    while let Some(done) = runs.join_next().await {
        results.push(done.expect("a personality's run finished"));
    }
    assert!(results.len() >= Personality::each().len() + Personality::field().len());
    for (name, (synced, doctor, stderr)) in results {
        let synced = synced.as_object().unwrap();
        assert!(!synced.is_empty());
        let mut compared = 0;
        for (capability, value) in synced {
            if value == "unknown" {
                continue;
            }
            compared += 1;
            assert_eq!(
                &doctor[capability], value,
                "{name}: {capability}: the sync learned {value}, doctor says {}\n{doctor:#}\n{stderr}",
                doctor[capability]
            );
        }
        // The upload flow is always known; a sync that learned nothing else compares only it.
        assert!(compared >= 1, "{name}: {synced:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_refusal_ferry_works_around_is_named_and_exits_1() {
    let doc = TestRegistry::builder()
        .personality(Personality::docker_flow_only())
        .start()
        .await
        .unwrap();
    doc.seed_image("team/app", "v1", &[b"layer"]);
    let target = format!("{}/team/app", doc.host());
    let out = ferry(&[
        "doctor",
        &target,
        "--insecure",
        "--write",
        "team/app",
        "--json",
    ])
    .await;
    let found = json(&out);
    assert_eq!(code(&out), 1, "{found:#}");
    assert_eq!(found["capabilities"]["upload_flow"], "docker");
    assert_eq!(
        probe(&found, "flow: monolithic (POST, PUT with the bytes)")["outcome"],
        "refused"
    );
    assert_eq!(
        probe(&found, "flow: docker (POST, PATCH, empty PUT)")["outcome"],
        "ok"
    );
    // Nothing the push made is still tagged.
    assert_eq!(doc.tags("team/app"), ["v1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_registry_shows_its_realm_service_and_what_each_token_grants_never_the_token() {
    use ferry_testkit::registry::TokenAuthConfig;
    let reg = TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![(USER.into(), PASSWORD.into())],
            anonymous_pull: false,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap();
    reg.seed_image("team/app", "v1", &[b"layer"]);
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n\
         \x20   auth: {{ type: basic, username: {USER}, password: \"{PASSWORD}\" }}\n",
        reg.host(),
        reg.url()
    );
    let path = write_config(dir.path(), &registries, "");
    let target = format!("{}/team/app", reg.host());
    let out = ferry(&[
        "doctor",
        &target,
        "-c",
        path.to_str().unwrap(),
        "--write",
        "team/app",
        "--json",
        "-vv",
    ])
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    assert!(
        !stdout.contains("Bearer ") && !stderr.contains("Bearer "),
        "{stderr}"
    );
    let found = json(&out);
    assert_eq!(found["auth"]["scheme"], "bearer", "{found:#}");
    assert!(
        found["auth"]["realm"]
            .as_str()
            .unwrap()
            .starts_with(&reg.url())
    );
    let granted = found["auth"]["granted"].as_array().unwrap();
    let scopes: Vec<&str> = granted.iter().map(|g| g[0].as_str().unwrap()).collect();
    assert!(scopes.contains(&"repository:team/app:pull"), "{found:#}");
    assert!(
        scopes.contains(&"repository:team/app:pull,push"),
        "{found:#}"
    );
    // The test kit mints opaque (not JWT) tokens: said so, never shown.
    assert!(
        granted
            .iter()
            .all(|g| g[1] == serde_json::json!(["(opaque token)"]))
    );
    assert_eq!(probe(&found, "tag list")["outcome"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_repository_ecr_never_created_says_so() {
    let doc = TestRegistry::builder()
        .personality(Personality::ecr())
        .start()
        .await
        .unwrap();
    let target = doc.host();
    let out = ferry(&[
        "doctor",
        &target,
        "--insecure",
        "--write",
        "team/new",
        "--json",
    ])
    .await;
    let found = json(&out);
    assert_eq!(code(&out), 1, "{found:#}");
    let upload = probe(&found, "upload (the sync's flow, small blob)");
    assert_eq!(upload["outcome"], "failed");
    assert!(
        upload["detail"]
            .as_str()
            .unwrap()
            .contains("create_repositories"),
        "{found:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attackers_registry_argument_is_refused_with_64_and_nothing_is_sent() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let host = reg.host();
    for bad in [
        format!("{host}/a/../b"),
        format!("{host}/..%2fadmin"),
        format!("{host}/a%2fb"),
        format!("{host}/a\u{1b}[2Jb"),
        format!("{host}/a\rb"),
        "127.0.0.1:65536/a".to_owned(),
        "127.0.0.1:99999999999".to_owned(),
    ] {
        let out = ferry(&["doctor", &bad, "--insecure"]).await;
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 64, "{bad:?}: {stderr}");
        assert!(stderr.contains("nothing was sent"), "{stderr}");
        assert!(
            !stderr.contains('\u{1b}') && !stderr.contains('\r'),
            "{stderr:?}"
        );
        if bad.contains(":65536") || bad.contains(":9999999") {
            assert!(stderr.contains("is not a port (1 to 65535)"), "{stderr}");
        }
    }
    let out = ferry(&[
        "doctor",
        &format!("{host}/ok"),
        "--insecure",
        "--write",
        "../x",
    ])
    .await;
    assert_eq!(code(&out), 64, "{}", text(&out.stderr));
    assert!(reg.requests().is_empty(), "{:?}", reg.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_registry_is_exit_2() {
    let port = TestRegistry::closed_port().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "  - host: \"127.0.0.1:{port}\"\n    insecure: true\n    retry: {{ attempts: 1 }}\n"
    );
    let path = write_config(dir.path(), &registries, "");
    let out = ferry(&[
        "doctor",
        &format!("127.0.0.1:{port}"),
        "-c",
        path.to_str().unwrap(),
        "--json",
    ])
    .await;
    let found = json(&out);
    assert_eq!(code(&out), 2, "{found:#}");
    assert_eq!(probe(&found, "ping")["outcome"], "failed");
}
