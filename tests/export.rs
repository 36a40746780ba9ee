//! `ferry export` through the real binary: a config of 2 mappings x 3 tags from the real
//! distribution registry into one bundle that skopeo reads by each full target reference.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::{code, ferry, text, write_config};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;

const SECRET: &str = "export-secret-never-in-a-bundle-7f3a";

/// Pushes `repo:tag`, a one-layer image whose layer is unique to it.
async fn push(client: &RegistryClient, repo: &str, tag: &str) {
    let config = format!(r#"{{"architecture":"amd64","os":"linux","tag":"{repo}:{tag}"}}"#);
    let layer = format!("layer of {repo}:{tag} ").repeat(4000);
    common::push_one_layer(client, repo, tag, &config, layer.as_bytes()).await;
}

struct Setup {
    real: RealRegistry,
    client: RegistryClient,
    dir: tempfile::TempDir,
    config: PathBuf,
}

/// The source registry with `apps/one` and `apps/two`, three tags each, and a config mapping
/// each to `registry.internal/mirror/...` (never contacted), with credentials for it.
async fn setup() -> Option<Setup> {
    let real = RealRegistry::start_for_test().await.expect("registry")?;
    let client = RegistryClient::new(RegistryOptions::insecure_at(&real.url())).unwrap();
    for repo in ["apps/one", "apps/two"] {
        for tag in ["1.0", "1.1", "2.0"] {
            push(&client, repo, tag).await;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n  - host: registry.internal\n    auth: {{ type: basic, username: bundle-user, password: \"{SECRET}\" }}\n",
        real.host(),
        real.url()
    );
    let mappings = format!(
        "  - source: {h}/apps/one\n    targets: [registry.internal/mirror/one]\n    tags: {{ include: [\"*\"] }}\n  - source: {h}/apps/two\n    targets: [registry.internal/mirror/two]\n    tags: {{ include: [\"*\"] }}\n",
        h = real.host()
    );
    let config = write_config(dir.path(), &registries, &mappings);
    Some(Setup {
        real,
        client,
        dir,
        config,
    })
}

async fn export(config: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "export",
        "-c",
        config.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--progress",
        "none",
    ];
    args.extend(extra);
    ferry(&args).await
}

/// The tar's entries in order, each with its bytes.
fn entries(path: &Path) -> Vec<(String, Vec<u8>)> {
    use std::io::Read as _;
    let mut a = tar::Archive::new(std::fs::File::open(path).unwrap());
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            e.read_to_end(&mut bytes).unwrap();
            (name, bytes)
        })
        .collect()
}

fn record(path: &Path) -> serde_json::Value {
    let (_, bytes) = entries(path)
        .into_iter()
        .find(|(n, _)| n == "ferry-bundle.json")
        .expect("a ferry-bundle.json entry");
    serde_json::from_slice(&bytes).unwrap()
}

fn skopeo(args: &[&str]) -> std::process::Output {
    std::process::Command::new("/usr/bin/skopeo")
        .args(args)
        .output()
        .expect("skopeo runs")
}

const TAGS: [&str; 3] = ["1.0", "1.1", "2.0"];

/// Every tag of both mappings is in the bundle under its full target reference; skopeo inspects
/// and copies each with the digest the source has; `tar tf` order ends with the record; the
/// config's credentials appear nowhere; `-o -` gives the same entries and record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_is_an_oci_archive_skopeo_reads_by_full_reference() {
    let Some(s) = setup().await else { return };
    let bundle = s.dir.path().join("bundle.tar");
    let out = export(&s.config, &bundle, &["--json"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    let stdout = text(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["totals"]["images_synced"], 6, "{stdout}");
    assert_eq!(report["archives"][0]["images_indexed"], 6, "{stdout}");
    assert!(!bundle.with_extension("tar.partial").exists());

    // Order: every blob before oci-layout, index.json, and ferry-bundle.json last.
    let list = entries(&bundle);
    let names: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
    let n = names.len();
    assert_eq!(
        &names[n - 3..],
        ["oci-layout", "index.json", "ferry-bundle.json"],
        "{names:?}"
    );
    let blobs = names
        .iter()
        .filter(|n| n.starts_with("blobs/sha256/") && n.len() > 14);
    // 6 images x (manifest, config, layer).
    assert_eq!(blobs.count(), 18, "{names:?}");
    let unique: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "no entry twice: {names:?}");

    for repo in ["one", "two"] {
        for tag in TAGS {
            let reference = format!("registry.internal/mirror/{repo}:{tag}");
            let at = format!("oci-archive:{}:{reference}", bundle.display());
            let inspected = skopeo(&["inspect", "--raw", &at]);
            assert!(
                inspected.status.success(),
                "{reference}: {}",
                text(&inspected.stderr)
            );
            let source = s
                .client
                .head_manifest(&format!("apps/{repo}"), tag)
                .await
                .unwrap()
                .unwrap();
            let digest = ferry_distribution::Digest::of_bytes(
                ferry_distribution::Algorithm::Sha256,
                &inspected.stdout,
            );
            assert_eq!(digest, source.digest, "{reference}");
            let dir = s.dir.path().join(format!("copied-{repo}-{tag}"));
            let copied = skopeo(&["copy", &at, &format!("dir:{}", dir.display())]);
            assert!(
                copied.status.success(),
                "{reference}: {}",
                text(&copied.stderr)
            );
            let manifest = std::fs::read(dir.join("manifest.json")).unwrap();
            assert_eq!(
                manifest, inspected.stdout,
                "{reference}: the same manifest bytes"
            );
        }
    }

    // The record: both mappings, six images with their sources, everything carried.
    let r = record(&bundle);
    assert_eq!(r["format"], "ferry-bundle/v1");
    assert_eq!(r["mappings"].as_array().unwrap().len(), 2);
    let images = r["images"].as_array().unwrap();
    assert_eq!(images.len(), 6);
    assert_eq!(images[0]["reference"], "registry.internal/mirror/one:1.0");
    assert_eq!(
        images[0]["source"],
        format!("{}/apps/one:1.0", s.real.host())
    );
    assert_eq!(r["content"], r["carried"]);
    assert_eq!(r["bases"].as_array().unwrap().len(), 0);
    let beside: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.dir.path().join("bundle.tar.json")).unwrap())
            .unwrap();
    assert_eq!(beside, r, "the record beside the bundle is the one inside");

    // Credentials never travel: not in the tar, the record, the report or the logs.
    let raw = std::fs::read(&bundle).unwrap();
    assert!(!raw.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));

    // `-o -`: the same entries with the same bytes, and the same record but for its time.
    let piped = s.dir.path().join("piped.tar");
    let mut c = common::command(&[
        "export",
        "-c",
        s.config.to_str().unwrap(),
        "-o",
        "-",
        "--progress",
        "none",
    ]);
    c.stdout(std::fs::File::create(&piped).unwrap());
    let status = c.status().await.unwrap();
    assert!(status.success());
    let by_name = |l: Vec<(String, Vec<u8>)>| {
        l.into_iter()
            .filter(|(n, _)| n != "ferry-bundle.json")
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(by_name(entries(&piped)), by_name(list));
    let mut a = record(&piped);
    let mut b = r.clone();
    a["created"] = "".into();
    b["created"] = "".into();
    assert_eq!(a, b);
}

