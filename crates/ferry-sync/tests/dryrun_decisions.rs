//! The dry run asks the engine's own questions of the same `Destination`: a registry that
//! ignored or refused mounts this run is counted as uploaded to, not mounted into.

mod common;

use common::layout::HandLayout;
use common::{ALL_TAGS, QUICK_RETRY};
use ferry_distribution::capabilities::{Feature, Support};
use ferry_sync::registries::Registries;

#[tokio::test(start_paused = true)]
async fn a_registry_that_ignores_mounts_is_counted_as_two_uploads_not_a_mount() {
    let dst = common::started().await;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("app");
    let mut layout = HandLayout::new(&src);
    let image = layout.image("amd64", &[b"first layer", b"second layer"]);
    layout.tag(&image, Some("v1"));
    let host = dst.host();
    let config = common::config()
        .entry(&host, &dst.url(), &[QUICK_RETRY])
        .mapping(
            format!("oci:{}", src.display()),
            &[format!("{host}/team/a"), format!("{host}/team/b")],
            &[ALL_TAGS],
        )
        .build();

    // Mounts work: each blob goes up once and is mounted into the other repository.
    let fresh = common::dry_run(&config, None).await.dry.totals;
    assert_eq!(fresh.copies, 2, "{fresh:?}");
    // Two layers and the config blob.
    assert_eq!(fresh.blobs_to_transfer, 3, "{fresh:?}");
    assert_eq!(fresh.blobs_to_mount, 3, "{fresh:?}");

    // The registry ignored a mount earlier in the run: the engine's `mounts_from` says no, so a
    // sync uploads every blob to both repositories, and the dry run says so.
    let registries = Registries::new(&config);
    registries
        .client(&host)
        .await
        .unwrap()
        .capabilities()
        .learn(Feature::Mount, Support::Ignored);
    let learned = common::dry_run(&config, Some(registries)).await.dry.totals;
    assert_eq!(learned.copies, 2, "{learned:?}");
    assert_eq!(learned.blobs_to_transfer, 6, "{learned:?}");
    assert_eq!(learned.blobs_to_mount, 0, "{learned:?}");
    assert_eq!(learned.bytes_to_transfer, 2 * fresh.bytes_to_transfer);
}
