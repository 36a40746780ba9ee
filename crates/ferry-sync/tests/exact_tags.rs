//! Exact tags resolve without a listing: a mapping of two exact tags on a repository of 5,000
//! tags (listed 100 per page) costs the ping and one manifest request per tag, where a glob
//! filter over the same two tags walks all 50 pages first. Figures in docs/performance.md.

mod common;

use ferry_sync::registries::Registries;
use ferry_testkit::registry::{OpKind, TestRegistry};

async fn prepare(src: &TestRegistry, dst: &TestRegistry, tags: &str, extra: &str) {
    let cfg = common::config()
        .registries(&[src, dst], &[])
        .mapping(
            format!("{}/big/repo", src.host()),
            &[format!("{}/mirror/repo", dst.host())],
            &[&format!("tags: {tags}")],
        )
        .mappings(extra)
        .build();
    let plan = common::prepare_only(&cfg, &Registries::new(&cfg)).await;
    let resolved: Vec<_> = plan.resolved().collect();
    assert_eq!(resolved.len(), 1, "the mapping resolved");
    let images: Vec<_> = resolved[0]
        .1
        .images
        .iter()
        .filter_map(|i| i.tag.clone())
        .collect();
    assert_eq!(images, ["1.36", "1.37"]);
    assert_eq!(resolved[0].1.missing_exact, ["0.0-missing"]);
}

fn manifest_requests(reg: &TestRegistry) -> u64 {
    let s = reg.stats();
    s.op(OpKind::ManifestGet) + s.op(OpKind::ManifestHead)
}

#[tokio::test(start_paused = true)]
async fn two_exact_tags_on_a_repository_of_5000_cost_two_manifest_requests_and_no_listing() {
    let src = TestRegistry::builder()
        .page_size(100)
        .start()
        .await
        .unwrap();
    let dst = common::started().await;
    let digest = src.seed_image("big/repo", "1.36", &[b"one layer"]);
    let (media_type, bytes) = src.manifest("big/repo", &digest).unwrap();
    for i in 0..4_998 {
        src.seed_manifest("big/repo", &format!("t{i}"), &media_type, &bytes);
    }
    src.seed_image("big/repo", "1.37", &[b"another layer"]);
    assert_eq!(src.tags("big/repo").len(), 5_000);

    // Exact only (referrers off, as `ferry copy` runs): the ping and one GET per tag (the
    // third, missing tag costs its own request and is reported missing).
    prepare(
        &src,
        &dst,
        "{ exact: [\"1.36\", \"1.37\", \"0.0-missing\"] }",
        "    referrers: false\n",
    )
    .await;
    let exact = src.stats();
    assert_eq!(exact.op(OpKind::TagList), 0);
    assert_eq!(exact.op(OpKind::Ping), 1);
    assert_eq!(
        manifest_requests(&src),
        3,
        "one per exact tag, the missing one included"
    );

    // A glob selecting the same two walks every page first: the cost the exact form avoids.
    src.reset_stats();
    prepare(
        &src,
        &dst,
        "{ include: [\"1.3[67]\"], exact: [\"0.0-missing\"] }",
        "    referrers: false\n",
    )
    .await;
    assert_eq!(src.stats().op(OpKind::TagList), 50);
    assert_eq!(manifest_requests(&src), 2);

    // With referrers on (the default), each image's signature tags are probed by HEAD: four
    // per image, still no listing.
    src.reset_stats();
    prepare(
        &src,
        &dst,
        "{ exact: [\"1.36\", \"1.37\", \"0.0-missing\"] }",
        "",
    )
    .await;
    let s = src.stats();
    assert_eq!(s.op(OpKind::TagList), 0);
    assert_eq!(s.op(OpKind::ManifestGet), 3);
    assert_eq!(s.op(OpKind::ManifestHead), 8);
}
