//! The registry client against the in-process test registry: image push and pull both ways,
//! mounts, pagination, digest and size checks, token auth, redirects, foreign links, referrers.

mod common;

use bytes::Bytes;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use ferry_distribution::Secret;
use ferry_distribution::auth::Credentials;
use ferry_distribution::client::RegistryClient;
use ferry_distribution::error::ErrorKind;
use ferry_distribution::media::OCI_MANIFEST;
use ferry_distribution::ops::MountOutcome;
use ferry_testkit::registry::{OpKind, TestRegistry, TokenAuthConfig};

use common::{
    Blob, MultiArchImage, Upload, client_at, fast_policy, manifest_of, noise, options_at,
    pull_and_check, push_image, read_blob, sha256,
};

async fn registry() -> TestRegistry {
    TestRegistry::builder().start().await.unwrap()
}

fn auth_config() -> TokenAuthConfig {
    TokenAuthConfig {
        users: vec![("alice".into(), "wonderland-7".into())],
        anonymous_pull: true,
        token_ttl_secs: 300,
    }
}

fn client_with(url: &str, credentials: Credentials) -> RegistryClient {
    let mut options = options_at(url, fast_policy(3));
    options.credentials = credentials;
    RegistryClient::new(options).unwrap()
}

fn alice(password: &str) -> Credentials {
    Credentials::Basic {
        username: "alice".into(),
        password: Secret::new(password),
    }
}

#[tokio::test(start_paused = true)]
async fn a_multi_arch_image_round_trips_monolithic_and_chunked() {
    for (seed, upload) in [(1, Upload::Monolithic), (2, Upload::Chunked(16 * 1024))] {
        let reg = registry().await;
        let client = client_at(&reg.url(), 3);
        let image = MultiArchImage::build(seed, 70_000);
        push_image(&client, "team/app", "v1", &image, upload).await;

        // The registry holds exactly what was sent.
        let (media_type, stored) = reg.manifest("team/app", "v1").unwrap();
        assert_eq!(media_type, ferry_distribution::media::OCI_INDEX);
        assert_eq!(stored, image.index.bytes);
        for blob in &image.blobs {
            assert_eq!(reg.blob(&blob.digest.to_string()).unwrap(), blob.bytes);
        }
        let stats = reg.stats();
        let blobs = image.blobs.len() as u64;
        assert_eq!(stats.op(OpKind::UploadStart), blobs, "{upload:?}");
        assert_eq!(stats.op(OpKind::UploadPut), blobs, "{upload:?}");
        match upload {
            Upload::Monolithic => assert_eq!(stats.op(OpKind::UploadPatch), 0),
            Upload::Chunked(_) => {
                // Two 70 000-byte layers, one of 71 000, two small configs: 5 + 5 + 5 + 1 + 1.
                assert_eq!(stats.op(OpKind::UploadPatch), 17);
            }
        }
        assert_eq!(reg.open_uploads(), 0);

        pull_and_check(&client, "team/app", "v1", &image).await;
    }
}

#[tokio::test(start_paused = true)]
async fn mounts_across_repositories_and_the_202_fallback_is_a_usable_session() {
    let reg = registry().await;
    let client = client_at(&reg.url(), 3);
    let present = Blob::new(noise(5, 4096));
    reg.seed_blob("base/app", &present.bytes);

    let outcome = client
        .mount_blob("mirror/app", &present.digest, "base/app")
        .await
        .unwrap();
    assert_eq!(outcome, MountOutcome::Mounted);
    assert!(reg.has_blob("mirror/app", &present.digest.to_string()));
    assert_eq!(reg.stats().op(OpKind::Mount), 1);

    // The source does not have this one: the registry opens an ordinary session instead.
    let absent = Blob::new(noise(6, 4096));
    let outcome = client
        .mount_blob("mirror/app", &absent.digest, "base/app")
        .await
        .unwrap();
    let MountOutcome::Session(session) = outcome else {
        panic!("expected an upload session, got {outcome:?}");
    };
    assert_eq!(session.repository, "mirror/app");
    assert_eq!(session.location.origin(), client.base_url().origin());
    assert_eq!(reg.open_uploads(), 1);
    let len = absent.bytes.len() as u64;
    client
        .finish_upload_once(
            &session,
            &absent.digest,
            Some((absent.bytes.clone().into(), len)),
        )
        .await
        .unwrap();
    assert!(reg.has_blob("mirror/app", &absent.digest.to_string()));
    assert_eq!(reg.open_uploads(), 0);
    assert_eq!(
        read_blob(&client, "mirror/app", &absent.digest).await,
        absent.bytes
    );
}

