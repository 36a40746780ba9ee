//! Destructive paths lose nothing, with real processes: several `ferry copy` and sharded
//! `ferry sync` runs writing one layout at once keep every tag (skopeo reads each back), a run
//! killed with SIGKILL part way leaves nothing half-written under a digest and a rerun
//! completes, and prune deletes only what a complete, faultless reading of the source dropped.

mod common;

use common::{code, command, ferry, text};
use ferry_testkit::fixtures::{ALL_TAGS, MirrorYaml, QUICK_RETRY, mirror_yaml};

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_testkit::registry::{
    FaultAction, FaultRule, LaterPage, OpKind, TestRegistry, sha256_digest,
};

/// The `ref.name` of every entry of the layout's `index.json`, sorted.
fn layout_tags(dir: &Path) -> Vec<String> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    let mut tags: Vec<String> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["annotations"]["org.opencontainers.image.ref.name"].as_str())
        .map(str::to_owned)
        .collect();
    tags.sort();
    tags
}

/// skopeo reads `tag` from the layout (its manifest, config and the layout's structure).
async fn skopeo_reads(dir: &Path, tag: &str) {
    let out = tokio::process::Command::new("skopeo")
        .args(["inspect", &format!("oci:{}:{tag}", dir.display())])
        .kill_on_drop(true)
        .output()
        .await
        .expect("skopeo runs (scripts/test installs it when missing)");
    assert!(
        out.status.success(),
        "skopeo inspect {tag}: {}",
        text(&out.stderr)
    );
}

/// Every file named by a digest under `blobs/sha256` holds exactly the bytes of that digest.
fn every_blob_matches_its_name(dir: &Path) -> usize {
    let blobs = dir.join("blobs/sha256");
    let Ok(entries) = std::fs::read_dir(&blobs) else {
        return 0;
    };
    let mut checked = 0;
    for e in entries {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let bytes = std::fs::read(e.path()).unwrap();
        assert_eq!(
            sha256_digest(&bytes),
            format!("sha256:{name}"),
            "blob {name} holds other bytes ({} of them): half-written under its digest",
            bytes.len()
        );
        checked += 1;
    }
    checked
}

/// mirror.yaml naming `reg` with two quick attempts.
fn with_registry(reg: &TestRegistry) -> MirrorYaml {
    mirror_yaml().registry(reg, &[QUICK_RETRY])
}

