//! Referrer filters: `referrers: {include, exclude}` choose which referrers travel by artifact
//! type (from the referrers API, or the tag-schema index on registries without it, as
//! distribution 2.8), `true`/`false` keep working, and `require_referrers` fails an image whose
//! source has no referrer of a required type before anything is copied for it.

mod common;

use std::path::Path;

use common::{QUICK_RETRY, run_sync};
use ferry_config::{self as config, Config};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_sync::dryrun::DryRun;
use ferry_sync::report::ImageStatus;
use ferry_testkit::registry::{OCI_MANIFEST, OpKind, TestRegistry, sha256_digest};

const SBOM: &str = "application/spdx+json";
const SIG: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// `src/lib/app` (every tag) to `dst/m/app`, with `extra` appended to the mapping.
fn config(src: (&str, &str), dst: (&str, &str), extra: &str) -> Config {
    let text = format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/lib/app\"\n    targets: [\"{}/m/app\"]\n{extra}",
        common::registry_entry(src.1, src.0, &[QUICK_RETRY]),
        common::registry_entry(dst.1, dst.0, &[QUICK_RETRY]),
        src.1,
        dst.1,
    );
    common::parse(&text)
}

fn kit(src: &TestRegistry, dst: &TestRegistry, extra: &str) -> Config {
    config((&src.url(), &src.host()), (&dst.url(), &dst.host()), extra)
}

/// A referrer of `kind` with one layer of `body`, whose subject is `image` in `repo`.
fn seed_referrer(src: &TestRegistry, repo: &str, image: &str, kind: &str, body: &[u8]) -> String {
    let (image_type, image_bytes) = src.manifest(repo, image).unwrap();
    let empty = src.seed_blob(repo, b"{}");
    let layer = src.seed_blob(repo, body);
    let artifact = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","artifactType":"{kind}","config":{{"mediaType":"application/vnd.oci.empty.v1+json","digest":"{empty}","size":2}},"layers":[{{"mediaType":"{kind}","digest":"{layer}","size":{}}}],"subject":{{"mediaType":"{image_type}","digest":"{image}","size":{}}}}}"#,
        body.len(),
        image_bytes.len()
    );
    src.seed_manifest(
        repo,
        &sha256_digest(artifact.as_bytes()),
        OCI_MANIFEST,
        artifact.as_bytes(),
    )
}

/// lib/app:signed with an SBOM and a signature; lib/app:bare with an SBOM only.
struct Seeded {
    signed: String,
    bare: String,
    signed_sbom: String,
    signature: String,
    bare_sbom: String,
}

fn seed(src: &TestRegistry) -> Seeded {
    let signed = src.seed_image("lib/app", "signed", &[b"signed layer"]);
    let bare = src.seed_image("lib/app", "bare", &[b"bare layer"]);
    Seeded {
        signed_sbom: seed_referrer(src, "lib/app", &signed, SBOM, b"sbom of signed"),
        signature: seed_referrer(src, "lib/app", &signed, SIG, b"signature"),
        bare_sbom: seed_referrer(src, "lib/app", &bare, SBOM, b"sbom of bare"),
        signed,
        bare,
    }
}

