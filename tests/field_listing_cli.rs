//! The `ferry` binary against the field registries' listing personalities (issue 31): `ferry
//! tags` leaves Artifactory's digest entries out and reads Quay's opaque pages, `ferry sync`
//! mirrors through them with exit 0 and reports the listing style, `ferry copy` is unaffected.

mod common;

use common::{code, ferry, text};
use ferry_testkit::fixtures::{ALL_TAGS, mirror_yaml};

use ferry_testkit::registry::{Personality, TestRegistry};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_tags_leaves_artifactory_digest_entries_out_and_reads_every_quay_page() {
    let art = TestRegistry::builder()
        .personality(Personality::artifactory())
        .page_size(2)
        .start()
        .await
        .unwrap();
    let amd = art.seed_image("docker/app", "amd", &[b"amd64"]);
    let arm = art.seed_image("docker/app", "arm", &[b"arm64"]);
    art.seed_index("docker/app", "1.0", &[amd, arm]);
    art.untag("docker/app", "amd");
    art.untag("docker/app", "arm");
    art.seed_image("docker/app", "2.0", &[b"two"]);
    let out = ferry(&["tags", &format!("{}/docker/app", art.host()), "--insecure"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{}\n{stdout}", text(&out.stderr));
    assert!(!stdout.contains("sha256:"), "{stdout}");
    assert!(!stdout.contains("invalid "), "{stdout}");
    assert!(stdout.contains("1.0") && stdout.contains("2.0"), "{stdout}");

    let quay = TestRegistry::builder()
        .personality(Personality::quay())
        .start()
        .await
        .unwrap();
    for i in 0..60 {
        quay.seed_image("lib/app", &format!("t-{i:02}"), &[b"same"]);
    }
    let out = ferry(&["tags", &format!("{}/lib/app", quay.host()), "--insecure"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        stdout.contains("t-00") && stdout.contains("t-59"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_sync_mirrors_through_quay_and_artifactory_with_exit_0_and_reports_the_listing() {
    let quay = TestRegistry::builder()
        .personality(Personality::quay())
        .start()
        .await
        .unwrap();
    let art = TestRegistry::builder()
        .personality(Personality::artifactory())
        .page_size(3)
        .start()
        .await
        .unwrap();
    for i in 0..55 {
        quay.seed_image(
            "lib/app",
            &format!("t-{i:02}"),
            &[format!("{i}").as_bytes()],
        );
    }
    let amd = art.seed_image("docker/lib/app", "amd", &[b"amd64"]);
    let arm = art.seed_image("docker/lib/app", "arm", &[b"arm64"]);
    art.seed_index("docker/lib/app", "1.0", &[amd, arm]);
    art.untag("docker/lib/app", "amd");
    art.untag("docker/lib/app", "arm");
    for i in 0..5 {
        art.seed_image(
            "docker/lib/app",
            &format!("v{i}"),
            &[format!("v{i}").as_bytes()],
        );
    }
    let dst = TestRegistry::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (q, a, d) = (quay.host(), art.host(), dst.host());
    let config = mirror_yaml()
        .registries(&[&quay, &art, &dst], &[])
        .mapping(
            format!("{q}/lib/app"),
            &[format!("{d}/quay/app")],
            &[ALL_TAGS],
        )
        .mapping(
            format!("{a}/docker/lib/app"),
            &[format!("{d}/art/app")],
            &[ALL_TAGS],
        )
        .write(dir.path());
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--json"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["totals"]["images_synced"], 61, "{json}");
    let listing = |host: String| {
        json["registries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["registry"] == host.as_str())
            .map(|r| r["listing"].clone())
            .unwrap()
    };
    let q = listing(quay.host());
    assert_eq!(
        (&q["paging"], &q["page_size"]),
        (&"opaque".into(), &50.into()),
        "{q}"
    );
    let a = listing(art.host());
    assert_eq!(a["digest_entries_skipped"], 2, "{a}");
    assert!(a["links_repaired"].as_u64().unwrap() >= 2, "{a}");
    for i in 0..55 {
        let tag = format!("t-{i:02}");
        assert_eq!(
            dst.manifest("quay/app", &tag),
            quay.manifest("lib/app", &tag)
        );
    }
    assert_eq!(
        dst.manifest("art/app", "1.0"),
        art.manifest("docker/lib/app", "1.0")
    );

    // One tag by name lists nothing: Quay's paging does not matter to `ferry copy`.
    let out = ferry(&[
        "copy",
        &format!("{}/lib/app:t-54", quay.host()),
        &format!("{}/copy/app", dst.host()),
        "--insecure",
        "--progress",
        "none",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(
        dst.manifest("copy/app", "t-54"),
        quay.manifest("lib/app", "t-54")
    );
}
