//! The sync engine end to end under each test-kit registry personality (docker's upload flow
//! only, no chunked PATCH, mounts ignored or refused, no tag listing, no referrers API, no tag
//! deletion, no one-component names): everything that does not need the missing capability is
//! copied with the same digests, the capability is learned once and shown in the report, and
//! learning it spends no retry. The same scenario against the real registry is in
//! engine_real_registry.rs.

mod common;

use common::run_sync;
use ferry_config::Config;
use ferry_distribution::capabilities::{CapabilitiesSnapshot, Support, UploadFlow};
use ferry_sync::report::{ImageStatus, SyncReport};
use ferry_testkit::registry::{OpKind, Personality, TestRegistry};

fn config(regs: &[&TestRegistry], mappings: &str) -> Config {
    common::engine_config(regs)
        .engine("chunk_size: \"1MiB\", monolithic_limit: \"1MiB\"")
        .mappings(mappings)
        .build()
}

fn capabilities(report: &SyncReport, reg: &TestRegistry) -> CapabilitiesSnapshot {
    report
        .registries
        .iter()
        .find(|r| r.registry == reg.host())
        .map(|r| r.capabilities)
        .expect("the registry is in the report")
}

/// Requests that write to `reg`, outside the one-component repository `app`.
fn writes_outside_app(reg: &TestRegistry) -> usize {
    reg.requests()
        .iter()
        .filter(|r| {
            matches!(
                r.op,
                OpKind::ManifestPut
                    | OpKind::UploadStart
                    | OpKind::UploadMonolithic
                    | OpKind::UploadPatch
                    | OpKind::UploadPut
                    | OpKind::Mount
                    | OpKind::ManifestDelete
            ) && r.repo.as_deref() != Some("app")
        })
        .count()
}

/// 500 answers the registry gave (the refused PUTs of a docker-flow-only registry).
fn server_errors(reg: &TestRegistry) -> u64 {
    reg.requests().iter().filter(|r| r.status >= 500).count() as u64
}

/// A multi-arch index over two images sharing a base layer, a 3 MB image (above the
/// monolithic limit: chunked), and a cosign-style signature tag of the index.
fn seed(src: &TestRegistry) -> Vec<String> {
    let amd = src.seed_image("lib/app", "1.0-amd64", &[b"base layer", b"amd64 layer"]);
    let arm = src.seed_image("lib/app", "1.0-arm64", &[b"base layer", b"arm64 layer"]);
    let index = src.seed_index("lib/app", "1.0", &[amd, arm]);
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    src.seed_image("lib/app", "big", &[&big]);
    let sig = format!("{}.sig", index.replace(':', "-"));
    src.seed_image("lib/app", &sig, &[b"a signature"]);
    vec!["1.0".into(), "big".into(), sig]
}