/// Images sharing a base layer (so the writers race on the same blobs too) with one own layer.
fn seed_apps(reg: &TestRegistry, repo: &str, tags: &[String]) {
    for tag in tags {
        let own = format!("own layer of {repo}:{tag}");
        reg.seed_image(repo, tag, &[b"shared base layer", own.as_bytes()]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_copies_at_once_into_one_layout_keep_every_tag() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let tags: Vec<String> = (0..6).map(|i| format!("v{i}")).collect();
    seed_apps(&reg, "src/app", &tags);
    let tmp = tempfile::tempdir().unwrap();
    // Three rounds, each into a fresh layout: the lost update this guards against is a race.
    for round in 0..3 {
        let dir = tmp.path().join(format!("layout{round}"));
        let target = format!("oci:{}", dir.display());
        let runs: Vec<_> = tags
            .iter()
            .map(|tag| {
                let source = format!("{}/src/app:{tag}", reg.host());
                let mut c =
                    command(&["copy", &source, &target, "--insecure", "--progress", "none"]);
                async move { c.output().await.expect("ferry ran") }
            })
            .collect();
        let outs = tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(runs))
            .await
            .expect("the copies finished within two minutes");
        for out in &outs {
            assert_eq!(code(out), 0, "{}", text(&out.stderr));
        }
        assert_eq!(layout_tags(&dir), tags, "round {round}: a tag was lost");
        assert!(every_blob_matches_its_name(&dir) >= 8);
        for tag in &tags {
            skopeo_reads(&dir, tag).await;
        }
    }
}

/// A config may not name one layout in two mappings, so the shards of one config never share a
/// layout: the writers sharing one here are the shards of three configs (each with one mapping
/// into the shared layout and one elsewhere) and two copies, all at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncs_of_several_configs_and_copies_at_once_into_one_layout_keep_every_tag() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("layout");
    let mut expected = Vec::new();
    let mut configs = Vec::new();
    for i in 0..3 {
        // Each repository its own tag names, as a layout holds one name per tag.
        let tags = vec![format!("a{i}"), format!("b{i}")];
        seed_apps(&reg, &format!("src/app{i}"), &tags);
        expected.extend(tags);
        let own = tmp.path().join(format!("config{i}"));
        std::fs::create_dir(&own).unwrap();
        let source = format!("{}/src/app{i}", reg.host());
        let config = with_registry(&reg)
            .mapping(&source, &[format!("oci:{}", dir.display())], &[ALL_TAGS])
            .mapping(
                &source,
                &[format!("oci:{}", own.join("elsewhere").display())],
                &[ALL_TAGS],
            )
            .write(&own);
        configs.push(config.to_str().unwrap().to_owned());
    }
    let copies = ["c0", "c1"].map(String::from);
    seed_apps(&reg, "src/copied", &copies);
    expected.extend(copies.iter().cloned());
    expected.sort();
    let target = format!("oci:{}", dir.display());
    // Both shards of every config: six syncs, three of which write the shared layout.
    let mut runs: Vec<tokio::process::Command> = configs
        .iter()
        .flat_map(|c| {
            ["0/2", "1/2"].map(|s| command(&["sync", "-c", c, "--shard", s, "--progress", "none"]))
        })
        .collect();
    for tag in &copies {
        let source = format!("{}/src/copied:{tag}", reg.host());
        runs.push(command(&[
            "copy",
            &source,
            &target,
            "--insecure",
            "--progress",
            "none",
        ]));
    }
    let runs = runs
        .into_iter()
        .map(|mut c| async move { c.output().await.expect("ferry ran") });
    let outs = tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(runs))
        .await
        .expect("the runs finished within two minutes");
    for out in &outs {
        assert_eq!(code(out), 0, "{}", text(&out.stderr));
    }
    assert_eq!(layout_tags(&dir), expected, "a tag was lost");
    every_blob_matches_its_name(&dir);
    for tag in &expected {
        skopeo_reads(&dir, tag).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_killed_during_a_layout_write_leaves_nothing_half_written_and_a_rerun_completes() {
    let reg = TestRegistry::builder().start().await.unwrap();
    // A layer large enough that the stalled body leaves it part way.
    let big: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 251) as u8).collect();
    reg.seed_image("src/app", "v1", &[b"small layer", &big]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("layout");
    let source = format!("{}/src/app:v1", reg.host());
    let target = format!("oci:{}", dir.display());

    // Every blob body stops half way (128 KiB in: several reads, so ferry writes some of it)
    // and never ends: the copy is caught mid-write. The small blobs arrive whole.
    reg.body_stalls().stall_blob_bodies(128 * 1024);
    let mut child = command(&["copy", &source, &target, "--insecure", "--progress", "none"])
        .spawn()
        .expect("ferry starts");
    // The big layer, part way: under a temporary name (or, were it written in place, its own).
    let big_hex = sha256_digest(&big).trim_start_matches("sha256:").to_owned();
    let partial_seen = async {
        loop {
            let partial = std::fs::read_dir(dir.join("blobs/sha256"))
                .ok()
                .and_then(|d| {
                    d.filter_map(Result::ok).find(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        name.ends_with(".partial") || name == big_hex
                    })
                });
            if partial.is_some_and(|e| e.metadata().is_ok_and(|m| m.len() > 0)) {
                return;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), partial_seen)
        .await
        .expect("the copy started writing a blob into the layout");
    child.start_kill().expect("SIGKILL sent");
    let status = child.wait().await.unwrap();
    assert!(!status.success(), "killed, not finished");

    // Nothing half-written under a digest, and no index pointing at what is not there.
    every_blob_matches_its_name(&dir);
    assert!(
        !dir.join("index.json").exists() || layout_tags(&dir).is_empty(),
        "no tag for an image whose blobs never arrived"
    );

    reg.body_stalls().clear();
    let out = ferry(&["copy", &source, &target, "--insecure", "--progress", "none"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(layout_tags(&dir), ["v1"]);
    assert!(every_blob_matches_its_name(&dir) >= 4);
    skopeo_reads(&dir, "v1").await;
}

/// A prune mapping from `src/app` into a layout, its config path, and the layout.
fn prune_setup(reg: &TestRegistry, tmp: &Path) -> (PathBuf, PathBuf) {
    let dir = tmp.join("layout");
    let config = with_registry(reg)
        .mapping(
            format!("{}/src/app", reg.host()),
            &[format!("oci:{}", dir.display())],
            &[ALL_TAGS, "prune: true"],
        )
        .write(tmp);
    (config, dir)
}

async fn sync_json(config: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let config = config.to_str().unwrap();
    let mut args = vec!["sync", "-c", config, "--json", "--progress", "none"];
    args.extend_from_slice(extra);
    let out = ferry(&args).await;
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (code(&out), json, text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_tag_answering_404_is_reported_failed_and_stops_the_prune() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let tags: Vec<String> = ["v0", "v1", "v2"].map(String::from).to_vec();
    seed_apps(&reg, "src/app", &tags);
    let tmp = tempfile::tempdir().unwrap();
    let (config, dir) = prune_setup(&reg, tmp.path());
    let (first, json, err) = sync_json(&config, &[]).await;
    assert_eq!(first, 0, "{err}");
    assert_eq!(layout_tags(&dir), tags);
    // Every byte under blobs/ was written by this run, and the report counts each once.
    let on_disk: u64 = std::fs::read_dir(dir.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(on_disk > 0);
    assert_eq!(json["totals"]["layout_bytes_written"], on_disk, "{json:#}");
    assert!(json["totals"]["bytes_written"].as_u64().unwrap() >= on_disk);

    // v2 goes from the source, so it is a prune candidate; then one listed tag's manifest
    // answers 404 for a moment (replica lag): the source is not settled, nothing is pruned.
    reg.untag("src/app", "v2");
    reg.faults().push(
        FaultRule::on(
            OpKind::ManifestHead,
            FaultAction::Status {
                code: 404,
                retry_after: None,
            },
        )
        .repo("src/app"),
    );
    let (code, json, err) = sync_json(&config, &[]).await;
    assert_ne!(
        code, 0,
        "a listed tag that could not be fetched fails the run: {err}"
    );
    let failed: Vec<&serde_json::Value> = json["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{json:#}");
    assert_eq!(failed[0]["http_status"], 404, "{json:#}");
    assert!(["v0", "v1"].contains(&failed[0]["image"].as_str().unwrap()));
    assert_eq!(json["totals"]["images_failed"], 1);
    let skipped = &json["prune"]["skipped"];
    assert_eq!(skipped.as_array().map(Vec::len), Some(1), "{json:#}");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("could not be fetched"),
        "{skipped}"
    );
    assert!(err.contains("prune skipped"), "{err}");
    assert_eq!(layout_tags(&dir), tags, "nothing was pruned");

    // The dry run shows the same decision while the fault lasts.
    reg.faults().push(
        FaultRule::on(
            OpKind::ManifestHead,
            FaultAction::Status {
                code: 404,
                retry_after: None,
            },
        )
        .repo("src/app"),
    );
    let (_, dry, _) = sync_json(&config, &["--dry-run"]).await;
    assert_eq!(dry["prune"]["would_delete"], 0, "{dry:#}");
    assert_eq!(dry["prune"]["skipped"].as_array().map(Vec::len), Some(1));

    // Once the source answers again, v2 (really gone) is pruned and nothing else.
    let (code, json, err) = sync_json(&config, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(json["prune"]["deleted"], 1, "{json:#}");
    assert_eq!(layout_tags(&dir), ["v0", "v1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_whose_link_repeats_a_page_fails_the_mapping_and_prunes_nothing() {
    let reg = TestRegistry::builder().page_size(1).start().await.unwrap();
    let tags: Vec<String> = ["v0", "v1", "v2"].map(String::from).to_vec();
    seed_apps(&reg, "src/app", &tags);
    let tmp = tempfile::tempdir().unwrap();
    let (config, dir) = prune_setup(&reg, tmp.path());
    let (first, _, err) = sync_json(&config, &[]).await;
    assert_eq!(first, 0, "{err}");
    assert_eq!(layout_tags(&dir), tags);

    // Page 2 links to itself: a client that takes that as the end never sees v2.
    reg.listing_faults()
        .later_pages("src/app", LaterPage::LinkToItself);
    let (code, json, err) = sync_json(&config, &[]).await;
    assert_ne!(code, 0, "{err}");
    assert_eq!(json["totals"]["mappings_failed"], 1, "{json:#}");
    let reason = json["prune"]["skipped"][0]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("page already read"), "{json:#}");
    assert_eq!(json["prune"]["deleted"], 0);
    assert_eq!(
        layout_tags(&dir),
        tags,
        "v2 was pruned from an incomplete listing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_fails_part_way_prunes_nothing() {
    let reg = TestRegistry::builder().page_size(1).start().await.unwrap();
    let tags: Vec<String> = ["v0", "v1", "v2"].map(String::from).to_vec();
    seed_apps(&reg, "src/app", &tags);
    let tmp = tempfile::tempdir().unwrap();
    let (config, dir) = prune_setup(&reg, tmp.path());
    let (first, _, err) = sync_json(&config, &[]).await;
    assert_eq!(first, 0, "{err}");

    // Page 1 answers, the rest fail (retries spent): only part of the listing was read.
    reg.listing_faults()
        .later_pages("src/app", LaterPage::Fail(500));
    let (code, json, err) = sync_json(&config, &[]).await;
    assert_ne!(code, 0, "{err}");
    assert_eq!(json["totals"]["mappings_failed"], 1, "{json:#}");
    assert_eq!(json["prune"]["skipped"].as_array().map(Vec::len), Some(1));
    assert!(err.contains("prune skipped"), "{err}");
    assert_eq!(
        layout_tags(&dir),
        tags,
        "a tag was pruned from a partial listing"
    );

    let (_, dry, _) = sync_json(&config, &["--dry-run"]).await;
    assert_eq!(dry["prune"]["skipped"].as_array().map(Vec::len), Some(1));
    assert_eq!(dry["prune"]["would_delete"], 0);
}

/// The digest `index.json` of the layout at `dir` names for `tag`.
fn layout_digest(dir: &Path, tag: &str) -> Option<String> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).ok()?).ok()?;
    index["manifests"].as_array()?.iter().find_map(|m| {
        (m["annotations"]["org.opencontainers.image.ref.name"].as_str() == Some(tag))
            .then(|| m["digest"].as_str().map(str::to_owned))
            .flatten()
    })
}

/// Issue 30 item 1: a hostile registry's catalog, mirrored whole under a shared layout prefix
/// (`target_groups: local: [oci:./mirror]`), names repositories that land at another
/// mapping's layout: `repo-0000` (the trusted layout spelled `oci:mirror/repo-0000`),
/// `repo-0000/blobs/sha256/<hex>` (a directory at a blob path), `x/index.json` and
/// `x/oci-layout` (directories at the index and marker of the catalog's own `x`). Each is left
/// out with both targets named; the trusted layout keeps the trusted digest, run after run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_cannot_put_a_layout_inside_or_onto_another_mappings_layout() {
    let trusted = TestRegistry::builder().start().await.unwrap();
    let hostile = TestRegistry::builder().start().await.unwrap();
    let good = trusted.seed_image("repo-0000", "v0", &[b"trusted layer"]);
    let hex = "ab".repeat(32);
    let planted = format!("repo-0000/blobs/sha256/{hex}");
    for repo in [
        "repo-0000",
        planted.as_str(),
        "x",
        "x/index.json",
        "x/oci-layout",
    ] {
        hostile.seed_image(repo, "v0", &[format!("hostile {repo}").as_bytes()]);
    }
    let tmp = tempfile::tempdir().unwrap();
    let config = with_registry(&trusted)
        .registry(&hostile, &[QUICK_RETRY])
        .setting("target_groups:\n  local: [\"oci:./mirror\"]")
        .mapping(
            format!("{}/repo-0000", trusted.host()),
            &["oci:mirror/repo-0000".to_owned()],
            &[],
        )
        .mappings(&format!(
            "  - source: \"{}/**\"\n    target_group: local\n",
            hostile.host()
        ))
        .write(tmp.path());
    let layout = tmp.path().join("mirror/repo-0000");
    for run in 0..2 {
        let mut c = command(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]);
        c.current_dir(tmp.path());
        let out = tokio::time::timeout(Duration::from_secs(120), c.output())
            .await
            .expect("ferry finished within two minutes")
            .expect("ferry ran");
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(
            layout_digest(&layout, "v0").as_deref(),
            Some(good.as_str()),
            "run {run}: the trusted layout names another digest\n{all}"
        );
        assert!(
            !layout.join("blobs/sha256").join(&hex).is_dir(),
            "run {run}: a directory sits at a blob path of the trusted layout\n{all}"
        );
        let x = tmp.path().join("mirror/x");
        assert!(x.join("index.json").is_file(), "run {run}\n{all}");
        assert!(x.join("oci-layout").is_file(), "run {run}\n{all}");
        assert!(!all.contains("Is a directory"), "run {run}\n{all}");
        assert!(
            all.contains("lies inside the layout oci:mirror/repo-0000"),
            "run {run}: the rejection names both layouts\n{all}"
        );
        assert!(
            all.contains("is the same place as oci:mirror/repo-0000"),
            "run {run}\n{all}"
        );
    }
    // Written as a static mapping, the same nesting is refused when the config is checked.
    let h = trusted.host();
    with_registry(&trusted)
        .mapping(
            format!("{h}/repo-0000"),
            &["oci:mirror/repo-0000".to_owned()],
            &[],
        )
        .mapping(
            format!("{h}/x"),
            &[format!("oci:./mirror/repo-0000/blobs/sha256/{hex}")],
            &[],
        )
        .write(tmp.path());
    let mut c = command(&["validate", "-c", config.to_str().unwrap()]);
    c.current_dir(tmp.path());
    let out = c.output().await.expect("ferry ran");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_ne!(code(&out), 0, "{all}");
    assert!(
        all.contains(&format!(
            "target oci:./mirror/repo-0000/blobs/sha256/{hex} lies inside the layout oci:mirror/repo-0000"
        )),
        "{all}"
    );
}

/// Issue 30 item 8: a layout directory a co-user can write (group- or world-writable, sticky
/// or not) is refused with an error naming it, and nothing is written there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_directory_other_users_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    for mode in [0o777, 0o1777, 0o775] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("shared");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let source = format!("{}/src/app:v1", reg.host());
        let target = format!("oci:{}", dir.display());
        let out = ferry(&["copy", &source, &target, "--insecure", "--progress", "none"]).await;
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_ne!(code(&out), 0, "{mode:o}: {all}");
        assert!(
            all.contains(&format!("layout directory {}", dir.display()))
                && all.contains("group- or world-writable"),
            "{mode:o}: {all}"
        );
        let written: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(written.is_empty(), "{mode:o}: {written:?}");
    }
}

