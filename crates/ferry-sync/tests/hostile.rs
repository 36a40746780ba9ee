//! A hostile source or target registry cannot steer, crash or overfill a sync: names that are not
//! tags are left out with their reason (the good tags beside them still sync), extreme and
//! malformed numbers, headers and bodies end one image with a clear error and the other mappings
//! finish, and a blob longer than its descriptor is cut off at its size.

use std::path::Path;
use std::sync::Arc;

use ferry_sync::config::{self, Config};
use ferry_sync::dryrun::DryRun;
use ferry_sync::engine::{EngineOptions, StopSignal, sync};
use ferry_sync::prepare::{PrepareOptions, PrepareTracker, resolve_all};
use ferry_sync::registries::Registries;
use ferry_sync::report::{ImageStatus, SyncReport, Verdict};
use ferry_testkit::registry::{HostileRule, Hostility, OpKind, TestRegistry};

fn registry_yaml(reg: &TestRegistry) -> String {
    format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    retry: {{ attempts: 3, base: 100ms, cap: 1s }}\n",
        reg.host(),
        reg.url()
    )
}

fn config(regs: &[&TestRegistry], mappings: &str) -> Config {
    let registries: String = regs.iter().map(|r| registry_yaml(r)).collect();
    let text =
        format!("version: 1\nconcurrency: 4\nregistries:\n{registries}mappings:\n{mappings}");
    config::parse(&text, Path::new("test.yaml"), &|_| None).expect("test config parses")
}

fn mapping(src: &TestRegistry, repo: &str, dst: &TestRegistry) -> String {
    format!(
        "  - source: \"{}/{repo}\"\n    targets: [\"{}/mirror/{repo}\"]\n    tags: {{ include: [\"*\"] }}\n",
        src.host(),
        dst.host()
    )
}

async fn plan_and_sync(config: &Config) -> (ferry_sync::plan::Plan, SyncReport) {
    let registries = Registries::new(config);
    let mut prepare = PrepareOptions::from_config(config);
    prepare.watch_interval = None;
    let tracker = Arc::new(PrepareTracker::new(config.mappings.len()));
    let plan = resolve_all(config, &registries, &prepare, tracker).await;
    let options = EngineOptions::from_settings(&config.engine);
    let report = sync(&plan, &registries, &options, &StopSignal::default()).await;
    (plan, report)
}

const HOSTILE_NAMES: [&str; 6] = [
    "x/../../../repo-0001/manifests/v0",
    "..",
    "a%2fb",
    "..\\..\\x",
    "evil\u{1b}[2J",
    "-rc",
];

#[tokio::test(start_paused = true)]
async fn names_that_are_not_tags_are_left_out_and_the_good_tags_still_sync() {
    let src = TestRegistry::builder().start().await.unwrap();
    let dst = TestRegistry::builder().start().await.unwrap();
    src.seed_image("app", "v1", &[b"good layer"]);
    // A manifest elsewhere that a steered request would reach and copy.
    src.seed_image("repo-0001", "v0", &[b"another repository"]);
    src.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("app"),
        vec![Hostility::ExtraTags(
            HOSTILE_NAMES.iter().map(|s| s.to_string()).collect(),
        )],
    ));
    let config = config(&[&src, &dst], &mapping(&src, "app", &dst));
    let (plan, report) = plan_and_sync(&config).await;

    assert_eq!(dst.tags("mirror/app"), ["v1"], "the good tag is mirrored");
    let synced: Vec<_> = report
        .images
        .iter()
        .filter(|i| i.status == ImageStatus::Synced)
        .map(|i| i.image.as_str())
        .collect();
    assert_eq!(synced, ["v1"]);
    let rejected: Vec<&str> = report
        .rejected_names
        .iter()
        .map(|r| r.rejected.name.as_str())
        .collect();
    assert_eq!(
        rejected, HOSTILE_NAMES,
        "every bad name left out, with its reason"
    );
    assert!(
        report
            .rejected_names
            .iter()
            .all(|r| r.rejected.reason.contains("tag"))
    );
    assert_eq!(
        report.verdict(),
        Verdict::Partial,
        "the exit code says something was left out"
    );

    // No request went anywhere but the mapped repository, on either side.
    for r in src.requests() {
        assert!(
            r.repo.as_deref().is_none_or(|repo| repo == "app"),
            "source request outside the mapping: {} {}",
            r.method,
            r.path
        );
        assert!(!r.path.contains(".."), "{}", r.path);
    }
    for r in dst.requests() {
        assert!(
            r.repo.as_deref().is_none_or(|repo| repo == "mirror/app"),
            "target request outside the mapping: {} {}",
            r.method,
            r.path
        );
    }
    assert!(dst.tags("repo-0001").is_empty());

    // The dry run and its JSON say the same.
    let dry = DryRun::from_plan(&plan);
    let text = dry.render_text();
    assert!(text.contains("invalid \"..\""), "{text}");
    assert!(
        text.contains("\\u{1b}"),
        "control characters are escaped: {text}"
    );
    let json = serde_json::to_value(&dry).unwrap();
    assert_eq!(
        json["mappings"][0]["rejected_names"]
            .as_array()
            .map(Vec::len),
        Some(HOSTILE_NAMES.len()),
        "{json}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["rejected_names"][1]["name"], "..", "{json}");
    assert!(report.render_text().contains("not a valid tag"));
}

#[tokio::test(start_paused = true)]
async fn a_blob_longer_than_its_descriptor_is_cut_off_and_fails_only_its_image() {
    let src = TestRegistry::builder().start().await.unwrap();
    let dst = TestRegistry::builder().start().await.unwrap();
    let layer = vec![7u8; 4096];
    src.seed_image("long", "v1", &[&layer]);
    src.seed_image("fine", "v1", &[b"fine layer"]);
    let layer_digest = ferry_testkit::registry::sha256_digest(&layer);
    let extra = 16 << 20;
    src.hostile().add(HostileRule::new(
        OpKind::BlobGet,
        Some("long"),
        vec![Hostility::Overlong(extra)],
    ));
    let mappings = mapping(&src, "long", &dst) + &mapping(&src, "fine", &dst);
    let config = config(&[&src, &dst], &mappings);
    let (_, report) = plan_and_sync(&config).await;

    assert_eq!(dst.tags("mirror/fine"), ["v1"]);
    assert!(
        dst.tags("mirror/long").is_empty(),
        "nothing tagged on cut-off content"
    );
    assert!(!dst.has_blob("mirror/long", &layer_digest));
    let failed = report
        .images
        .iter()
        .find(|i| i.source.ends_with("/long"))
        .unwrap();
    match &failed.status {
        ImageStatus::Failed { error, .. } => assert!(
            error.contains("more than its declared") && error.contains("cut off"),
            "{error}"
        ),
        other => panic!("expected a failure, got {other:?}"),
    }
    // Cut at the declared size: far less than the 16 MiB the source offered was read.
    let read = report.totals.bytes_read;
    assert!(read < 4 << 20, "read {read} bytes of a 4 KiB blob");
}
