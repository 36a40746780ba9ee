//! Layout targets across runs: a warm rerun rewrites no file, prepare reads each image's state
//! from the layout, a held lock fails as a layout lock, and the dry run sees what the engine sees.

use super::*;

/// Every file under `dir` (recursively) with its inode and modification time: a file rewritten
/// by rename gets a new inode, one rewritten in place a new time.
fn file_identities(
    dir: &Path,
) -> std::collections::BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = std::collections::BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                out.insert(entry.path(), (meta.ino(), meta.modified().unwrap()));
            }
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_warm_rerun_into_a_layout_target_rewrites_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    let mut layout = HandLayout::new(&src);
    layout.multi_arch("1.0");
    // A second tag sharing nothing with the first, and a third sharing its layer with it.
    let plain = layout.image("amd64", &[b"plain layer"]);
    layout.tag(&plain, Some("plain"));
    let sibling = layout.image("arm64", &[b"plain layer"]);
    layout.tag(&sibling, Some("sibling"));
    // And an untagged signature of `plain`: an image the layout names by digest alone.
    let empty = layout.blob(b"{}");
    let signature = json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "artifactType": "application/vnd.example.signature",
        "config": {"mediaType": media::OCI_EMPTY_JSON, "digest": empty["digest"], "size": 2},
        "layers": [],
        "subject": {"mediaType": media::OCI_MANIFEST, "digest": plain["digest"], "size": plain["size"]},
    });
    let mut sig = layout.blob(&serde_json::to_vec(&signature).unwrap());
    sig["mediaType"] = json!(media::OCI_MANIFEST);
    layout.tag(&sig, None);
    let config = layout_to_layout(&src, &dst, "");

    let cold = run_sync(&config).await.report;
    assert_eq!(cold.totals.images_failed, 0, "{}", cold.render_text());
    assert_eq!(cold.totals.images_synced, 4, "{}", cold.render_text());
    let before = file_identities(&dst);
    assert!(
        before.keys().any(|p| p.ends_with("index.json")) && before.len() > 8,
        "{before:?}"
    );

    let warm = run_sync(&config).await.report;
    assert_eq!(warm.totals.images_up_to_date, 4, "{}", warm.render_text());
    assert_eq!(warm.totals.images_synced, 0, "{}", warm.render_text());
    assert_eq!(
        file_identities(&dst),
        before,
        "a warm rerun rewrote a file of the layout"
    );
}

/// Each image's state in its mapping's only target, by name, as prepare found it.
async fn layout_states(config: &Config) -> Vec<(String, TargetState)> {
    let plan = prepare_only(config, &Registries::new(config)).await;
    let resolved = plan.mappings[0].outcome.as_ref().unwrap();
    let mut states: Vec<_> = resolved
        .images
        .iter()
        .map(|i| (i.name(), i.targets[0].state.clone()))
        .collect();
    states.sort_by(|a, b| a.0.cmp(&b.0));
    states
}

