//! A write that fails on a store target (a layout directory or an archive file) is that target's
//! failure, named by its place, never the source's blob GET: a full disk is not a registry fault.

mod common;

use std::path::Path;

use common::layout::HandLayout;
use common::{ALL_TAGS, run_sync};
use ferry_config::Config;
use ferry_sync::report::ImageStatus;

fn layout_to(src: &Path, target: String) -> Config {
    common::config()
        .mapping(format!("oci:{}", src.display()), &[target], &[ALL_TAGS])
        .build()
}

/// A source layout with one tagged image `v1`.
fn source(dir: &Path) {
    let mut layout = HandLayout::new(dir);
    let image = layout.image("amd64", &[b"a layer that cannot land"]);
    layout.tag(&image, Some("v1"));
}

/// The one image's failure: (place, operation, error).
async fn failure(config: &Config) -> (String, String, String) {
    let report = run_sync(config).await.report;
    assert_eq!(report.images.len(), 1, "{}", report.render_text());
    match report.images[0].status.clone() {
        ImageStatus::Failed { error } => (error.place(), error.operation(), error.to_string()),
        other => panic!("the image did not fail: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_layout_target_whose_blob_directory_is_a_file_fails_as_that_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let dst = tmp.path().join("dst");
    std::fs::create_dir(&dst).unwrap();
    // A file where `blobs/` must be a directory: every blob write into the layout fails
    // (root ignores permissions, not this).
    std::fs::write(dst.join("blobs"), b"not a directory").unwrap();
    let config = layout_to(&src, format!("oci:{}", dst.display()));
    let (place, operation, error) = failure(&config).await;
    assert_eq!(place, format!("oci:{}", dst.display()), "{error}");
    assert_eq!(operation, "layout write (blob)", "{error}");
    assert!(
        !error.contains(&format!("oci:{}:", src.display())),
        "{error}"
    );
    assert_eq!(
        std::fs::read(dst.join("blobs")).unwrap(),
        b"not a directory",
        "the planted file was written through"
    );
}

#[tokio::test(start_paused = true)]
async fn an_archive_target_that_cannot_be_created_fails_as_that_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    // The archive's directory is a regular file: `PATH.partial` cannot be created.
    let file = tmp.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let archive = file.join("out.tar");
    let config = layout_to(&src, format!("oci-archive:{}", archive.display()));
    let (place, operation, error) = failure(&config).await;
    assert_eq!(
        place,
        format!("oci-archive:{}", archive.display()),
        "{error}"
    );
    assert!(
        operation.starts_with("archive write ("),
        "{operation}: {error}"
    );
    assert!(
        !error.contains(&format!("oci:{}", src.display())),
        "{error}"
    );
    assert!(!archive.exists());
}
