//! `ferry inspect` through the real binary against the real distribution registry: an index's
//! platforms, a manifest's config, layers and referrers, `--raw`, `--config`, `--json`, layouts,
//! hostile references and content, and a manifest over the size limit.

mod common;

use common::{code, ferry, ferry_env, text};
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::{RealRegistry, RealRegistryOptions};
use ferry_testkit::noise;
use ferry_testkit::registry::TestRegistry;
use serde_json::{Value, json};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

async fn put(c: &RegistryClient, repo: &str, reference: &str, kind: &str, doc: &Value) -> Manifest {
    let bytes = serde_json::to_vec(doc).unwrap();
    let m = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes: bytes.into(),
        media_type: kind.to_owned(),
    };
    c.put_manifest(repo, reference, &m).await.unwrap();
    m
}

async fn blob(c: &RegistryClient, repo: &str, bytes: Vec<u8>) -> Value {
    let d = Digest::of_bytes(Algorithm::Sha256, &bytes);
    c.push_blob_bytes(repo, &d, bytes.clone().into())
        .await
        .unwrap();
    json!({"digest": d.to_string(), "size": bytes.len()})
}

/// An image at `repo:tag` whose config holds `labels`, with one 20 kB layer.
async fn image(
    c: &RegistryClient,
    repo: &str,
    tag: &str,
    arch: &str,
    labels: Value,
) -> (Manifest, Vec<u8>) {
    let config = serde_json::to_vec(&json!({
        "architecture": arch, "os": "linux", "created": "2026-11-30T10:00:00Z",
        "config": {"Labels": labels}, "rootfs": {"type": "layers", "diff_ids": []}
    }))
    .unwrap();
    let mut cd = blob(c, repo, config.clone()).await;
    cd["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    let mut ld = blob(c, repo, noise(arch.len() as u64, 20_000)).await;
    ld["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
    let doc = json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": cd, "layers": [ld]});
    (put(c, repo, tag, OCI_MANIFEST, &doc).await, config)
}

fn tls_off(args: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = vec!["--progress".into(), "none".into(), "inspect".into()];
    all.extend(args.iter().map(|a| a.to_string()));
    all.push("--tls-verify=false".into());
    all
}

async fn inspect(args: &[&str]) -> std::process::Output {
    let all = tls_off(args);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    ferry(&refs).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_an_index_its_children_config_layers_and_referrers() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let host = registry.host();
    let labels = json!({"org.opencontainers.image.source": "https://example.test/app"});
    let (amd, amd_config) = image(&c, "src/app", "1.0-amd64", "amd64", labels.clone()).await;
    let (arm, _) = image(&c, "src/app", "1.0-arm64", "arm64", labels).await;
    let children: Vec<Value> = [(&amd, "amd64"), (&arm, "arm64")]
        .iter()
        .map(|(m, arch)| {
            json!({"mediaType": OCI_MANIFEST, "digest": m.digest.to_string(),
            "size": m.bytes.len(), "platform": {"os": "linux", "architecture": arch}})
        })
        .collect();
    let index = put(
        &c,
        "src/app",
        "1.0",
        OCI_INDEX,
        &json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children}),
    )
    .await;
    // A signature of the amd64 image, listed under the referrers tag schema (`sha256-<hex>`):
    // this registry (distribution 2.8) has no referrers API.
    let empty = blob(&c, "src/app", b"{}".to_vec()).await;
    let mut cfg = empty.clone();
    cfg["mediaType"] = "application/vnd.oci.empty.v1+json".into();
    let sig = put(&c, "src/app", "sig", OCI_MANIFEST, &json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json", "config": cfg, "layers": [cfg],
        "subject": {"mediaType": OCI_MANIFEST, "digest": amd.digest.to_string(), "size": amd.bytes.len()}})).await;
    put(&c, "src/app", &amd.digest.fallback_tag(), OCI_INDEX, &json!({"schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": sig.digest.to_string(), "size": sig.bytes.len(),
        "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json"}]})).await;

    // The index: its platforms, each child's digest.
    let out = inspect(&[&format!("{host}/src/app:1.0")]).await;
    let shown = text(&out.stdout);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        shown.contains(&format!("digest      {}", index.digest)),
        "{shown}"
    );
    assert!(shown.contains(OCI_INDEX), "{shown}");
    assert!(shown.contains("platforms   2"), "{shown}");
    assert!(
        shown.contains(&format!("linux/amd64  {}", amd.digest)),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("linux/arm64  {}", arm.digest)),
        "{shown}"
    );

    // One child by digest, as JSON: config summary, layers, the tag-schema referrer.
    let child = format!("docker://{host}/src/app@{}", amd.digest);
    let out = inspect(&[&child, "--json"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["image"], format!("{host}/src/app@{}", amd.digest));
    assert_eq!(v["digest"], amd.digest.to_string());
    assert_eq!(v["size"], amd.bytes.len());
    assert_eq!(v["config"]["architecture"], "amd64");
    assert_eq!(v["config"]["created"], "2026-11-30T10:00:00Z");
    assert_eq!(
        v["config"]["labels"]["org.opencontainers.image.source"],
        "https://example.test/app"
    );
    assert_eq!(v["layers"].as_array().unwrap().len(), 1);
    assert_eq!(v["layers"][0]["size"], 20_000);
    assert_eq!(v["referrers"]["found_by"], "tag schema");
    assert_eq!(
        v["referrers"]["manifests"][0]["digest"],
        sig.digest.to_string()
    );
    let out = inspect(&[&child]).await;
    let shown = text(&out.stdout);
    assert!(shown.contains("  platform  linux/amd64"), "{shown}");
    assert!(
        shown.contains("label     org.opencontainers.image.source=https://example.test/app"),
        "{shown}"
    );
    assert!(shown.contains("referrers   1 (tag schema)"), "{shown}");

    // --raw: the bytes exactly as served; --config: the config blob's.
    let out = inspect(&[&format!("{host}/src/app:1.0"), "--raw"]).await;
    assert_eq!(code(&out), 0);
    assert_eq!(out.stdout, index.bytes.to_vec());
    let out = inspect(&[&format!("{host}/src/app:1.0-amd64"), "--config-blob"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(out.stdout, amd_config);
    let out = inspect(&[&format!("{host}/src/app:1.0"), "--config-blob"]).await;
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("has no config"),
        "{}",
        text(&out.stderr)
    );

    // A layout: the same image after `ferry copy`, by tag and by digest.
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("lay");
    let out = ferry(&[
        "--progress",
        "none",
        "copy",
        &format!("{host}/src/app:1.0"),
        &format!("oci:{}", layout.display()),
        "--src-tls-verify=false",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    for reference in [
        format!("oci:{}:1.0", layout.display()),
        format!("oci:{}@{}", layout.display(), index.digest),
    ] {
        let out = ferry(&["inspect", &reference, "--json"]).await;
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["digest"], index.digest.to_string(), "{reference}");
        assert_eq!(
            v["image"],
            reference.as_str(),
            "a digest follows an @, a tag a :"
        );
        assert_eq!(
            v["platforms"][1]["digest"],
            arm.digest.to_string(),
            "{reference}"
        );
    }
    // A layout named without its image is a malformed argument: exit 64.
    let out = ferry(&["inspect", &format!("oci:{}", layout.display())]).await;
    assert_eq!(code(&out), 64);
    assert!(
        text(&out.stderr).contains("names no tag or digest"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_refuses_hostile_references_content_and_a_manifest_over_the_limit() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let host = registry.host();

    // References an attacker (or a typo) writes: each refused before any request, exit 64 (a
    // malformed argument).
    let before = registry.access_log().await.unwrap().len();
    for bad in [
        format!("{host}/App:1"),
        format!("{host}/app:1\u{1b}[2J"),
        format!("{host}/../etc:1"),
        format!("{host}/app@sha256:{}", "z".repeat(64)),
        format!("{host}/app:{}", "t".repeat(200)),
        "oci:".to_owned(),
    ] {
        let out = inspect(&[&bad]).await;
        let err = text(&out.stderr);
        assert_eq!(code(&out), 64, "{bad:?}: {err}");
        assert!(err.starts_with("error: "), "{bad:?}: {err}");
        assert!(
            !err.contains('\u{1b}'),
            "{bad:?}: an escape reached the terminal: {err}"
        );
    }
    assert_eq!(
        registry.access_log().await.unwrap().len(),
        before,
        "no request for a bad reference"
    );

    // A missing image: exit 2, naming the repository, the operation and the status.
    let out = inspect(&[&format!("{host}/nothing/here:1")]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("nothing/here") && err.contains("manifest GET") && err.contains("404"),
        "{err}"
    );

    // Labels that carry terminal escapes are shown escaped, never sent to the terminal raw.
    let (m, _) = image(
        &c,
        "hostile/app",
        "1",
        "amd64",
        json!({"x": "\u{1b}]0;owned\u{7}\u{1b}[2J"}),
    )
    .await;
    let out = inspect(&[&format!("{host}/hostile/app@{}", m.digest)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("label     x="), "{shown}");
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );

    // A manifest past the 4 MiB limit is refused, not read whole, and the error says so. The
    // real registry will neither store nor serve one, so a hostile registry (the testkit's,
    // which serves what it is given) and a layout on disk serve it.
    let big = serde_json::to_vec(&json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": format!("sha256:{}", "4".repeat(64)), "size": 2},
        "layers": [], "annotations": {"padding": "p".repeat(5 << 20)}}))
    .unwrap();
    let hostile = TestRegistry::builder().start().await.unwrap();
    hostile.seed_manifest("big/app", "1", OCI_MANIFEST, &big);
    let out = inspect(&[&format!("{}/big/app:1", hostile.host())]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("big/app") && err.contains("manifest") && err.contains("limit"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let mut layout = ferry_testkit::fixtures::Images::new();
    let d = layout.typed_blob(OCI_MANIFEST, &big);
    layout.tag(&d, Some("1"));
    layout.write_layout(dir.path());
    let out = ferry(&["inspect", &format!("oci:{}:1", dir.path().display())]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(err.contains("manifest") && err.contains("limit"), "{err}");
    assert!(out.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_takes_credentials_as_skopeo_does_and_a_refusal_exits_4() {
    let Some(locked) = RealRegistry::start_for_test_with(RealRegistryOptions {
        htpasswd: Some(("mirror".into(), "s3cret-pw".into())),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("registry") else {
        return;
    };
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"layer"]);
    let home = tempfile::tempdir().unwrap();
    let home = home.path().to_str().unwrap();
    let env = [
        ("HOME", home),
        ("DOCKER_CONFIG", home),
        ("REGISTRY_AUTH_FILE", "/nonexistent"),
    ];
    let target = format!("{}/app/x:v1", locked.host());
    let out = ferry_env(
        &[
            "--progress",
            "none",
            "copy",
            &format!("{}/src/app:v1", source.host()),
            &target,
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            "--dest-creds",
            "mirror:s3cret-pw",
        ],
        &env,
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));

    let out = ferry_env(
        &[
            "inspect",
            &target,
            "--tls-verify=false",
            "--creds",
            "mirror:s3cret-pw",
        ],
        &env,
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("layers      1"),
        "{}",
        text(&out.stdout)
    );
    for args in [vec![], vec!["--creds", "mirror:wrong-pw"]] {
        let mut all = vec!["inspect", target.as_str(), "--tls-verify=false"];
        all.extend(args);
        let out = ferry_env(&all, &env).await;
        let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(code(&out), 4, "{all:?}: {shown}");
        assert!(
            shown.contains(&locked.host()) && shown.contains("app/x"),
            "{shown}"
        );
        assert!(
            !shown.contains("wrong-pw") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_referrers_lookup_still_shows_the_image() {
    use ferry_testkit::registry::{FaultAction, FaultRule, OpKind};
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("deg/app", "v1", &[b"layer"]);
    reg.faults().push(
        FaultRule::on(
            OpKind::Referrers,
            FaultAction::Status {
                code: 400,
                retry_after: None,
            },
        )
        .forever(),
    );
    let out = inspect(&[&format!("{}/deg/app:v1", reg.host())]).await;
    let shown = text(&out.stdout);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(shown.contains("layers      1"), "{shown}");
    assert!(
        shown.contains("referrers   none (unknown: ") && shown.contains("400"),
        "{shown}"
    );
}

/// `--signatures`: each `.sig` layer with who signed it and whether it verifies under the
/// policy of the -c config's mapping for the repository; without -c, each shown unverified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_lists_signatures_with_their_signer_and_whether_each_verifies() {
    use ferry_testkit::trust_signer::{Keyless, SIGNED_AT, TestSigstore};
    let reg = TestRegistry::builder().start().await.unwrap();
    let app = reg.seed_image("lib/app", "v1", &[b"signed layer"]);
    let d: Digest = app.parse().unwrap();
    let sigstore = TestSigstore::new();
    let key = ferry_trust::PrivateKey::generate_p256();
    let evil = Keyless::new("https://issuer.test", "mallory@evil.test");
    let layers = [
        sigstore.key_signed_layer_logged(&key, &d, SIGNED_AT),
        sigstore.keyless_layer(&evil, &d),
    ];
    let config_blob = reg.seed_blob("lib/app", b"{}");
    let descriptors: Vec<Value> = layers
        .iter()
        .map(|l| {
            let p = reg.seed_blob("lib/app", &l.payload);
            json!({"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": p, "size": l.payload.len(), "annotations": l.annotations})
        })
        .collect();
    let sig = json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_blob, "size": 2},
        "layers": descriptors});
    let tag = format!("sha256-{}.sig", d.hex());
    reg.seed_manifest("lib/app", &tag, OCI_MANIFEST, sig.to_string().as_bytes());

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("release.pub"), key.public_key().to_pem()).unwrap();
    std::fs::write(dir.path().join("root.json"), sigstore.root_json()).unwrap();
    let config = dir.path().join("mirror.yaml");
    std::fs::write(
        &config,
        format!(
            "version: 1\nregistries:\n  - host: \"{host}\"\n    insecure: true\nmappings:\n  - source: \"{host}/lib/app\"\n    targets: [\"mirror.test/app\"]\n    signatures:\n      keys: [release.pub]\n      identities: [{{issuer: \"https://issuer.test\", subject: \"release@acme.test\"}}]\n      trusted_root: root.json\n",
            host = reg.host()
        ),
    )
    .unwrap();
    let image = format!("{}/lib/app:v1", reg.host());
    let config = config.display().to_string();
    let out = inspect(&[&image, "--signatures", "-c", &config]).await;
    let shown = text(&out.stdout);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let fingerprint = key.public_key().fingerprint().to_string();
    assert!(
        shown.contains("signatures  2 (under the mapping's"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "{tag} layer 0  key {fingerprint}  verified, logged 2024-01-01T00:00:00Z"
        )),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("{tag} layer 1  mallory@evil.test (issuer https://issuer.test)  NOT VERIFIED: identity mismatch")),
        "{shown}"
    );
    let out = inspect(&[&image, "--signatures", "--json", "-c", &config]).await;
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = doc["signatures"]["found"].as_array().unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(
        (found[0]["verified"].clone(), found[1]["verified"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(found[0]["signer"], format!("key {fingerprint}"));

    // Without a policy: listed, none verified.
    let out = inspect(&[&image, "--signatures"]).await;
    let shown = text(&out.stdout);
    assert!(shown.contains("signatures  2 (no policy"), "{shown}");
    assert!(!shown.contains("  verified"), "{shown}");
}