#[tokio::test(start_paused = true)]
async fn a_layout_targets_images_are_each_new_up_to_date_missing_or_stale() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    let mut layout = HandLayout::new(&src);
    let mut images = Vec::new();
    for tag in ["a", "b", "c", "d"] {
        let image = layout.image("amd64", &[format!("{tag} layer").as_bytes()]);
        layout.tag(&image, Some(tag));
        images.push(image);
    }
    // An untagged signature of `a`: an image the target names by digest alone.
    let empty = layout.blob(b"{}");
    let signature = json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "artifactType": "application/vnd.example.signature",
        "config": {"mediaType": media::OCI_EMPTY_JSON, "digest": empty["digest"], "size": 2},
        "layers": [],
        "subject": {"mediaType": media::OCI_MANIFEST, "digest": images[0]["digest"], "size": images[0]["size"]},
    });
    let mut sig = layout.blob(&serde_json::to_vec(&signature).unwrap());
    sig["mediaType"] = json!(media::OCI_MANIFEST);
    layout.tag(&sig, None);
    let config = layout_to_layout(&src, &dst, "");
    let named = |states: &[(&str, TargetState)]| -> Vec<(String, TargetState)> {
        let mut v: Vec<_> = states
            .iter()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let sig_name = digest_of(&sig);

    // No layout yet.
    assert_eq!(
        layout_states(&config).await,
        named(&[
            ("a", TargetState::NewRepository),
            ("b", TargetState::NewRepository),
            ("c", TargetState::NewRepository),
            ("d", TargetState::NewRepository),
            (&sig_name, TargetState::NewRepository),
        ])
    );
    let report = run_sync(&config).await.report;
    assert_eq!(report.totals.images_synced, 5, "{}", report.render_text());
    assert!(
        layout_states(&config)
            .await
            .iter()
            .all(|(_, s)| *s == TargetState::UpToDate)
    );

    // The source moves b to new content; the target loses c's manifest file (its index entry
    // stays) and d's index entry (its files stay).
    let new_b = layout.image("amd64", &[b"b moved"]);
    layout.untag("b");
    layout.tag(&new_b, Some("b"));
    let c = Digest::parse(&digest_of(&images[2])).unwrap();
    std::fs::remove_file(dst.join("blobs/sha256").join(c.hex())).unwrap();
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dst.join("index.json")).unwrap()).unwrap();
    index["manifests"]
        .as_array_mut()
        .unwrap()
        .retain(|m| m["annotations"]["org.opencontainers.image.ref.name"] != "d");
    std::fs::write(dst.join("index.json"), index.to_string()).unwrap();
    let old_b = Digest::parse(&digest_of(&images[1])).unwrap();
    assert_eq!(
        layout_states(&config).await,
        named(&[
            ("a", TargetState::UpToDate),
            ("b", TargetState::Stale { current: old_b }),
            ("c", TargetState::Missing),
            ("d", TargetState::Missing),
            (&sig_name, TargetState::UpToDate),
        ])
    );
}

#[tokio::test(start_paused = true)]
async fn a_layout_whose_lock_is_held_fails_as_a_layout_lock_not_a_registry_operation() {
    use ferry_store::layout::lock::{self, LockKind};
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    let mut layout = HandLayout::new(&src);
    let image = layout.image("amd64", &[b"layer"]);
    layout.tag(&image, Some("1.0"));
    // Garbage collection holds the layout for the whole wait: the run writes nothing there.
    let _gc = lock::acquire(&dst, LockKind::Collecting, lock::LOCK_WAIT)
        .await
        .unwrap();
    let report = run_sync(&layout_to_layout(&src, &dst, "")).await.report;
    assert_eq!(report.totals.images_failed, 1, "{}", report.render_text());
    let ImageStatus::Failed { error } = &report.images[0].status else {
        panic!("{}", report.render_text());
    };
    assert_eq!(error.place(), format!("oci:{}", dst.display()));
    assert_eq!(error.operation(), "layout lock");
    assert_eq!(error.status(), None);
    assert!(
        error
            .to_string()
            .contains("still held by another ferry run"),
        "{error}"
    );
    assert!(!dst.join("index.json").exists(), "nothing was written");
}

#[tokio::test(start_paused = true)]
async fn the_dry_run_counts_a_symlinked_blob_in_a_layout_target_as_missing_as_the_engine_does() {
    // A symlink planted at a blob name of the target, pointing at the right bytes outside it:
    // the engine does not count it as held (it writes the blob), so the dry run must not either.
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let dst = tmp.path().join("dst");
    let mut layout = HandLayout::new(&src);
    let image = layout.image("amd64", &[b"planted layer"]);
    layout.tag(&image, Some("1.0"));
    let layer = Digest::of_bytes(Algorithm::Sha256, b"planted layer");
    std::fs::create_dir_all(dst.join("blobs/sha256")).unwrap();
    let outside = tmp.path().join("outside");
    std::fs::write(&outside, b"planted layer").unwrap();
    let planted = dst.join("blobs/sha256").join(layer.hex());
    std::os::unix::fs::symlink(&outside, &planted).unwrap();

    let config = layout_to_layout(&src, &dst, "");
    let registries = Registries::new(&config);
    let plan = prepare_only(&config, &registries).await;
    let dry = ferry_sync::dryrun::DryRun::measure(&plan, &registries).await;
    let report = run_sync(&config).await.report;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    assert_eq!(report.totals.blobs_skipped, 0, "{}", report.render_text());
    assert_eq!(
        dry.totals.blobs_to_transfer, report.totals.blobs_copied,
        "the dry run and the engine disagree on what the layout holds"
    );
    assert_eq!(dry.totals.blobs_to_transfer, 2, "the config and the layer");
    assert!(std::fs::symlink_metadata(&planted).unwrap().is_file());
    assert_eq!(std::fs::read(&outside).unwrap(), b"planted layer");
}