/// Copies `1.0` and `big` (an exact-only mapping, referrers on) from a source to three
/// repositories of a target, both with `personality`; checks what every personality must keep,
/// and returns the first run's report for the personality's own checks.
async fn scenario(
    name: &str,
    personality: Personality,
) -> (SyncReport, TestRegistry, TestRegistry) {
    let (src, dst) = common::pair_with(|b| b.personality(personality)).await;
    let tags = seed(&src);
    let d = dst.host();
    let mapping = format!(
        "  - source: \"{}/lib/app\"\n    targets: [\"{d}/mirror/app\", \"{d}/second/app\", \"{d}/app\"]\n    tags: {{ exact: [\"1.0\", \"big\"] }}\n",
        src.host()
    );
    let cfg = config(&[&src, &dst], &mapping);
    let report = run_sync(&cfg).await.report;
    let text = report.render_text();

    // Every image reaches every namespaced repository, byte for byte.
    for repo in ["mirror/app", "second/app"] {
        for tag in &tags {
            let copied = dst.manifest(repo, tag);
            assert!(copied.is_some(), "{name}: {repo}:{tag} missing\n{text}");
            assert_eq!(copied, src.manifest("lib/app", tag), "{name}: {repo}:{tag}");
        }
        for tag in dst.tags(repo) {
            let (_, bytes) = dst.manifest(repo, &tag).unwrap();
            let m: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            let children = m["manifests"].as_array().cloned().unwrap_or_default();
            for c in children {
                assert!(dst.manifest(repo, c["digest"].as_str().unwrap()).is_some());
            }
            if let Some(layers) = m["layers"].as_array() {
                for l in layers.iter().chain([&m["config"]]) {
                    assert!(dst.has_blob(repo, l["digest"].as_str().unwrap()), "{name}");
                }
            }
        }
    }
    // Only the one-component repository may fail, and only where such names are refused.
    for i in &report.images {
        let to_app = i.target == format!("{d}/app");
        match (&i.status, to_app && personality.one_component_names_refused) {
            (ImageStatus::Synced, false) => {}
            (ImageStatus::Failed { error, .. }, true) => {
                assert!(
                    error.to_string().contains("one-component"),
                    "{name}: {error}"
                );
            }
            (status, _) => panic!("{name}: {} -> {}: {status:?}\n{text}", i.image, i.target),
        }
    }
    assert_eq!(report.failed_mappings.len(), 0, "{name}\n{text}");
    // Learning a capability is not a failure: no refusal was retried (a retry here could only
    // follow a broken connection, which a loaded machine may cause), no breaker opened.
    let unexplained: u64 = report
        .registries
        .iter()
        .map(|r| r.stats.retries.saturating_sub(r.stats.transport_errors))
        .sum();
    assert_eq!(unexplained, 0, "{name}: retries\n{text}");
    // The refused PUTs were answered 500, and none reached the retry loop's books (nor so the
    // breaker's): they taught the flow instead.
    assert_eq!(
        personality.put_with_body_refused,
        server_errors(&dst) > 0,
        "{name}: 500s seen by the target"
    );
    let recorded: u64 = report
        .registries
        .iter()
        .map(|r| r.stats.server_errors)
        .sum();
    assert_eq!(
        recorded, 0,
        "{name}: 5xx recorded against a registry\n{text}"
    );
    assert!(!text.contains("breaker"), "{name}\n{text}");

    // A warm re-run writes nothing where everything landed.
    dst.reset_stats();
    let warm = run_sync(&cfg).await.report;
    assert_eq!(
        writes_outside_app(&dst),
        0,
        "{name}\n{}",
        warm.render_text()
    );
    assert_eq!(
        warm.totals.images_up_to_date,
        if personality.one_component_names_refused {
            6
        } else {
            9
        },
        "{name}\n{}",
        warm.render_text()
    );
    (report, src, dst)
}

#[tokio::test(start_paused = true)]
async fn a_registry_without_quirks_keeps_the_cheapest_flow_and_mounts() {
    let (report, src, dst) = scenario("plain", Personality::default()).await;
    let caps = capabilities(&report, &dst);
    assert_eq!(caps.upload_flow, UploadFlow::Monolithic);
    assert_eq!(caps.mount, Support::Works);
    assert_eq!(caps.one_component_names, Support::Unknown);
    // No listing of the source: two exact tags cost two manifest GETs, four HEAD probes per
    // image for signature tags, and no tags/list.
    assert_eq!(src.stats().op(OpKind::TagList), 0);
    assert!(
        report
            .render_text()
            .contains(&format!("registry {}: upload flow monolithic", dst.host()))
    );
}

