//! `signatures:`: a mapping mirrors an image only when a cosign `.sig` layer or a Sigstore
//! bundle referrer for its exact digest verifies (key, keyless under a custom trusted root, v3
//! bundle, a multi-arch index signed at the index); every other image is refused by name, with
//! its reason, and nothing of it reaches the target, while the rest of the mapping is mirrored.
//! `min_age` holds a too-new image (not a failure) until the policy allows it.

mod common;

use std::collections::BTreeMap;

use common::{QUICK_RETRY, run_sync};
use ferry_config::Config;
use ferry_distribution::Digest;
use ferry_sync::report::{ImageStatus, Verdict};
use ferry_testkit::registry::{OCI_MANIFEST, TestRegistry, sha256_digest};
use ferry_testkit::trust_signer::{
    Keyless, SignedLayer, TestSigstore, key_signed_layer, simple_signing_payload,
};
use ferry_trust::PrivateKey;

const BUNDLE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
const PAYLOAD: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
const ISSUER: &str = "https://token.actions.githubusercontent.com";
const SUBJECT: &str = "https://github.com/acme/app/.github/workflows/release.yml@refs/heads/main";
const REPO: &str = "lib/app";

struct Trust {
    dir: tempfile::TempDir,
    sigstore: TestSigstore,
    key: PrivateKey,
}

impl Trust {
    fn new() -> Trust {
        let dir = tempfile::tempdir().unwrap();
        let sigstore = TestSigstore::new();
        let key = PrivateKey::generate_p256();
        std::fs::write(dir.path().join("release.pub"), key.public_key().to_pem()).unwrap();
        std::fs::write(dir.path().join("root.json"), sigstore.root_json()).unwrap();
        Trust { dir, sigstore, key }
    }

    /// The mapping's `signatures:` block (`extra` appended inside it).
    fn policy(&self, extra: &str) -> String {
        format!(
            "    signatures:\n      keys: [\"{}\"]\n      identities:\n        - {{issuer: \"{ISSUER}\", subject_regexp: \"^https://github.com/acme/.+$\"}}\n      trusted_root: \"{}\"\n{extra}",
            self.dir.path().join("release.pub").display(),
            self.dir.path().join("root.json").display(),
        )
    }
}

fn config(src: &TestRegistry, dst: &TestRegistry, extra: &str) -> Config {
    let text = format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/{REPO}\"\n    targets: [\"{}/m/app\"]\n{extra}",
        common::registry_entry(&src.host(), &src.url(), &[QUICK_RETRY]),
        common::registry_entry(&dst.host(), &dst.url(), &[QUICK_RETRY]),
        src.host(),
        dst.host(),
    );
    common::parse(&text)
}

fn digest(d: &str) -> Digest {
    d.parse().unwrap()
}

/// The cosign `.sig` manifest for `subject`, its payloads seeded as layers, tagged
/// `sha256-<hex>.sig`; returns its digest.
fn seed_sig(src: &TestRegistry, subject: &str, layers: &[SignedLayer]) -> String {
    let config = src.seed_blob(REPO, b"{}");
    let descriptors: Vec<serde_json::Value> = layers
        .iter()
        .map(|l| {
            let d = src.seed_blob(REPO, &l.payload);
            serde_json::json!({"mediaType": PAYLOAD, "digest": d, "size": l.payload.len(), "annotations": l.annotations})
        })
        .collect();
    let manifest = serde_json::json!({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
        "layers": descriptors,
    })
    .to_string();
    let tag = format!("sha256-{}.sig", subject.trim_start_matches("sha256:"));
    src.seed_manifest(REPO, &tag, OCI_MANIFEST, manifest.as_bytes())
}

/// A Sigstore bundle attached to `subject` as a referrer (artifactType v0.3); returns its digest.
fn seed_bundle(src: &TestRegistry, subject: &str, bundle: &[u8]) -> String {
    let (subject_type, subject_bytes) = src.manifest(REPO, subject).unwrap();
    let empty = src.seed_blob(REPO, b"{}");
    let layer = src.seed_blob(REPO, bundle);
    let artifact = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","artifactType":"{BUNDLE}","config":{{"mediaType":"application/vnd.oci.empty.v1+json","digest":"{empty}","size":2}},"layers":[{{"mediaType":"{BUNDLE}","digest":"{layer}","size":{}}}],"subject":{{"mediaType":"{subject_type}","digest":"{subject}","size":{}}}}}"#,
        bundle.len(),
        subject_bytes.len()
    );
    src.seed_manifest(
        REPO,
        &sha256_digest(artifact.as_bytes()),
        OCI_MANIFEST,
        artifact.as_bytes(),
    )
}

