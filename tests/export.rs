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
/// and copies each with the digest the source has; `tar tf` order starts with the record; the
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
    assert!(
        stderr.contains("wrote  ") && stderr.contains("6 images in index.json"),
        "the summary names the bundle: {stderr}"
    );

    // Head first: oci-layout, index.json and ferry-bundle.json, then every manifest (each
    // image's root before what it names), then the other blobs, so one pass over a pipe knows
    // every image before its first blob.
    let list = entries(&bundle);
    let names: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        &names[..3],
        ["oci-layout", "index.json", "ferry-bundle.json"],
        "{names:?}"
    );
    let is_manifest = |bytes: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(bytes)
            .is_ok_and(|v| v.get("layers").is_some() || v.get("manifests").is_some())
    };
    let kinds: Vec<bool> = list
        .iter()
        .filter(|(n, _)| n.starts_with("blobs/sha256/") && n.len() > 14)
        .map(|(_, b)| is_manifest(b))
        .collect();
    assert_eq!(kinds.iter().filter(|m| **m).count(), 6, "{names:?}");
    assert!(
        kinds.iter().take(6).all(|m| *m),
        "the six manifests come before every other blob: {names:?}"
    );
    let blobs = names
        .iter()
        .filter(|n| n.starts_with("blobs/sha256/") && n.len() > 14);
    // 6 images x (manifest, config, layer).
    assert_eq!(blobs.count(), 18, "{names:?}");
    // One pass over it, as over a pipe: the head holds the record and all six manifests, then
    // each of the twelve other blobs streams checked against its name.
    let one_pass = ferry_store::archive::stream::open(std::fs::File::open(&bundle).unwrap());
    let Ok(ferry_store::archive::stream::Opened::Bundle(head, mut body)) = one_pass else {
        panic!("the export is a head-first bundle to a one-pass reader");
    };
    assert_eq!(head.manifests.len(), 6);
    assert!(head.signature.is_none() && !head.record.is_empty());
    let mut streamed = 0;
    while let Some(mut blob) = body.next_blob().unwrap() {
        std::io::copy(&mut blob, &mut std::io::sink()).expect("each blob is its digest");
        streamed += 1;
    }
    assert_eq!(streamed, 12);
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
    // A dry run says what the bundle would carry and writes nothing.
    let dry = s.dir.path().join("dry.tar");
    let out = export(
        &s.config,
        &dry,
        &["--since", full.to_str().unwrap(), "--dry-run"],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(!dry.exists() && !s.dir.path().join("dry.tar.partial").exists());

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

/// `ferry export -o NAME` as the docs write it, run from `cwd`: a bare file name, relative to
/// the working directory.
fn export_in(cwd: &Path, config: &Path, name: &str) -> tokio::process::Command {
    let mut c = common::command(&[
        "export",
        "-c",
        config.to_str().unwrap(),
        "-o",
        name,
        "--progress",
        "none",
    ]);
    c.current_dir(cwd);
    c
}

/// A bundle named by a bare file name (`-o bundle-full.tar`, docs/airgap.md) and killed part
/// way (SIGKILL) leaves nothing at that name nor its `.json`: only its `.partial`, which the
/// next export (the same bare name, from the same directory) takes over and replaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_to_a_bare_name_killed_part_way_leaves_no_bundle() {
    let Some(s) = setup().await else { return };
    // A big layer so the kill lands while it streams.
    let big: Vec<u8> = (0..192u32 * 1024 * 1024)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    common::push_one_layer(&s.client, "apps/one", "big", r#"{"os":"linux"}"#, &big).await;
    let cwd = tempfile::tempdir().unwrap();
    let bundle = cwd.path().join("bundle-full.tar");
    let beside = cwd.path().join("bundle-full.tar.json");
    let partial = cwd.path().join("bundle-full.tar.partial");
    let mut child = export_in(cwd.path(), &s.config, "bundle-full.tar")
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
    let status = child.wait().await.unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "killed by SIGKILL"
    );
    assert!(!bundle.exists(), "a killed export leaves no bundle");
    assert!(!beside.exists(), "a killed export leaves no record beside");
    // The next export takes the leftover over and completes, at the bare name.
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        export_in(cwd.path(), &s.config, "bundle-full.tar").output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(bundle.exists() && !partial.exists());
    assert!(
        entries(&bundle).iter().any(|(_, b)| b.len() == big.len()),
        "the big layer is in the finished bundle"
    );
    let beside: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&beside).unwrap()).unwrap();
    assert_eq!(
        beside,
        record(&bundle),
        "the record beside is the one inside"
    );
    let mut names: Vec<String> = std::fs::read_dir(cwd.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["bundle-full.tar", "bundle-full.tar.json"]);
}

