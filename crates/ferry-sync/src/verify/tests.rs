//! Unit tests of `ferry verify`: the verdict a report's findings give, the text and JSON it
//! renders, and verifies against the in-process registry and a layout after a real sync.

use std::path::Path;
use std::sync::Arc;

use ferry_testkit::registry::TestRegistry;

use super::*;

fn report(findings: Vec<Finding>, checked: u64) -> VerifyReport {
    let mut r = VerifyReport {
        authenticity: None,
        deep: false,
        signatures: false,
        mappings: vec![MappingVerify {
            index: 0,
            source: "src.example/app".into(),
            findings: Vec::new(),
            targets: vec![TargetVerify {
                target: "dst.example/app".into(),
                checked,
                findings,
            }],
        }],
        totals: VerifyTotals::default(),
    };
    r.count(0, 0);
    r
}

fn unreadable(auth: bool) -> Finding {
    Finding::Unreadable {
        what: "the mapping's listings".into(),
        http_status: Some(if auth { 401 } else { 503 }),
        auth,
        error: "refused".into(),
    }
}

#[test]
fn the_verdict_counts_missing_and_drift_not_extra_and_nothing_checked_is_its_own() {
    assert_eq!(report(vec![], 3).verdict(), VerifyVerdict::Complete);
    let extra = Finding::Extra { tag: "old".into() };
    assert_eq!(report(vec![extra], 3).verdict(), VerifyVerdict::Complete);
    let drift = Finding::Drifted {
        tag: "1.0".into(),
        expected: "sha256:aa".into(),
        found: "sha256:bb".into(),
    };
    assert_eq!(report(vec![drift], 3).verdict(), VerifyVerdict::Incomplete);
    assert_eq!(
        report(vec![unreadable(false)], 0).verdict(),
        VerifyVerdict::Unchecked
    );
    assert_eq!(
        report(vec![unreadable(false)], 2).verdict(),
        VerifyVerdict::Incomplete
    );
    assert!(report(vec![unreadable(true)], 0).all_unreadable_are_auth());
    assert!(!report(vec![unreadable(true), unreadable(false)], 0).all_unreadable_are_auth());
    assert!(!report(vec![], 1).all_unreadable_are_auth());
}

#[test]
fn text_groups_by_mapping_and_target_and_ends_in_one_verdict_line_json_has_every_finding() {
    let missing = Finding::Missing {
        kind: Missing::Blob,
        name: "sha256:cc".into(),
        digest: "sha256:cc".into(),
        of: Some("1.0".into()),
        detail: None,
    };
    let r = report(vec![missing, Finding::Extra { tag: "old".into() }], 4);
    let text = r.render_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "mapping 0 src.example/app");
    assert_eq!(lines[1], "  -> dst.example/app  4 checked, INCOMPLETE");
    assert_eq!(lines[2], "     MISSING   blob sha256:cc of 1.0");
    assert!(lines[3].starts_with("     extra     old"), "{text}");
    assert_eq!(
        lines[4],
        "verify: INCOMPLETE: 4 checked (0 children) in 1 mappings; 1 missing, 0 drifted, 1 extra, 0 unreadable"
    );
    assert_eq!(lines.len(), 5);
    let extra_only = report(vec![Finding::Extra { tag: "old".into() }], 1).render_text();
    assert!(
        extra_only.contains("  -> dst.example/app  1 checked, complete\n"),
        "{extra_only}"
    );
    let json: serde_json::Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
    assert_eq!(json["verdict"], "incomplete");
    let found = &json["mappings"][0]["targets"][0]["findings"];
    assert_eq!(found[0]["finding"], "missing");
    assert_eq!(found[0]["kind"], "blob");
    assert_eq!(found[0]["of"], "1.0");
    assert_eq!(found[1]["finding"], "extra");
    assert_eq!(json["totals"]["missing"], 1);
}

fn config(text: &str) -> Config {
    ferry_config::parse(text, Path::new("mirror.yaml"), &|_| None).unwrap()
}

async fn sync(config: &Config) {
    let outcome = match crate::run::Run::new(config.clone(), crate::run::RunContext::new(config))
        .sync()
        .await
    {
        crate::run::Outcome::Synced(outcome) => outcome,
        crate::run::Outcome::DryRun(_) => unreachable!("a writing run"),
    };
    assert_eq!(
        outcome.verdict(),
        crate::Verdict::Clean,
        "{}",
        outcome.render_text()
    );
}

fn quiet(config: &Config) -> PrepareOptions {
    let mut p = PrepareOptions::from_config(config);
    p.watch_interval = None;
    p
}

async fn verify(config: &Config, deep: bool) -> VerifyReport {
    let registries = Registries::new(config);
    let tracker = Arc::new(PrepareTracker::new(config.mappings.len()));
    run(
        config,
        &registries,
        &quiet(config),
        tracker,
        VerifyOptions {
            deep,
            signatures: false,
        },
    )
    .await
}

fn all_findings(r: &VerifyReport) -> Vec<&Finding> {
    r.mappings
        .iter()
        .flat_map(|m| {
            m.findings
                .iter()
                .chain(m.targets.iter().flat_map(|t| &t.findings))
        })
        .collect()
}

