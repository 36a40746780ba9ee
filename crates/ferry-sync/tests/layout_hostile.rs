//! A layout source that came from outside cannot reach past itself or overfill ferry: links out
//! of it, FIFOs, `/dev/zero`, over-long blobs and huge manifests each fail their own image with
//! an error naming the layout and digest, while the good image beside them is still mirrored.

mod common;

use std::path::{Path, PathBuf};

use common::{ALL_TAGS, QUICK_RETRY, run_sync};
use ferry_distribution::{Algorithm, Digest};
use ferry_sync::report::{ImageStatus, SyncReport};
use ferry_testkit::fixtures::images::{Images, blob_path, digest_of};
use ferry_testkit::registry::TestRegistry;

/// A layout on disk from the test kit's image builder, written again after each image (blob
/// files a test has replaced are left as they are).
struct Layout {
    dir: PathBuf,
    images: Images,
}

impl Layout {
    fn new(dir: &Path) -> Self {
        let layout = Layout {
            dir: dir.to_path_buf(),
            images: Images::new(),
        };
        layout.images.write_layout(dir);
        layout
    }

    fn path_of(&self, digest: &Digest) -> PathBuf {
        blob_path(&self.dir, &digest.to_string())
    }

    /// An image with one layer `layer`, tagged `tag`; returns the layer's and manifest's digests.
    fn image(&mut self, tag: &str, layer: &[u8]) -> (Digest, Digest) {
        let manifest = self.images.platform_image("amd64", &[layer]);
        self.images.tag(&manifest, Some(tag));
        self.images.write_layout(&self.dir);
        (
            Digest::of_bytes(Algorithm::Sha256, layer),
            Digest::parse(&digest_of(&manifest)).unwrap(),
        )
    }

    /// Replaces the blob file of `digest` with a symbolic link to `to`.
    fn link(&self, digest: &Digest, to: &Path) {
        std::fs::remove_file(self.path_of(digest)).unwrap();
        std::os::unix::fs::symlink(to, self.path_of(digest)).unwrap();
    }
}

/// Syncs each layout in `sources` to `mirror/<its directory name>` in one run.
async fn run(sources: &[&Path], registry: &TestRegistry) -> SyncReport {
    let mut config = common::config().registry(registry, &[QUICK_RETRY]);
    for src in sources {
        let name = src.file_name().unwrap().to_str().unwrap();
        config = config.mapping(
            format!("oci:{}", src.display()),
            &[format!("{}/mirror/{name}", registry.host())],
            &[ALL_TAGS],
        );
    }
    run_sync(&config.build()).await.report
}

/// The error that failed the mapping reading `src`.
fn mapping_failure(report: &SyncReport, src: &Path) -> String {
    let source = format!("oci:{}", src.display());
    let found = report.failed_mappings.iter().find(|m| m.source == source);
    match found.map(|m| &m.status) {
        Some(ImageStatus::Failed { error, .. }) => error.to_string(),
        other => panic!(
            "{source}: expected a failure, got {other:?}\n{}",
            report.render_text()
        ),
    }
}

/// The error of the image tagged `tag`, or a panic naming how it ended instead.
fn failure(report: &SyncReport, tag: &str) -> String {
    let found = report.images.iter().find(|i| i.image == tag);
    match found.map(|i| &i.status) {
        Some(ImageStatus::Failed { error, .. }) => error.to_string(),
        other => panic!(
            "{tag}: expected a failure, got {other:?}\n{}",
            report.render_text()
        ),
    }
}

