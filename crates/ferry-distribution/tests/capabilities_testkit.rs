//! Capabilities learned by the client against test-kit registry personalities: a PUT carrying a
//! blob refused (twice where the answer is ambiguous) moves the registry to docker's flow within
//! the same attempt, and a refused mount becomes an upload session; neither spends a retry.

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
    // A 500 could be a fault a retry clears: it teaches only when a fresh session is refused
    // the same way, within the same attempt.
    assert_eq!(refused(&reg), 2);

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

/// 320 KiB: above what the container-registry binary's personality lets go unread before the
/// connection resets.
fn large_blob() -> Bytes {
    Bytes::from(
        (0..320 * 1024u32)
            .map(|i| (i % 253) as u8)
            .collect::<Vec<u8>>(),
    )
}

#[tokio::test(start_paused = true)]
async fn an_upload_in_flight_when_docker_flow_is_learned_finishes_through_it_without_a_retry() {
    use ferry_testkit::registry::{FaultAction, FaultRule};
    let reg = TestRegistry::builder()
        .personality(Personality::container_registry())
        .start()
        .await
        .unwrap();
    // The PUT carrying the blob is held at the registry, then reset (answered unread).
    reg.faults().push(FaultRule::on(
        OpKind::UploadPut,
        FaultAction::Delay(std::time::Duration::from_secs(10)),
    ));
    let c = client_at(&reg.url(), 3);
    let bytes = large_blob();
    let digest = sha256(&bytes);
    let push = tokio::spawn({
        let c = c.clone();
        let bytes = bytes.clone();
        let digest = digest.clone();
        async move { c.push_blob_bytes("lib/app", &digest, bytes).await }
    });
    while !reg.requests().iter().any(|r| r.op == OpKind::UploadPut) {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    // Meanwhile another upload taught docker's flow.
    assert!(c.capabilities().learn_docker_flow());
    push.await.unwrap().unwrap();
    assert!(reg.has_blob("lib/app", &digest.to_string()));
    assert_eq!(c.gate().stats.snapshot().retries, 0, "no attempt spent");
}

#[tokio::test(start_paused = true)]
async fn a_put_with_the_blob_that_breaks_in_two_attempts_learns_docker_flow() {
    let reg = TestRegistry::builder()
        .personality(Personality::container_registry())
        .start()
        .await
        .unwrap();
    let c = client_at(&reg.url(), 3);
    let bytes = large_blob();
    let digest = sha256(&bytes);
    c.push_blob_bytes("lib/app", &digest, bytes).await.unwrap();
    assert!(reg.has_blob("lib/app", &digest.to_string()));
    assert_eq!(c.capabilities().upload_flow(), UploadFlow::Docker);
    // The first break was the retry loop's (one retry); the second taught the flow.
    assert_eq!(c.gate().stats.snapshot().retries, 1);
}

/// A blob whose reads break off half way for the first `breaks` opens (a source's body cut by
/// a reset, as the resilience bench's mixed condition does to 5% of blob GETs), then arrive
/// whole.
struct BreaksOff {
    bytes: Bytes,
    breaks: std::sync::atomic::AtomicU32,
}

impl ferry_distribution::ops::push::BlobBytes for BreaksOff {
    fn open(
        &self,
        offset: u64,
    ) -> impl std::future::Future<
        Output = Result<
            ferry_distribution::ops::push::ByteStream,
            ferry_distribution::retry::Failure,
        >,
    > + Send {
        use std::sync::atomic::Ordering;
        let rest = self.bytes.slice(offset as usize..);
        let cut = self
            .breaks
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        async move {
            let stream: ferry_distribution::ops::push::ByteStream = if cut {
                let half = rest.slice(..rest.len() / 2);
                Box::pin(futures::stream::iter(vec![
                    Ok(half),
                    Err(ferry_distribution::retry::Failure::Transport {
                        message: "the source's body broke off".into(),
                        sent: ferry_distribution::retry::Sent::Unknown,
                        local: false,
                    }),
                ]))
            } else {
                Box::pin(futures::stream::once(async move { Ok(rest) }))
            };
            Ok(stream)
        }
    }
}

/// Bytes that broke off on their way in (the source's read, not the target) are ferry's side of
/// the request: two such breaks of the PUT carrying one blob teach the target nothing (a target
/// that resets such PUTs itself is taught docker's flow, above) and are not counted as its
/// transport errors, whether they broke mid-PUT or in the tee before it; when attempts run out
/// the error names the source's failure, not the target's.
#[tokio::test(start_paused = true)]
async fn bytes_that_break_off_on_ferrys_side_teach_the_target_nothing() {
    use ferry_distribution::ops::push::{BlobPush, PushFlow, UploadShape};
    let reg = TestRegistry::builder().start().await.unwrap();
    let c = client_at(&reg.url(), 4);
    let bytes = Bytes::from(vec![7u8; 64 * 1024]);
    let digest = sha256(&bytes);
    let push = || BlobPush {
        repository: "lib/app",
        digest: &digest,
        size: bytes.len() as u64,
        shape: UploadShape {
            chunk_size: u64::MAX,
            monolithic_limit: u64::MAX,
        },
        session: None,
    };
    let breaking = |breaks| BreaksOff {
        bytes: bytes.clone(),
        breaks: std::sync::atomic::AtomicU32::new(breaks),
    };
    let flow = c.push_blob(push(), None, &breaking(2)).await.unwrap();
    assert_eq!(flow, PushFlow::Monolithic);
    assert_eq!(c.capabilities().upload_flow(), UploadFlow::Monolithic);
    assert!(reg.has_blob("lib/app", &digest.to_string()));
    // Retried, and not counted as the target's transport errors.
    let stats = c.gate().stats.snapshot();
    assert_eq!((stats.retries, stats.transport_errors), (2, 0));

    // The tee the engine hands the first attempt failed before its first byte (the source's
    // read cut at once): the same, on the tee's path.
    let reg = TestRegistry::builder().start().await.unwrap();
    let c = client_at(&reg.url(), 4);
    let cut: ferry_distribution::retry::Failure = ferry_distribution::retry::Failure::Transport {
        message: "the source's body broke off".into(),
        sent: ferry_distribution::retry::Sent::Unknown,
        local: false,
    };
    c.push_blob(push(), Some(Err(cut)), &breaking(0))
        .await
        .unwrap();
    assert!(reg.has_blob("lib/app", &digest.to_string()));
    let stats = c.gate().stats.snapshot();
    assert_eq!((stats.retries, stats.transport_errors), (1, 0));

    let other = Bytes::from(vec![8u8; 64 * 1024]);
    let other_digest = sha256(&other);
    let err = c
        .push_blob(
            BlobPush {
                digest: &other_digest,
                ..push()
            },
            None,
            &BreaksOff {
                bytes: other,
                breaks: std::sync::atomic::AtomicU32::new(u32::MAX),
            },
        )
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("the source's body broke off"), "{text}");
    assert_eq!(c.capabilities().upload_flow(), UploadFlow::Monolithic);
}
