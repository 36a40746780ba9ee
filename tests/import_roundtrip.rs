//! `ferry export` → a file → `ferry import`, through the real binary and two real registries:
//! the target ends with the source's tags and digests, the weekly incremental bundle adds the
//! new tag, and that bundle alone on an empty registry fails naming its base.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{code, ferry, push_one_layer, text};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::fixtures::{ALL_TAGS, mirror_yaml};

async fn run(args: &[&str]) -> std::process::Output {
    let mut all = vec!["--progress", "none"];
    all.extend_from_slice(args);
    ferry(&all).await
}

/// Every tag of `repo` with its digest.
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
    let out = run(&["import", s(&weekly), "-c", s(&config)]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(tags(&dst, "mirror/one").await, tags(&src, "apps/one").await);
    assert_eq!(tags(&dst, "mirror/one").await.len(), 3);

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