/// Issue 30 item 8: a symbolic link planted at the run lock's name is not followed (it would
/// have had the run create, and lock, a file of the link's choosing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_at_the_run_lock_is_not_followed() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    let tmp = tempfile::tempdir().unwrap();
    let config = with_registry(&reg)
        .mapping(
            format!("{}/src/app", reg.host()),
            &[format!("oci:{}", tmp.path().join("out").display())],
            &[],
        )
        .write(tmp.path());
    let victim = tmp.path().join("victim");
    let lock = tmp.path().join("mirror.yaml.lock");
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]).await;
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 2, "{all}");
    assert!(
        all.contains(&format!("cannot open lock file {}", lock.display())),
        "{all}"
    );
    assert!(!victim.exists(), "the run created the link's target");
    assert!(!tmp.path().join("out").exists(), "the run went on: {all}");
}

/// A layout directory ferry creates itself is accepted under a group umask (002), which would
/// otherwise make it group-writable and refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_ferry_creates_under_a_group_umask_is_accepted() {
    use std::os::unix::fs::PermissionsExt;
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"layer"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new/layout");
    let source = format!("{}/src/app:v1", reg.host());
    let target = format!("oci:{}", dir.display());
    let out = tokio::process::Command::new("sh")
        .args(["-c", "umask 002 && exec \"$0\" \"$@\"", common::FERRY])
        .args(["copy", &source, &target, "--insecure", "--progress", "none"])
        .env_remove("RUST_LOG")
        .env_remove("FERRY_CONFIG")
        .kill_on_drop(true)
        .output()
        .await
        .expect("ferry ran");
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(layout_tags(&dir), ["v1"]);
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755, "{mode:o}");
}

