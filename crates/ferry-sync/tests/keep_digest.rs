//! `platforms_keep_digest: true`: only the selected platforms' children are copied, and the
//! source's own index is pushed so the digest stays. A target that refuses an index whose
//! children it lacks (distribution 2.8: `400 MANIFEST_BLOB_UNKNOWN`) gets the filtered index,
//! and the report says so for that target, in JSON and text; a rerun is up to date either way.

mod common;

use common::{QUICK_RETRY, run_sync};
use std::path::Path;

use ferry_config::{self as config, Config};
use ferry_sync::report::ImageStatus;
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::registry::{OpKind, Personality, TestRegistry, sha256_digest};

/// The registries, each `(host, url)`, anonymous with two quick attempts.
fn with_registries(entries: &[(String, String)]) -> common::ConfigBuilder {
    entries.iter().fold(common::config(), |b, (host, url)| {
        b.entry(host, url, &["auth: { type: anonymous }", QUICK_RETRY])
    })
}

fn config(entries: &[(String, String)], source: &str, target: &str, keep: bool) -> Config {
    with_registries(entries)
        .mappings(&keep_digest(
            &format!("{source}/lib/app"),
            &format!("{target}/m/app"),
            keep,
        ))
        .build()
}

/// `source` (tag 1.0, linux/amd64 only) to `target`, keeping the index digest when `keep`.
fn keep_digest(source: &str, target: &str, keep: bool) -> String {
    common::mapping(
        source,
        &[target.to_owned()],
        &[
            "tags: { exact: [\"1.0\"] }",
            "platforms: [linux/amd64]",
            &format!("platforms_keep_digest: {keep}"),
        ],
    )
}

/// An index over a linux/amd64 and a linux/arm64 image; returns (index, amd64, arm64) digests.
fn seed(src: &TestRegistry) -> (String, String, String) {
    let amd = src.seed_image("lib/app", "1.0-amd64", &[b"base", b"amd64 layer"]);
    let arm = src.seed_image("lib/app", "1.0-arm64", &[b"base", b"arm64 layer"]);
    let index = src.seed_index("lib/app", "1.0", &[amd.clone(), arm.clone()]);
    let (_, bytes) = src.manifest("lib/app", &index).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let platform = |i: usize| {
        format!(
            "{}/{}",
            v["manifests"][i]["platform"]["os"].as_str().unwrap(),
            v["manifests"][i]["platform"]["architecture"]
                .as_str()
                .unwrap()
        )
    };
    assert_eq!(
        (platform(0), platform(1)),
        ("linux/amd64".into(), "linux/arm64".into())
    );
    (index, amd, arm)
}

