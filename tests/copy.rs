//! `ferry copy` through the real binary against the real registry: `--all-tags` (with
//! `--include`), a retag's report naming the source's tag, and messages that name the copy.

mod common;

use common::{code, ferry, text};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use serde_json::Value;

/// `ferry --progress none copy ARGS… --src-tls-verify=false --dest-tls-verify=false`.
async fn copy(args: &[&str]) -> std::process::Output {
    let mut all = vec!["--progress", "none", "copy"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--src-tls-verify=false", "--dest-tls-verify=false"]);
    ferry(&all).await
}

async fn tags(c: &RegistryClient, repo: &str) -> Vec<String> {
    let mut t = c.list_tags(repo).await.unwrap_or_default();
    t.sort();
    t
}

async fn seed(c: &RegistryClient, repo: &str, tags: &[&str]) {
    for (i, tag) in tags.iter().enumerate() {
        let layer = ferry_testkit::noise(i as u64 + 1, 4_000);
        let d = ferry_distribution::Digest::of_bytes(ferry_distribution::Algorithm::Sha256, &layer);
        c.push_blob_bytes(repo, &d, layer.clone().into())
            .await
            .unwrap();
        let config = format!(r#"{{"architecture":"amd64","os":"linux","n":{i}}}"#).into_bytes();
        let cd =
            ferry_distribution::Digest::of_bytes(ferry_distribution::Algorithm::Sha256, &config);
        c.push_blob_bytes(repo, &cd, config.clone().into())
            .await
            .unwrap();
        let doc = serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd.to_string(), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d.to_string(), "size": layer.len()}]});
        let bytes = serde_json::to_vec(&doc).unwrap();
        let m = ferry_distribution::ops::Manifest {
            digest: ferry_distribution::Digest::of_bytes(
                ferry_distribution::Algorithm::Sha256,
                &bytes,
            ),
            bytes: bytes.into(),
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
        };
        c.put_manifest(repo, tag, &m).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_all_tags_copies_every_tag_or_those_include_selects() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let host = registry.host();
    seed(&c, "src/app", &["1.0", "1.1", "2.0"]).await;

    let src = format!("{host}/src/app");
    let out = copy(&[
        "--all-tags",
        "--include",
        "1.*",
        &src,
        &format!("{host}/some/app"),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(tags(&c, "some/app").await, ["1.0", "1.1"]);

    let out = copy(&[
        "--all-tags",
        &src,
        &format!("docker://{host}/all/app"),
        "--json",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(tags(&c, "all/app").await, ["1.0", "1.1", "2.0"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["totals"]["images_synced"], 3, "{report:#}");
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("synced  {src}:2.0 -> {host}/all/app")),
        "{err}"
    );

    // Into a layout, then again: every tag up to date.
    let dir = tempfile::tempdir().unwrap();
    let layout = format!("oci:{}", dir.path().join("lay").display());
    for synced in [3, 0] {
        let out = copy(&["--all-tags", &src, &layout, "--json"]).await;
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["totals"]["images_synced"], synced, "{report:#}");
        assert_eq!(
            report["totals"]["images_up_to_date"],
            3 - synced,
            "{report:#}"
        );
    }

    // A tag on either side is refused (exit 64, nothing sent); --include needs --all-tags (64).
    let before = registry.access_log().await.unwrap().len();
    for (from, to) in [
        (format!("{src}:1.0"), format!("{host}/x/app")),
        (src.clone(), format!("{host}/x/app:stable")),
    ] {
        let out = copy(&["--all-tags", &from, &to]).await;
        assert_eq!(code(&out), 64, "{from} {to}");
        assert!(
            text(&out.stderr).contains("--all-tags"),
            "{}",
            text(&out.stderr)
        );
    }
    assert_eq!(registry.access_log().await.unwrap().len(), before);
    let out = copy(&[
        "--include",
        "1.*",
        &format!("{src}:1.0"),
        &format!("{host}/x/app"),
    ])
    .await;
    assert_eq!(code(&out), 64, "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_names_itself_and_a_retag_reports_the_source_tag() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let c = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let host = registry.host();
    seed(&c, "src/app", &["3.21"]).await;

    // A retag: the JSON's image is the source's tag, `pushed_as` the target's.
    let out = copy(&[
        &format!("{host}/src/app:3.21"),
        &format!("{host}/dst/app:stable"),
        "--json",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["images"][0]["image"], "3.21", "{report:#}");
    assert_eq!(report["images"][0]["pushed_as"], "stable", "{report:#}");
    assert_eq!(tags(&c, "dst/app").await, ["stable"]);
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "synced  {host}/src/app:3.21 -> {host}/dst/app:stable"
        )),
        "{err}"
    );

    // A tag the source lacks: named as the copy, not as a config's mapping.
    let from = format!("{host}/src/app:9.9");
    let to = format!("{host}/dst/app");
    let out = copy(&[&from, &to]).await;
    let err = text(&out.stderr);
    assert_ne!(code(&out), 0, "{err}");
    assert!(
        err.contains(&format!("MISSING  copy {from} -> {to}: exact tag 9.9")),
        "{err}"
    );
    assert!(!err.contains("mapping 0"), "{err}");

    // A source that cannot be opened: FAILED names the copy.
    let dir = tempfile::tempdir().unwrap();
    let from = format!("oci:{}:1", dir.path().join("absent").display());
    let out = copy(&[&from, &to]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains(&format!("FAILED  copy {from} -> {to}: ")),
        "{err}"
    );
    assert!(!err.contains("mapping 0"), "{err}");
}
