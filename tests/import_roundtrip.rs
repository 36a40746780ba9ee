//! `ferry export` → a file → `ferry import`, through the real binary and two real registries:
//! the target ends with the source's tags and digests, the weekly incremental bundle adds the
//! new tag, and that bundle alone on an empty registry fails naming its base.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{code, ferry, push_one_layer, text, write_config};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::fixtures::{ALL_TAGS, mirror_yaml};

async fn run(args: &[&str]) -> std::process::Output {
    let mut all = vec!["--progress", "none"];
    all.extend_from_slice(args);
    ferry(&all).await
}

/// Every tag of `repo` with its digest.
/// `ferry --progress none ARGS…` with `stdin` fed to its standard input.
async fn import_stdin(args: &[&str], stdin: Vec<u8>) -> std::process::Output {
    use tokio::io::AsyncWriteExt as _;
    let mut all = vec!["--progress", "none"];
    all.extend_from_slice(args);
    let mut child = common::command(&all)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ferry runs");
    let mut pipe = child.stdin.take().unwrap();
    let feed = tokio::spawn(async move {
        let _ = pipe.write_all(&stdin).await;
    });
    let out = child.wait_with_output().await.expect("ferry ran");
    feed.await.unwrap();
    out
}

async fn tags(c: &RegistryClient, repo: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for tag in c.list_tags(repo).await.unwrap_or_default() {
        let m = c.head_manifest(repo, &tag).await.unwrap().unwrap();
        out.insert(tag, m.digest.to_string());
    }
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_imported_leaves_the_target_as_the_source_and_the_weekly_bundle_needs_its_base() {
    let Some(source) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let target = RealRegistry::start().await.expect("registry");
    let empty = RealRegistry::start().await.expect("registry");
    let src = RegistryClient::new(RegistryOptions::insecure_at(&source.url())).unwrap();
    let dst = RegistryClient::new(RegistryOptions::insecure_at(&target.url())).unwrap();
    let other = RegistryClient::new(RegistryOptions::insecure_at(&empty.url())).unwrap();
    let base_layer = ferry_testkit::noise(41, 300_000);
    for (tag, seed) in [("1.0", 1), ("1.1", 2)] {
        let config = format!(r#"{{"os":"linux","architecture":"amd64","n":{seed}}}"#);
        push_one_layer(&src, "apps/one", tag, &config, &base_layer).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let registries = mirror_yaml().registries(&[&source, &target, &empty], &[]);
    let config = registries
        .clone()
        .mapping(
            format!("{}/apps/one", source.host()),
            &[format!("{}/mirror/one", target.host())],
            &[ALL_TAGS],
        )
        .write(dir.path());
    let full = dir.path().join("full.tar");
    let out = run(&["export", "-c", s(&config), "-o", s(&full)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));

    // The site config is the same file: its mappings are not run, only its registries used.
    let out = run(&["import", s(&full), "-c", s(&config), "--json"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(tags(&dst, "mirror/one").await, tags(&src, "apps/one").await);

    // The same bundle (written head first) compressed and from a pipe, as `zstd -dc full.tar.zst
    // | ferry import -` gives it: every tag lands, with the source's digests.
    let piped_prefix = format!("{}/piped", empty.host());
    let zst = ruzstd::encoding::compress_to_vec(
        &std::fs::read(&full).unwrap()[..],
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    let out = import_stdin(
        &[
            "import",
            "-",
            "-c",
            s(&config),
            "--target-prefix",
            &piped_prefix,
        ],
        zst,
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(
        tags(&other, "piped/mirror/one").await,
        tags(&src, "apps/one").await
    );

    // A week later: one new tag, on the same layer. The incremental bundle leaves the layer
    // out; imported where the base went, the target again matches the source.
    let config_2 = r#"{"os":"linux","architecture":"amd64","n":3}"#;
    push_one_layer(&src, "apps/one", "2.0", config_2, &base_layer).await;
    let weekly = dir.path().join("weekly.tar");
    let out = run(&[
        "export",
        "-c",
        s(&config),
        "-o",
        s(&weekly),
        "--since",
        s(&full),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let layer =
        ferry_distribution::Digest::of_bytes(ferry_distribution::Algorithm::Sha256, &base_layer);
    let listing = std::process::Command::new("tar")
        .args(["tf", s(&weekly)])
        .output()
        .unwrap();
    assert!(
        !text(&listing.stdout).contains(layer.hex()),
        "the weekly bundle leaves the base's layer out"
    );
    // Alone on an empty registry it fails first, naming the base and the layer.
    let prefix = format!("{}/site", empty.host());
    let out = run(&[
        "import",
        s(&weekly),
        "-c",
        s(&config),
        "--target-prefix",
        &prefix,
    ])
    .await;
    let stderr = text(&out.stderr);
    assert_ne!(code(&out), 0, "{stderr}");
    assert!(
        stderr.contains("full.tar") && stderr.contains(&layer.to_string()),
        "{stderr}"
    );
    assert!(tags(&other, "site/mirror/one").await.is_empty());
    // The same from a pipe (read in one pass): alone it fails the same way; where the piped
    // full bundle went, the left-out layer is found there and every tag lands.
    let piped_alone = format!("{}/piped-alone", empty.host());
    let args = [
        "import",
        "-",
        "-c",
        s(&config),
        "--target-prefix",
        &piped_alone,
    ];
    let out = import_stdin(&args, std::fs::read(&weekly).unwrap()).await;
    let stderr = text(&out.stderr);
    assert_ne!(code(&out), 0, "{stderr}");
    assert!(stderr.contains("nothing was spooled"), "{stderr}");
    assert!(
        stderr.contains("full.tar") && stderr.contains(&layer.to_string()),
        "{stderr}"
    );
    assert!(tags(&other, "piped-alone/mirror/one").await.is_empty());
    let args = [
        "import",
        "-",
        "-c",
        s(&config),
        "--target-prefix",
        &piped_prefix,
    ];
    let out = import_stdin(&args, std::fs::read(&weekly).unwrap()).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(
        tags(&other, "piped/mirror/one").await,
        tags(&src, "apps/one").await
    );
    assert_eq!(tags(&other, "piped/mirror/one").await.len(), 3);
    let out = run(&["import", s(&weekly), "-c", s(&config)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(tags(&dst, "mirror/one").await, tags(&src, "apps/one").await);
    assert_eq!(tags(&dst, "mirror/one").await.len(), 3);

    // A week with nothing new: the bundle carries no image and its record lists every one as
    // its bases'. Imported where the bases went, each is accounted for and nothing fails.
    let quiet = dir.path().join("quiet.tar");
    let out = run(&[
        "export",
        "-c",
        s(&config),
        "-o",
        s(&quiet),
        "--since",
        s(&weekly),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = run(&["import", s(&quiet), "-c", s(&config)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(tags(&dst, "mirror/one").await, tags(&src, "apps/one").await);

    // What export -> file -> import left is what a direct sync leaves: a deep verify of the
    // config (every tag, manifest and blob on the target, read and checked) finds nothing, and a
    // direct sync of the same mapping into another registry holds the same tags and digests.
    let out = run(&["verify", "--deep", "-c", s(&config)]).await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));
    let direct_dir = tempfile::tempdir().unwrap();
    let direct = registries
        .mapping(
            format!("{}/apps/one", source.host()),
            &[format!("{}/direct/one", empty.host())],
            &[ALL_TAGS],
        )
        .write(direct_dir.path());
    let out = run(&["sync", "-c", s(&direct)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(
        tags(&dst, "mirror/one").await,
        tags(&other, "direct/one").await
    );
    for r in [source, target, empty] {
        r.stop().await.unwrap();
    }
}

/// Each logged request as `METHOD path?query status`, in the order logged: what a failed
/// comparison prints, so a mount (`?mount=…&from=…`) tells itself from an upload.
fn in_order(log: &ferry_testkit::distribution::AccessLog) -> Vec<String> {
    log.entries
        .iter()
        .map(|e| format!("{} {} {}", e.method, e.path, e.status))
        .collect()
}

/// Each logged request as `METHOD path` with digests and upload session ids folded, sorted:
/// what two runs of the same images into two registries can be compared by.
fn requests(log: &ferry_testkit::distribution::AccessLog) -> Vec<String> {
    let mut out: Vec<String> = log
        .entries
        .iter()
        .map(|e| {
            let path = e.path.split('?').next().unwrap_or_default();
            // An upload session's id is the registry's: fold it.
            let path = match path.find("/blobs/uploads/") {
                Some(i) => format!("{}/blobs/uploads/…", &path[..i]),
                None => path.to_owned(),
            };
            format!("{} {path}", e.method)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_sends_the_target_no_more_requests_than_a_direct_sync_of_the_same_images() {
    let Some(source) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let imported = RealRegistry::start().await.expect("registry");
    let synced = RealRegistry::start().await.expect("registry");
    let src = RegistryClient::new(RegistryOptions::insecure_at(&source.url())).unwrap();
    // Two repositories sharing a layer, one of them with two tags.
    let layer = ferry_testkit::noise(43, 200_000);
    for (repo, tag, seed) in [
        ("apps/one", "1.0", 1),
        ("apps/one", "1.1", 2),
        ("apps/two", "2.0", 3),
    ] {
        let config = format!(r#"{{"os":"linux","architecture":"amd64","n":{seed}}}"#);
        push_one_layer(&src, repo, tag, &config, &layer).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let registries = [&source, &imported, &synced]
        .iter()
        .map(|r| {
            format!(
                "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n",
                r.host(),
                r.url()
            )
        })
        .collect::<String>();
    let mappings = |to: &RealRegistry| {
        format!(
            "  - source: {src}/apps/one\n    targets: [{to}/mirror/one]\n    tags: {{ include: [\"*\"] }}\n  - source: {src}/apps/two\n    targets: [{to}/mirror/two]\n    tags: {{ include: [\"*\"] }}\n",
            src = source.host(),
            to = to.host()
        )
    };
    let export_config = write_config(dir.path(), &registries, &mappings(&imported));
    let bundle = dir.path().join("bundle.tar");
    let out = run(&["export", "-c", s(&export_config), "-o", s(&bundle)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let sync_dir = tempfile::tempdir().unwrap();
    let sync_config = write_config(sync_dir.path(), &registries, &mappings(&synced));

    let out = run(&["import", s(&bundle), "-c", s(&export_config)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = run(&["sync", "-c", s(&sync_config)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));

    let import_log = imported.access_log().await.unwrap();
    let sync_log = synced.access_log().await.unwrap();
    let (by_import, by_sync) = (requests(&import_log), requests(&sync_log));
    // Both put the same three images there: three manifests each, and the blobs (one shared
    // layer, three configs) pushed at least once.
    assert_eq!(
        by_import
            .iter()
            .filter(|r| r.starts_with("PUT ") && r.contains("/manifests/"))
            .count(),
        3,
        "{by_import:#?}"
    );
    assert_eq!(
        by_sync
            .iter()
            .filter(|r| r.starts_with("PUT ") && r.contains("/manifests/"))
            .count(),
        3,
        "{by_sync:#?}"
    );
    assert!(
        by_import.len() <= by_sync.len(),
        "the import sent {} requests, the direct sync {}, in order with query and status:\nimport {:#?}\nsync {:#?}",
        by_import.len(),
        by_sync.len(),
        in_order(&import_log),
        in_order(&sync_log)
    );
    let dst = RegistryClient::new(RegistryOptions::insecure_at(&imported.url())).unwrap();
    let other = RegistryClient::new(RegistryOptions::insecure_at(&synced.url())).unwrap();
    for repo in ["mirror/one", "mirror/two"] {
        assert_eq!(tags(&dst, repo).await, tags(&other, repo).await);
        assert!(!tags(&dst, repo).await.is_empty());
    }
    for r in [source, imported, synced] {
        r.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weekly_bundle_alone_accounts_for_every_image_its_record_lists_and_names_its_base() {
    let Some(source) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let target = RealRegistry::start().await.expect("registry");
    let src = RegistryClient::new(RegistryOptions::insecure_at(&source.url())).unwrap();
    let dst = RegistryClient::new(RegistryOptions::insecure_at(&target.url())).unwrap();
    for (repo, seed) in [("apps/one", 1), ("apps/two", 2)] {
        let config = format!(r#"{{"os":"linux","architecture":"amd64","n":{seed}}}"#);
        push_one_layer(
            &src,
            repo,
            "1.0",
            &config,
            &ferry_testkit::noise(seed, 50_000),
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = mirror_yaml().registries(&[&source, &target], &[]);
    for repo in ["one", "two"] {
        yaml = yaml.mapping(
            format!("{}/apps/{repo}", source.host()),
            &[format!("{}/mirror/{repo}", target.host())],
            &[ALL_TAGS],
        );
    }
    let config = yaml.write(dir.path());
    let full = dir.path().join("bundle-full.tar");
    let out = run(&["export", "-c", s(&config), "-o", s(&full)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    // A week later: one new tag with a new layer; the weekly bundle records the two old images
    // as unchanged (their roots are the full bundle's) and carries only the new one.
    let config_3 = r#"{"os":"linux","architecture":"amd64","n":3}"#;
    push_one_layer(
        &src,
        "apps/one",
        "2.0",
        config_3,
        &ferry_testkit::noise(3, 50_000),
    )
    .await;
    let weekly = dir.path().join("weekly-49.tar");
    let out = run(&[
        "export",
        "-c",
        s(&config),
        "-o",
        s(&weekly),
        "--since",
        s(&full),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));

    // Alone on the empty target: the new tag goes in, and each image the record lists from
    // the base fails naming bundle-full.tar and its missing root; the run is not clean.
    let out = run(&["import", s(&weekly), "-c", s(&config), "--json"]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_ne!(code(&out), 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // A refused image fails its one-image mapping before it is resolved.
    let failed: Vec<String> = report["failed_mappings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.to_string())
        .collect();
    assert_eq!(failed.len(), 2, "the two base images fail: {stdout}");
    for (repo, row) in ["one", "two"].iter().zip(&failed) {
        let root = src
            .head_manifest(&format!("apps/{repo}"), "1.0")
            .await
            .unwrap()
            .unwrap()
            .digest;
        assert!(row.contains("bundle-full.tar"), "{row}");
        assert!(
            row.contains("manifest GET"),
            "a missing root is a manifest: {row}"
        );
        assert!(row.contains(&root.to_string()), "{row}");
    }
    assert!(
        dst.head_manifest("mirror/one", "2.0")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        dst.head_manifest("mirror/one", "1.0")
            .await
            .unwrap()
            .is_none()
    );

    // ferry verify --bundle says the same, read-only: two tags missing, exit 1.
    let before = target.access_log().await.unwrap();
    let out = run(&["verify", "--bundle", s(&weekly), "-c", s(&config), "--json"]).await;
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    let audit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(audit["verdict"], "incomplete");
    assert_eq!(audit["totals"]["missing"], 2, "{audit}");
    assert_eq!(audit["totals"]["checked"], 3, "{audit}");
    let after = target.access_log().await.unwrap();
    for method in ["PUT", "POST", "PATCH", "DELETE"] {
        assert_eq!(
            after.count(method, "/"),
            before.count(method, "/"),
            "{method}"
        );
    }

    // With its base imported first, the weekly bundle tags nothing new and leaves the target
    // as the source.
    let out = run(&["import", s(&full), "-c", s(&config)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = run(&["import", s(&weekly), "-c", s(&config)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(tags(&dst, "mirror/one").await, tags(&src, "apps/one").await);
    assert_eq!(tags(&dst, "mirror/two").await, tags(&src, "apps/two").await);
    let verify = [
        "verify",
        "--bundle",
        s(&weekly),
        "--since",
        s(&full),
        "-c",
        s(&config),
    ];
    let out = run(&verify).await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        text(&out.stdout).contains("complete"),
        "{}",
        text(&out.stdout)
    );
    // A --since bundle's images are checked too: the full bundle's two and the weekly's new tag.
    let chain = [
        "verify",
        "--bundle",
        s(&full),
        "--since",
        s(&weekly),
        "-c",
        s(&config),
        "--json",
    ];
    let out = run(&chain).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let audit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(audit["totals"]["checked"], 3, "{audit}");
    // A tag the base describes, moved on the site, is drifted.
    push_one_layer(&dst, "mirror/two", "1.0", r#"{"n":9}"#, b"moved").await;
    let out = run(&verify).await;
    assert_eq!(code(&out), 1, "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("DRIFTED"),
        "{}",
        text(&out.stdout)
    );
    source.stop().await.unwrap();
    target.stop().await.unwrap();
}
