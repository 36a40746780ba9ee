//! A hostile source or target registry cannot steer, crash or overfill a sync: names that are not
//! tags are left out with their reason (the good tags beside them still sync), extreme and
//! malformed numbers, headers and bodies end one image with a clear error and the other mappings
//! finish, and a blob longer than its descriptor is cut off at its size.

mod common;

use common::{ALL_TAGS, run_sync};
use ferry_config::Config;
use ferry_sync::dryrun::DryRun;
use ferry_sync::report::{ImageStatus, Verdict};
use ferry_testkit::registry::{HostileRule, Hostility, OpKind, TestRegistry};

/// Three attempts, at most a second apart.
const RETRY: &str = "retry: { attempts: 3, base: 100ms, cap: 1s }";

/// Each of `regs` (three quick attempts), four mappings resolving at once.
fn config(regs: &[&TestRegistry], mappings: &str) -> Config {
    common::config()
        .setting("concurrency: 4")
        .registries(regs, &[RETRY])
        .mappings(mappings)
        .build()
}

fn mapping(src: &TestRegistry, repo: &str, dst: &TestRegistry) -> String {
    common::mapping(
        format!("{}/{repo}", src.host()),
        &[format!("{}/mirror/{repo}", dst.host())],
        &[ALL_TAGS],
    )
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
    let (src, dst) = common::pair().await;
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
    let common::Run { plan, report, .. } = run_sync(&config).await;

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
    let (src, dst) = common::pair().await;
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
    let report = run_sync(&config).await.report;

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
            error.to_string().contains("more than its declared")
                && error.to_string().contains("cut off"),
            "{error}"
        ),
        other => panic!("expected a failure, got {other:?}"),
    }
    // Cut at the declared size: far less than the 16 MiB the source offered was read.
    let read = report.totals.bytes_read;
    assert!(read < 4 << 20, "read {read} bytes of a 4 KiB blob");
}

