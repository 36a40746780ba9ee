//! `ferry convert` through the binary (issue 40): a regsync.yml and a `skopeo sync --src yaml`
//! file, shaped as their documentation shows them, convert into configs that `ferry validate`
//! accepts and that mirror, against the real distribution registry, the tags regsync's and
//! skopeo's rules select (for skopeo, compared with a real `skopeo sync` of the same file).
//!
//! Samples: regclient/regclient docs/examples/regsync.yml (creds with `tls: disabled`,
//! `defaults.parallel`/`interval`, sync entries of type image and repository with `tags.allow`,
//! here with a `deny` too) and containers/skopeo docs/skopeo-sync.1.md's YAML example (images
//! with none, some tags and a digest, images-by-tag-regex, images-by-semver, tls-verify), their
//! registry replaced by the test's.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::{code, ferry, push_one_layer, text};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;

async fn seed(client: &RegistryClient, repo: &str, tags: &[&str]) {
    for tag in tags {
        let config =
            format!(r#"{{"architecture":"amd64","os":"linux","ferry-test":"{repo}:{tag}"}}"#);
        push_one_layer(
            client,
            repo,
            tag,
            &config,
            format!("{repo} {tag}").as_bytes(),
        )
        .await;
    }
}

async fn tags(client: &RegistryClient, repo: &str) -> BTreeSet<String> {
    client
        .list_tags_or_empty(repo)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

fn set(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// `ferry convert ARGS` into `dir/mirror.yaml`, validated; returns the config's text.
async fn convert(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut all = vec!["--progress", "none", "convert"];
    all.extend_from_slice(args);
    let out = ferry(&all).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    assert!(
        text(&out.stderr).contains("notes to read"),
        "{}",
        text(&out.stderr)
    );
    let path = dir.join("mirror.yaml");
    std::fs::write(&path, &yaml).unwrap();
    let out = common::ferry_env(&["validate", path.to_str().unwrap()], env).await;
    assert_eq!(code(&out), 0, "{yaml}\n{}", text(&out.stderr));
    yaml
}

async fn sync(dir: &Path) {
    let path = dir.join("mirror.yaml");
    let out = ferry(&["--progress", "none", "sync", "-c", path.to_str().unwrap()]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regsync_yml_converts_into_a_config_that_mirrors_the_tags_regsync_selects() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let reg = registry.host();
    seed(&client, "src/busybox", &["latest", "1.36"]).await;
    seed(
        &client,
        "src/alpine",
        &["latest", "3", "3.18", "3.19", "3.19.1", "3x5", "edge"],
    )
    .await;
    let regsync = format!(
        r#"version: 1
creds:
  - registry: {reg}
    tls: disabled
defaults:
  parallel: 2
  interval: 60m
  backup: "bkup-{{{{.Ref.Tag}}}}"
sync:
  - source: {reg}/src/busybox:latest
    target: {reg}/mirror/busybox:latest
    type: image
  - source: {reg}/src/alpine
    target: {reg}/mirror/alpine
    type: repository
    tags:
      allow:
      - "latest"
      - "3"
      - "3.\\d+"
      deny:
      - "3.18"
    mediaTypes:
      - "application/vnd.oci.image.manifest.v1+json"
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("regsync.yml");
    std::fs::write(&file, regsync).unwrap();
    let yaml = convert(dir.path(), &["regsync", file.to_str().unwrap()], &[]).await;
    // What has no exact equivalent is said where it was.
    assert!(
        yaml.contains("# ferry convert: regsync `defaults.backup`"),
        "{yaml}"
    );
    assert!(
        yaml.contains("regsync `mediaTypes` has no ferry equivalent"),
        "{yaml}"
    );
    assert!(yaml.contains("images_in_flight: 2"), "{yaml}");
    // The dry run names the deny regex that dropped a tag.
    let path = dir.path().join("mirror.yaml");
    let out = ferry(&[
        "--progress",
        "none",
        "sync",
        "--dry-run",
        "-c",
        path.to_str().unwrap(),
    ])
    .await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.lines()
            .any(|l| l.contains("3.18") && l.contains("denied by regex \"^(?:3.18)$\"")),
        "{said}"
    );
    sync(dir.path()).await;
    // regsync's rule: allow and deny anchored (^…$), `.` any character; an image entry copies
    // its one tag.
    assert_eq!(tags(&client, "mirror/busybox").await, set(&["latest"]));
    assert_eq!(
        tags(&client, "mirror/alpine").await,
        set(&["latest", "3", "3.19", "3x5"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skopeo_sync_file_converts_into_a_config_that_mirrors_what_skopeo_sync_copies() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let reg = registry.host();
    seed(&client, "busybox", &["1-glibc", "1-musl", "latest"]).await;
    seed(&client, "redis", &["1.0", "2.0", "3.0"]).await;
    seed(
        &client,
        "nginx",
        &[
            "1.13.1-alpine-perl",
            "1.13.2-alpine-perl",
            "1.13.3-alpine-perl",
            "1.13.1",
        ],
    )
    .await;
    seed(
        &client,
        "alpine",
        &[
            "3.11",
            "3.12.0",
            "3.12",
            "3.19.1",
            "4.0.0",
            "3.13.0-rc1",
            "latest",
        ],
    )
    .await;
    let redis_3 = client
        .get_manifest("redis", "3.0")
        .await
        .unwrap()
        .digest
        .to_string();
    let sync_yml = format!(
        r#"{reg}:
    images:
        busybox: []
        redis:
            - "1.0"
            - "2.0"
            - "{redis_3}"
    images-by-tag-regex:
        nginx: ^1\.13\.[12]-alpine-perl$
    images-by-semver:
        alpine: ">= 3.12.0"
    tls-verify: false
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sync.yml");
    std::fs::write(&file, sync_yml).unwrap();
    let dest = format!("{reg}/ferry");
    let yaml = convert(
        dir.path(),
        &[
            "skopeo-sync",
            file.to_str().unwrap(),
            "--dest",
            &dest,
            "--dest-tls-verify=false",
        ],
        &[],
    )
    .await;
    assert!(yaml.contains("without --all copies only"), "{yaml}");
    sync(dir.path()).await;

    // skopeo-sync(1)'s own account of that example.
    let expected = [
        ("busybox", set(&["1-glibc", "1-musl", "latest"])),
        ("redis", set(&["1.0", "2.0"])),
        ("nginx", set(&["1.13.1-alpine-perl", "1.13.2-alpine-perl"])),
        ("alpine", set(&["3.12", "3.12.0", "3.19.1", "4.0.0"])),
    ];
    for (repo, want) in &expected {
        assert_eq!(
            &tags(&client, &format!("ferry/{repo}")).await,
            want,
            "{repo}"
        );
    }
    // The digest entry arrives by digest (no tag), as skopeo copies it.
    assert!(
        client.get_manifest("ferry/redis", &redis_3).await.is_ok(),
        "redis by digest"
    );

    // The real skopeo sync of the same file, into another prefix: the same tags.
    let skopeo = tokio::process::Command::new("skopeo")
        .args([
            "sync",
            "--src",
            "yaml",
            "--dest",
            "docker",
            "--dest-tls-verify=false",
            file.to_str().unwrap(),
            &format!("{reg}/skopeo"),
        ])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), skopeo)
        .await
        .expect("skopeo sync finishes within two minutes")
        .expect("skopeo runs (scripts/test installs it when missing)");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // images-by-semver came in skopeo 1.15.0 (containers/skopeo 177d4adb2); an older skopeo
    // ignores the key, so its alpine is compared with skopeo-sync(1)'s account above only.
    let version = tokio::process::Command::new("skopeo")
        .arg("--version")
        .output()
        .await
        .map(|o| text(&o.stdout))
        .unwrap_or_default();
    let semver_known = version
        .split_whitespace()
        .nth(2)
        .and_then(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
            Some((parts.next()?, parts.next()?))
        })
        .is_some_and(|v| v >= (1, 15));
    for (repo, _) in &expected {
        if *repo == "alpine" && !semver_known {
            eprintln!(
                "{version}: before images-by-semver (1.15.0); alpine compared with the man page only"
            );
            continue;
        }
        assert_eq!(
            tags(&client, &format!("skopeo/{repo}")).await,
            tags(&client, &format!("ferry/{repo}")).await,
            "{repo}: skopeo sync and the converted config disagree"
        );
    }
}

#[tokio::test]
async fn a_file_that_is_not_the_format_named_is_exit_3_and_prints_no_config() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.yml");
    std::fs::write(&file, "- just\n- a list\n").unwrap();
    for args in [
        vec!["convert", "regsync", file.to_str().unwrap()],
        vec![
            "convert",
            "skopeo-sync",
            file.to_str().unwrap(),
            "--dest",
            "r.io/x",
        ],
    ] {
        let out = ferry(&args).await;
        assert_eq!(code(&out), 3, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            text(&out.stderr).starts_with("error: "),
            "{}",
            text(&out.stderr)
        );
    }
    let out = ferry(&["convert", "skopeo-sync", file.to_str().unwrap()]).await;
    assert_eq!(code(&out), 64, "--dest is required");
}

#[tokio::test]
async fn one_validate_run_lists_the_four_mistakes_with_did_you_mean() {
    // The issue's newcomer config, and a regsync file given to validate as it is.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mirror.yaml");
    std::fs::write(
        &path,
        "version: 1\ntarget_groups:\n  mirrors: [\"registry.local:5000/mirror\"]\nmappings:\n  - source: docker.io/library/alpine\n    target: [\"registry.local:5000/alpine\"]\n  - source: docker.io/library/busybox\n    targets: [\"registry.local:5000/busybox\"]\n    tagz: { latest: 2 }\n    digests: [\"sha256:1234\"]\n  - source: docker.io/library/nginx\n    target_group: mirorrs\n",
    )
    .unwrap();
    let out = ferry(&["validate", path.to_str().unwrap()]).await;
    assert_eq!(code(&out), 3);
    let said = text(&out.stderr);
    for needle in [
        "mirror.yaml:6:5: mappings[0] (source docker.io/library/alpine): unknown field `target`: did you mean `targets`?",
        "mirror.yaml:9:5: mappings[1] (source docker.io/library/busybox): unknown field `tagz`: did you mean `tags`?",
        "mirror.yaml:10:15: mappings[1] (source docker.io/library/busybox): digests[0]",
        "mirror.yaml:12:19: mappings[2] (source docker.io/library/nginx): target_group: unknown target group \"mirorrs\"",
    ] {
        assert!(said.contains(needle), "{needle}\n{said}");
    }
    std::fs::write(&path, "version: 1\ncreds: []\nsync: []\n").unwrap();
    let out = ferry(&["validate", path.to_str().unwrap()]).await;
    assert!(
        text(&out.stderr)
            .contains("unknown field `creds`: regsync's spelling; ferry's is `registries`"),
        "{}",
        text(&out.stderr)
    );
}

// A file whose every entry is refused says why in the error itself (nothing else is printed),
// with the foreign names escaped: no terminal escape or line break from the file reaches stderr.
#[tokio::test]
async fn nothing_convertible_says_why_with_the_files_text_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.yml");
    std::fs::write(
        &file,
        "version: 1\nsync:\n  - source: \"quay.io/../etc/\\x1b[31mred\"\n    target: \"mirror.local/a\\nb: c\"\n    type: repository\n",
    )
    .unwrap();
    let out = ferry(&["convert", "regsync", file.to_str().unwrap()]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 3, "{stderr}");
    assert!(out.stdout.is_empty(), "{stderr}");
    assert!(
        stderr.contains("sync[0]") && stderr.contains("is not a reference ferry reads"),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr:?}");
}