#[tokio::test]
async fn a_platform_filtered_index_is_expected_with_the_digest_the_engine_pushes() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let amd = reg.seed_image("src/app", "amd", &[b"amd64 layer"]);
    let arm = reg.seed_image("src/app", "arm", &[b"arm64 layer"]);
    let index = reg.seed_index("src/app", "1.0", &[amd, arm]);
    let config = config(&format!(
        "version: 1\nregistries:\n  - host: \"{h}\"\n    url: \"{u}\"\n    insecure: true\nmappings:\n  - source: \"{h}/src/app\"\n    targets: [\"{h}/dst/app\"]\n    tags: {{ include: [\"1.*\"] }}\n    platforms: [linux/amd64]\n",
        h = reg.host(),
        u = reg.url()
    ));
    sync(&config).await;
    let r = verify(&config, false).await;
    assert_eq!(r.verdict(), VerifyVerdict::Complete, "{}", r.render_text());
    assert_eq!(r.totals.checked, 1);
    assert_eq!(
        r.totals.children_checked, 1,
        "the filtered index has one child"
    );
    let (_, synced) = reg.manifest("dst/app", "1.0").expect("synced");
    let synced =
        ferry_distribution::Digest::of_bytes(ferry_distribution::Algorithm::Sha256, &synced)
            .to_string();
    assert_ne!(synced, index, "the filter rewrote the index");

    // The source's whole index on the target is not what a sync leaves there.
    let (media_type, bytes) = reg.manifest("src/app", &index).unwrap();
    reg.seed_manifest("dst/app", "1.0", &media_type, &bytes);
    let r = verify(&config, false).await;
    assert_eq!(r.verdict(), VerifyVerdict::Incomplete);
    assert_eq!(
        all_findings(&r),
        vec![&Finding::Drifted {
            tag: "1.0".into(),
            expected: synced.clone(),
            found: index.clone(),
        }]
    );
}

#[tokio::test]
async fn a_layout_target_is_verified_and_deep_rehashes_its_blobs() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "1.0", &[b"a layer of the image"]);
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let config = config(&format!(
        "version: 1\nregistries:\n  - host: \"{h}\"\n    url: \"{u}\"\n    insecure: true\nmappings:\n  - source: \"{h}/src/app\"\n    targets: [\"oci:{l}\"]\n    tags: {{ include: [\"*\"] }}\n",
        h = reg.host(),
        u = reg.url(),
        l = layout.display()
    ));
    sync(&config).await;
    assert_eq!(
        verify(&config, true).await.verdict(),
        VerifyVerdict::Complete
    );
    let layer = ferry_distribution::Digest::of_bytes(
        ferry_distribution::Algorithm::Sha256,
        b"a layer of the image",
    );
    let path = layout.join("blobs/sha256").join(layer.hex());
    std::fs::write(&path, b"a layer of the imagE").unwrap();
    let shallow = verify(&config, false).await;
    assert_eq!(
        shallow.verdict(),
        VerifyVerdict::Complete,
        "shallow reads no blob"
    );
    let deep = verify(&config, true).await;
    let found = all_findings(&deep);
    assert_eq!(found.len(), 1, "{}", deep.render_text());
    match found[0] {
        Finding::Missing {
            kind: Missing::Blob,
            name,
            detail: Some(detail),
            ..
        } => {
            assert_eq!(*name, layer.to_string());
            assert!(detail.starts_with("its bytes hash to sha256:"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_file(&path).unwrap();
    let deep = verify(&config, true).await;
    assert!(
        matches!(
            all_findings(&deep)[..],
            [Finding::Missing {
                kind: Missing::Blob,
                detail: None,
                ..
            }]
        ),
        "{}",
        deep.render_text()
    );
}

/// An attacker's index: the same hostile index (2000 children that do not exist) on source and
/// target, so the tag is up to date and verify walks it. It asks about at most 1024 children
/// and says why it stopped; it neither hangs nor sends 2000 HEADs.
#[tokio::test]
async fn a_hostile_index_with_thousands_of_children_costs_a_bounded_number_of_heads() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let children: Vec<String> = (0..2000u32)
        .map(|i| {
            ferry_distribution::Digest::of_bytes(
                ferry_distribution::Algorithm::Sha256,
                &i.to_be_bytes(),
            )
            .to_string()
        })
        .collect();
    reg.seed_index("src/app", "1.0", &children);
    let (media_type, bytes) = reg.manifest("src/app", "1.0").unwrap();
    reg.seed_manifest("dst/app", "1.0", &media_type, &bytes);
    let config = config(&format!(
        "version: 1\nregistries:\n  - host: \"{h}\"\n    url: \"{u}\"\n    insecure: true\nmappings:\n  - source: \"{h}/src/app\"\n    targets: [\"{h}/dst/app\"]\n    tags: {{ include: [\"*\"] }}\n",
        h = reg.host(),
        u = reg.url()
    ));
    let r = verify(&config, false).await;
    let heads = reg
        .requests()
        .iter()
        .filter(|q| q.method == "HEAD" && q.path.starts_with("/v2/dst/app/manifests/sha256:"))
        .count();
    assert_eq!(heads, content::MAX_CHILDREN, "child HEADs at the target");
    assert_eq!(r.totals.children_checked, content::MAX_CHILDREN as u64);
    assert_eq!(r.totals.missing, content::MAX_CHILDREN as u64);
    assert_eq!(r.totals.unreadable, 1, "one finding says why it stopped");
    assert!(
        all_findings(&r).iter().any(|f| matches!(
            f,
            Finding::Unreadable { what, error, .. }
                if what == "children of 1.0" && error.starts_with("more than 1024 child manifests")
        )),
        "{}",
        r.render_text()
    );
    assert_eq!(r.verdict(), VerifyVerdict::Incomplete);
}