#[tokio::test(start_paused = true)]
async fn lists_every_tag_across_pages() {
    let reg = TestRegistry::builder().page_size(3).start().await.unwrap();
    let client = client_at(&reg.url(), 3);
    let digest = reg.seed_image("team/app", "t00", &[b"layer"]);
    let (_, bytes) = reg.manifest("team/app", &digest).unwrap();
    let mut expected = vec!["t00".to_owned()];
    for i in 1..20 {
        let tag = format!("t{i:02}");
        reg.seed_manifest("team/app", &tag, OCI_MANIFEST, &bytes);
        expected.push(tag);
    }
    let tags = client.list_tags("team/app").await.unwrap();
    assert_eq!(tags, expected);
    // 20 tags, 3 a page: 7 pages, each fetched once.
    assert_eq!(reg.stats().op(OpKind::TagList), 7);

    assert!(
        client
            .list_tags_or_empty("team/none")
            .await
            .unwrap()
            .is_empty()
    );
    let missing = client.list_tags("team/none").await.unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
}

#[tokio::test(start_paused = true)]
async fn a_tag_list_whose_link_repeats_a_page_is_an_error_not_an_end() {
    let reg = TestRegistry::builder().page_size(2).start().await.unwrap();
    let client = client_at(&reg.url(), 3);
    let digest = reg.seed_image("team/app", "t0", &[b"layer"]);
    let (_, bytes) = reg.manifest("team/app", &digest).unwrap();
    for i in 1..6 {
        reg.seed_manifest("team/app", &format!("t{i}"), OCI_MANIFEST, &bytes);
    }
    // Page 2 names itself as the next page: tags t4 and t5 are never listed.
    reg.listing_faults()
        .later_pages("team/app", ferry_testkit::registry::LaterPage::LinkToItself);
    let err = client.list_tags("team/app").await.unwrap_err();
    assert!(
        matches!(&err.kind, ErrorKind::InvalidResponse(m) if m.contains("page already read")),
        "{err}"
    );
    // Each page once: the repeat is caught before it is fetched again.
    assert_eq!(reg.stats().op(OpKind::TagList), 2);
}

#[tokio::test(start_paused = true)]
async fn head_blob_answers_size_or_none() {
    let reg = registry().await;
    let client = client_at(&reg.url(), 3);
    let blob = Blob::new(noise(9, 1234));
    reg.seed_blob("team/app", &blob.bytes);
    assert_eq!(
        client.head_blob("team/app", &blob.digest).await.unwrap(),
        Some(1234)
    );
    let missing = sha256(b"never pushed");
    assert_eq!(client.head_blob("team/app", &missing).await.unwrap(), None);
    // A 404 is an answer, not a failure: nothing retried.
    assert_eq!(reg.stats().op(OpKind::BlobHead), 2);
}