#[tokio::test(start_paused = true)]
async fn a_docker_flow_only_registry_gets_every_blob_through_docker_flow() {
    let (report, _, dst) = scenario("docker_flow_only", Personality::docker_flow_only()).await;
    assert_eq!(capabilities(&report, &dst).upload_flow, UploadFlow::Docker);
    let text = report.render_text();
    assert!(text.contains("upload flow docker"), "{text}");
    let json = serde_json::to_value(&report).unwrap();
    let entry = json["registries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["registry"] == dst.host())
        .unwrap()
        .clone();
    assert_eq!(entry["capabilities"]["upload_flow"], "docker");
}

#[tokio::test(start_paused = true)]
async fn a_registry_refusing_chunked_patches_takes_the_large_blob_in_one_patch() {
    let (report, _, dst) = scenario("no_chunked_patch", Personality::no_chunked_patch()).await;
    assert_eq!(capabilities(&report, &dst).upload_flow, UploadFlow::Docker);
    assert_eq!(capabilities(&report, &dst).chunked_patch, Support::Refused);
}

#[tokio::test(start_paused = true)]
async fn a_registry_ignoring_mounts_is_uploaded_to_and_asked_no_more() {
    let (report, _, dst) = scenario("no_mount", Personality::no_mount()).await;
    assert_eq!(capabilities(&report, &dst).mount, Support::Ignored);
}

#[tokio::test(start_paused = true)]
async fn a_registry_refusing_mounts_is_uploaded_to() {
    let (report, _, dst) = scenario("mount_refused", Personality::mount_refused()).await;
    assert_eq!(capabilities(&report, &dst).mount, Support::Refused);
}

#[tokio::test(start_paused = true)]
async fn a_registry_refusing_tag_listing_is_compared_by_head() {
    let (report, src, dst) = scenario("no_tag_list", Personality::no_tag_list()).await;
    assert_eq!(capabilities(&report, &dst).tag_list, Support::Refused);
    assert_eq!(capabilities(&report, &src).tag_list, Support::Unknown);
}

#[tokio::test(start_paused = true)]
async fn a_source_without_referrers_api_still_gives_its_signature_tags() {
    let (report, src, _) = scenario("no_referrers_api", Personality::no_referrers_api()).await;
    assert_eq!(capabilities(&report, &src).referrers_api, Support::Refused);
}

#[tokio::test(start_paused = true)]
async fn a_registry_refusing_one_component_names_fails_only_those_images() {
    let (report, _, dst) = scenario(
        "no_one_component_names",
        Personality::no_one_component_names(),
    )
    .await;
    assert_eq!(
        capabilities(&report, &dst).one_component_names,
        Support::Refused
    );
    assert!(dst.tags("app").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_registry_refusing_tag_deletes_copies_everything_and_reports_the_refusal() {
    let (_, src, dst) = scenario("no_tag_delete", Personality::no_tag_delete()).await;
    // Pruning needs a listing and a delete: the target refuses the delete, learned once.
    dst.seed_image("mirror/app", "gone", &[b"old layer"]);
    let mapping = format!(
        "  - source: \"{}/lib/app\"\n    targets: [\"{}/mirror/app\"]\n    tags: {{ include: [\"*\"] }}\n    prune: true\n",
        src.host(),
        dst.host()
    );
    let cfg = config(&[&src, &dst], &mapping);
    let run = run_sync(&cfg).await;
    let report = run.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    let pruned = run.pruned.expect("the mapping prunes");
    assert_eq!(pruned.unsupported, 1, "{}", pruned.render_text());
    assert_eq!(capabilities(&report, &dst).tag_delete, Support::Refused);
    assert!(dst.tags("mirror/app").contains(&"gone".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_docker_flow_only_registry_keeps_large_blobs_chunked_and_resumable() {
    use std::time::Duration;
    // The large image's repository answers late, so its blob goes up after the small blobs
    // have taught docker's flow: it must still go up in chunks (each one a resume point).
    let src = TestRegistry::builder()
        .repo_latency("lib/slow", Duration::from_secs(20))
        .start()
        .await
        .unwrap();
    let dst = TestRegistry::builder()
        .personality(Personality::docker_flow_only())
        .start()
        .await
        .unwrap();
    src.seed_image("lib/app", "1", &[b"small layer"]);
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 241) as u8).collect();
    src.seed_image("lib/slow", "1", &[&big]);
    let mapping = |repo: &str| {
        format!(
            "  - source: \"{}/{repo}\"\n    targets: [\"{}/m/{repo}\"]\n    tags: {{ exact: [\"1\"] }}\n",
            src.host(),
            dst.host()
        )
    };
    let cfg = config(
        &[&src, &dst],
        &format!("{}{}", mapping("lib/app"), mapping("lib/slow")),
    );
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_synced, 2, "{}", report.render_text());
    assert_eq!(capabilities(&report, &dst).upload_flow, UploadFlow::Docker);
    let big_digest = ferry_testkit::registry::sha256_digest(&big);
    assert_eq!(dst.blob(&big_digest).as_deref(), Some(&big[..]));
    let chunks = dst
        .requests()
        .iter()
        .filter(|r| {
            r.op == OpKind::UploadPatch
                && r.repo.as_deref() == Some("m/lib/slow")
                && r.headers.iter().any(|(k, _)| k == "content-range")
        })
        .count();
    assert_eq!(chunks, 3, "3 MB in 1 MiB chunks");
}
