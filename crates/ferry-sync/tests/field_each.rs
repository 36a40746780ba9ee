//! Every field registry of the test kit (`Personality::field()`), as source and as target: 60
//! listed tags (two indexes, one with untagged children, a signature tag, more than a Quay page)
//! with referrers, pruning after a tag goes, and a whole-registry mapping expanded through the
//! catalog. Same digests everywhere, no failure but where the registry has no catalog to give.

mod common;

use common::run_sync;
use ferry_config::Config;
use ferry_sync::report::Verdict;
use ferry_testkit::registry::{Personality, TestRegistry};

/// 55 small images, an index over two more and its cosign signature tag in `lib/app`; two
/// repositories under `cat/` for the catalog. Returns the tags of `lib/app`.
fn seed(src: &TestRegistry) -> Vec<String> {
    let mut tags: Vec<String> = (0..55).map(|i| format!("t{i:02}")).collect();
    for t in &tags {
        src.seed_image("lib/app", t, &[t.as_bytes(), b"shared base"]);
    }
    let amd = src.seed_image("lib/app", "1.0-amd64", &[b"base", b"amd64"]);
    let arm = src.seed_image("lib/app", "1.0-arm64", &[b"base", b"arm64"]);
    let index = src.seed_index("lib/app", "1.0", &[amd, arm]);
    let sig = format!("{}.sig", index.replace(':', "-"));
    src.seed_image("lib/app", &sig, &[b"a signature"]);
    tags.extend(["1.0-amd64".into(), "1.0-arm64".into(), "1.0".into(), sig]);
    // An index whose children no tag names (Artifactory lists their digests among the tags).
    let c1 = src.seed_image("lib/app", "tmp-a", &[b"base", b"untagged a"]);
    let c2 = src.seed_image("lib/app", "tmp-b", &[b"base", b"untagged b"]);
    src.seed_index("lib/app", "2.0", &[c1, c2]);
    src.untag("lib/app", "tmp-a");
    src.untag("lib/app", "tmp-b");
    tags.push("2.0".into());
    for repo in ["cat/one", "cat/two"] {
        src.seed_image(repo, "v1", &[repo.as_bytes()]);
    }
    tags
}

fn config(src: &TestRegistry, dst: &TestRegistry) -> Config {
    let (s, d) = (src.host(), dst.host());
    common::engine_config(&[src, dst])
        .setting(&format!("target_groups:\n  mirror: [\"{d}/group\"]"))
        .mappings(&format!(
            "  - source: \"{s}/lib/app\"\n    targets: [\"{d}/mirror/app\"]\n    tags: {{ include: [\"*\"] }}\n    referrers: true\n    prune: true\n  - source: \"{s}/cat/*\"\n    target_group: mirror\n"
        ))
        .build()
}

async fn under(name: &str, personality: Personality, as_source: bool) {
    let (src, dst) = match as_source {
        true => (
            TestRegistry::builder()
                .personality(personality)
                .start()
                .await,
            TestRegistry::builder().start().await,
        ),
        false => (
            TestRegistry::builder().start().await,
            TestRegistry::builder()
                .personality(personality)
                .start()
                .await,
        ),
    };
    let (src, dst) = (src.unwrap(), dst.unwrap());
    let side = if as_source { "source" } else { "target" };
    for repo in ["mirror/app", "group/cat/one", "group/cat/two"] {
        dst.create_repository(repo);
    }
    let tags = seed(&src);
    let cfg = config(&src, &dst);
    let outcome = run_sync(&cfg).await;
    let text = outcome.report.render_text();
    for tag in &tags {
        assert_eq!(
            dst.manifest("mirror/app", tag),
            src.manifest("lib/app", tag),
            "{name} as {side}: {tag}\n{text}"
        );
    }
    assert_eq!(
        outcome.report.totals.images_failed, 0,
        "{name} as {side}\n{text}"
    );
    // Only a source without a catalog for these credentials fails, and only the mapping that
    // needs one.
    let no_catalog = as_source && (personality.catalog_absent || personality.catalog_admin_only);
    let failed: Vec<usize> = outcome
        .report
        .failed_mappings
        .iter()
        .map(|f| f.mapping)
        .collect();
    if no_catalog {
        assert_eq!(failed, [1], "{name} as {side}\n{text}");
    } else {
        assert_eq!(failed, Vec::<usize>::new(), "{name} as {side}\n{text}");
        for repo in ["one", "two"] {
            let copied = dst.manifest(&format!("group/cat/{repo}"), "v1");
            assert_eq!(
                copied,
                src.manifest(&format!("cat/{repo}"), "v1"),
                "{name} as {side}"
            );
        }
        assert_eq!(
            outcome.report.verdict(),
            Verdict::Clean,
            "{name} as {side}\n{text}"
        );
        let prune_failed = outcome.pruned.as_ref().map(|p| p.has_failures());
        assert_eq!(prune_failed, Some(false), "{name} as {side}\n{text}");
    }
    // What the registry does is learned, not retried: a retry here could only follow a broken
    // connection, which a loaded machine may cause.
    let unexplained: u64 = outcome
        .report
        .registries
        .iter()
        .map(|r| r.stats.retries.saturating_sub(r.stats.transport_errors))
        .sum();
    assert_eq!(unexplained, 0, "{name} as {side}: retries\n{text}");

    // A tag gone from the source is pruned from the target; everything else stays.
    src.untag("lib/app", "t00");
    let again = run_sync(&cfg).await;
    let text = again.report.render_text();
    assert!(
        dst.manifest("mirror/app", "t00").is_none(),
        "{name} as {side}: t00 kept\n{text}"
    );
    assert_eq!(
        dst.tags("mirror/app").len(),
        tags.len() - 1,
        "{name} as {side}\n{text}"
    );
    let pruned = again.pruned.as_ref().map(|p| p.has_failures());
    assert_eq!(pruned, Some(false), "{name} as {side}\n{text}");
}

#[tokio::test(start_paused = true)]
async fn every_field_registry_as_a_source() {
    assert!(Personality::field().len() >= 9, "the nine field registries");
    for (name, personality) in Personality::field() {
        under(name, personality, true).await;
    }
}

#[tokio::test(start_paused = true)]
async fn every_field_registry_as_a_target() {
    for (name, personality) in Personality::field() {
        under(name, personality, false).await;
    }
}
