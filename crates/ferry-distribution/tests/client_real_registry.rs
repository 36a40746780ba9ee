//! The registry client against the real CNCF distribution registry on loopback: multi-arch
//! push and pull both ways, mounts, tag listing, missing blobs, manifest put and delete.

mod common;

use ferry_distribution::client::RegistryClient;
use ferry_distribution::ops::MountOutcome;
use ferry_testkit::distribution::RealRegistry;

use common::{
    Blob, MultiArchImage, Upload, fast_policy, noise, options_at, pull_and_check, push_image,
    read_blob, sha256,
};

/// The real registry, or `None` when its binary is missing and `FERRY_SKIP_REAL_REGISTRY=1`.
/// Without that variable a missing binary fails the test, naming what to install.
async fn real_registry() -> Option<(RealRegistry, RegistryClient)> {
    let registry = match RealRegistry::start_for_test().await {
        Ok(Some(registry)) => registry,
        Ok(None) => return None,
        Err(e) => panic!("cannot run the real distribution registry: {e}"),
    };
    let mut options = options_at(&registry.url(), fast_policy(3));
    // A real process on the wall clock: keep real, finite bounds.
    options.connect_timeout = std::time::Duration::from_secs(10);
    options.read_timeout = std::time::Duration::from_secs(30);
    options.ping_timeout = std::time::Duration::from_secs(10);
    let client = RegistryClient::new(options).unwrap();
    Some((registry, client))
}

#[tokio::test]
async fn a_multi_arch_image_round_trips_monolithic_and_chunked() {
    let Some((registry, client)) = real_registry().await else {
        return;
    };
    for (seed, repository, upload) in [
        (21, "team/mono", Upload::Monolithic),
        (22, "team/chunked", Upload::Chunked(16 * 1024)),
    ] {
        let image = MultiArchImage::build(seed, 70_000);
        push_image(&client, repository, "v1", &image, upload).await;
        pull_and_check(&client, repository, "v1", &image).await;
        let head = client
            .head_manifest(repository, "v1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(head.digest, image.index.digest);
        assert_eq!(head.size, image.index.bytes.len() as u64);
    }
    let log = registry.access_log().await.unwrap();
    assert!(
        log.count("PATCH", "/v2/team/chunked/blobs/uploads/") >= 17,
        "{log:?}"
    );
    assert_eq!(log.count("PATCH", "/v2/team/mono/blobs/uploads/"), 0);
}

#[tokio::test]
async fn mounts_across_repositories_and_falls_back_to_a_session() {
    let Some((_registry, client)) = real_registry().await else {
        return;
    };
    let blob = Blob::new(noise(23, 20_000));
    client
        .push_blob_bytes("base/app", &blob.digest, blob.bytes.clone())
        .await
        .unwrap();
    assert_eq!(
        client.head_blob("mirror/app", &blob.digest).await.unwrap(),
        None
    );
    let outcome = client
        .mount_blob("mirror/app", &blob.digest, "base/app")
        .await
        .unwrap();
    assert_eq!(outcome, MountOutcome::Mounted);
    assert_eq!(
        client.head_blob("mirror/app", &blob.digest).await.unwrap(),
        Some(20_000)
    );
    assert_eq!(
        read_blob(&client, "mirror/app", &blob.digest).await,
        blob.bytes
    );

    // Not in the source: distribution opens an ordinary session, which takes the bytes.
    let absent = Blob::new(noise(24, 3000));
    let outcome = client
        .mount_blob("mirror/app", &absent.digest, "base/app")
        .await
        .unwrap();
    let MountOutcome::Session(session) = outcome else {
        panic!("expected an upload session, got {outcome:?}");
    };
    let len = absent.bytes.len() as u64;
    client
        .finish_upload_once(
            &session,
            &absent.digest,
            Some((absent.bytes.clone().into(), len)),
        )
        .await
        .unwrap();
    assert_eq!(
        client
            .head_blob("mirror/app", &absent.digest)
            .await
            .unwrap(),
        Some(3000)
    );
}

#[tokio::test]
async fn lists_every_tag_and_heads_a_missing_blob() {
    let Some((_registry, client)) = real_registry().await else {
        return;
    };
    let image = MultiArchImage::build(25, 1000);
    push_image(&client, "team/tags", "v00", &image, Upload::Monolithic).await;
    let mut expected = vec!["v00".to_owned()];
    for i in 1..12 {
        let tag = format!("v{i:02}");
        client
            .put_manifest("team/tags", &tag, &image.index)
            .await
            .unwrap();
        expected.push(tag);
    }
    let mut tags = client.list_tags("team/tags").await.unwrap();
    tags.sort();
    assert_eq!(tags, expected);
    assert!(
        client
            .list_tags_or_empty("team/none")
            .await
            .unwrap()
            .is_empty()
    );
    let missing = sha256(b"never pushed anywhere");
    assert_eq!(client.head_blob("team/tags", &missing).await.unwrap(), None);
    assert_eq!(
        client.head_manifest("team/tags", "nope").await.unwrap(),
        None
    );
}

#[tokio::test]
async fn puts_and_deletes_a_manifest() {
    let Some((_registry, client)) = real_registry().await else {
        return;
    };
    let image = MultiArchImage::build(26, 1000);
    push_image(&client, "team/del", "v1", &image, Upload::Monolithic).await;
    let child = &image.children[0];
    let digest = client
        .put_manifest("team/del", "single", child)
        .await
        .unwrap();
    assert_eq!(digest, child.digest);
    let got = client.get_manifest("team/del", "single").await.unwrap();
    assert_eq!(got.bytes, child.bytes);

    client
        .delete_manifest("team/del", &image.index.digest.to_string())
        .await
        .unwrap();
    assert_eq!(client.head_manifest("team/del", "v1").await.unwrap(), None);
    assert_eq!(
        client
            .head_manifest("team/del", &image.index.digest.to_string())
            .await
            .unwrap(),
        None
    );
    // Deleting what is already gone counts as deleted.
    client
        .delete_manifest("team/del", &image.index.digest.to_string())
        .await
        .unwrap();
    // The child is untouched.
    assert!(
        client
            .head_manifest("team/del", "single")
            .await
            .unwrap()
            .is_some()
    );
}