#[tokio::test(start_paused = true)]
async fn a_manifest_fetched_by_digest_must_hash_to_it() {
    let reg = registry().await;
    let client = client_at(&reg.url(), 3);
    let good = manifest_of(OCI_MANIFEST, &json!({"schemaVersion": 2, "layers": []}));
    let claimed = sha256(b"some other manifest");
    reg.seed_manifest("team/app", &claimed.to_string(), OCI_MANIFEST, &good.bytes);
    let err = client
        .get_manifest("team/app", &claimed.to_string())
        .await
        .unwrap_err();
    match &err.kind {
        ErrorKind::DigestMismatch { expected, actual } => {
            assert_eq!(expected, &claimed.to_string());
            assert_eq!(actual, &good.digest.to_string());
        }
        other => panic!("expected a digest mismatch, got {other:?}"),
    }
    // Final: bad bytes are not fetched again.
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 1);

    // The honest copy passes.
    reg.seed_manifest("team/app", "v1", OCI_MANIFEST, &good.bytes);
    let got = client
        .get_manifest("team/app", &good.digest.to_string())
        .await
        .unwrap();
    assert_eq!(got.bytes, good.bytes);
}

#[tokio::test(start_paused = true)]
async fn a_manifest_over_the_size_limit_is_refused() {
    let reg = registry().await;
    let mut options = options_at(&reg.url(), fast_policy(3));
    options.manifest_limit = 512;
    let client = RegistryClient::new(options).unwrap();
    let padding = "x".repeat(600);
    let big = manifest_of(
        OCI_MANIFEST,
        &json!({"schemaVersion": 2, "annotations": {"pad": padding}}),
    );
    assert!(big.bytes.len() > 512);
    reg.seed_manifest("team/app", "big", OCI_MANIFEST, &big.bytes);
    let small = manifest_of(OCI_MANIFEST, &json!({"schemaVersion": 2}));
    reg.seed_manifest("team/app", "small", OCI_MANIFEST, &small.bytes);

    let err = client.get_manifest("team/app", "big").await.unwrap_err();
    assert!(
        matches!(
            err.kind,
            ErrorKind::TooLarge {
                what: "manifest",
                limit: 512
            }
        ),
        "{err:?}"
    );
    assert_eq!(reg.stats().op(OpKind::ManifestGet), 1);
    assert_eq!(
        client
            .get_manifest("team/app", "small")
            .await
            .unwrap()
            .bytes,
        small.bytes
    );
}

#[tokio::test(start_paused = true)]
async fn token_auth_pushes_with_basic_credentials_pulls_anonymously_and_refuses_a_wrong_password() {
    let reg = TestRegistry::builder()
        .token_auth(auth_config())
        .start()
        .await
        .unwrap();
    let image = MultiArchImage::build(3, 5000);

    let pusher = client_with(&reg.url(), alice("wonderland-7"));
    push_image(&pusher, "team/app", "v1", &image, Upload::Monolithic).await;
    assert_eq!(reg.tags("team/app"), ["v1"]);
    assert!(reg.stats().op(OpKind::Token) >= 1);

    let anonymous = client_with(&reg.url(), Credentials::Anonymous);
    pull_and_check(&anonymous, "team/app", "v1", &image).await;
    // Anonymous is granted pull only: a push is an authentication failure, not a retry loop.
    let err = anonymous
        .put_manifest("team/app", "v2", &image.index)
        .await
        .unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Auth(_)), "{err:?}");
    assert!(err.is_auth());

    let before = reg.stats();
    let wrong = client_with(&reg.url(), alice("not-the-password"));
    let err = wrong.get_manifest("team/app", "v1").await.unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Auth(_)), "{err:?}");
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains("not-the-password"), "{text}");
        assert!(!text.contains("wonderland"), "{text}");
    }
    // Refused credentials are not retried: one token request, and the manifest never asked for.
    let after = reg.stats();
    assert_eq!(after.op(OpKind::Token) - before.op(OpKind::Token), 1);
    assert_eq!(
        after.op(OpKind::ManifestGet) - before.op(OpKind::ManifestGet),
        0
    );
}

