//! The field behaviours that still beat ferry after issue 31 (issue 39), each played by the test
//! kit's registry as its public report shows it on the wire: a Nexus group's tag list cut without
//! a `Link`, GAR's referrers endpoint sending the client to a sign-in page, and ECR's manifest
//! commits lagging longer (and less evenly) than a fixed wait covers.

mod common;

use std::time::Duration;

use common::run_sync;
use ferry_config::Config;
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
