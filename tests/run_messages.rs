//! What a run's lines say, second pass (issue 40), through the real binary: no credentials sent
//! is said so with where to give them, a one-image copy counts its image, distribution's 404 to
//! the referrers API is no warning, import and incremental export lines name what happened, an
//! unresolvable host reads as a DNS failure with no request counted, and a label cannot forge
//! an `inspect` line.

mod common;

use common::{code, ferry, ferry_env, push_one_layer, text};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::{RealRegistry, RealRegistryOptions};
use ferry_testkit::fixtures::mirror_yaml;
use ferry_testkit::registry::{OCI_MANIFEST, TestRegistry};

/// Stderr and stdout of `out`, together.
fn all(out: &std::process::Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_asking_for_credentials_none_were_sent_says_where_to_give_them() {
    let Some(target) = RealRegistry::start_for_test_with(RealRegistryOptions {
        htpasswd: Some(("alice".into(), "s3cret-Pa55".into())),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("registry") else {
        return;
    };
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"layer"]);
    // No login anywhere: an empty home, docker config and auth file.
    let home = tempfile::tempdir().unwrap();
    let home = home.path().to_str().unwrap();
    let env = [
        ("HOME", home),
        ("DOCKER_CONFIG", home),
        ("XDG_RUNTIME_DIR", home),
        ("REGISTRY_AUTH_FILE", "/nonexistent/auth.json"),
    ];
    let out = ferry_env(
        &[
            "copy",
            &format!("{}/src/app:v1", source.host()),
            &format!("{}/dst/app:v1", target.host()),
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            "--progress",
            "none",
        ],
        &env,
    )
    .await;
    let text = all(&out);
    assert_eq!(code(&out), 4, "{text}");
    assert!(
        text.contains(&format!(
            "no credentials were sent: {} asks for them",
            target.host()
        )),
        "{text}"
    );
    assert!(!text.contains("refused the credentials"), "{text}");
    assert!(
        text.contains("hint: log in with `docker login HOST`")
            && text.contains("--src-creds")
            && text.contains("--dest-creds"),
        "{text}"
    );
    // `ferry tags` names its own flag.
    let out = ferry_env(
        &[
            "tags",
            &format!("{}/dst/app", target.host()),
            "--tls-verify=false",
        ],
        &env,
    )
    .await;
    let text = all(&out);
    assert_eq!(code(&out), 4, "{text}");
    assert!(
        text.contains("hint: log in with `docker login HOST`") && text.contains("pass --creds"),
        "{text}"
    );
    assert!(!text.contains("--dest-creds"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresolvable_host_reads_as_a_dns_failure_and_counts_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mirror.yaml");
    std::fs::write(
        &config,
        "version: 1\nmappings:\n  - source: \"ferry-no-such-host.invalid/src/a\"\n    targets: [\"ferry-no-such-target.invalid/dst/a\"]\n    tags: { exact: [\"v1\"] }\n  - source: \"ferry-no-such-host.invalid/src/b\"\n    targets: [\"ferry-no-such-target.invalid/dst/b\"]\n    tags: { exact: [\"v1\"] }\n",
    )
    .unwrap();
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]).await;
    let text = all(&out);
    assert_eq!(code(&out), 2, "{text}");
    // Both mappings fail on the name, the second too (held back by the breaker the first
    // opened), never as "the registry failed repeatedly".
    let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("FAILED")).collect();
    assert_eq!(failed.len(), 2, "{text}");
    for line in failed {
        assert!(line.contains("name not resolved: ferry-no-such-"), "{line}");
    }
    assert!(!text.contains("repeatedly"), "{text}");
    assert!(!text.contains("breaker open: the registry"), "{text}");
    // Nothing went out: no request and no retry sent.
    assert!(
        text.contains("; 0 requests, 0 retries, 0 throttled"),
        "{text}"
    );
    assert!(text.contains("0 failed, 2 mappings failed"), "{text}");

    // A one-image copy whose source does not resolve: its image failed, not "1 mappings".
    let out = ferry(&[
        "copy",
        "ferry-no-such-host.invalid/src/a:v1",
        "ferry-no-such-target.invalid/dst/a:v1",
        "--progress",
        "none",
    ])
    .await;
    let text = all(&out);
    assert_ne!(code(&out), 0, "{text}");
    assert!(text.contains("0 synced, 0 up to date, 1 failed;"), "{text}");
    assert!(!text.contains("mappings failed"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_export_and_import_lines_say_what_happened_on_distribution() {
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&real.url())).unwrap();
    push_one_layer(&c, "src/app", "v1", "{\"n\":1}", b"one").await;
    push_one_layer(&c, "src/app", "v2", "{\"n\":2}", b"two").await;
    let dir = tempfile::tempdir().unwrap();
    let h = real.host();
    let write = |tags: &str| {
        mirror_yaml()
            .registry(&real, &[])
            .mapping(
                format!("{h}/src/app"),
                &[format!("{h}/dst/app")],
                &[&format!("tags: {{ exact: [{tags}] }}")],
            )
            .write(dir.path())
    };
    let config = write(r#""v1""#);
    let config = config.to_str().unwrap();

    // Distribution answers 404 to the referrers API: the tag schema stands in, said at info.
    let out = ferry(&["sync", "-c", config, "--progress", "none"]).await;
    let text = all(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(!text.contains("referrers API refused"), "{text}");
    let said = text
        .lines()
        .find(|l| l.contains("does not serve the referrers API"))
        .unwrap_or_else(|| panic!("said once at info:\n{text}"));
    assert!(
        said.contains("INFO") && said.contains("tag schema"),
        "{said}"
    );

    // A full bundle of v1, then an incremental one of v1 and v2 on top of it.
    let full = dir.path().join("full.tar");
    let out = ferry(&[
        "export",
        "-c",
        config,
        "-o",
        full.to_str().unwrap(),
        "--progress",
        "none",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", all(&out));
    let config = write(r#""v1", "v2""#);
    let config = config.to_str().unwrap();
    let inc = dir.path().join("inc.tar");
    let out = ferry(&[
        "export",
        "-c",
        config,
        "-o",
        inc.to_str().unwrap(),
        "--since",
        full.to_str().unwrap(),
        "--progress",
        "none",
    ])
    .await;
    let text = all(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(
        text.contains(&format!(
            "unchanged  {h}/src/app:v1 -> {h}/dst/app: in base full.tar, not carried"
        )),
        "{text}"
    );
    assert!(
        !text.contains(&format!("synced  {h}/src/app:v1 ")),
        "{text}"
    );
    assert!(
        text.contains(&format!("synced  {h}/src/app:v2 -> ")),
        "{text}"
    );
    assert!(
        text.contains("2 synced (1 of them in a base bundle, not carried)"),
        "{text}"
    );

    // Import: each line names the bundle's image once, tag and all.
    let site = dir.path().join("site.yaml");
    std::fs::write(
        &site,
        format!(
            "version: 1\nregistries:\n  - host: \"{h}\"\n    url: \"{}\"\n    insecure: true\n",
            real.url()
        ),
    )
    .unwrap();
    let out = ferry(&[
        "import",
        full.to_str().unwrap(),
        "-c",
        site.to_str().unwrap(),
        "--target-prefix",
        &format!("{h}/imported"),
        "--progress",
        "none",
    ])
    .await;
    let text = all(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(
        text.contains(&format!(
            "synced  oci-archive:{}:{h}/dst/app:v1 -> {h}/imported/dst/app",
            full.display()
        )),
        "{text}"
    );
    assert!(!text.contains("app:v1:v1"), "{text}");
}

#[tokio::test]
async fn inspect_escapes_label_text_so_no_label_forges_a_line() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let config = br#"{"architecture":"amd64","os":"linux","config":{"Labels":{"note":"x\ndigest      sha256:forged","color":"\u001b[31mred"}},"rootfs":{"type":"layers","diff_ids":[]}}"#;
    let config_digest = reg.seed_blob("lib/app", config);
    let layer_digest = reg.seed_blob("lib/app", b"layer");
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config_digest}","size":{}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{layer_digest}","size":5}}]}}"#,
        config.len()
    );
    reg.seed_manifest("lib/app", "v1", OCI_MANIFEST, manifest.as_bytes());
    let out = ferry(&[
        "inspect",
        &format!("{}/lib/app:v1", reg.host()),
        "--tls-verify=false",
    ])
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}{}", text(&out.stderr));
    let digests: Vec<&str> = stdout.lines().filter(|l| l.starts_with("digest")).collect();
    assert_eq!(digests.len(), 1, "one digest line:\n{stdout}");
    assert!(
        stdout.contains(r"label     note=x\ndigest      sha256:forged"),
        "{stdout}"
    );
    assert!(stdout.contains(r"label     color=\x1b[31mred"), "{stdout}");
}

#[test]
fn the_binary_is_built() {
    assert!(std::path::Path::new(common::FERRY).exists());
}