async fn registry() -> TestRegistry {
    TestRegistry::builder()
        .referrers_api(true)
        .start()
        .await
        .unwrap()
}

/// Every image on the target by tag (signature tags aside).
fn images_on(dst: &TestRegistry) -> Vec<String> {
    dst.tags("m/app")
        .into_iter()
        .filter(|t| !t.starts_with("sha256-"))
        .collect()
}

/// Each failed image of the report with its refusal reason (from the JSON report row).
fn refusals(report: &ferry_sync::report::SyncReport) -> BTreeMap<String, String> {
    report
        .images
        .iter()
        .filter(|i| matches!(i.status, ImageStatus::Failed { .. }))
        .map(|i| {
            let json = serde_json::to_value(i).unwrap();
            assert_eq!(json["operation"], "signature verify", "{json}");
            (
                i.image.clone(),
                json["signature"]["reason"]
                    .as_str()
                    .unwrap_or("?")
                    .to_owned(),
            )
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn signed_images_are_mirrored_with_their_signatures_and_every_other_is_refused_by_name() {
    let trust = Trust::new();
    let (src, dst) = (registry().await, registry().await);
    let s = &trust.sigstore;
    let who = Keyless::new(ISSUER, SUBJECT);

    // Mirrored: key-signed (tag scheme, logged), keyless with a SET (tag scheme), a v3 DSSE
    // bundle referrer, and a multi-arch index signed at the index digest.
    let key = src.seed_image(REPO, "key", &[b"key layer"]);
    let key_sig = seed_sig(
        &src,
        &key,
        &[s.key_signed_layer_logged(
            &trust.key,
            &digest(&key),
            ferry_testkit::trust_signer::SIGNED_AT,
        )],
    );
    let keyless = src.seed_image(REPO, "keyless", &[b"keyless layer"]);
    let keyless_sig = seed_sig(&src, &keyless, &[s.keyless_layer(&who, &digest(&keyless))]);
    let bundled = src.seed_image(REPO, "bundle", &[b"bundle layer"]);
    let bundle = seed_bundle(&src, &bundled, &s.dsse_bundle(&who, &digest(&bundled)));
    let amd = src.seed_image(REPO, "child-a", &[b"amd64 layer"]);
    let arm = src.seed_image(REPO, "child-b", &[b"arm64 layer"]);
    src.untag(REPO, "child-a");
    src.untag(REPO, "child-b");
    let index = src.seed_index(REPO, "multi", &[amd.clone(), arm.clone()]);
    seed_sig(
        &src,
        &index,
        &[s.key_signed_layer_logged(
            &trust.key,
            &digest(&index),
            ferry_testkit::trust_signer::SIGNED_AT,
        )],
    );

    // Refused: unsigned; another key; another identity; a payload naming another digest; a
    // key signature with no Rekor entry under `tlog: require`.
    let unsigned = src.seed_image(REPO, "unsigned", &[b"unsigned layer"]);
    let wrong = src.seed_image(REPO, "wrongkey", &[b"wrong key layer"]);
    let mallory = PrivateKey::generate_p256();
    seed_sig(
        &src,
        &wrong,
        &[s.key_signed_layer_logged(&mallory, &digest(&wrong), 1_704_067_200)],
    );
    let other = src.seed_image(REPO, "otherid", &[b"other identity layer"]);
    let evil = Keyless::new(
        ISSUER,
        "https://github.com/evil/app/.github/workflows/x.yml@refs/heads/main",
    );
    seed_sig(&src, &other, &[s.keyless_layer(&evil, &digest(&other))]);
    let moved = src.seed_image(REPO, "otherdigest", &[b"other digest layer"]);
    seed_sig(
        &src,
        &moved,
        &[s.keyless_layer_over(
            &who,
            simple_signing_payload(&digest(&key), "registry.test/app"),
        )],
    );
    let unlogged = src.seed_image(REPO, "unlogged", &[b"unlogged layer"]);
    seed_sig(
        &src,
        &unlogged,
        &[key_signed_layer(&trust.key, &digest(&unlogged))],
    );

    let common::Run { report, .. } = run_sync(&config(&src, &dst, &trust.policy(""))).await;
    let text = report.render_text();

    assert_eq!(
        images_on(&dst),
        ["bundle", "key", "keyless", "multi"],
        "{text}"
    );
    // Each carries its signatures, and the index its children.
    for d in [&key_sig, &keyless_sig, &bundle, &amd, &arm] {
        assert!(
            dst.manifest("m/app", d).is_some(),
            "{d} missing on the target\n{text}"
        );
    }
    assert_eq!(
        refusals(&report),
        BTreeMap::from([
            ("otherdigest".to_owned(), "digest_mismatch".to_owned()),
            ("otherid".to_owned(), "identity_mismatch".to_owned()),
            ("unlogged".to_owned(), "tlog_untrusted".to_owned()),
            ("unsigned".to_owned(), "no_signature".to_owned()),
            ("wrongkey".to_owned(), "wrong_key".to_owned()),
        ]),
        "{text}"
    );
    // Nothing of a refused image reached the target: no manifest, no blob, no request.
    for (d, layer) in [
        (&unsigned, &b"unsigned layer"[..]),
        (&wrong, b"wrong key layer"),
        (&other, b"other identity layer"),
        (&moved, b"other digest layer"),
        (&unlogged, b"unlogged layer"),
    ] {
        assert!(dst.manifest("m/app", d).is_none());
        let hex = sha256_digest(layer);
        let hex = hex.trim_start_matches("sha256:");
        let sub = d.trim_start_matches("sha256:");
        assert!(
            !dst.requests()
                .iter()
                .any(|r| r.path.contains(hex) || r.path.contains(sub)),
            "a request about a refused image reached the target"
        );
    }
    assert_eq!(report.verdict(), Verdict::Partial);
    assert!(
        text.contains("signature refused (wrong key): wrongkey"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn min_age_holds_a_too_new_image_without_failing_and_mirrors_it_once_the_policy_allows() {
    let trust = Trust::new();
    let (src, dst) = (registry().await, registry().await);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let fresh = src.seed_image(REPO, "fresh", &[b"fresh layer"]);
    let signed_at = now - 3600;
    seed_sig(
        &src,
        &fresh,
        &[trust
            .sigstore
            .key_signed_layer_logged(&trust.key, &digest(&fresh), signed_at)],
    );
    let old = src.seed_image(REPO, "old", &[b"old layer"]);
    seed_sig(
        &src,
        &old,
        &[trust
            .sigstore
            .key_signed_layer_logged(&trust.key, &digest(&old), now - 10 * 86400)],
    );

    let held = config(&src, &dst, &trust.policy("      min_age: 72h\n"));
    let dry = common::dry_run(&held, None).await;
    let m = &dry.dry.mappings[0];
    assert_eq!(m.signature_held.len(), 1, "{}", dry.dry.render_text());
    assert_eq!(m.signature_held[0].image, "fresh");
    assert_eq!(m.signature_held[0].mirrorable_at, signed_at + 72 * 3600);
    assert!(
        dry.dry.render_text().contains("held    fresh"),
        "{}",
        dry.dry.render_text()
    );

    let common::Run { report, .. } = run_sync(&held).await;
    assert_eq!(images_on(&dst), ["old"], "{}", report.render_text());
    assert_eq!(report.verdict(), Verdict::Clean, "held is not failed");
    assert_eq!(report.totals.images_held, 1);
    let row = report.images.iter().find(|i| i.image == "fresh").unwrap();
    assert!(
        matches!(row.status, ImageStatus::Held { mirrorable_at, .. } if mirrorable_at == signed_at + 72 * 3600)
    );
    let json = serde_json::to_value(row).unwrap();
    assert_eq!(json["status"], "held");
    assert_eq!(
        json["mirrorable_at"],
        ferry_sync::report::rfc3339(signed_at + 72 * 3600)
    );

    let allowed = config(&src, &dst, &trust.policy("      min_age: 30m\n"));
    let common::Run { report, .. } = run_sync(&allowed).await;
    assert_eq!(
        images_on(&dst),
        ["fresh", "old"],
        "{}",
        report.render_text()
    );
    assert_eq!(report.totals.images_held, 0);
}

#[tokio::test(start_paused = true)]
async fn under_tlog_skip_min_age_counts_from_when_ferry_first_saw_the_digest_kept_in_the_state_dir()
{
    let trust = Trust::new();
    let (src, dst) = (registry().await, registry().await);
    let app = src.seed_image(REPO, "app", &[b"app layer"]);
    seed_sig(&src, &app, &[key_signed_layer(&trust.key, &digest(&app))]);
    let state = tempfile::tempdir().unwrap();
    let cfg = config(
        &src,
        &dst,
        &trust.policy("      tlog: skip\n      min_age: 72h\n"),
    );
    let run = |c| {
        common::run_sync_with(
            c,
            common::RunOptions {
                state_dir: Some(state.path()),
                ..Default::default()
            },
        )
    };
    let first = run(&cfg).await.report;
    let held = |r: &ferry_sync::report::SyncReport| -> i64 {
        match r
            .images
            .iter()
            .find(|i| i.image == "app")
            .map(|i| &i.status)
        {
            Some(ImageStatus::Held {
                mirrorable_at,
                signed_at,
            }) => {
                assert_eq!(*mirrorable_at, signed_at + 72 * 3600);
                *mirrorable_at
            }
            other => panic!("app not held: {other:?}\n{}", r.render_text()),
        }
    };
    let at = held(&first);
    assert!(images_on(&dst).is_empty());
    // The run recorded when it first saw the digest; 73 hours later (the record aged by hand,
    // as the clock would), the next run mirrors it.
    let record = state
        .path()
        .join("first-seen")
        .join(format!("sha256-{}", app.trim_start_matches("sha256:")));
    let seen: i64 = std::fs::read_to_string(&record)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(seen + 72 * 3600, at);
    std::fs::write(&record, (seen - 73 * 3600).to_string()).unwrap();
    let second = run(&cfg).await.report;
    assert_eq!(images_on(&dst), ["app"], "{}", second.render_text());
    assert_eq!(second.totals.images_held, 0);
}

#[tokio::test(start_paused = true)]
async fn without_the_referrers_api_a_bundle_is_found_through_the_tag_schema_and_hostile_signatures_are_refused_unread()
 {
    let trust = Trust::new();
    let src = TestRegistry::builder()
        .referrers_api(false)
        .start()
        .await
        .unwrap();
    let dst = registry().await;
    let s = &trust.sigstore;
    let who = Keyless::new(ISSUER, SUBJECT);

    // A v3 bundle listed only in the subject's tag-schema index (`sha256-<hex>`).
    let app = src.seed_image(REPO, "app", &[b"app layer"]);
    let bundle = seed_bundle(&src, &app, &s.dsse_bundle(&who, &digest(&app)));
    let (bundle_type, bundle_bytes) = src.manifest(REPO, &bundle).unwrap();
    let index = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": bundle_type, "digest": bundle, "size": bundle_bytes.len(), "artifactType": BUNDLE}],
    })
    .to_string();
    src.seed_manifest(
        REPO,
        &format!("sha256-{}", app.trim_start_matches("sha256:")),
        "application/vnd.oci.image.index.v1+json",
        index.as_bytes(),
    );

    // A `.sig` manifest of 10,000 layers, and a bundle referrer declaring 100 MiB.
    let wide = src.seed_image(REPO, "wide", &[b"wide layer"]);
    let layer = key_signed_layer(&trust.key, &digest(&wide));
    seed_sig(&src, &wide, &vec![layer; 10_000]);
    let huge = src.seed_image(REPO, "huge", &[b"huge layer"]);
    let small = src.seed_blob(REPO, b"{}");
    let huge_body = src.seed_blob(REPO, b"not read");
    let (huge_type, huge_bytes) = src.manifest(REPO, &huge).unwrap();
    let artifact = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","artifactType":"{BUNDLE}","config":{{"mediaType":"application/vnd.oci.empty.v1+json","digest":"{small}","size":2}},"layers":[{{"mediaType":"{BUNDLE}","digest":"{huge_body}","size":104857600}}],"subject":{{"mediaType":"{huge_type}","digest":"{huge}","size":{}}}}}"#,
        huge_bytes.len()
    );
    let huge_ref = src.seed_manifest(
        REPO,
        &sha256_digest(artifact.as_bytes()),
        OCI_MANIFEST,
        artifact.as_bytes(),
    );
    let huge_index = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": huge_ref, "size": artifact.len(), "artifactType": BUNDLE}],
    })
    .to_string();
    src.seed_manifest(
        REPO,
        &format!("sha256-{}", huge.trim_start_matches("sha256:")),
        "application/vnd.oci.image.index.v1+json",
        huge_index.as_bytes(),
    );

    let common::Run { report, .. } = run_sync(&config(&src, &dst, &trust.policy(""))).await;
    let text = report.render_text();
    assert_eq!(images_on(&dst), ["app"], "{text}");
    assert!(
        dst.manifest("m/app", &bundle).is_some(),
        "the bundle travels with it\n{text}"
    );
    assert_eq!(
        refusals(&report),
        BTreeMap::from([
            ("huge".to_owned(), "invalid".to_owned()),
            ("wide".to_owned(), "invalid".to_owned()),
        ]),
        "{text}"
    );
    assert!(text.contains("larger than"), "{text}");
    // Neither the 100 MiB bundle nor any of the 10,000 payloads was asked for.
    let payload = sha256_digest(&key_signed_layer(&trust.key, &digest(&wide)).payload);
    for blob in [&huge_body, &payload] {
        let hex = blob.trim_start_matches("sha256:");
        assert!(
            !src.requests()
                .iter()
                .any(|r| r.path.contains("/blobs/") && r.path.contains(hex)),
            "{blob} was read"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn verify_signatures_finds_an_image_on_the_target_whose_signature_is_gone() {
    let trust = Trust::new();
    let (src, dst) = (registry().await, registry().await);
    let app = src.seed_image(REPO, "app", &[b"app layer"]);
    let s = &trust.sigstore;
    seed_sig(
        &src,
        &app,
        &[s.key_signed_layer_logged(
            &trust.key,
            &digest(&app),
            ferry_testkit::trust_signer::SIGNED_AT,
        )],
    );
    let cfg = config(&src, &dst, &trust.policy(""));
    let synced = run_sync(&cfg).await.report;
    assert_eq!(images_on(&dst), ["app"], "{}", synced.render_text());
    let verify = |cfg: Config| async move {
        let ctx = ferry_sync::run::RunContext::new(&cfg);
        ferry_sync::run::Run::new(cfg.clone(), ctx)
            .verify_with(ferry_sync::verify::VerifyOptions {
                deep: false,
                signatures: true,
            })
            .await
    };
    let clean = verify(cfg.clone()).await;
    assert_eq!(
        clean.totals.signatures_checked,
        1,
        "{}",
        clean.render_text()
    );
    assert_eq!(clean.totals.unsigned, 0, "{}", clean.render_text());
    assert_eq!(clean.verdict(), ferry_sync::verify::VerifyVerdict::Complete);

    // The signature tag removed from the target: the image there is unsigned.
    dst.untag(
        "m/app",
        &format!("sha256-{}.sig", app.trim_start_matches("sha256:")),
    );
    let found = verify(cfg).await;
    let text = found.render_text();
    assert_eq!(found.totals.unsigned, 1, "{text}");
    assert_eq!(
        found.verdict(),
        ferry_sync::verify::VerifyVerdict::Incomplete
    );
    assert!(text.contains("UNSIGNED  app"), "{text}");
    assert!(text.contains("no signature"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn the_signatures_that_verified_travel_even_when_the_mapping_copies_no_referrers() {
    let trust = Trust::new();
    let (src, dst) = (registry().await, registry().await);
    let s = &trust.sigstore;
    let who = Keyless::new(ISSUER, SUBJECT);
    let key = src.seed_image(REPO, "key", &[b"key layer"]);
    let key_sig = seed_sig(
        &src,
        &key,
        &[s.key_signed_layer_logged(
            &trust.key,
            &digest(&key),
            ferry_testkit::trust_signer::SIGNED_AT,
        )],
    );
    let bundled = src.seed_image(REPO, "bundle", &[b"bundle layer"]);
    let bundle = seed_bundle(&src, &bundled, &s.dsse_bundle(&who, &digest(&bundled)));
    // Another referrer of the bundled image, not a signature: `referrers: false` keeps it home.
    let sbom = seed_bundle(&src, &bundled, b"not a bundle at all");
    let extra = "    referrers: false\n    tags: {include: [key, bundle]}\n";
    let policy = trust.policy("");
    let report = run_sync(&config(&src, &dst, &format!("{extra}{policy}")))
        .await
        .report;
    let text = report.render_text();
    assert_eq!(images_on(&dst), ["bundle", "key"], "{text}");
    assert!(
        dst.manifest("m/app", &key_sig).is_some(),
        "the .sig travels\n{text}"
    );
    assert!(
        dst.manifest("m/app", &bundle).is_some(),
        "the bundle travels\n{text}"
    );
    assert!(
        dst.manifest("m/app", &sbom).is_none(),
        "an unverified referrer stays\n{text}"
    );
    assert_eq!(report.totals.images_failed, 0, "{text}");
    // The `.sig` manifest read to verify is the one copied: one GET of it from the source.
    let sig_tag = format!("sha256-{}.sig", key.trim_start_matches("sha256:"));
    let gets = src
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with(&format!("/manifests/{sig_tag}")))
        .count();
    assert_eq!(gets, 1, "{text}");
}
