//! Whole-registry mappings (`source: host/team/*` or `/**`): the source's catalog is read in
//! the prepare phase (every `Link` page, under the one retry shape), each matched repository
//! goes to the target prefix plus the matched remainder, names from the catalog are validated
//! and the bad ones reported, a bound stops a catalog larger than meant, and the dry run and
//! the report list what the mapping expanded to.

mod common;

use std::path::Path;

use common::{RunOptions, run_sync_with};
use ferry_config::{self as config, Config};
use ferry_sync::dryrun::DryRun;
use ferry_sync::plan::{ListedIn, Plan};
use ferry_sync::report::{SyncReport, Verdict};
use ferry_testkit::registry::{FaultAction, FaultRule, OpKind, RetryAfter, TestRegistry};

/// Three quick attempts.
const RETRY: &str = "retry: { attempts: 3, base: 10ms, cap: 50ms }";

/// One mapping from `source` (a glob on `src`) to `targets`, with `extra` appended to it.
fn config(
    src: (&str, &str),
    dst: (&str, &str),
    source: &str,
    targets: &str,
    extra: &str,
) -> Config {
    let text = format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/{source}\"\n    targets: [{targets}]\n{extra}",
        common::registry_entry(src.1, src.0, &[RETRY]),
        common::registry_entry(dst.1, dst.0, &[RETRY]),
        src.1,
    );
    common::parse(&text)
}

fn testkit_config(src: &TestRegistry, dst: &TestRegistry, source: &str, extra: &str) -> Config {
    config(
        (&src.url(), &src.host()),
        (&dst.url(), &dst.host()),
        source,
        &format!("\"{}/mirror\"", dst.host()),
        extra,
    )
}

/// A whole run, its tracker checked: the glob and each expansion are counted once.
async fn run(config: &Config) -> (Plan, SyncReport) {
    let run = run_sync_with(config, RunOptions::default()).await;
    let snapshot = run.tracker.snapshot();
    assert_eq!(
        (snapshot.done, snapshot.total),
        (run.plan.mappings.len(), run.plan.mappings.len()),
        "the tracker counts the glob and each expansion once"
    );
    (run.plan, run.report)
}

/// team/app, team/tools/cli, teamx/app and other/app on the source, one image each.
fn seed(src: &TestRegistry) {
    for repo in ["team/app", "team/tools/cli", "teamx/app", "other/app"] {
        src.seed_image(repo, "v1", &[repo.as_bytes()]);
    }
}

#[tokio::test(start_paused = true)]
async fn any_depth_walks_every_catalog_page_and_maps_each_repository_to_the_prefix_plus_remainder()
{
    let src = TestRegistry::builder().page_size(1).start().await.unwrap();
    let dst = common::started().await;
    seed(&src);
    let cfg = testkit_config(&src, &dst, "team/**", "");
    let (plan, report) = run(&cfg).await;

    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    assert_eq!(report.totals.images_synced, 2);
    assert_eq!(
        dst.repositories(),
        ["mirror/app", "mirror/tools/cli"],
        "the prefix plus the part after team/; teamx/ and other/ are not under team/"
    );
    // Four repositories one per page: four catalog pages, every one read.
    assert_eq!(src.stats().op(OpKind::Catalog), 4);

    let expected = [
        format!("{}/team/app", src.host()),
        format!("{}/team/tools/cli", src.host()),
    ];
    assert_eq!(report.expansions.len(), 1);
    assert_eq!(
        report.expansions[0].source,
        format!("{}/team/**", src.host())
    );
    assert_eq!(report.expansions[0].repositories, expected);
    let dry = DryRun::from_plan(&plan);
    let sources: Vec<&str> = dry.mappings.iter().map(|m| m.source.as_str()).collect();
    assert_eq!(
        sources,
        [
            format!("{}/team/**", src.host()).as_str(),
            &expected[0],
            &expected[1]
        ],
        "the glob's entry first, then each repository, all under index 0"
    );
    assert!(dry.mappings.iter().all(|m| m.index == 0));
    assert_eq!(dry.mappings[0].expanded.as_deref(), Some(&expected[..]));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["expansions"][0]["repositories"][1],
        expected[1].as_str()
    );
    assert!(
        dry.render_text()
            .contains(&format!("  repo    {}", expected[1]))
    );
}

#[tokio::test(start_paused = true)]
async fn one_level_takes_direct_children_only_and_a_warm_rerun_writes_nothing() {
    let (src, dst) = common::pair().await;
    seed(&src);
    let cfg = testkit_config(&src, &dst, "team/*", "");
    let (_, report) = run(&cfg).await;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    assert_eq!(
        dst.repositories(),
        ["mirror/app"],
        "team/tools/cli is two levels down"
    );

    dst.reset_stats();
    let (_, warm) = run(&cfg).await;
    assert_eq!(warm.totals.images_up_to_date, 1);
    assert_eq!(warm.totals.images_synced, 0);
    assert_eq!(dst.stats().op(OpKind::ManifestPut), 0);
}