/// A second export `--since` the first, after one new tag, carries only that tag's manifest and
/// blobs; the unchanged images stay in the record (not in `index.json`), and the base is named
/// by digest. `--since` the record beside the bundle gives the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_since_an_earlier_bundle_carries_only_what_is_new() {
    let Some(s) = setup().await else { return };
    let full = s.dir.path().join("full.tar");
    let out = export(&s.config, &full, &[]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    push(&s.client, "apps/two", "3.0").await;

    for since in [full.clone(), s.dir.path().join("full.tar.json")] {
        let weekly = s.dir.path().join("weekly.tar");
        let out = export(
            &s.config,
            &weekly,
            &["--since", since.to_str().unwrap(), "--json"],
        )
        .await;
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
        let list = entries(&weekly);
        let blobs: Vec<&str> = list
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| n.starts_with("blobs/sha256/") && n.len() > 14)
            .collect();
        assert_eq!(
            blobs.len(),
            3,
            "the new tag's manifest, config and layer: {blobs:?}"
        );
        let index: serde_json::Value =
            serde_json::from_slice(&list.iter().find(|(n, _)| n == "index.json").unwrap().1)
                .unwrap();
        let names: Vec<&str> = index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                m["annotations"]["org.opencontainers.image.ref.name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(names, ["registry.internal/mirror/two:3.0"]);
        let r = record(&weekly);
        let old = record(&full);
        assert_eq!(r["images"].as_array().unwrap().len(), 7);
        assert_eq!(r["bases"][0]["digest"], old["digest"]);
        assert_eq!(r["carried"].as_array().unwrap().len(), 3);
        assert_eq!(r["content"].as_array().unwrap().len(), 21);
        let at = format!(
            "oci-archive:{}:registry.internal/mirror/two:3.0",
            weekly.display()
        );
        let inspected = skopeo(&["inspect", "--raw", &at]);
        assert!(inspected.status.success(), "{}", text(&inspected.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["archives"][0]["images_in_base"], 6);
        assert_eq!(report["archives"][0]["digests_left_out"], 18);
    }
}

/// A bundle killed part way (SIGKILL) leaves no `bundle.tar`: only its `.partial`, which the
/// next export takes over and replaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_killed_part_way_leaves_no_bundle() {
    let Some(s) = setup().await else { return };
    // A big layer so the kill lands while it streams.
    let big: Vec<u8> = (0..192u32 * 1024 * 1024)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    common::push_one_layer(&s.client, "apps/one", "big", r#"{"os":"linux"}"#, &big).await;
    let bundle = s.dir.path().join("bundle.tar");
    let partial = s.dir.path().join("bundle.tar.partial");
    let mut child = common::command(&[
        "export",
        "-c",
        s.config.to_str().unwrap(),
        "-o",
        bundle.to_str().unwrap(),
        "--progress",
        "none",
    ])
    .spawn()
    .unwrap();
    // Wait until the tar has started (on the file's own growth, bounded), then kill it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::metadata(&partial).map_or(0, |m| m.len()) < 1024 * 1024 {
        assert!(
            std::time::Instant::now() < deadline,
            "the export never started writing"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the export ended before the kill"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    child.start_kill().unwrap();
    let _ = child.wait().await;
    assert!(!bundle.exists(), "a killed export leaves no bundle");
    // The next export takes the leftover over and completes.
    let out = export(&s.config, &bundle, &[]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(bundle.exists() && !partial.exists());
    assert!(
        entries(&bundle).iter().any(|(_, b)| b.len() == big.len()),
        "the big layer is in the finished bundle"
    );
}
