//! `ferry import` and archive sources through the real binary and the real registry: skopeo's
//! oci-archive and docker-archive keep their digests, hostile bundles push nothing, and an
//! incremental bundle's left-out blobs are mounted from the target or fail the image first.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{code, ferry, push_one_layer, text};
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::fixtures::images::{self, ArchiveEntry, Images, write_tar};
use serde_json::{Value, json};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

async fn skopeo(args: &[&str]) -> Output {
    let run = tokio::process::Command::new("skopeo")
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("skopeo finished within two minutes")
        .expect("skopeo runs (scripts/test installs it)");
    assert!(
        out.status.success(),
        "skopeo {args:?}: {}",
        text(&out.stderr)
    );
    out
}

fn sha(bytes: &[u8]) -> Digest {
    Digest::of_bytes(Algorithm::Sha256, bytes)
}

/// The manifest `reference` names on the registry, as (digest, document), or `None`.
async fn manifest(c: &RegistryClient, repo: &str, reference: &str) -> Option<(Digest, Value)> {
    let m = c.get_manifest(repo, reference).await.ok()?;
    Some((m.digest, serde_json::from_slice(&m.bytes).unwrap()))
}

fn digests(doc: &Value) -> Vec<String> {
    let mut out = vec![doc["config"]["digest"].as_str().unwrap().to_owned()];
    for l in doc["layers"].as_array().unwrap() {
        out.push(l["digest"].as_str().unwrap().to_owned());
    }
    out
}