/// One repository of the hostile source (or target) per attack, each with its rules.
fn attacks(src: &TestRegistry, dst: &TestRegistry) -> Vec<(&'static str, Vec<HostileRule>)> {
    let h = |name: &'static str, value: &str| Hostility::Header(name, value.as_bytes().to_vec());
    let port = src.host().rsplit_once(':').unwrap().1.to_owned();
    let _ = dst;
    vec![
        (
            "content-length",
            vec![
                HostileRule::new(
                    OpKind::ManifestHead,
                    Some("content-length"),
                    vec![h("content-length", "18446744073709551615")],
                ),
                HostileRule::new(
                    OpKind::BlobHead,
                    Some("mirror/content-length"),
                    vec![h("content-length", "18446744073709551615")],
                ),
            ],
        ),
        (
            "retry-after",
            vec![
                HostileRule::new(
                    OpKind::TagList,
                    Some("retry-after"),
                    vec![
                        Hostility::Status(429),
                        h("retry-after", "99999999999999999999999999"),
                    ],
                )
                .times(1),
                HostileRule::new(
                    OpKind::ManifestGet,
                    Some("retry-after"),
                    vec![Hostility::Status(503), h("retry-after", "-5")],
                )
                .times(1),
                HostileRule::new(
                    OpKind::BlobGet,
                    Some("retry-after"),
                    vec![
                        Hostility::Status(429),
                        h("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
                    ],
                )
                .times(1),
            ],
        ),
        (
            "ratelimit",
            vec![
                HostileRule::new(
                    OpKind::ManifestGet,
                    Some("ratelimit"),
                    vec![
                        h(
                            "ratelimit-remaining",
                            "18446744073709551615;w=18446744073709551615",
                        ),
                        h("ratelimit-limit", "18446744073709551615;w=0"),
                    ],
                ),
                HostileRule::new(
                    OpKind::TagList,
                    Some("ratelimit"),
                    vec![
                        h("ratelimit-remaining", "-1;w=x"),
                        h("ratelimit-limit", "0"),
                    ],
                ),
            ],
        ),
        (
            "link-elsewhere",
            vec![HostileRule::new(
                OpKind::TagList,
                Some("link-elsewhere"),
                vec![h(
                    "link",
                    "<http://evil.example/v2/x/tags/list?n=1>; rel=\"next\"",
                )],
            )],
        ),
        (
            "link-loop",
            vec![HostileRule::new(
                OpKind::TagList,
                Some("link-loop"),
                vec![h(
                    "link",
                    &format!("<http://127.0.0.1:{port}/v2/link-loop/tags/list>; rel=\"next\""),
                )],
            )],
        ),
        (
            "link-garbage",
            vec![HostileRule::new(
                OpKind::TagList,
                Some("link-garbage"),
                vec![h("link", "<<<\u{7f}>>>; rel=next; rel=\"next\", <")],
            )],
        ),
        (
            "digest-header",
            vec![HostileRule {
                op: None,
                repo: Some("digest-header".into()),
                answer: vec![h("docker-content-digest", "sha256:../../../../etc/passwd")],
                times: None,
                skip: 0,
            }],
        ),
        (
            "bad-manifest",
            vec![HostileRule::new(
                OpKind::ManifestGet,
                Some("bad-manifest"),
                vec![Hostility::Body(bytes_of(
                    "{\"schemaVersion\": 2, \"layers\": [{\"size\": -1",
                ))],
            )],
        ),
        (
            "huge-manifest",
            vec![HostileRule::new(
                OpKind::ManifestGet,
                Some("huge-manifest"),
                vec![Hostility::Overlong(5 << 20)],
            )],
        ),
        (
            "location",
            vec![HostileRule::new(
                OpKind::UploadStart,
                Some("mirror/location"),
                vec![h("location", "http://[::1")],
            )],
        ),
        (
            "location-elsewhere",
            vec![HostileRule::new(
                OpKind::UploadStart,
                Some("mirror/location-elsewhere"),
                vec![
                    h("location", "//evil.example/v2/x/blobs/uploads/1"),
                    h("oci-chunk-min-length", "18446744073709551615"),
                ],
            )],
        ),
    ]
}

fn bytes_of(text: &str) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(text.as_bytes())
}

