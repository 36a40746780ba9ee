//! `ferry verify` through the real binary against the real distribution registry: a clean sync
//! verifies complete, and each change made on the target afterwards is named, and only it.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::{code, ferry, text};
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::fixtures::{ALL_TAGS, mirror_yaml};
use ferry_testkit::noise;
use ferry_testkit::registry::FaultProxy;
use serde_json::{Value, json};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

async fn put_manifest(
    c: &RegistryClient,
    repo: &str,
    reference: &str,
    kind: &str,
    doc: &Value,
) -> Manifest {
    let bytes = serde_json::to_vec(doc).unwrap();
    let m = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes: bytes.into(),
        media_type: kind.to_owned(),
    };
    c.put_manifest(repo, reference, &m).await.unwrap();
    m
}

/// An image manifest at `repo:tag` over a config and one layer of `seed`'s noise; its layer's
/// digest comes back beside it.
async fn push_image(
    c: &RegistryClient,
    repo: &str,
    tag: &str,
    arch: &str,
    seed: u64,
) -> (Manifest, Digest) {
    let config = format!(r#"{{"architecture":"{arch}","os":"linux","tag":"{tag}"}}"#).into_bytes();
    let mut descriptors = Vec::new();
    let mut layer = None;
    for bytes in [config, noise(seed, 20_000)] {
        let d = Digest::of_bytes(Algorithm::Sha256, &bytes);
        descriptors.push(json!({"digest": d.to_string(), "size": bytes.len()}));
        c.push_blob_bytes(repo, &d, bytes.into()).await.unwrap();
        layer = Some(d);
    }
    descriptors[0]["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    descriptors[1]["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
    let doc = json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": descriptors[0], "layers": [descriptors[1]]});
    (
        put_manifest(c, repo, tag, OCI_MANIFEST, &doc).await,
        layer.unwrap(),
    )
}

/// A two-platform index at `repo:tag`; the arm64 child's digest comes back beside it.
async fn push_index(c: &RegistryClient, repo: &str, tag: &str) -> (Manifest, Digest) {
    let mut children = Vec::new();
    let mut arm = None;
    for (seed, arch) in [(11, "amd64"), (12, "arm64")] {
        let (m, _) = push_image(c, repo, &format!("{tag}-{arch}"), arch, seed).await;
        children.push(json!({
            "mediaType": OCI_MANIFEST, "digest": m.digest.to_string(), "size": m.bytes.len(),
            "platform": {"os": "linux", "architecture": arch}
        }));
        arm = Some(m.digest);
    }
    let doc = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children});
    (
        put_manifest(c, repo, tag, OCI_INDEX, &doc).await,
        arm.unwrap(),
    )
}

/// What verify's JSON names, one line per finding: `target finding name`.
fn findings(json: &str) -> BTreeSet<String> {
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let mut out = BTreeSet::new();
    for m in v["mappings"].as_array().unwrap() {
        for f in m["findings"].as_array().into_iter().flatten() {
            out.insert(format!("mapping {f}"));
        }
        for t in m["targets"].as_array().unwrap() {
            for f in t["findings"].as_array().unwrap() {
                let line = match f["finding"].as_str().unwrap() {
                    "missing" => format!(
                        "missing {} {} of {}",
                        f["kind"].as_str().unwrap(),
                        f["name"].as_str().unwrap(),
                        f["of"].as_str().unwrap_or("-")
                    ),
                    "drifted" => format!(
                        "drifted {} expected {} found {}",
                        f["tag"].as_str().unwrap(),
                        f["expected"].as_str().unwrap(),
                        f["found"].as_str().unwrap()
                    ),
                    "extra" => format!("extra {}", f["tag"].as_str().unwrap()),
                    other => format!("{other} {f}"),
                };
                out.insert(line);
            }
        }
    }
    out
}

struct Verified {
    code: i32,
    findings: BTreeSet<String>,
    text: String,
}

