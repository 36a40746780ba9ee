//! Signed bundles through the real binary and real registries: `ferry export --sign-key`, then
//! `ferry import` with and without `--verify-key`; every altered, unsigned or retargeted bundle
//! is refused before the target registry sees a single request (issue 37).

mod common;

use std::path::{Path, PathBuf};

use common::{code, ferry, ferry_env, push_one_layer, text};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::fixtures::{ALL_TAGS, mirror_yaml};
use ferry_trust::keys::PrivateKey;

async fn run(args: &[&str]) -> std::process::Output {
    let mut all = vec!["--progress", "none"];
    all.extend_from_slice(args);
    ferry(&all).await
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Two registries: `source` with `apps/one:1.0`, `target` already holding the site's own
/// `prod/critical:latest`; a config whose mapping sends `apps/one` to `target/mirror/one`;
/// a signing key and its public half on disk.
struct Site {
    source: RealRegistry,
    target: RealRegistry,
    dst: RegistryClient,
    dir: tempfile::TempDir,
    config: PathBuf,
    private: PathBuf,
    public: PathBuf,
    critical: String,
}

impl Site {
    async fn new() -> Option<Site> {
        let source = RealRegistry::start_for_test().await.expect("registry")?;
        let target = RealRegistry::start().await.expect("registry");
        let src = RegistryClient::new(RegistryOptions::insecure_at(&source.url())).unwrap();
        let dst = RegistryClient::new(RegistryOptions::insecure_at(&target.url())).unwrap();
        let layer = ferry_testkit::noise(7, 100_000);
        push_one_layer(&src, "apps/one", "1.0", r#"{"n":1}"#, &layer).await;
        push_one_layer(
            &dst,
            "prod/critical",
            "latest",
            r#"{"n":"critical"}"#,
            &ferry_testkit::noise(8, 1000),
        )
        .await;
        let critical = dst
            .head_manifest("prod/critical", "latest")
            .await
            .unwrap()
            .unwrap()
            .digest
            .to_string();
        let dir = tempfile::tempdir().unwrap();
        let config = mirror_yaml()
            .registries(&[&source, &target], &[])
            .mapping(
                format!("{}/apps/one", source.host()),
                &[format!("{}/mirror/one", target.host())],
                &[ALL_TAGS],
            )
            .write(dir.path());
        let key = PrivateKey::generate_p256();
        let private = dir.path().join("bundle.key");
        let public = dir.path().join("bundle.pub");
        std::fs::write(&private, key.to_pkcs8_pem().unwrap().as_bytes()).unwrap();
        std::fs::write(&public, key.public_key().to_pem()).unwrap();
        Some(Site {
            source,
            target,
            dst,
            dir,
            config,
            private,
            public,
            critical,
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `ferry export` of the config into `name`, signed with `key` when given.
    async fn export(&self, name: &str, key: Option<&Path>) -> PathBuf {
        let out_path = self.path(name);
        let mut args = vec!["export", "-c", s(&self.config), "-o", s(&out_path)];
        if let Some(k) = key {
            args.extend(["--sign-key", s(k)]);
        }
        let out = run(&args).await;
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
        out_path
    }

    /// Runs `verb BUNDLE -c site.yaml extra…` (`import`, or `verify --bundle`); asserts it was
    /// refused with exit 2 before any request reached the target, its message holding `says`.
    async fn refused(&self, verb: &[&str], bundle: &Path, extra: &[&str], says: &str) {
        let before = self.target.access_log().await.unwrap().len();
        let mut args = verb.to_vec();
        args.extend_from_slice(&[s(bundle), "-c", s(&self.config)]);
        args.extend_from_slice(extra);
        let out = run(&args).await;
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 2, "{stderr}");
        assert!(stderr.contains(says), "{says:?} not in: {stderr}");
        assert_eq!(
            self.target.access_log().await.unwrap().len(),
            before,
            "the target saw no request: {stderr}"
        );
        self.untouched().await;
    }

    /// The site's own image is still what it was, and no import reached the target's mirror.
    async fn untouched(&self) {
        let m = self.dst.head_manifest("prod/critical", "latest").await;
        assert_eq!(m.unwrap().unwrap().digest.to_string(), self.critical);
        assert!(
            self.dst
                .head_manifest("prod/critical", "stable")
                .await
                .unwrap()
                .is_none()
        );
    }

    async fn stop(self) {
        self.source.stop().await.unwrap();
        self.target.stop().await.unwrap();
    }
}

/// The JSON report's `authenticity` of a `--json` run (its stdout).
fn authenticity(out: &std::process::Output) -> serde_json::Value {
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    report["authenticity"].clone()
}

/// Copies the tar at `from` to `to`, each entry's bytes passed through `edit` (`None` drops it).
fn rewrite(from: &Path, to: &Path, mut edit: impl FnMut(&str, Vec<u8>) -> Option<Vec<u8>>) {
    use std::io::Read as _;
    let mut archive = tar::Archive::new(std::fs::File::open(from).unwrap());
    let mut out = tar::Builder::new(std::fs::File::create(to).unwrap());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        let Some(bytes) = edit(&name, bytes) else {
            continue;
        };
        let mut h = tar::Header::new_ustar();
        h.set_path(&name).unwrap();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        out.append(&h, &bytes[..]).unwrap();
    }
    out.finish().unwrap();
}

/// The retarget of issue 37: one `ref.name` in index.json rewritten to `to`, and the record's
/// digest (and index digest) recomputed as anyone can; with `images` the record's image is
/// renamed too and its mapping's target moved, so the record agrees with the tar again.
fn retarget(from: &Path, out: &Path, to: &str, images: bool) {
    let mut index_json = Vec::new();
    rewrite(from, &from.with_extension("tmp"), |name, bytes| {
        if name == "index.json" {
            let mut index: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] = to.into();
            index_json = serde_json::to_vec(&index).unwrap();
            return Some(index_json.clone());
        }
        Some(bytes)
    });
    rewrite(&from.with_extension("tmp"), out, |name, bytes| {
        if name == "ferry-bundle.json" {
            let mut r: ferry_store::bundle::BundleRecord = serde_json::from_slice(&bytes).unwrap();
            r.digest = ferry_store::bundle::bundle_digest(&r.carried, &index_json);
            r.index = Some(ferry_store::bundle::sha256_of(&index_json));
            if images {
                r.images[0].reference = to.to_owned();
                let repo = to.rsplit_once(':').unwrap().0.to_owned();
                r.mappings[r.images[0].mapping].targets = vec![repo];
            }
            return Some(serde_json::to_vec(&r).unwrap());
        }
        Some(bytes)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_a_record_that_disagrees_with_index_json_is_refused_before_any_request() {
    let Some(site) = Site::new().await else {
        return;
    };
    let bundle = site.export("full.tar", None).await;
    let critical = format!("{}/prod/critical:latest", site.target.host());
    let attacked = site.path("attacked.tar");
    retarget(&bundle, &attacked, &critical, false);
    site.refused(&["import"], &attacked, &[], "record does not list")
        .await;

    // An archive with no record at all is imported as today, said to be unauthenticated.
    let bare = site.path("bare.tar");
    rewrite(&bundle, &bare, |name, b| {
        (name != "ferry-bundle.json").then_some(b)
    });
    let out = run(&["import", s(&bare), "-c", s(&site.config), "--json"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(stderr.contains("it is not authenticated"), "{stderr}");
    let status = serde_json::json!({"status": "not_authenticated"});
    assert_eq!(authenticity(&out), status);
    // The untouched bundle imports, its record checked but not authenticated; its dry run and
    // verify --bundle say so in their JSON too.
    let recorded = serde_json::json!({"status": "recorded"});
    for verb in [
        &["import", "--dry-run"][..],
        &["import"],
        &["verify", "--bundle"],
    ] {
        let mut args = verb.to_vec();
        args.extend_from_slice(&[s(&bundle), "-c", s(&site.config), "--json"]);
        let out = run(&args).await;
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 0, "{verb:?}: {stderr}");
        assert!(stderr.contains("no key was given"), "{verb:?}: {stderr}");
        assert_eq!(authenticity(&out), recorded, "{verb:?}");
    }
    site.untouched().await;
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_bundle_imports_under_its_key_and_every_altered_or_unsigned_one_is_refused() {
    let Some(site) = Site::new().await else {
        return;
    };
    let signed = site.export("signed.tar", Some(&site.private)).await;
    let beside = site.path("signed.tar.json.sig");
    assert!(
        beside.exists(),
        "the signature is written beside the bundle"
    );
    let unsigned = site.export("unsigned.tar", None).await;
    let key = ["--verify-key", s(&site.public)];

    // Unsigned, or its record removed: refused under a key.
    site.refused(&["import"], &unsigned, &key, "not signed")
        .await;
    let bare = site.path("bare.tar");
    rewrite(&signed, &bare, |name, b| {
        (!name.starts_with("ferry-bundle.json")).then_some(b)
    });
    site.refused(&["import"], &bare, &key, "has no ferry-bundle.json")
        .await;
    // The retarget with the record made to agree: its signature no longer verifies.
    let critical = format!("{}/prod/critical:latest", site.target.host());
    let attacked = site.path("attacked.tar");
    retarget(&signed, &attacked, &critical, true);
    site.refused(&["import"], &attacked, &key, "does not verify")
        .await;
    // The signature itself altered.
    let tampered = site.path("tampered.tar");
    rewrite(&signed, &tampered, |name, mut b| {
        if name == "ferry-bundle.json.sig" {
            b[10] = if b[10] == b'A' { b'B' } else { b'A' };
        }
        Some(b)
    });
    site.refused(&["import"], &tampered, &key, "does not verify")
        .await;
    // Another key.
    let other = site.path("other.pub");
    std::fs::write(&other, PrivateKey::generate_p256().public_key().to_pem()).unwrap();
    site.refused(
        &["import"],
        &signed,
        &["--verify-key", s(&other)],
        "does not verify",
    )
    .await;
    // A key file that is not there is a usage error for both commands, before anything is read.
    let missing = site.path("missing.pub");
    for verb in [&["import"][..], &["verify", "--bundle"][..]] {
        let mut args = verb.to_vec();
        args.extend_from_slice(&[
            s(&signed),
            "-c",
            s(&site.config),
            "--verify-key",
            s(&missing),
        ]);
        let out = run(&args).await;
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 64, "{verb:?}: {stderr}");
        assert!(stderr.contains("--verify-key"), "{stderr}");
    }
    // verify --bundle holds a bundle to the same keys before it asks the site anything.
    let verify = ["verify", "--bundle"];
    site.refused(&verify, &unsigned, &key, "not signed").await;
    site.refused(&verify, &attacked, &key, "does not verify")
        .await;

    // Signed and whole: imported, said to be signed by the key (on stderr and in the JSON).
    let out = run(&[
        "import",
        s(&signed),
        "-c",
        s(&site.config),
        "--verify-key",
        s(&site.public),
        "--json",
    ])
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(stderr.contains("signed by ECDSA P-256 sha256:"), "{stderr}");
    let signed_by = authenticity(&out);
    assert_eq!(signed_by["status"], "signed", "{signed_by}");
    let key_shown = signed_by["key"].as_str().unwrap_or_default().to_owned();
    assert!(key_shown.starts_with("ECDSA P-256 sha256:"), "{signed_by}");
    assert!(stderr.contains(&key_shown), "{stderr}");
    let m = site.dst.head_manifest("mirror/one", "1.0").await.unwrap();
    assert!(m.is_some(), "the signed bundle's image is on the target");
    let out = run(&[
        "verify",
        "--bundle",
        s(&signed),
        "-c",
        s(&site.config),
        "--verify-key",
        s(&site.public),
        "--json",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(authenticity(&out), signed_by);
    site.untouched().await;
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_site_configs_bundle_keys_require_a_signature_and_an_ed25519_or_cosign_key_signs() {
    let Some(site) = Site::new().await else {
        return;
    };
    // An Ed25519 key, and a cosign-encrypted P-256 key opened with COSIGN_PASSWORD.
    let ed = PrivateKey::generate_ed25519();
    let ed_key = site.path("ed.key");
    let ed_pub = site.path("ed.pub");
    std::fs::write(&ed_key, ed.to_pkcs8_pem().unwrap().as_bytes()).unwrap();
    std::fs::write(&ed_pub, ed.public_key().to_pem()).unwrap();
    let signed = site.export("ed.tar", Some(&ed_key)).await;
    let cosign = PrivateKey::generate_p256();
    let encrypted =
        ferry_trust::cosign_key::encrypt_pkcs8(&cosign.to_pkcs8_der().unwrap(), b"hunter2", 10)
            .unwrap();
    let cosign_key = site.path("cosign.key");
    std::fs::write(&cosign_key, encrypted.as_bytes()).unwrap();
    let cosign_pub = site.path("cosign.pub");
    std::fs::write(&cosign_pub, cosign.public_key().to_pem()).unwrap();
    let cosigned = site.path("cosigned.tar");
    let out = ferry_env(
        &[
            "--progress",
            "none",
            "export",
            "-c",
            s(&site.config),
            "-o",
            s(&cosigned),
            "--sign-key",
            s(&cosign_key),
        ],
        &[("COSIGN_PASSWORD", "hunter2")],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("hunter2"));

    let site_yaml = site.path("site.yaml");
    let config = std::fs::read_to_string(&site.config).unwrap();
    let keys = format!("bundles:\n  keys: [{}, {}]\n", s(&ed_pub), s(&cosign_pub));
    std::fs::write(&site_yaml, format!("{config}\n{keys}")).unwrap();
    let unsigned = site.export("unsigned.tar", None).await;
    let before = site.target.access_log().await.unwrap().len();
    let out = run(&["import", s(&unsigned), "-c", s(&site_yaml)]).await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not signed"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(site.target.access_log().await.unwrap().len(), before);
    for bundle in [&signed, &cosigned] {
        let out = run(&["import", s(bundle), "-c", s(&site_yaml)]).await;
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 0, "{stderr}");
        assert!(stderr.contains("signed by"), "{stderr}");
    }
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_with_a_layout_target_agrees_with_its_own_record() {
    let Some(site) = Site::new().await else {
        return;
    };
    let layout = site.path("layout");
    std::fs::create_dir(site.path("two-targets")).unwrap();
    let config = mirror_yaml()
        .registries(&[&site.source, &site.target], &[])
        .mapping(
            format!("{}/apps/one", site.source.host()),
            &[
                format!("{}/mirror/one", site.target.host()),
                format!("oci:{}", layout.display()),
            ],
            &[ALL_TAGS],
        )
        .write(&site.path("two-targets"));
    let bundle = site.path("two.tar");
    let out = run(&["export", "-c", s(&config), "-o", s(&bundle)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let prefix = format!("{}/site", site.target.host());
    let out = run(&[
        "import",
        s(&bundle),
        "-c",
        s(&config),
        "--target-prefix",
        &prefix,
    ])
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(!stderr.contains("disagree"), "{stderr}");
    let m = site
        .dst
        .head_manifest("site/mirror/one", "1.0")
        .await
        .unwrap();
    assert!(m.is_some(), "{stderr}");
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_registry_mappings_bundle_agrees_with_its_own_record() {
    let Some(site) = Site::new().await else {
        return;
    };
    std::fs::create_dir(site.path("glob")).unwrap();
    let config = mirror_yaml()
        .registries(&[&site.source, &site.target], &[])
        .mapping(
            format!("{}/apps/*", site.source.host()),
            &[format!("{}/globbed", site.target.host())],
            &[ALL_TAGS],
        )
        .write(&site.path("glob"));
    let bundle = site.path("glob.tar");
    let out = run(&["export", "-c", s(&config), "-o", s(&bundle)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = run(&["import", s(&bundle), "-c", s(&config)]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    let m = site.dst.head_manifest("globbed/one", "1.0").await.unwrap();
    assert!(m.is_some(), "{stderr}");
    site.stop().await;
}