#[tokio::test(start_paused = true)]
async fn extreme_and_malformed_answers_fail_their_image_clearly_and_the_rest_syncs() {
    let (src, dst) = common::pair().await;
    src.seed_image("fine", "v1", &[b"fine layer"]);
    let attacks = attacks(&src, &dst);
    let mut mappings = mapping(&src, "fine", &dst);
    for (i, (repo, rules)) in attacks.iter().enumerate() {
        let layer = format!("layer of {repo} {i}");
        src.seed_image(repo, "v1", &[layer.as_bytes()]);
        mappings += &mapping(&src, repo, &dst);
        for rule in rules {
            let handle = if rule
                .repo
                .as_deref()
                .is_some_and(|r| r.starts_with("mirror/"))
            {
                dst.hostile()
            } else {
                src.hostile()
            };
            handle.add(rule.clone());
        }
    }
    let config = config(&[&src, &dst], &mappings);
    let report = run_sync(&config).await.report;

    assert_eq!(
        dst.tags("mirror/fine"),
        ["v1"],
        "the good mapping is mirrored"
    );
    let mut outcomes = Vec::new();
    for (repo, _) in &attacks {
        let source = format!("{}/{repo}", src.host());
        let failure = report
            .failed_mappings
            .iter()
            .filter(|m| m.source == source)
            .map(|m| &m.status)
            .chain(
                report
                    .images
                    .iter()
                    .filter(|i| i.source == source)
                    .map(|i| &i.status),
            )
            .find_map(|s| match s {
                ImageStatus::Failed { error, .. } => Some(error.to_string()),
                _ => None,
            });
        let mirrored = dst.tags(&format!("mirror/{repo}"));
        outcomes.push(format!(
            "{repo}: mirrored {mirrored:?}, failure {failure:?}"
        ));
        // Either the attack was harmless and the image is mirrored, or it failed with a clear
        // error naming what was wrong; never both, never neither.
        assert!(
            mirrored == ["v1"] || failure.as_ref().is_some_and(|e| e.len() > 10),
            "{repo}: {outcomes:?}"
        );
    }
    eprintln!("{}", outcomes.join("\n"));
    let expect_failed = [
        "link-elsewhere",
        "bad-manifest",
        "huge-manifest",
        "location",
        "location-elsewhere",
    ];
    for line in &outcomes {
        let repo = line.split(':').next().unwrap();
        if expect_failed.contains(&repo) {
            assert!(line.contains("failure Some"), "{line}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_token_lifetime_at_the_u64_limit_neither_panics_nor_stops_the_run() {
    use ferry_testkit::registry::TokenAuthConfig;
    let src = TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![],
            anonymous_pull: true,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap();
    let dst = common::started().await;
    src.seed_image("app", "v1", &[b"layer"]);
    src.seed_image("other", "v1", &[b"other layer"]);
    src.hostile().add(HostileRule {
        op: Some(OpKind::Token),
        repo: None,
        answer: vec![Hostility::JsonMember(
            "expires_in",
            serde_json::json!(18_446_744_073_709_549_568u64),
        )],
        times: None,
        skip: 0,
    });
    let mappings = mapping(&src, "app", &dst) + &mapping(&src, "other", &dst);
    let report = run_sync(&config(&[&src, &dst], &mappings)).await.report;
    assert_eq!(dst.tags("mirror/app"), ["v1"]);
    assert_eq!(dst.tags("mirror/other"), ["v1"]);
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
}

#[tokio::test(start_paused = true)]
async fn layout_ref_names_that_are_not_tags_are_left_out_and_the_good_one_syncs() {
    let (src, dst) = common::pair().await;
    src.seed_image("app", "v1", &[b"layer"]);
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    let to_layout = format!(
        "  - source: \"{}/app\"\n    targets: [\"oci:{}\"]\n    tags: {{ include: [\"*\"] }}\n",
        src.host(),
        layout.display()
    );
    let report = run_sync(&config(&[&src], &to_layout)).await.report;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());

    // The same manifest, also named by hostile ref.names in index.json.
    let hostile = [
        "..\\..\\x",
        "../../etc/passwd",
        "a/b",
        "docker.io/x:..",
        "nul\u{0}byte",
        "ansi\u{1b}[2J",
    ];
    let path = layout.join("index.json");
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let good = index["manifests"][0].clone();
    for name in hostile {
        let mut entry = good.clone();
        entry["annotations"]["org.opencontainers.image.ref.name"] = serde_json::json!(name);
        index["manifests"].as_array_mut().unwrap().push(entry);
    }
    std::fs::write(&path, serde_json::to_vec(&index).unwrap()).unwrap();

    let from_layout = format!(
        "  - source: \"oci:{}\"\n    targets: [\"{}/mirror/app\"]\n    tags: {{ include: [\"*\"] }}\n",
        layout.display(),
        dst.host()
    );
    let report = run_sync(&config(&[&dst], &from_layout)).await.report;
    assert_eq!(dst.tags("mirror/app"), ["v1"]);
    let rejected: Vec<&str> = report
        .rejected_names
        .iter()
        .map(|r| r.rejected.name.as_str())
        .collect();
    // A ref.name with a '/' is a full reference: its tag is what follows the last ':' (none
    // for the two paths, '..' for docker.io/x:..). The layout lists its tags sorted.
    assert_eq!(
        rejected,
        ["..", "..\\..\\x", "ansi\u{1b}[2J", "nul\u{0}byte"]
    );
    assert_eq!(report.verdict(), Verdict::Partial);
    for r in dst.requests() {
        assert!(
            r.repo.as_deref().is_none_or(|x| x == "mirror/app"),
            "{}",
            r.path
        );
    }
}

#[tokio::test(start_paused = true)]
async fn descriptor_sizes_at_the_u64_limit_neither_panic_the_dry_run_nor_the_sync() {
    use ferry_testkit::registry::{OCI_CONFIG, OCI_LAYER_TAR, OCI_MANIFEST, sha256_digest};
    let (src, dst) = common::pair().await;
    src.seed_image("fine", "v1", &[b"fine layer"]);
    let config_blob = br#"{"architecture":"amd64","os":"linux"}"#;
    let layer = b"small layer";
    src.seed_blob("huge", config_blob);
    src.seed_blob("huge", layer);
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": sha256_digest(config_blob), "size": config_blob.len()},
        "layers": [
            {"mediaType": OCI_LAYER_TAR, "digest": sha256_digest(layer), "size": u64::MAX},
            {"mediaType": OCI_LAYER_TAR, "digest": sha256_digest(b"other"), "size": u64::MAX},
        ],
    });
    src.seed_manifest(
        "huge",
        "v1",
        OCI_MANIFEST,
        &serde_json::to_vec(&manifest).unwrap(),
    );
    let mappings = mapping(&src, "huge", &dst) + &mapping(&src, "fine", &dst);
    let config = config(&[&src, &dst], &mappings);

    let dry = common::dry_run(&config, None).await.dry;
    assert_eq!(dry.totals.bytes_to_transfer, u64::MAX, "saturated");

    let report = run_sync(&config).await.report;
    assert_eq!(dst.tags("mirror/fine"), ["v1"]);
    assert!(dst.tags("mirror/huge").is_empty());
    assert_eq!(report.totals.images_failed, 1, "{}", report.render_text());
}