async fn started(api: bool) -> TestRegistry {
    TestRegistry::builder()
        .referrers_api(api)
        .start()
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn include_and_exclude_choose_referrers_by_artifact_type_and_the_bool_still_works() {
    let src = started(true).await;
    let s = seed(&src);
    let cases: [(&str, &[&String], &[&String]); 4] = [
        (
            "    referrers: { include: [\"application/spdx+json\"] }\n",
            &[&s.signed_sbom, &s.bare_sbom],
            &[&s.signature],
        ),
        (
            "    referrers: { exclude: [\"application/spdx+json\"] }\n",
            &[&s.signature],
            &[&s.signed_sbom, &s.bare_sbom],
        ),
        (
            "    referrers: true\n",
            &[&s.signed_sbom, &s.bare_sbom, &s.signature],
            &[],
        ),
        (
            "    referrers: false\n",
            &[],
            &[&s.signed_sbom, &s.bare_sbom, &s.signature],
        ),
    ];
    for (extra, there, absent) in cases {
        // A target without the API: the chosen referrers are listed in the subject's
        // tag-schema index, and only they.
        let dst = started(false).await;
        let report = run_sync(&kit(&src, &dst, extra)).await.report;
        assert_eq!(
            report.totals.images_failed,
            0,
            "{extra}{}",
            report.render_text()
        );
        assert_eq!(
            dst.tags("m/app")
                .iter()
                .filter(|t| !t.starts_with("sha256-"))
                .count(),
            2
        );
        for d in there {
            assert!(
                dst.manifest("m/app", d).is_some(),
                "{extra}: {d} should travel"
            );
        }
        for d in absent {
            assert!(
                dst.manifest("m/app", d).is_none(),
                "{extra}: {d} should not travel"
            );
        }
        let fallback = format!("sha256-{}", s.signed.trim_start_matches("sha256:"));
        let listed: Vec<String> = dst
            .manifest("m/app", &fallback)
            .map(|(_, bytes)| {
                let index: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                index["manifests"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["digest"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        for d in absent {
            assert!(!listed.contains(d), "{extra}: the index lists {d}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn require_referrers_fails_an_unsigned_image_before_anything_is_pushed_for_it() {
    let src = started(true).await;
    let dst = started(true).await;
    let s = seed(&src);
    let cfg = kit(
        &src,
        &dst,
        "    require_referrers: [\"application/vnd.dev.sigstore.bundle.v0.3+json\"]\n",
    );
    let common::Run { plan, report, .. } = run_sync(&cfg).await;

    assert_eq!(dst.tags("m/app"), ["signed"], "{}", report.render_text());
    assert!(dst.manifest("m/app", &s.signature).is_some());
    assert!(dst.manifest("m/app", &s.signed_sbom).is_some());
    assert!(
        dst.manifest("m/app", &s.bare).is_none(),
        "nothing of bare is written"
    );
    assert!(
        dst.manifest("m/app", &s.bare_sbom).is_none(),
        "nor its referrers"
    );
    let bare_layer = sha256_digest(b"bare layer");
    assert!(
        !dst.has_blob("m/app", &bare_layer),
        "no blob of bare is uploaded"
    );
    assert!(
        !dst.requests()
            .iter()
            .any(|r| r.path.contains(bare_layer.trim_start_matches("sha256:"))),
        "no request about bare's layer reached the target"
    );

    let failed: Vec<String> = report
        .images
        .iter()
        .filter_map(|i| match &i.status {
            ImageStatus::Failed { error, .. } => {
                assert_eq!(i.image, "bare");
                Some(error.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "{}", report.render_text());
    assert!(
        failed[0].contains("require_referrers: bare")
            && failed[0].contains(SIG)
            && failed[0].contains(&format!("it has: {SBOM}")),
        "{}",
        failed[0]
    );
    let dry = DryRun::from_plan(&plan);
    assert_eq!(dry.mappings[0].unfetched[0].tag, "bare");
    assert!(
        dry.mappings[0].unfetched[0]
            .reason
            .contains("require_referrers")
    );

    // Required and present everywhere: clean; the lookup sends no write.
    let dst2 = started(true).await;
    let ok = run_sync(&kit(
        &src,
        &dst2,
        "    require_referrers: [\"application/spdx+json\"]\n",
    ))
    .await
    .report;
    assert_eq!(ok.totals.images_failed, 0, "{}", ok.render_text());
    assert_eq!(src.stats().op(OpKind::ManifestPut), 0);
}

#[test]
fn artifact_types_are_checked_where_the_config_names_them() {
    let parse = |extra: &str| {
        let text =
            format!("version: 1\nmappings:\n  - source: r.io/a\n    targets: [m.io/a]\n{extra}");
        config::parse(&text, Path::new("m.yaml"), &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = parse("    referrers: { include: [\"not a type\"] }\n");
    assert!(e.contains("\"not a type\" is not an artifact type"), "{e}");
    let e = parse("    require_referrers: [\"../x\"]\n");
    assert!(
        e.contains("require_referrers[0]") && e.contains("is not an artifact type"),
        "{e}"
    );
    let e = parse(
        "    referrers: { include: [\"application/spdx+json\"], exclude: [\"application/spdx+json\"] }\n",
    );
    assert!(e.contains("is both included and excluded"), "{e}");
    let e = parse("    referrers: { includ: [\"application/spdx+json\"] }\n");
    assert!(
        e.contains("5:18: mappings[0] (source r.io/a): referrers")
            && e.contains("unknown field `includ`"),
        "{e}"
    );
    let e = parse("    referrers: yes please\n");
    assert!(e.contains("expected true, false, or {include"), "{e}");
    let ok = config::parse(
        "version: 1\ndefaults: { require_referrers: [\"cosign:sig\"] }\nmappings:\n  - { source: r.io/a, targets: [m.io/a], referrers: { exclude: [\"cosign:sbom\"] } }\n",
        Path::new("m.yaml"),
        &|_| None,
    )
    .unwrap();
    let m = &ok.mappings[0];
    assert!(m.referrers);
    assert_eq!(m.require_referrers, ["cosign:sig"]);
    assert_eq!(m.referrer_filter.exclude, ["cosign:sbom"]);
}

/// distribution 2.8 has no referrers API: referrers live in the tag-schema index. A first
/// mirror from the test kit writes that index on the real registry; from there a filter picks
/// entries out of it, and `require_referrers` reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_real_registry_filters_and_requirements_read_the_tag_schema_index() {
    let Some((a, b)) = common::real_pair().await else {
        return;
    };
    let src = started(true).await;
    let s = seed(&src);
    let to_a = config((&src.url(), &src.host()), (&a.url(), &a.host()), "");
    let seeded = run_sync(&to_a).await.report;
    assert_eq!(seeded.totals.images_failed, 0, "{}", seeded.render_text());

    // a/m/app -> b/m/app with only SBOMs: b's index for `signed` lists the SBOM alone.
    let text = format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/m/app\"\n    targets: [\"{}/m/app\"]\n    tags: {{ exact: [signed, bare] }}\n    referrers: {{ include: [\"application/spdx+json\"] }}\n",
        common::registry_entry(&a.host(), &a.url(), &[QUICK_RETRY]),
        common::registry_entry(&b.host(), &b.url(), &[QUICK_RETRY]),
        a.host(),
        b.host()
    );
    let cfg = config::parse(&text, Path::new("real.yaml"), &|_| None).unwrap();
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_failed, 0, "{}", report.render_text());
    let fallback = format!("sha256-{}", s.signed.trim_start_matches("sha256:"));
    let client = RegistryClient::new(RegistryOptions::insecure_at(&b.url())).unwrap();
    let index = client.get_manifest("m/app", &fallback).await.unwrap();
    let index: serde_json::Value = serde_json::from_slice(&index.bytes).unwrap();
    let listed: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["digest"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [s.signed_sbom.as_str()]);
    assert!(
        client
            .head_manifest("m/app", &s.signature)
            .await
            .unwrap()
            .is_none(),
        "the signature did not travel"
    );

    // require a signature: `bare` has none on a and fails; `signed` lands.
    let text = text.replace(
        "    referrers: { include: [\"application/spdx+json\"] }\n",
        &format!("    require_referrers: [\"{SIG}\"]\n"),
    );
    let text = text.replace(
        &format!("{}/m/app\"]", b.host()),
        &format!("{}/n/app\"]", b.host()),
    );
    let cfg = config::parse(&text, Path::new("real.yaml"), &|_| None).unwrap();
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.totals.images_failed, 1, "{}", report.render_text());
    assert_eq!(
        report.totals.images_synced, 2,
        "signed, and its tag-schema index (which carries its SBOM and signature)"
    );
    assert!(
        client
            .head_manifest("n/app", "bare")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        client
            .head_manifest("n/app", "signed")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_tag_schema_index_fails_the_referrer_on_that_target_only() {
    use ferry_testkit::registry::{HostileRule, Hostility};
    // One mapping, two targets: `a` has no referrers API (the referrer is listed in its
    // subject's tag-schema index, whose PUT is refused), `b` has one. The failure belongs to
    // the referrer's report on `a`; on `b` the same referrer stays synced.
    let src = started(true).await;
    let image = src.seed_image("lib/app", "v1", &[b"layer"]);
    let sbom = seed_referrer(&src, "lib/app", &image, SBOM, b"sbom");
    let a = started(false).await;
    let b = started(true).await;
    // On `a`: the image's PUT and the referrer's go through; the third, the index, is refused.
    a.hostile().add(
        HostileRule::new(
            OpKind::ManifestPut,
            Some("m/app"),
            vec![Hostility::Status(400)],
        )
        .after(2),
    );
    let text = format!(
        "version: 1\nregistries:\n{}{}{}mappings:\n  - source: \"{}/lib/app\"\n    targets: [\"{}/m/app\", \"{}/m/app\"]\n    referrers: true\n",
        common::registry_entry(&src.host(), &src.url(), &[QUICK_RETRY]),
        common::registry_entry(&a.host(), &a.url(), &[QUICK_RETRY]),
        common::registry_entry(&b.host(), &b.url(), &[QUICK_RETRY]),
        src.host(),
        a.host(),
        b.host(),
    );
    let report = run_sync(&common::parse(&text)).await.report;
    let rendered = report.render_text();
    let status = |host: &str| {
        report
            .images
            .iter()
            .find(|i| i.image == sbom && i.target == format!("{host}/m/app"))
            .map(|i| i.status.clone())
            .unwrap_or_else(|| panic!("no report for the referrer on {host}: {rendered}"))
    };
    assert!(
        matches!(status(&a.host()), ImageStatus::Failed { .. }),
        "{rendered}"
    );
    assert_eq!(status(&b.host()), ImageStatus::Synced, "{rendered}");
    assert!(b.manifest("m/app", &sbom).is_some());
    assert_eq!(report.totals.images_failed, 1, "{rendered}");
}