#[tokio::test(start_paused = true)]
async fn a_redirected_blob_get_carries_no_authorization_to_the_other_origin() {
    let reg = TestRegistry::builder()
        .token_auth(auth_config())
        .redirect_blobs(true)
        .start()
        .await
        .unwrap();
    let blob = Blob::new(noise(11, 50_000));
    reg.seed_blob("team/app", &blob.bytes);
    let client = client_with(&reg.url(), alice("wonderland-7"));

    assert_eq!(
        read_blob(&client, "team/app", &blob.digest).await,
        blob.bytes
    );
    let stats = reg.stats();
    assert_eq!(stats.op(OpKind::BlobGet), 1);
    assert_eq!(stats.op(OpKind::RedirectBlobGet), 1);
    assert_eq!(stats.blob_bytes(&blob.digest.to_string()), 50_000);
    // The registry itself got the token; the storage host got nothing.
    let records = reg.requests();
    let at_registry = records.iter().find(|r| r.op == OpKind::BlobGet).unwrap();
    assert!(at_registry.authorization);
    let at_storage = records
        .iter()
        .find(|r| r.op == OpKind::RedirectBlobGet)
        .unwrap();
    assert!(!at_storage.authorization);
    assert!(reg.redirect_authorizations().is_empty());
}

/// A registry of one repository (`x`, tag `a`) whose tag page points its `Link` at `next`.
async fn linking_server(next: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let next = next.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
                    buffer.drain(..end + 4);
                    let (body, link) = if head.starts_with("GET /v2/x/tags/list") {
                        (
                            r#"{"name":"x","tags":["a"]}"#.to_owned(),
                            format!("Link: <{next}/v2/x/tags/list?last=a>; rel=\"next\"\r\n"),
                        )
                    } else {
                        ("{}".to_owned(), String::new())
                    };
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{link}content-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

#[tokio::test(start_paused = true)]
async fn a_tag_page_linking_to_another_origin_is_refused() {
    let elsewhere = registry().await;
    elsewhere.seed_image("x", "b", &[b"layer"]);
    let url = linking_server(elsewhere.url()).await;
    let client = client_at(&url, 3);
    let err = client.list_tags("x").await.unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Refused(_)), "{err:?}");
    assert_eq!(
        elsewhere.stats().requests,
        0,
        "nothing may be sent to the other origin"
    );
}