#[tokio::test(start_paused = true)]
async fn hostile_catalog_names_are_reported_and_never_put_into_a_request() {
    let (src, dst) = common::pair().await;
    src.seed_image("team/app", "v1", &[b"app"]);
    let hostile = [
        "team/../admin",
        "team/%2fadmin",
        "team/a\u{1}b",
        "team//app",
        "team/App",
    ];
    for name in hostile {
        src.seed_image(name, "v1", &[name.as_bytes()]);
    }
    // Not under team/ at all: none of the mapping's business, and not reported.
    src.seed_image("other/../x", "v1", &[b"x"]);
    let (_, report) = run(&testkit_config(&src, &dst, "team/**", "")).await;

    assert_eq!(dst.repositories(), ["mirror/app"]);
    let mut rejected: Vec<&str> = report
        .rejected_names
        .iter()
        .map(|r| r.rejected.name.as_str())
        .collect();
    rejected.sort_unstable();
    let mut want = hostile.to_vec();
    want.sort_unstable();
    assert_eq!(rejected, want);
    assert!(
        report
            .rejected_names
            .iter()
            .all(|r| r.rejected.listed_in == ListedIn::Catalog
                && r.rejected.reason.contains("not a valid repository name"))
    );
    assert_eq!(
        report.verdict(),
        Verdict::Partial,
        "left-out names are not a clean run"
    );
    let text = report.render_text();
    assert!(
        text.contains("repository \"team/../admin\" from the catalog"),
        "{text}"
    );
    for r in src.requests() {
        let repo = r.repo.unwrap_or_default();
        assert!(
            repo.is_empty() || repo == "team/app",
            "a request named a hostile repository: {} {}",
            r.method,
            r.path
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_catalog_matching_more_than_max_repositories_fails_the_mapping_before_any_copy() {
    let (src, dst) = common::pair().await;
    seed(&src);
    let cfg = testkit_config(&src, &dst, "team/**", "    max_repositories: 1\n");
    let (_, report) = run(&cfg).await;
    assert_eq!(report.totals.mappings_failed, 1);
    assert_eq!(report.verdict(), Verdict::Failed);
    let text = report.render_text();
    assert!(
        text.contains("matches 2 repositories, more than max_repositories (1)"),
        "{text}"
    );
    assert!(dst.repositories().is_empty(), "nothing was copied");
    assert_eq!(src.stats().op(OpKind::ManifestGet), 0);

    // At the bound, it expands.
    let cfg = testkit_config(&src, &dst, "team/**", "    max_repositories: 2\n");
    let (_, report) = run(&cfg).await;
    assert_eq!(report.totals.images_synced, 2, "{}", report.render_text());
}

#[tokio::test(start_paused = true)]
async fn a_throttled_catalog_page_is_retried_under_the_one_retry_shape() {
    let src = TestRegistry::builder().page_size(2).start().await.unwrap();
    let dst = common::started().await;
    seed(&src);
    src.faults().push(
        FaultRule::on(
            OpKind::Catalog,
            FaultAction::Status {
                code: 429,
                retry_after: Some(RetryAfter::Seconds(1)),
            },
        )
        .times(2),
    );
    let (_, report) = run(&testkit_config(&src, &dst, "team/**", "")).await;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    assert_eq!(dst.repositories(), ["mirror/app", "mirror/tools/cli"]);
    // Two pages, two throttled answers before them.
    assert_eq!(src.stats().op(OpKind::Catalog), 4);

    // Throttled past the attempts: the mapping fails with the catalog named; nothing else.
    let dst2 = common::started().await;
    src.faults().push(
        FaultRule::on(
            OpKind::Catalog,
            FaultAction::Status {
                code: 429,
                retry_after: None,
            },
        )
        .forever(),
    );
    let (_, report) = run(&testkit_config(&src, &dst2, "team/**", "")).await;
    assert_eq!(report.totals.mappings_failed, 1);
    assert!(
        report.render_text().contains("catalog list"),
        "{}",
        report.render_text()
    );
    assert!(dst2.repositories().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_repository_another_mapping_writes_or_that_is_a_mirror_target_is_left_out() {
    let src = common::started().await;
    src.seed_image("team/app", "v1", &[b"app"]);
    src.seed_image("team/db", "v1", &[b"db"]);
    src.seed_image("team/mirror/old", "v1", &[b"old"]);
    // team/** -> src/team/mirror (the same registry), and an explicit mapping that already
    // writes team/mirror/db.
    let text = format!(
        "version: 1\nregistries:\n{}mappings:\n  - source: \"{h}/team/**\"\n    targets: [\"{h}/team/mirror\"]\n  - source: \"{h}/team/app\"\n    targets: [\"{h}/team/mirror/db\"]\n",
        common::registry_entry(&src.host(), &src.url(), &[RETRY]),
        h = src.host()
    );
    let cfg = config::parse(&text, Path::new("whole.yaml"), &|_| None).unwrap();
    let (_, report) = run(&cfg).await;
    let reasons: Vec<(String, String)> = report
        .rejected_names
        .iter()
        .map(|r| (r.rejected.name.clone(), r.rejected.reason.clone()))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|(n, r)| n == "team/db" && r.contains("also written by mappings[1]"))
    );
    assert!(
        reasons
            .iter()
            .any(|(n, r)| n == "team/mirror/old" && r.contains("mirror target itself")),
        "{reasons:?}"
    );
    assert!(
        src.tags("team/mirror/mirror/old").is_empty(),
        "the mirror is not mirrored"
    );
    assert_eq!(src.tags("team/mirror/app"), ["v1"]);
}

#[test]
fn config_refuses_what_cannot_apply_to_many_repositories() {
    let parse = |mapping: &str| {
        let text = format!("version: 1\nmappings:\n{mapping}");
        config::parse(&text, Path::new("m.yaml"), &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = parse("  - { source: r.io/team/*, target_group: g, rename: x }\n");
    assert!(
        e.contains("rename cannot apply to a source ending in /* or /**"),
        "{e}"
    );
    let e = parse(
        "  - { source: r.io/team/*, targets: [m.io/x], digests: ['sha256:0000000000000000000000000000000000000000000000000000000000000000'] }\n",
    );
    assert!(e.contains("digests cannot apply"), "{e}");
    let e = parse("  - { source: r.io/team/app, targets: [m.io/x], max_repositories: 3 }\n");
    assert!(
        e.contains("max_repositories applies to a source ending in /* or /** only"),
        "{e}"
    );
    let e = parse("  - { source: r.io/te*m/*, targets: [m.io/x] }\n");
    assert!(
        e.contains("only a final /* or /** may be a wildcard"),
        "{e}"
    );
    let e = parse("  - { source: \"oci:./layouts/*\", targets: [m.io/x] }\n");
    assert!(e.contains("a layout source cannot be a pattern"), "{e}");
    let e = parse("  - { source: r.io/team/*, targets: [m.io/x], max_repositories: 0 }\n");
    assert!(e.contains("max_repositories: must be at least 1"), "{e}");
    let ok = config::parse(
        "version: 1\nmappings:\n  - { source: r.io/*, targets: [\"m.io:5000\", \"oci:./out\"] }\n",
        Path::new("m.yaml"),
        &|_| None,
    )
    .expect("a whole registry to a host and to a layout directory");
    let glob = ok.mappings[0].repositories.as_ref().unwrap();
    assert_eq!((glob.prefix.as_str(), glob.any_depth), ("", false));
    assert_eq!(ok.mappings[0].source, "r.io/*");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_registry_catalog_expands_and_every_repository_lands() {
    let Some((src, dst)) = common::real_pair().await else {
        return;
    };
    // Seed the real source by mirroring from a test kit registry (the plainest way to push).
    let seedkit = common::started().await;
    for repo in ["team/app", "team/tools/cli", "other/app"] {
        seedkit.seed_image(repo, "v1", &[repo.as_bytes()]);
    }
    let mut text = format!(
        "version: 1\nregistries:\n{}{}mappings:\n",
        common::registry_entry(&seedkit.host(), &seedkit.url(), &[RETRY]),
        common::registry_entry(&src.host(), &src.url(), &[RETRY])
    );
    for repo in ["team/app", "team/tools/cli", "other/app"] {
        text.push_str(&format!(
            "  - {{ source: \"{}/{repo}\", targets: [\"{}/{repo}\"] }}\n",
            seedkit.host(),
            src.host()
        ));
    }
    let seeding = config::parse(&text, Path::new("seed.yaml"), &|_| None).unwrap();
    let (_, seeded) = run(&seeding).await;
    assert_eq!(seeded.totals.images_synced, 3, "{}", seeded.render_text());

    let cfg = config(
        (&src.url(), &src.host()),
        (&dst.url(), &dst.host()),
        "team/**",
        &format!("\"{}/mirror\"", dst.host()),
        "",
    );
    let (_, report) = run(&cfg).await;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    assert_eq!(report.totals.images_synced, 2);
    assert_eq!(report.expansions[0].repositories.len(), 2);
    let log = src.access_log().await.unwrap();
    assert!(
        log.count("GET", "/v2/_catalog") >= 1,
        "the real catalog was read"
    );
    let mirrored = dst.request("GET", "/v2/_catalog").await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&mirrored.body).unwrap();
    assert_eq!(
        body["repositories"],
        serde_json::json!(["mirror/app", "mirror/tools/cli"])
    );
}