async fn verify(config: &Path, extra: &[&str]) -> Verified {
    let mut args = vec![
        "--progress",
        "none",
        "verify",
        "-c",
        config.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = ferry(&args).await;
    let mut text_args = args.clone();
    text_args.retain(|a| *a != "--json");
    let human = ferry(&text_args).await;
    assert_eq!(code(&human), code(&out), "text and JSON runs agree");
    Verified {
        code: code(&out),
        findings: findings(&text(&out.stdout)),
        text: text(&human.stdout),
    }
}

fn set(items: &[String]) -> BTreeSet<String> {
    items.iter().cloned().collect()
}

/// The target's storage path of one tag of `dst/app`.
fn tag_dir(real: &RealRegistry, tag: &str) -> PathBuf {
    real.storage_dir()
        .join("docker/registry/v2/repositories/dst/app/_manifests/tags")
        .join(tag)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_nothing_after_a_sync_then_names_each_change_on_the_target() {
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    // Requests are counted at a proxy in front of the registry: src/ is one side, dst/ the other.
    let proxy = FaultProxy::start(&real.url()).await.unwrap();
    let c = RegistryClient::new(RegistryOptions::insecure_at(&real.url())).unwrap();
    let (index, arm_child) = push_index(&c, "src/app", "1.0").await;
    let (signed, _) = push_image(&c, "src/app", "2.0", "amd64", 2).await;
    let (_, _) = push_image(&c, "src/app", "3.0", "amd64", 3).await;
    let (moved, _) = push_image(&c, "src/app", "4.0", "amd64", 4).await;
    let (_, layer5) = push_image(&c, "src/app", "5.0", "amd64", 5).await;
    let sig_tag = format!("{}.sig", signed.digest.fallback_tag());
    push_image(&c, "src/app", &sig_tag, "amd64", 6).await;

    let dir = tempfile::tempdir().unwrap();
    let h = proxy.host();
    let config = mirror_yaml()
        .registry(&proxy, &[])
        .mapping(
            format!("{h}/src/app"),
            &[format!("{h}/dst/app")],
            &[r#"tags: { include: ["*.0"] }"#, "referrers: true"],
        )
        .write(dir.path());
    let sync = ferry(&["--progress", "none", "sync", "-c", config.to_str().unwrap()]).await;
    assert_eq!(code(&sync), 0, "{}", text(&sync.stderr));

    // A clean sync verifies complete, at the stated cost.
    proxy.reset_stats();
    let out = ferry(&[
        "--progress",
        "none",
        "verify",
        "-c",
        config.to_str().unwrap(),
        "--json",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(findings(&text(&out.stdout)), BTreeSet::new());
    let requests = proxy.requests();
    let count = |method: &str, side: &str, what: &str| {
        requests
            .iter()
            .filter(|r| r.method == method && r.path.starts_with(&format!("/v2/{side}/app/{what}")))
            .count()
    };
    // Six tags selected (five by the filter, the signature as 2.0's referrer), on both sides.
    let source = (
        count("GET", "src", "tags/list"),
        count("HEAD", "src", "manifests/"),
        count("GET", "src", "manifests/"),
    );
    let target = (
        count("GET", "dst", "tags/list"),
        count("HEAD", "dst", "manifests/"),
        count("GET", "dst", "manifests/"),
    );
    eprintln!(
        "verify requests: source (list, HEAD, GET) {source:?}, target {target:?}; all {}",
        requests.len()
    );
    // One listing per side, one manifest HEAD per tag per side, no source manifest GET; on
    // the target, the index is read once and its two children HEADed. The registry's first
    // Link-less listing (the source's) is asked once more with `last=` to prove it whole; the
    // target's, no longer than it, is not (issue 39).
    assert_eq!(source, (2, 6, 0), "source side");
    assert_eq!(target, (1, 6 + 2, 1), "target side");
    assert_eq!(
        count("HEAD", "dst", "blobs/"),
        0,
        "a shallow verify asks for no blob"
    );
    // --deep: every manifest read from the target (the index, its two children, five image
    // manifests) and each of the 14 unique blobs HEADed once; the source side as before.
    proxy.reset_stats();
    let deep = ferry(&[
        "--progress",
        "none",
        "verify",
        "-c",
        config.to_str().unwrap(),
        "--deep",
    ])
    .await;
    assert_eq!(code(&deep), 0, "{}", text(&deep.stdout));
    let requests = proxy.requests();
    let count = |method: &str, side: &str, what: &str| {
        requests
            .iter()
            .filter(|r| r.method == method && r.path.starts_with(&format!("/v2/{side}/app/{what}")))
            .count()
    };
    let deep_target = (
        count("HEAD", "dst", "manifests/"),
        count("GET", "dst", "manifests/"),
        count("HEAD", "dst", "blobs/"),
    );
    eprintln!(
        "deep verify: target (manifest HEAD, manifest GET, blob HEAD) {deep_target:?}; all {}",
        requests.len()
    );
    assert_eq!(deep_target, (6, 1 + 2 + 5, 14), "target side, deep");
    assert_eq!(
        count("GET", "src", "manifests/"),
        0,
        "no source manifest GET, deep"
    );
    assert_eq!(
        count("GET", "src", "blobs/") + count("HEAD", "src", "blobs/"),
        0
    );

    // An extra tag on the target is named, and leaves the mirror complete.
    put_manifest(
        &c,
        "dst/app",
        "9.0",
        OCI_MANIFEST,
        &serde_json::from_slice(&moved.bytes).unwrap(),
    )
    .await;
    let mut expected = vec!["extra 9.0".to_owned()];
    let v = verify(&config, &[]).await;
    assert_eq!((v.code, &v.findings), (0, &set(&expected)), "{}", v.text);
    assert!(v.text.contains("extra     9.0"), "{}", v.text);

    // A tag deleted. Its source manifest is HEADed, not fetched (a sync would GET it).
    std::fs::remove_dir_all(tag_dir(&real, "3.0")).unwrap();
    expected.push("missing tag 3.0 of -".to_owned());
    proxy.reset_stats();
    let v = verify(&config, &[]).await;
    assert_eq!((v.code, &v.findings), (1, &set(&expected)), "{}", v.text);
    let source_gets = proxy
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/v2/src/app/manifests/"))
        .count();
    assert_eq!(source_gets, 0, "no manifest GET at the source");
    assert!(v.text.contains("MISSING   tag 3.0"), "{}", v.text);

    // A tag moved to another digest.
    put_manifest(
        &c,
        "dst/app",
        "4.0",
        OCI_MANIFEST,
        &serde_json::from_slice(&signed.bytes).unwrap(),
    )
    .await;
    expected.push(format!(
        "drifted 4.0 expected {} found {}",
        moved.digest, signed.digest
    ));
    let v = verify(&config, &[]).await;
    assert_eq!((v.code, &v.findings), (1, &set(&expected)), "{}", v.text);

    // A child manifest of an index deleted.
    let deleted = real
        .request("DELETE", &format!("/v2/dst/app/manifests/{arm_child}"))
        .await
        .unwrap();
    assert_eq!(deleted.status, 202);
    expected.push(format!("missing child {arm_child} of 1.0"));
    let v = verify(&config, &[]).await;
    assert_eq!((v.code, &v.findings), (1, &set(&expected)), "{}", v.text);
    assert!(
        !v.findings
            .iter()
            .any(|f| f.contains(&index.digest.to_string()))
    );

    // A cosign signature tag deleted.
    std::fs::remove_dir_all(tag_dir(&real, &sig_tag)).unwrap();
    expected.push(format!("missing referrer {sig_tag} of -"));
    let v = verify(&config, &[]).await;
    assert_eq!((v.code, &v.findings), (1, &set(&expected)), "{}", v.text);

    // A blob deleted from the registry's storage: a shallow verify cannot see it, --deep does.
    let hex = layer5.hex();
    std::fs::remove_dir_all(
        real.storage_dir()
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex),
    )
    .unwrap();
    let v = verify(&config, &[]).await;
    assert_eq!((v.code, &v.findings), (1, &set(&expected)), "{}", v.text);
    expected.push(format!("missing blob {layer5} of 5.0"));
    let v = verify(&config, &["--deep"]).await;
    assert_eq!((v.code, &v.findings), (1, &set(&expected)), "{}", v.text);
    assert!(
        v.text
            .lines()
            .last()
            .unwrap()
            .starts_with("verify: INCOMPLETE"),
        "{}",
        v.text
    );
}

/// `ferry sync --verify`: a run whose target does not show what was written fails (exit 1,
/// the finding named), where the same run without `--verify` exits 0; a whole one passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_verify_fails_a_run_whose_target_does_not_show_what_it_wrote() {
    use ferry_testkit::registry::{FaultAction, FaultRule, OpKind, TestRegistry};
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"one"]);
    // The target answers every manifest HEAD under lost/ with a 404: written, never seen.
    reg.faults().push(
        FaultRule::on(
            OpKind::ManifestHead,
            FaultAction::Status {
                code: 404,
                retry_after: None,
            },
        )
        .repo("lost/")
        .times(FaultRule::FOREVER),
    );
    let dir = tempfile::tempdir().unwrap();
    let h = reg.host();
    let config = |target: &str| {
        mirror_yaml()
            .registry(&reg, &[])
            .mapping(
                format!("{h}/src/app"),
                &[format!("{h}/{target}")],
                &[r#"tags: { include: ["v*"] }"#],
            )
            .write(dir.path())
    };
    let lost = config("lost/app");
    let lost = lost.to_str().unwrap();
    let plain = ferry(&["--progress", "none", "sync", "-c", lost]).await;
    assert_eq!(code(&plain), 0, "{}", text(&plain.stderr));
    let verified = ferry(&["--progress", "none", "sync", "-c", lost, "--verify"]).await;
    let err = text(&verified.stderr);
    assert_eq!(code(&verified), 1, "{err}");
    assert!(err.contains("MISSING   tag v1"), "{err}");
    assert!(err.contains("verify: INCOMPLETE"), "{err}");

    let whole = config("ok/app");
    let out = ferry(&[
        "--progress",
        "none",
        "sync",
        "-c",
        whole.to_str().unwrap(),
        "--verify",
    ])
    .await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("verify: complete: 1 checked"), "{err}");
}

/// Nothing checkable (the source registry refuses connections) exits 2 with the listing named
/// unreadable; an invalid config exits 3; a bad `--shard` is a usage error (64).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_checkable_exits_2_a_bad_config_3_and_a_bad_shard_64() {
    let port = ferry_testkit::registry::closed_port().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let h = format!("127.0.0.1:{port}");
    let config = mirror_yaml()
        .entry(&h, &format!("http://{h}"), &["retry: { attempts: 1 }"])
        .mapping(
            format!("{h}/src/app"),
            &[format!("{h}/dst/app")],
            &[ALL_TAGS],
        )
        .write(dir.path());
    let config = config.to_str().unwrap();
    let out = ferry(&["--progress", "none", "verify", "-c", config, "--json"]).await;
    assert_eq!(code(&out), 2, "{}{}", text(&out.stdout), text(&out.stderr));
    let json: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(json["verdict"], "unchecked");
    assert_eq!(json["mappings"][0]["findings"][0]["finding"], "unreadable");

    std::fs::write(dir.path().join("bad.yaml"), "version: 1\nmappings: 7\n").unwrap();
    let bad = dir.path().join("bad.yaml");
    let out = ferry(&["verify", "-c", bad.to_str().unwrap()]).await;
    assert_eq!(code(&out), 3, "{}", text(&out.stderr));
    let out = ferry(&["verify", "-c", config, "--shard", "4/2"]).await;
    assert_eq!(code(&out), 64, "{}", text(&out.stderr));
}

