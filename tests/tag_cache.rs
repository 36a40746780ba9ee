//! `ferry sync`'s tag cache through the binary: a warm run asks the target about no tag,
//! `--no-cache` asks about each, and a damaged cache file is a warning, never a failure.

mod common;

use std::path::{Path, PathBuf};

use common::{code, ferry, text};
use ferry_testkit::fixtures::{QUICK_RETRY, mirror_yaml};
use ferry_testkit::registry::{OpKind, TestRegistry};

/// Manifest HEADs the registry answered on `repo` since its stats were reset.
fn heads(reg: &TestRegistry, repo: &str) -> usize {
    reg.requests()
        .into_iter()
        .filter(|r| r.op == OpKind::ManifestHead && r.path.starts_with(&format!("/v2/{repo}/")))
        .count()
}

async fn sync(config: &Path, extra: &[&str]) -> String {
    let mut args = vec!["sync", "-c", config.to_str().unwrap(), "--progress", "none"];
    args.extend_from_slice(extra);
    let out = ferry(&args).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 0, "{err}");
    err
}

/// The cache files under the config's default state directory (`<config>.state`).
fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let state = entry.unwrap().path();
        let cache = state.join("tag-cache");
        if state.to_string_lossy().ends_with(".state") && cache.is_dir() {
            for f in std::fs::read_dir(cache).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "json") {
                    files.push(f);
                }
            }
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_sync_asks_the_target_nothing_and_no_cache_asks_it_everything() {
    let reg = TestRegistry::builder().start().await.unwrap();
    for tag in ["v1", "v2", "v3"] {
        reg.seed_image("src/app", tag, &[tag.as_bytes()]);
    }
    let dir = tempfile::tempdir().unwrap();
    let config = mirror_yaml()
        .registry(&reg, &[QUICK_RETRY])
        .within(
            &reg.host(),
            "src/app",
            "dst/app",
            &["tags: { include: [\"v*\"] }"],
        )
        .write(dir.path());
    let cold = sync(&config, &[]).await;
    assert!(cold.contains("3 synced"), "{cold}");
    assert_eq!(
        cache_files(dir.path()).len(),
        1,
        "one file for the one target registry"
    );

    reg.reset_stats();
    let warm = sync(&config, &[]).await;
    assert!(warm.contains("0 synced, 3 up to date"), "{warm}");
    assert_eq!(heads(&reg, "dst/app"), 0, "the cache vouches for every tag");
    assert_eq!(heads(&reg, "src/app"), 3, "the source's HEAD per tag");

    reg.reset_stats();
    sync(&config, &["--no-cache"]).await;
    assert_eq!(heads(&reg, "dst/app"), 3, "--no-cache asks the target");

    // A damaged file: a warning naming it, every tag asked, the run clean, the file rewritten.
    for f in cache_files(dir.path()) {
        std::fs::write(&f, b"\x00not a cache").unwrap();
    }
    reg.reset_stats();
    let damaged = sync(&config, &[]).await;
    assert!(damaged.contains("tag cache file ignored"), "{damaged}");
    assert_eq!(heads(&reg, "dst/app"), 3);
    reg.reset_stats();
    sync(&config, &[]).await;
    assert_eq!(
        heads(&reg, "dst/app"),
        0,
        "rewritten by the run that ignored it"
    );
}