#[tokio::test]
async fn a_target_that_takes_the_source_index_keeps_its_digest_with_one_platforms_content() {
    let src = common::started().await;
    let dst = TestRegistry::builder()
        .personality(Personality {
            index_children_unchecked: true,
            ..Personality::default()
        })
        .start()
        .await
        .unwrap();
    let (index, amd, arm) = seed(&src);
    let entries = [(src.host(), src.url()), (dst.host(), dst.url())];
    let cfg = config(&entries, &src.host(), &dst.host(), true);

    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    let (_, held) = dst.manifest("m/app", "1.0").expect("tagged");
    assert_eq!(sha256_digest(&held), index, "the source's index, unchanged");
    assert!(dst.manifest("m/app", &amd).is_some());
    assert!(dst.manifest("m/app", &arm).is_none(), "arm64 stays behind");
    assert!(!dst.has_blob("m/app", &sha256_digest(b"arm64 layer")));
    assert_eq!(report.images[0].digest, index);
    assert_eq!(report.images[0].kept_digest_refused, None);

    dst.reset_stats();
    let warm = run_sync(&cfg).await.report;
    assert_eq!(warm.totals.images_up_to_date, 1, "{}", warm.render_text());
    assert_eq!(dst.stats().op(OpKind::ManifestPut), 0);

    // Without the setting the same mapping rewrites the index (and now finds it stale).
    let rewritten = run_sync(&config(&entries, &src.host(), &dst.host(), false))
        .await
        .report;
    assert_eq!(rewritten.totals.images_synced, 1);
    assert_ne!(rewritten.images[0].digest, index);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distribution_refuses_the_source_index_and_gets_the_filtered_one_reported() {
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let src = common::started().await;
    let (index, amd, _) = seed(&src);
    let entries = [(src.host(), src.url()), (real.host(), real.url())];
    let cfg = config(&entries, &src.host(), &real.host(), true);

    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    let image = &report.images[0];
    assert_eq!(image.status, ImageStatus::Synced);
    let refused = image
        .kept_digest_refused
        .as_ref()
        .expect("the refusal is reported");
    assert!(refused.reason.contains("400"), "{}", refused.reason);
    assert!(
        refused.reason.contains("MANIFEST_BLOB_UNKNOWN"),
        "{}",
        refused.reason
    );
    assert_ne!(refused.pushed, index);
    assert_eq!(image.digest, refused.pushed, "the digest the target holds");

    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["images"][0]["kept_digest_refused"]["pushed"],
        serde_json::json!(refused.pushed)
    );
    let text = report.render_text();
    assert!(
        text.contains("refused the source's index") && text.contains(&refused.pushed),
        "{text}"
    );

    // What the registry holds: the filtered index, naming the amd64 child only.
    let log = real.access_log().await.unwrap();
    let puts: Vec<_> = log
        .entries
        .iter()
        .filter(|e| e.method == "PUT" && e.path.contains("/manifests/"))
        .map(|e| (e.path.clone(), e.status))
        .collect();
    assert_eq!(
        puts,
        [
            (format!("/v2/m/app/manifests/{amd}"), 201),
            ("/v2/m/app/manifests/1.0".to_owned(), 400),
            ("/v2/m/app/manifests/1.0".to_owned(), 201),
        ]
    );

    // A rerun takes the filtered index as up to date: no second refusal every run.
    let warm = run_sync(&cfg).await.report;
    assert_eq!(warm.totals.images_up_to_date, 1, "{}", warm.render_text());
    let after = real.access_log().await.unwrap();
    assert_eq!(after.count("PUT", "/v2/m/app/manifests/"), 3);
}

#[tokio::test]
async fn a_layout_target_holds_the_source_index_with_one_platforms_content() {
    let src = common::started().await;
    let (index, amd, arm) = seed(&src);
    let dir = tempfile::tempdir().unwrap();
    let layout = format!("oci:{}", dir.path().join("m").display());
    let cfg = with_registries(&[(src.host(), src.url())])
        .mappings(&keep_digest(
            &format!("{}/lib/app", src.host()),
            &layout,
            true,
        ))
        .build();
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    let index_json = std::fs::read_to_string(dir.path().join("m/index.json")).unwrap();
    assert!(index_json.contains(&index), "{index_json}");
    let blob = |d: &str| {
        dir.path()
            .join("m/blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    assert!(blob(&index).is_file());
    assert!(blob(&amd).is_file());
    assert!(!blob(&arm).exists(), "arm64 stays behind");
    let warm = run_sync(&cfg).await.report;
    assert_eq!(warm.totals.images_up_to_date, 1, "{}", warm.render_text());
}

#[test]
fn the_setting_comes_from_defaults_unless_the_mapping_says() {
    let text = "version: 1\ndefaults:\n  platforms: [linux/amd64]\n  platforms_keep_digest: true\nmappings:\n  - source: r.io/a\n    targets: [\"oci:./a\"]\n  - source: r.io/b\n    targets: [\"oci:./b\"]\n    platforms_keep_digest: false\n";
    let cfg = config::parse(text, Path::new("t.yaml"), &|_| None).unwrap();
    let keep: Vec<bool> = cfg
        .mappings
        .iter()
        .map(|m| m.platforms_keep_digest)
        .collect();
    assert_eq!(keep, [true, false]);
    let plain = "version: 1\nmappings:\n  - source: r.io/a\n    targets: [\"oci:./a\"]\n";
    let cfg = config::parse(plain, Path::new("t.yaml"), &|_| None).unwrap();
    assert!(!cfg.mappings[0].platforms_keep_digest);
    let wrong = "version: 1\nmappings:\n  - source: r.io/a\n    targets: [\"oci:./a\"]\n    platforms_keep_digest: yes-please\n";
    let err = config::parse(wrong, Path::new("t.yaml"), &|_| None).unwrap_err();
    assert!(err.to_string().contains("t.yaml:5:"), "{err}");
}
