//! The field behaviours that still beat ferry after issue 31 (issue 39), each played by the test
//! kit's registry as its public report shows it on the wire: a Nexus group's tag list cut without
//! a `Link`, GAR's referrers endpoint sending the client to a sign-in page, and ECR's manifest
//! commits lagging longer (and less evenly) than a fixed wait covers.

mod common;

use std::time::Duration;

use common::run_sync;
use ferry_config::Config;
use ferry_distribution::capabilities::Support;
use ferry_distribution::ops::Paging;
use ferry_sync::report::{SyncReport, Verdict};
use ferry_testkit::registry::{OpKind, Personality, TestRegistry};

async fn start(personality: Personality, page_size: Option<usize>) -> TestRegistry {
    let mut b = TestRegistry::builder().personality(personality);
    if let Some(n) = page_size {
        b = b.page_size(n);
    }
    b.start().await.expect("test registry starts")
}

fn config(regs: &[&TestRegistry], mappings: &str) -> Config {
    common::engine_config(regs).mappings(mappings).build()
}

/// `count` tags `t-000`… on `repo`, every one its own image.
fn seed_tags(reg: &TestRegistry, repo: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let tag = format!("t-{i:03}");
            reg.seed_image(repo, &tag, &[tag.as_bytes()]);
            tag
        })
        .collect()
}

/// How many of `tags` are on `dst`'s `to` with `src`'s `from` bytes.
fn mirrored(
    src: &TestRegistry,
    from: &str,
    dst: &TestRegistry,
    to: &str,
    tags: &[String],
) -> usize {
    tags.iter()
        .filter(|t| dst.manifest(to, t).is_some() && dst.manifest(to, t) == src.manifest(from, t))
        .count()
}

fn registry<'a>(
    report: &'a SyncReport,
    reg: &TestRegistry,
) -> &'a ferry_sync::report::RegistryReport {
    report
        .registries
        .iter()
        .find(|r| r.registry == reg.host())
        .expect("the registry is in the report")
}

fn all_tags(src: &TestRegistry, from: &str, dst: &TestRegistry, to: &str) -> String {
    format!(
        "  - source: \"{}/{from}\"\n    targets: [\"{}/{to}\"]\n    tags: {{ include: [\"*\"] }}\n",
        src.host(),
        dst.host()
    )
}

/// nexus-public #117/#209, renovate #18447: a group repository of 129 tags answers its first
/// page (100 here) with no `Link`; a single-repository mapping on a fresh run has learned no
/// page size from anything else. Before: 100/129 mirrored, exit 0, not a word.
#[tokio::test(start_paused = true)]
async fn a_nexus_group_cut_without_a_link_is_mirrored_whole_on_a_fresh_run() {
    let src = start(Personality::nexus(), Some(100)).await;
    let dst = common::started().await;
    let tags = seed_tags(&src, "team/app", 129);
    let report = run_sync(&config(
        &[&src, &dst],
        &all_tags(&src, "team/app", &dst, "mirror/app"),
    ))
    .await
    .report;
    let text = report.render_text();
    assert_eq!(
        mirrored(&src, "team/app", &dst, "mirror/app", &tags),
        129,
        "{text}"
    );
    assert_eq!(report.verdict(), Verdict::Clean, "{text}");
    // The first page (100, asked without `n`), then `n=100&last=t-099` (29): the short page
    // that answered an `n` ends it.
    let pages: Vec<String> = src
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::TagList)
        .map(|r| r.path)
        .collect();
    assert_eq!(pages.len(), 2, "{pages:?}");
    let listing = registry(&report, &src).listing;
    assert_eq!(
        (listing.paging, listing.page_size),
        (Paging::CutWithoutLink, Some(100)),
        "{listing:?}"
    );
    assert_eq!(
        registry(&report, &src).stats.retries,
        0,
        "a probe is not a retry"
    );
}