async fn import(args: &[&str]) -> Output {
    let mut all = vec!["--progress", "none", "import", "--insecure"];
    all.extend_from_slice(args);
    ferry(&all).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_skopeo_wrote_are_imported_and_copied_with_their_digests() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let host = registry.host();
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let layer = ferry_testkit::noise(3, 200_000);
    push_one_layer(
        &client,
        "src/app",
        "v1",
        r#"{"os":"linux","architecture":"amd64"}"#,
        &layer,
    )
    .await;
    let (_, source_doc) = manifest(&client, "src/app", "v1").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let from = format!("docker://{host}/src/app:v1");

    // skopeo's oci-archive named by tag only: imported under the prefix, digest as in the tar.
    let by_tag = dir.path().join("by-tag.tar");
    let to = format!("oci-archive:{}:v1", by_tag.display());
    skopeo(&["copy", "-q", "--src-tls-verify=false", &from, &to]).await;
    let raw = skopeo(&["inspect", "--raw", &to]).await.stdout;
    let prefix = format!("{host}/site");
    let out = import(&[
        by_tag.to_str().unwrap(),
        "--target-prefix",
        &prefix,
        "--json",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["totals"]["images_synced"], 1, "{report}");
    let (digest, doc) = manifest(&client, "site", "v1").await.expect("imported");
    assert_eq!(digest, sha(&raw), "the archive's manifest, byte for byte");
    // skopeo compressed the layer on its way into the archive: the archive's digests are kept.
    let archived: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(digests(&doc), digests(&archived));

    // Named by full reference: the import needs no prefix, the reference says where.
    let by_ref = dir.path().join("by-ref.tar");
    let to = format!("oci-archive:{}:{host}/mirror/app:v2", by_ref.display());
    skopeo(&["copy", "-q", "--src-tls-verify=false", &from, &to]).await;
    let out = import(&[by_ref.to_str().unwrap()]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let (digest, _) = manifest(&client, "mirror/app", "v2")
        .await
        .expect("imported");
    assert_eq!(
        digest,
        sha(&skopeo(&["inspect", "--raw", &to]).await.stdout)
    );
    // A second import finds everything there: nothing copied.
    let out = import(&[by_ref.to_str().unwrap(), "--json"]).await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["totals"]["images_up_to_date"], 1, "{report}");
    assert_eq!(report["totals"]["blobs_copied"], 0, "{report}");

    // skopeo's docker-archive (layers linked `<id>/layer.tar -> ../<hex>.tar`): ferry copy
    // keeps the config's and layers' digests; the manifest is ferry's own.
    let docker = dir.path().join("d.tar");
    let to = format!("docker-archive:{}:src/app:v1", docker.display());
    skopeo(&["copy", "-q", "--src-tls-verify=false", &from, &to]).await;
    let listing = std::process::Command::new("tar")
        .args(["tvf", docker.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        text(&listing.stdout).contains("layer.tar -> ../"),
        "skopeo links its layers"
    );
    let out = ferry(&[
        "--progress",
        "none",
        "copy",
        "--insecure",
        &to,
        &format!("{host}/dock/app:v1"),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let (_, doc) = manifest(&client, "dock/app", "v1").await.expect("copied");
    assert_eq!(
        doc["mediaType"],
        "application/vnd.docker.distribution.manifest.v2+json"
    );
    assert_eq!(digests(&doc), digests(&source_doc));
    registry.stop().await.unwrap();
}

/// A bundle from the test kit's image builder: its oci-archive entries, with blobs left out or
/// damaged and a ferry-bundle.json added as a test asks.
struct Bundle {
    images: Images,
}

impl Bundle {
    fn new() -> Self {
        Bundle {
            images: Images::new(),
        }
    }

    /// An image of a config and one layer, named `ref_name`; its config and layer digests.
    fn image(&mut self, ref_name: &str, seed: u64) -> (Digest, Digest) {
        let config = format!(r#"{{"os":"linux","architecture":"amd64","seed":{seed}}}"#);
        let layer = ferry_testkit::noise(seed, 50_000);
        let m = self.images.image(config.as_bytes(), &[&layer]);
        self.images.tag(&m, Some(ref_name));
        (sha(config.as_bytes()), sha(&layer))
    }

    /// Writes the tar; blobs in `omit` are left out, and with `bases` a ferry-bundle.json
    /// records them as content carried by a base. `damage` edits the bytes of one blob.
    fn write(&self, path: &Path, omit: &[Digest], bases: Option<&str>, damage: Option<&Digest>) {
        let mut entries = Vec::new();
        let mut carried = Vec::new();
        for mut entry in self.images.oci_entries() {
            if let Some(hex) = entry.name.strip_prefix("blobs/sha256/") {
                let d = Digest::parse(&format!("sha256:{hex}")).unwrap();
                if omit.contains(&d) {
                    continue;
                }
                if damage == Some(&d) {
                    let last = entry.body.len() - 1;
                    entry.body[last] ^= 1;
                }
                carried.push(d.to_string());
            }
            entries.push(entry);
        }
        if let Some(base) = bases {
            let content: Vec<String> = self.images.blobs().map(|(d, _)| d.to_owned()).collect();
            let index = self.images.index_json();
            let (mappings, images) = record_images(&index);
            let record = json!({
                "format": "ferry-bundle/v1", "created": "2026-12-01T00:00:00Z",
                "mappings": mappings, "images": images,
                "bases": [{"digest": format!("sha256:{}", "b".repeat(64)), "name": base}],
                "content": content, "carried": carried.clone(),
                "digest": ferry_store::bundle::bundle_digest(&carried, &index),
            });
            entries.push(ArchiveEntry::file(
                "ferry-bundle.json",
                &serde_json::to_vec(&record).unwrap(),
            ));
        }
        write_tar(path, &entries);
    }
}

/// The record's mappings and images for `index.json`'s entries: one mapping per repository,
/// each image under it by its `ref.name`, as `ferry export` records them.
fn record_images(index: &[u8]) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let index: serde_json::Value = serde_json::from_slice(index).unwrap();
    let mut targets: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for m in index["manifests"].as_array().unwrap() {
        let name = m["annotations"]["org.opencontainers.image.ref.name"]
            .as_str()
            .unwrap();
        // A hostile name may have no tag: its repository is then the whole name.
        let repo = name.rsplit_once(':').map_or(name, |(r, _)| r).to_owned();
        let n = match targets.iter().position(|t| *t == repo) {
            Some(n) => n,
            None => {
                targets.push(repo.clone());
                targets.len() - 1
            }
        };
        images
            .push(json!({"reference": name, "source": name, "digest": m["digest"], "mapping": n}));
    }
    let mappings = targets
        .into_iter()
        .map(|t| json!({"source": t, "targets": [t]}))
        .collect();
    (mappings, images)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_bundle_mounts_what_the_target_holds_and_fails_first_what_it_lacks() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let host = registry.host();
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let mut bundle = Bundle::new();
    // held/app is on the target already (last week's import); shared/app uses its layer,
    // which this week's bundle leaves out; gone/app's layer is nowhere.
    let (_, held_layer) = bundle.image(&format!("{host}/held/app:v1"), 11);
    let shared_config = format!(r#"{{"os":"linux","architecture":"amd64","seed":{}}}"#, 12);
    let (gone_config, gone_layer) = bundle.image(&format!("{host}/gone/app:v1"), 13);
    let held_bytes = ferry_testkit::noise(11, 50_000);
    push_one_layer(
        &client,
        "held/app",
        "v1",
        r#"{"os":"linux","architecture":"amd64","seed":11}"#,
        &held_bytes,
    )
    .await;
    // shared/app: its own config, held/app's layer.
    let c = bundle
        .images
        .typed_blob(images::OCI_CONFIG, shared_config.as_bytes());
    let mut l = json!({"digest": held_layer.to_string(), "size": held_bytes.len()});
    l["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
    let d = bundle.images.manifest(
        OCI_MANIFEST,
        &json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": c, "layers": [l]}),
    );
    bundle
        .images
        .tag(&d, Some(&format!("{host}/shared/app:v1")));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weekly-48.tar");
    bundle.write(
        &path,
        &[held_layer.clone(), gone_layer.clone()],
        Some("weekly-47.tar"),
        None,
    );

    let before = registry.access_log().await.unwrap();
    let out = import(&[path.to_str().unwrap(), "--json"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "one image of three fails: {stderr}");
    // The failing image is named with the base bundle and the missing digest, and nothing of
    // it reached the registry: not its tag, not even its config, which the bundle carries.
    let report = text(&out.stdout);
    assert!(
        report.contains("weekly-47.tar") && report.contains(&gone_layer.to_string()),
        "{report}"
    );
    assert!(manifest(&client, "gone/app", "v1").await.is_none());
    assert_eq!(
        client.head_blob("gone/app", &gone_config).await.unwrap(),
        None
    );
    // shared/app got held/app's layer by a mount, not a byte of it sent.
    let (_, doc) = manifest(&client, "shared/app", "v1")
        .await
        .unwrap_or_else(|| panic!("shared/app imported: {stderr}\n{report}"));
    assert_eq!(doc["layers"][0]["digest"], held_layer.to_string());
    let after = registry.access_log().await.unwrap();
    let mounts = |log: &ferry_testkit::distribution::AccessLog| {
        log.count("POST", "/v2/shared/app/blobs/uploads/?mount=")
    };
    assert_eq!(
        mounts(&after) - mounts(&before),
        1,
        "one mount into shared/app"
    );
    let puts = |log: &ferry_testkit::distribution::AccessLog| {
        log.count("PUT", "/v2/shared/app/blobs/uploads/")
    };
    assert_eq!(
        puts(&after) - puts(&before),
        1,
        "only shared/app's config is uploaded"
    );
    registry.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_or_damaged_bundle_pushes_nothing_of_its_images() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let host = registry.host();
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut bundle = Bundle::new();
    let (_, layer) = bundle.image(&format!("{host}/bad/app:v1"), 21);

    // A blob whose bytes are not its name's: the image fails, its tag never appears, and the
    // damaged blob is not committed.
    let damaged = dir.path().join("damaged.tar");
    bundle.write(&damaged, &[], None, Some(&layer));
    let out = import(&[damaged.to_str().unwrap()]).await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&layer.to_string()),
        "{}",
        text(&out.stderr)
    );
    assert!(manifest(&client, "bad/app", "v1").await.is_none());
    assert_eq!(client.head_blob("bad/app", &layer).await.unwrap(), None);

    // Cut off part way (a copy that did not finish): refused before a request is sent.
    let whole = dir.path().join("whole.tar");
    bundle.write(&whole, &[], None, None);
    let bytes = std::fs::read(&whole).unwrap();
    let cut = dir.path().join("cut.tar");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    // A symbolic link in an OCI archive.
    let linked = dir.path().join("linked.tar");
    {
        let mut b = tar::Builder::new(std::fs::File::create(&linked).unwrap());
        let mut a = tar::Archive::new(std::fs::File::open(&whole).unwrap());
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let mut h = e.header().clone();
            let path = e.path().unwrap().into_owned();
            b.append_data(&mut h, &path, &mut e).unwrap();
        }
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(
            &mut h,
            format!("blobs/sha256/{}", "f".repeat(64)),
            "/etc/shadow",
        )
        .unwrap();
        b.into_inner().unwrap();
    }
    let before = registry.access_log().await.unwrap().len();
    for (file, names) in [(&cut, "truncated"), (&linked, "symbolic link")] {
        let out = import(&[file.to_str().unwrap()]).await;
        assert_eq!(code(&out), 2, "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains(names), "{}", text(&out.stderr));
    }
    assert_eq!(
        registry.access_log().await.unwrap().len(),
        before,
        "no request sent"
    );
    assert!(manifest(&client, "bad/app", "v1").await.is_none());
    registry.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_over_a_child_the_bundle_leaves_out_is_imported_over_the_targets_copy() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let host = registry.host();
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    // Last week's import put the amd64 image there; this week's bundle carries only the new
    // index over it, leaving the child manifest and its blobs out.
    let layer = ferry_testkit::noise(31, 40_000);
    push_one_layer(
        &client,
        "idx/app",
        "amd64",
        r#"{"os":"linux","architecture":"amd64"}"#,
        &layer,
    )
    .await;
    let child = client.get_manifest("idx/app", "amd64").await.unwrap();
    let mut bundle = Bundle::new();
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": child.digest.to_string(),
            "size": child.bytes.len(), "platform": {"os": "linux", "architecture": "amd64"}}],
    }))
    .unwrap();
    let d = bundle.images.typed_blob(images::OCI_INDEX, &index);
    bundle.images.tag(&d, Some(&format!("{host}/idx/app:v2")));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weekly-48.tar");
    bundle.write(&path, &[], Some("weekly-47.tar"), None);
    let out = import(&[path.to_str().unwrap()]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let (digest, _) = manifest(&client, "idx/app", "v2").await.expect("imported");
    assert_eq!(digest, sha(&index));
    registry.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_is_never_mounted_from_a_repository_only_a_refused_entry_names() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let host = registry.host();
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    // The site's private repository holds a layer the bundle wants in a public one.
    let secret = ferry_testkit::noise(31, 40_000);
    push_one_layer(
        &client,
        "private/vault",
        "v1",
        r#"{"os":"linux","architecture":"amd64","seed":31}"#,
        &secret,
    )
    .await;
    let secret_digest = sha(&secret);
    let mut bundle = Bundle::new();
    // A decoy entry naming the private repository, refused (its layer is nowhere) ...
    let (_, gone) = bundle.image(&format!("{host}/private/vault:decoy"), 32);
    // ... and public/app, whose left-out layer is the private one.
    let config = r#"{"os":"linux","architecture":"amd64","seed":33}"#;
    let c = bundle
        .images
        .typed_blob(images::OCI_CONFIG, config.as_bytes());
    let mut l = json!({"digest": secret_digest.to_string(), "size": secret.len()});
    l["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
    let d = bundle.images.manifest(
        OCI_MANIFEST,
        &json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": c, "layers": [l]}),
    );
    bundle
        .images
        .tag(&d, Some(&format!("{host}/public/app:v1")));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weekly-9.tar");
    bundle.write(
        &path,
        &[gone.clone(), secret_digest.clone()],
        Some("full.tar"),
        None,
    );

    let before = registry.access_log().await.unwrap();
    let out = import(&[path.to_str().unwrap()]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 2, "both images fail: {stderr}");
    assert!(stderr.contains(&secret_digest.to_string()), "{stderr}");
    let after = registry.access_log().await.unwrap();
    let mounts = |log: &ferry_testkit::distribution::AccessLog| {
        log.count("POST", "/v2/public/app/blobs/uploads/?mount=")
    };
    assert_eq!(mounts(&after), mounts(&before), "nothing mounted: {stderr}");
    assert_eq!(
        client
            .head_blob("public/app", &secret_digest)
            .await
            .unwrap(),
        None,
        "the private layer is not readable from public/app"
    );
    assert!(manifest(&client, "public/app", "v1").await.is_none());

    // A site config that names the private repository lets it lend the layer.
    let site = ferry_testkit::fixtures::mirror_yaml()
        .registries(&[&registry], &[])
        .mapping(
            format!("{host}/upstream/vault"),
            &[format!("{host}/private/vault")],
            &[ferry_testkit::fixtures::ALL_TAGS],
        )
        .write(dir.path());
    let out = import(&[path.to_str().unwrap(), "-c", site.to_str().unwrap()]).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "only the decoy fails: {stderr}");
    assert!(
        manifest(&client, "public/app", "v1").await.is_some(),
        "{stderr}"
    );
    registry.stop().await.unwrap();
}

/// Names from a bundle reach the output as registry text does: escaped (a newline is `\n`, never
/// a line of its own) and cut to a few hundred bytes. An `index.json` ref.name and a record's
/// `bases[].name`, each with a newline and 66 KB long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundles_names_are_escaped_and_cut_in_every_message() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let host = registry.host();
    let mut bundle = Bundle::new();
    let (_, gone_layer) = bundle.image(&format!("{host}/gone/app:v1"), 21);
    let ref_name = format!("evil\nFORGED ref line {}", "r".repeat(66_000));
    bundle.image(&ref_name, 22);
    let base = format!("weekly-47.tar\nFORGED base line {}", "b".repeat(66_000));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weekly-48.tar");
    bundle.write(&path, &[gone_layer], Some(&base), None);

    let out = import(&[path.to_str().unwrap()]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_ne!(code(&out), 0, "{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(all.contains(r"evil\nFORGED ref line rrr"), "{stderr}");
    assert!(
        all.contains(r"weekly-47.tar\nFORGED base line bbb"),
        "{all}"
    );
    for line in all.lines() {
        assert!(
            !line.starts_with("FORGED"),
            "a name started a line: {line:.200}"
        );
        assert!(
            line.len() < 2_000,
            "a line of {} bytes: {line:.200}",
            line.len()
        );
    }
    let out = import(&[path.to_str().unwrap(), "--json"]).await;
    assert!(
        out.stdout.len() < 20_000 && out.stderr.len() < 20_000,
        "the report is {} bytes, stderr {}",
        out.stdout.len(),
        out.stderr.len()
    );
    registry.stop().await.unwrap();
}