/// Refused credentials: nothing could be read, every answer an auth failure: exit 4, and the
/// password appears in no output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_exit_4_and_the_password_appears_nowhere() {
    use ferry_testkit::registry::{TestRegistry, TokenAuthConfig};
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
    let h = reg.host();
    let auth = format!(r#"auth: {{ type: basic, username: alice, password: "{password}" }}"#);
    let config = mirror_yaml()
        .registry(&reg, &[&auth])
        .mapping(
            format!("{h}/src/app"),
            &[format!("{h}/dst/app")],
            &[ALL_TAGS],
        )
        .write(dir.path());
    let out = ferry(&["verify", "-c", config.to_str().unwrap(), "--json", "-vv"]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 4, "{stdout}{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["mappings"][0]["findings"][0]["auth"], true, "{stdout}");
    assert!(!stdout.contains(password) && !stderr.contains(password));
}

/// `ferry watch --verify-every`: after the first run a deep verify runs, and /metrics serves
/// its findings by kind (here one extra tag the target holds beside the mirrored one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_verify_every_serves_the_last_verify_on_metrics() {
    use ferry_testkit::registry::TestRegistry;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"one"]);
    reg.seed_image("dst/app", "v9", &[b"nine"]);
    let dir = tempfile::tempdir().unwrap();
    let h = reg.host();
    let config = mirror_yaml()
        .registry(&reg, &[])
        .mapping(
            format!("{h}/src/app"),
            &[format!("{h}/dst/app")],
            &[r#"tags: { include: ["v*"] }"#],
        )
        .write(dir.path());
    let mut child = common::command(&[
        "watch",
        "-c",
        config.to_str().unwrap(),
        "--interval",
        "1h",
        "--verify-every",
        "1h",
        "--listen",
        "127.0.0.1:0",
    ])
    .stderr(std::process::Stdio::piped())
    .stdout(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut addr, mut seen) = (None, Vec::new());
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push(line.clone());
            if let Some(rest) = line.strip_prefix("watch: listening on ") {
                addr = rest.split_whitespace().next().map(str::to_owned);
            }
            if line.starts_with("watch: verify finished") {
                break;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), read)
        .await
        .expect("a verify within a minute");
    assert!(
        seen.iter()
            .any(|l| l == "watch: verify finished with exit code 0"),
        "{seen:#?}"
    );
    let addr = addr.unwrap_or_else(|| panic!("{seen:#?}"));
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: ferry\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    for (line, present) in [
        ("ferry_verify_findings{kind=\"extra\"} 1", true),
        ("ferry_verify_findings{kind=\"missing\"} 0", true),
        ("ferry_verify_findings{kind=\"drifted\"} 0", true),
        ("ferry_last_verify_timestamp_seconds 0.0", false),
    ] {
        assert_eq!(body.lines().any(|l| l == line), present, "{line}: {body}");
    }
    child.kill().await.unwrap();
}