/// An export whose record beside cannot be written (a directory holds `NAME.json`) fails and
/// leaves nothing at NAME: the tar renamed a moment before is taken back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_whose_record_beside_fails_leaves_no_bundle() {
    let Some(s) = setup().await else { return };
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir(cwd.path().join("bundle-full.tar.json")).unwrap();
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        export_in(cwd.path(), &s.config, "bundle-full.tar").output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("bundle-full.tar"),
        "{}",
        text(&out.stderr)
    );
    let names: Vec<String> = std::fs::read_dir(cwd.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["bundle-full.tar.json"],
        "only the planted directory"
    );
}

/// An export in which every image fails (the source refuses connections) exits 2 and leaves
/// nothing at NAME nor NAME.json (commands.md: "nothing is left at BUNDLE").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_where_everything_fails_leaves_no_bundle() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host = format!("127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let cwd = tempfile::tempdir().unwrap();
    let config = write_config(
        cwd.path(),
        &format!("  - host: \"{host}\"\n    insecure: true\n    retry: {{ attempts: 1 }}\n"),
        &format!(
            "  - source: {host}/apps/one\n    targets: [registry.internal/mirror/one]\n    tags: {{ include: [\"*\"] }}\n"
        ),
    );
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        export_in(cwd.path(), &config, "bundle-full.tar").output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    let names: Vec<String> = std::fs::read_dir(cwd.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["mirror.yaml"], "nothing but the config");
}

/// `oci-archive:` as a target outside an export: `ferry copy SRC oci-archive:FILE:REF` names the
/// image REF (as skopeo does), a mapping's `oci-archive:FILE` names each image by its tag; both
/// are plain archives (no bundle record) that skopeo reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oci_archive_target_of_copy_and_of_a_mapping_is_what_skopeo_reads() {
    let Some(s) = setup().await else { return };
    let one = s.dir.path().join("one.tar");
    let source = format!("{}/apps/one:1.0", s.real.host());
    let target = format!("oci-archive:{}:myimage", one.display());
    let out = ferry(&["copy", &source, &target, "--insecure", "--progress", "none"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let inspected = skopeo(&["inspect", "--raw", &target]);
    assert!(inspected.status.success(), "{}", text(&inspected.stderr));
    let digest = ferry_distribution::Digest::of_bytes(
        ferry_distribution::Algorithm::Sha256,
        &inspected.stdout,
    );
    let at_source = s
        .client
        .head_manifest("apps/one", "1.0")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(digest, at_source.digest);

    let two = s.dir.path().join("two.tar");
    let registries = format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n",
        s.real.host(),
        s.real.url()
    );
    let mappings = format!(
        "  - source: {}/apps/two\n    targets: [\"oci-archive:{}\"]\n    tags: {{ include: [\"*\"] }}\n",
        s.real.host(),
        two.display()
    );
    let own = s.dir.path().join("plain");
    std::fs::create_dir(&own).unwrap();
    let cfg = write_config(&own, &registries, &mappings);
    let out = ferry(&["sync", "-c", cfg.to_str().unwrap(), "--progress", "none"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    for tag in TAGS {
        let at = format!("oci-archive:{}:{tag}", two.display());
        let inspected = skopeo(&["inspect", "--raw", &at]);
        assert!(
            inspected.status.success(),
            "{tag}: {}",
            text(&inspected.stderr)
        );
    }
    assert!(
        !entries(&two).iter().any(|(n, _)| n == "ferry-bundle.json"),
        "a plain archive carries no bundle record"
    );
    // A verify does not read an archive back: it says so, and fails.
    let out = ferry(&["verify", "-c", cfg.to_str().unwrap(), "--progress", "none"]).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_ne!(code(&out), 0, "{said}");
    assert!(said.contains("does not read oci-archive targets"), "{said}");
}
