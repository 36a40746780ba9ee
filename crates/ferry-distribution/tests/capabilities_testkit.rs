//! Capabilities learned by the client against test-kit registry personalities: a PUT carrying a
//! blob refused moves the registry to docker's flow within the same attempt, and a refused
//! mount becomes an upload session; neither spends a retry, and each is learned once.

mod common;

use bytes::Bytes;

use ferry_distribution::capabilities::{Feature, Support, UploadFlow};
use ferry_distribution::ops::MountOutcome;
use ferry_testkit::registry::{OpKind, Personality, TestRegistry};

use common::{client_at, sha256};

#[tokio::test(start_paused = true)]
async fn a_refused_put_body_is_redone_through_docker_flow_once_and_kept() {
    let reg = TestRegistry::builder()
        .personality(Personality::docker_flow_only())
        .start()
        .await
        .unwrap();
    let c = client_at(&reg.url(), 3);
    let first = Bytes::from_static(b"first blob");
    c.push_blob_bytes("lib/app", &sha256(&first), first.clone())
        .await
        .unwrap();
    assert!(reg.has_blob("lib/app", &sha256(&first).to_string()));
    assert_eq!(c.capabilities().upload_flow(), UploadFlow::Docker);
    assert_eq!(c.gate().stats.snapshot().retries, 0);
    let refused = |reg: &TestRegistry| {
        reg.requests()
            .iter()
            .filter(|r| r.op == OpKind::UploadPut && r.status == 500)
            .count()
    };
    assert_eq!(refused(&reg), 1);

    // Learned: the next blob sends no PUT with a body at all.
    reg.reset_stats();
    let second = Bytes::from_static(b"second blob");
    c.push_blob_bytes("lib/app", &sha256(&second), second.clone())
        .await
        .unwrap();
    assert!(reg.has_blob("lib/app", &sha256(&second).to_string()));
    assert_eq!(refused(&reg), 0);
    assert_eq!(reg.stats().op(OpKind::UploadPatch), 1);
}

#[tokio::test(start_paused = true)]
async fn a_refused_mount_opens_an_upload_session_and_is_not_asked_again() {
    let reg = TestRegistry::builder()
        .personality(Personality::mount_refused())
        .start()
        .await
        .unwrap();
    let c = client_at(&reg.url(), 3);
    let blob = b"shared layer";
    let digest = sha256(blob);
    reg.seed_blob("lib/a", blob);
    for repo in ["lib/b", "lib/c"] {
        match c.mount_blob(repo, &digest, "lib/a").await.unwrap() {
            MountOutcome::Session(s) => assert_eq!(s.repository, repo),
            MountOutcome::Mounted => panic!("the registry refuses mounts"),
        }
    }
    assert_eq!(c.capabilities().support(Feature::Mount), Support::Refused);
    assert_eq!(reg.stats().op(OpKind::Mount), 1, "asked once");
    assert_eq!(c.gate().stats.snapshot().retries, 0);
}

#[tokio::test(start_paused = true)]
async fn push_blob_reports_the_flow_it_used_and_keeps_the_learned_one() {
    use ferry_distribution::ops::push::{BlobPush, InMemory, PushFlow, UploadShape};
    let shape = UploadShape {
        chunk_size: 4,
        monolithic_limit: 16,
    };
    let push = |c: &ferry_distribution::RegistryClient, bytes: &'static [u8]| {
        let c = c.clone();
        async move {
            let digest = sha256(bytes);
            let push = BlobPush {
                repository: "lib/app",
                digest: &digest,
                size: bytes.len() as u64,
                shape,
                session: None,
            };
            c.push_blob(push, None, &InMemory(Bytes::from_static(bytes)))
                .await
                .unwrap()
        }
    };
    let plain = TestRegistry::builder().start().await.unwrap();
    let c = client_at(&plain.url(), 3);
    assert_eq!(push(&c, b"small").await, PushFlow::Monolithic);
    assert_eq!(
        push(&c, b"larger than sixteen bytes").await,
        PushFlow::Chunked
    );
    assert_eq!(
        plain.stats().op(OpKind::UploadPatch),
        7,
        "25 bytes in chunks of 4"
    );

    let docker = TestRegistry::builder()
        .personality(Personality::docker_flow_only())
        .start()
        .await
        .unwrap();
    let c = client_at(&docker.url(), 3);
    assert_eq!(push(&c, b"small").await, PushFlow::Docker);
    assert_eq!(push(&c, b"also small").await, PushFlow::Docker);
    // Above the monolithic limit, blobs stay chunked (the empty closing PUT is taken).
    assert_eq!(
        push(&c, b"larger than sixteen bytes").await,
        PushFlow::Chunked
    );
    assert!(docker.has_blob("lib/app", &sha256(b"also small").to_string()));
    assert_eq!(c.gate().stats.snapshot().retries, 0);
}