#[tokio::test(start_paused = true)]
async fn a_resumed_ranged_read_longer_than_the_rest_of_the_blob_is_cut_off_too() {
    use ferry_testkit::registry::{FaultAction, FaultRule};
    let (src, dst) = common::pair().await;
    let big = ferry_testkit::noise(9, 3_000_000);
    src.seed_image("big", "v1", &[&big]);
    src.seed_image("fine", "v1", &[b"fine layer"]);
    // The first 1 MiB chunk lands but its reply is lost: the rest is read again from the
    // source with a Range, and that read sends 16 MiB more than the blob has left.
    dst.faults().push(FaultRule::on(
        OpKind::UploadPatch,
        FaultAction::AfterCommit { code: 502 },
    ));
    let big_digest = ferry_testkit::registry::sha256_digest(&big);
    src.hostile().add(
        HostileRule::new(
            OpKind::BlobGet,
            Some("big"),
            vec![Hostility::Overlong(16 << 20)],
        )
        .after(2),
    );
    let config = common::config()
        .setting("concurrency: 4")
        .engine("chunk_size: \"1MiB\", monolithic_limit: \"1MiB\"")
        .registries(&[&src, &dst], &[RETRY])
        .mappings(&(mapping(&src, "big", &dst) + &mapping(&src, "fine", &dst)))
        .build();
    let report = run_sync(&config).await.report;

    assert_eq!(dst.tags("mirror/fine"), ["v1"]);
    assert!(
        dst.tags("mirror/big").is_empty(),
        "{}",
        report.render_text()
    );
    assert!(!dst.has_blob("mirror/big", &big_digest));
    let ranged: Vec<_> = src
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::BlobGet && r.headers.iter().any(|(k, _)| k == "range"))
        .collect();
    assert!(!ranged.is_empty(), "the upload resumed with a ranged read");
    let error = report
        .images
        .iter()
        .find_map(|i| match &i.status {
            ImageStatus::Failed { error, .. } if i.source.ends_with("/big") => {
                Some(error.to_string())
            }
            _ => None,
        })
        .expect("the big image failed");
    assert!(error.contains("more than its declared"), "{error}");
    assert!(
        report.totals.bytes_read < 3_000_000 + (4 << 20) * ranged.len() as u64,
        "read {} bytes",
        report.totals.bytes_read
    );
}