/// What a run into a layout says about the registry it only read, and where the prune report
/// sits in the JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_into_a_layout_names_no_upload_flow_for_its_source_and_ends_its_json_with_prune() {
    let reg = TestRegistry::builder().start().await.unwrap();
    seed_apps(&reg, "src/app", &["v1".to_owned()]);
    let tmp = tempfile::tempdir().unwrap();
    let (config, dir) = prune_setup(&reg, tmp.path());
    let config = config.to_str().unwrap();
    let out = ferry(&["sync", "-c", config, "--json", "--progress", "none"]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 0, "{err}");
    assert_eq!(layout_tags(&dir), ["v1"]);
    // The source registry was only read: no upload flow is claimed for it.
    assert!(!err.contains("upload flow"), "{err}");
    assert!(err.contains("1 synced, 0 up to date, 0 failed"), "{err}");
    // The members keep the report's own order with `prune` last, as without pruning.
    let json = text(&out.stdout);
    let at = |member: &str| {
        json.find(&format!("\n  \"{member}\":"))
            .unwrap_or_else(|| panic!("no {member}: {json}"))
    };
    assert!(at("images") < at("registries"), "{json}");
    assert!(at("registries") < at("totals"), "{json}");
    assert!(at("totals") < at("elapsed"), "{json}");
    assert!(at("interrupted") < at("prune"), "{json}");
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(parsed["prune"]["deleted"], 0, "{json}");
}