#[tokio::test(start_paused = true)]
async fn referrers_are_listed_when_the_api_is_on_and_none_when_off() {
    for enabled in [true, false] {
        let reg = TestRegistry::builder()
            .referrers_api(enabled)
            .start()
            .await
            .unwrap();
        let client = client_at(&reg.url(), 3);
        let subject = reg.seed_image("team/app", "v1", &[b"layer"]);
        let (_, subject_bytes) = reg.manifest("team/app", &subject).unwrap();
        let empty = Blob::new(b"{}".to_vec());
        client
            .push_blob_bytes("team/app", &empty.digest, empty.bytes.clone())
            .await
            .unwrap();
        let artifact = manifest_of(
            OCI_MANIFEST,
            &json!({
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "artifactType": "application/vnd.example.sig",
                "config": {
                    "mediaType": "application/vnd.oci.empty.v1+json",
                    "digest": empty.digest.to_string(),
                    "size": 2,
                },
                "layers": [],
                "subject": {
                    "mediaType": OCI_MANIFEST,
                    "digest": subject,
                    "size": subject_bytes.len(),
                },
            }),
        );
        client
            .put_manifest("team/app", &artifact.digest.to_string(), &artifact)
            .await
            .unwrap();
        let subject = ferry_distribution::digest::Digest::parse(&subject).unwrap();
        let referrers = client.list_referrers("team/app", &subject).await.unwrap();
        if enabled {
            let referrers = referrers.expect("the referrers API is on");
            assert_eq!(referrers.len(), 1);
            assert_eq!(referrers[0].digest, artifact.digest);
            assert_eq!(referrers[0].size, artifact.bytes.len() as u64);
            assert_eq!(
                referrers[0].artifact_type.as_deref(),
                Some("application/vnd.example.sig")
            );
        } else {
            assert_eq!(referrers, None);
        }
        assert_eq!(reg.stats().op(OpKind::Referrers), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_blob_stream_resumes_from_an_offset() {
    let reg = registry().await;
    let client = client_at(&reg.url(), 3);
    let blob = Blob::new(noise(12, 10_000));
    reg.seed_blob("team/app", &blob.bytes);
    let stream = client
        .get_blob("team/app", &blob.digest, 4000)
        .await
        .unwrap();
    assert_eq!(stream.offset, 4000);
    assert_eq!(stream.remaining, Some(6000));
    let rest: Vec<Bytes> = futures::StreamExt::collect::<Vec<_>>(stream)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rest.concat(), blob.bytes[4000..]);
}

/// A registry whose every ping is answered `code` (with `retry_after`), and a client for it.
async fn every_ping_answered(
    code: u16,
    retry_after: Option<ferry_testkit::registry::RetryAfter>,
) -> (TestRegistry, RegistryClient) {
    use ferry_testkit::registry::{FaultAction, FaultRule};
    let reg = registry().await;
    reg.faults()
        .push(FaultRule::on(OpKind::Ping, FaultAction::Status { code, retry_after }).forever());
    let client = client_at(&reg.url(), 3);
    (reg, client)
}

/// The ping trips the breaker by the retry loop's own verdict (`classify::breaker_verdict`):
/// a fault of the registry trips it, an answer that proves it alive does not.
#[tokio::test(start_paused = true)]
async fn a_failed_ping_trips_the_breaker_only_on_a_fault_of_the_registry() {
    use ferry_distribution::Operation;
    use ferry_distribution::breaker::BreakerState;
    use ferry_testkit::registry::RetryAfter;

    // Shed with 503 and Retry-After, and 501: a registry alive (pacing us, or not serving
    // this), not a fault. The ping fails; the breaker stays closed; once the registry answers,
    // the next operation pings again and goes through.
    for (code, retry_after, pings) in [(503, Some(RetryAfter::Seconds(1)), 3), (501, None, 1)] {
        let (reg, client) = every_ping_answered(code, retry_after).await;
        let err = client.list_tags("team/app").await.unwrap_err();
        assert_eq!(err.operation, Operation::Ping, "{code}: {err:?}");
        assert_eq!(reg.stats().op(OpKind::Ping), pings, "{code}");
        assert_eq!(
            client.gate().breaker.state(),
            BreakerState::Closed,
            "{code}"
        );
        reg.faults().clear_rules();
        reg.seed_image("team/app", "v1", &[b"layer"]);
        assert_eq!(
            client.list_tags("team/app").await.unwrap(),
            vec!["v1"],
            "{code}"
        );
    }

    // Every ping a 502 without Retry-After: a fault, and the breaker trips at once.
    let (reg, client) = every_ping_answered(502, None).await;
    let err = client.list_tags("team/app").await.unwrap_err();
    assert_eq!(err.operation, Operation::Ping, "{err:?}");
    assert_eq!(client.gate().breaker.state(), BreakerState::Open);
    let err = client.list_tags("team/app").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BreakerOpen);
    assert_eq!(reg.stats().op(OpKind::Ping), 2, "two attempts on a fault");
}

/// Issue 27: the ping made 8 attempts on a 502 where docs/retry.md says two. A fault of the
/// registry gets two attempts whatever the policy allows; a shed keeps the policy's budget.
#[tokio::test(start_paused = true)]
async fn the_ping_makes_two_attempts_on_a_fault_and_the_policy_s_on_a_shed() {
    use ferry_testkit::registry::{FaultAction, FaultRule, RetryAfter};
    for (code, retry_after, pings) in [(502, None, 2), (503, Some(RetryAfter::Seconds(1)), 8)] {
        let reg = registry().await;
        reg.faults()
            .push(FaultRule::on(OpKind::Ping, FaultAction::Status { code, retry_after }).forever());
        let client = client_at(&reg.url(), 8);
        let err = client.list_tags("team/app").await.unwrap_err();
        assert_eq!(err.attempts, pings, "{code}: {err:?}");
        assert_eq!(reg.stats().op(OpKind::Ping), u64::from(pings), "{code}");
    }
}