/// awslabs/soci-snapshotter#512: GAR sends a referrers request to Google's sign-in page
/// (HTML). No mapping asked for anything that answer could give: before, every mapping failed
/// (`referrers index is not JSON`), 0/12 images. Now the registry is read as having no
/// referrers API, the tag schema stands in (the cosign `.sig` tag travels), and it says so.
#[tokio::test(start_paused = true)]
async fn a_gar_referrers_sign_in_page_fails_no_mapping_and_the_tag_schema_stands_in() {
    let src = start(Personality::gar(), None).await;
    let dst = common::started().await;
    let mut tags = seed_tags(&src, "team/app", 6);
    let signed = src.seed_image("solo/app", "1.0", &[b"signed image"]);
    let sig = format!("{}.sig", signed.replace(':', "-"));
    src.seed_image("solo/app", &sig, &[b"a cosign signature"]);
    for t in ["2.0", "2.1", "2.2", "2.3", "2.4"] {
        src.seed_image("solo/app", t, &[t.as_bytes()]);
    }
    let mappings = format!(
        "{}  - source: \"{s}/solo/app\"\n    targets: [\"{d}/solo/app\"]\n    tags: {{ exact: [\"1.0\", \"2.0\", \"2.1\", \"2.2\", \"2.3\", \"2.4\"] }}\n",
        all_tags(&src, "team/app", &dst, "mirror/app"),
        s = src.host(),
        d = dst.host()
    );
    let report = run_sync(&config(&[&src, &dst], &mappings)).await.report;
    let text = report.render_text();
    assert_eq!(report.verdict(), Verdict::Clean, "{text}");
    assert_eq!(report.totals.mappings_failed, 0, "{text}");
    assert_eq!(
        mirrored(&src, "team/app", &dst, "mirror/app", &tags),
        6,
        "{text}"
    );
    tags = ["1.0", "2.0", "2.1", "2.2", "2.3", "2.4"]
        .map(String::from)
        .to_vec();
    assert_eq!(
        mirrored(&src, "solo/app", &dst, "solo/app", &tags),
        6,
        "{text}"
    );
    // The signature found by the tag schema travelled with its image.
    assert!(dst.manifest("solo/app", &sig).is_some(), "{text}");
    let caps = registry(&report, &src).capabilities;
    assert_eq!(caps.referrers_api, Support::Refused, "{caps:?}");
    // Learned once: no second referrers request after the sign-in page.
    assert_eq!(src.stats().op(OpKind::Referrers), 1, "{text}");
}

/// ocync PR #104: ECR refuses a manifest PUT naming blobs committed a moment ago with
/// `MANIFEST_BLOB_UNKNOWN`. Here each commit lags 0.7 s to 4 s (fixed per digest): before,
/// the fixed 2.5 s of waits left the slowest images failed; now the PUT is sent again on the
/// retry layer's jittered backoff until the registry catches up, within the deadline.
#[tokio::test(start_paused = true)]
async fn ecr_commit_lags_longer_than_any_fixed_wait_are_waited_for_until_the_registry_catches_up() {
    let src = common::started().await;
    let dst = start(
        Personality {
            manifest_commit_lag: Some(Duration::from_millis(700)),
            manifest_commit_lag_max: Some(Duration::from_secs(4)),
            ..Personality::ecr()
        },
        None,
    )
    .await;
    dst.create_repository("mirror/app");
    let tags = seed_tags(&src, "lib/app", 12);
    let report = run_sync(&config(
        &[&src, &dst],
        &all_tags(&src, "lib/app", &dst, "mirror/app"),
    ))
    .await
    .report;
    let text = report.render_text();
    assert_eq!(
        mirrored(&src, "lib/app", &dst, "mirror/app", &tags),
        12,
        "{text}"
    );
    assert_eq!(report.verdict(), Verdict::Clean, "{text}");
    let refused = dst
        .requests()
        .iter()
        .filter(|r| r.op == OpKind::ManifestPut && r.status == 400)
        .count();
    assert!(refused >= 12, "every manifest met the lag: {refused}");
    let stats = &registry(&report, &dst).stats;
    assert_eq!(stats.retries, 0, "waiting out a lag is not a retry\n{text}");
    assert!(text.contains("commit lag"), "{text}");
}