/// The last plain `sync …` progress line of `stderr`, as key → value.
fn last_sync_line(stderr: &str) -> std::collections::BTreeMap<String, String> {
    let line = stderr
        .lines()
        .rfind(|l| l.starts_with("sync images_done="))
        .unwrap_or_else(|| panic!("no plain sync line: {stderr}"));
    line.split_whitespace()
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// `bytes_read`, `bytes_written` and `requests` mean one thing each in the report's totals and
/// the progress line, into a layout and from one (issue 29: a layout's writes showed as
/// `bytes_written=0` in progress, a layout source's reads as "0 B read" in the report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_and_the_progress_line_count_bytes_into_and_from_a_layout_alike() {
    let reg = TestRegistry::builder().start().await.unwrap();
    seed_apps(&reg, "src/app", &["v1".to_owned(), "v2".to_owned()]);
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let into = |from: String, dir: &Path, name: &str| {
        let cfg = tmp.path().join(name);
        std::fs::create_dir_all(&cfg).unwrap();
        with_registry(&reg)
            .mapping(from, &[format!("oci:{}", dir.display())], &[ALL_TAGS])
            .write(&cfg)
    };
    let sync = |config: PathBuf| async move {
        let config = config.to_str().unwrap().to_owned();
        let out = ferry(&["sync", "-c", &config, "--json", "--progress", "plain"]).await;
        let err = text(&out.stderr);
        assert_eq!(code(&out), 0, "{err}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (json, last_sync_line(&err), err)
    };

    // Registry into a layout: the layout's writes are the written bytes, in both places.
    let (json, line, err) = sync(into(format!("{}/src/app", reg.host()), &a, "one")).await;
    let t = &json["totals"];
    let on_disk: u64 = std::fs::read_dir(a.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(t["layout_bytes_written"], on_disk, "{json:#}");
    assert_eq!(t["bytes_written"], on_disk, "GETs send no body: {json:#}");
    for key in ["bytes_read", "bytes_written", "requests"] {
        assert_eq!(line[key], t[key].to_string(), "{key}: {err}");
    }
    // `requests` is what the registry saw.
    let seen: u64 = reg.stats().ops.values().sum();
    assert_eq!(t["requests"], seen, "{json:#}");
    assert_eq!(json["registries"][0]["requests"], seen, "{json:#}");

    // A layout into another: no registry at all, and the blob bytes read are the bytes read.
    let (json, line, err) = sync(into(format!("oci:{}", a.display()), &b, "two")).await;
    let t = &json["totals"];
    let copied = t["bytes_copied"].as_u64().unwrap();
    assert!(copied > 0, "{json:#}");
    assert_eq!(
        t["bytes_read"], copied,
        "one place, each blob read once: {json:#}"
    );
    assert_eq!(t["requests"], 0, "{json:#}");
    for key in ["bytes_read", "bytes_written", "requests"] {
        assert_eq!(line[key], t[key].to_string(), "{key}: {err}");
    }
    assert_eq!(line["blob_bytes_read"], copied.to_string(), "{err}");
}