#[tokio::test(start_paused = true)]
async fn links_fifos_devices_and_overlong_blobs_fail_their_own_image_and_the_good_one_syncs() {
    let dst = common::started().await;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("layout");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mut layout = Layout::new(&src);
    layout.image("good", b"the good layer");

    // A link to a file outside the layout that holds exactly the right bytes: only the refusal
    // to follow links keeps it out.
    let (escape, _) = layout.image("escape", b"bytes that live outside the layout");
    std::fs::write(outside.join("copy"), b"bytes that live outside the layout").unwrap();
    layout.link(&escape, &outside.join("copy"));
    // /dev/zero behind a link: endless bytes.
    let (zero, _) = layout.image("zero", b"a layer replaced by /dev/zero");
    layout.link(&zero, Path::new("/dev/zero"));
    // A FIFO nobody writes to: opening it must not hang the run.
    let (fifo, _) = layout.image("fifo", b"a layer replaced by a fifo");
    std::fs::remove_file(layout.path_of(&fifo)).unwrap();
    mkfifo(&layout.path_of(&fifo));
    // A blob file longer than its descriptor says (the right bytes, then more).
    let (long, _) = layout.image("long", b"declared bytes");
    std::fs::write(
        layout.path_of(&long),
        [&b"declared bytes"[..], &[7u8; 100_000]].concat(),
    )
    .unwrap();
    // Manifests are read when the mapping is prepared, so a bad one fails its mapping: each is
    // in a layout of its own, mapped beside the first. A manifest behind a link to a copy of
    // itself outside the layout:
    let linked = tmp.path().join("linked");
    let mut linked_layout = Layout::new(&linked);
    let (_, manifest) = linked_layout.image("v1", b"a layer under a linked manifest");
    std::fs::copy(linked_layout.path_of(&manifest), outside.join("manifest")).unwrap();
    linked_layout.link(&manifest, &outside.join("manifest"));
    // A manifest far larger than any manifest may be (sparse: nothing is written to disk).
    let huge = tmp.path().join("huge");
    let mut huge_layout = Layout::new(&huge);
    let (_, manifest) = huge_layout.image("v1", b"a layer under a huge manifest");
    std::fs::OpenOptions::new()
        .write(true)
        .open(huge_layout.path_of(&manifest))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();

    let report = run(&[&src, &linked, &huge], &dst).await;
    let synced: Vec<_> = report
        .images
        .iter()
        .filter(|i| i.status == ImageStatus::Synced)
        .map(|i| i.image.as_str())
        .collect();
    assert_eq!(synced, ["good"], "{}", report.render_text());
    assert_eq!(dst.tags("mirror/layout"), ["good"]);
    let layout_name = format!("oci:{}", src.display());
    for (tag, digest, why) in [
        ("escape", &escape, "symbolic link"),
        ("zero", &zero, "symbolic link"),
        ("fifo", &fifo, "a FIFO"),
        ("long", &long, "longer than"),
    ] {
        let error = failure(&report, tag);
        assert!(
            error.contains(&layout_name)
                && error.contains(&digest.to_string())
                && error.contains(why),
            "{tag}: {error}"
        );
        assert!(!dst.has_blob("mirror/layout", &digest.to_string()), "{tag}");
    }
    let error = mapping_failure(&report, &linked);
    assert!(
        error.contains(&linked.join("blobs/sha256").display().to_string())
            && error.contains("symbolic link"),
        "{error}"
    );
    let error = mapping_failure(&report, &huge);
    assert!(
        error.contains(&format!("oci:{}", huge.display())) && error.contains("larger than"),
        "{error}"
    );
    assert!(dst.tags("mirror/linked").is_empty() && dst.tags("mirror/huge").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_linked_or_special_index_json_fails_the_layout_with_a_clear_error() {
    let dst = common::started().await;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("layout");
    let mut layout = Layout::new(&src);
    layout.image("good", b"the good layer");
    let real = tmp.path().join("index-elsewhere.json");
    std::fs::rename(src.join("index.json"), &real).unwrap();
    std::os::unix::fs::symlink(&real, src.join("index.json")).unwrap();
    let report = run(&[&src], &dst).await;
    let text = report.render_text();
    assert!(
        text.contains("index.json") && text.contains("symbolic link"),
        "{text}"
    );
    assert!(dst.tags("mirror/layout").is_empty());

    // Put back as a regular file, the same layout syncs: the refusal was the link, nothing else.
    std::fs::remove_file(src.join("index.json")).unwrap();
    std::fs::rename(&real, src.join("index.json")).unwrap();
    let report = run(&[&src], &dst).await;
    assert_eq!(
        dst.tags("mirror/layout"),
        ["good"],
        "{}",
        report.render_text()
    );
}

/// Makes a FIFO at `path` with the `mkfifo` tool (the test needs no crate for it).
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}
