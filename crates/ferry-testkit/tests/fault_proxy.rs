//! The fault proxy in front of the real distribution registry: pushes and pulls pass through with
//! `Location` rewritten, and each fault knob acts before, after or part way through forwarding.

use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::noise;
use ferry_testkit::registry::{
    FaultAction, FaultProxy, FaultRule, OpKind, RetryAfter, TokenBucket, sha256_digest,
};
use reqwest::{Client, StatusCode};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

/// The real registry with a proxy in front, or `None` when the run may skip it.
async fn setup() -> Option<(RealRegistry, FaultProxy)> {
    let real = RealRegistry::start_for_test().await.unwrap()?;
    let proxy = FaultProxy::start(&real.url()).await.unwrap();
    Some((real, proxy))
}

/// Pushes `bytes` as a blob through `base` (POST, then PUT to the returned `Location`); returns
/// the digest and the `Location` the POST answered.
async fn push_blob(http: &Client, base: &str, repo: &str, bytes: &[u8]) -> (String, String) {
    let digest = sha256_digest(bytes);
    let started = http
        .post(format!("{base}/v2/{repo}/blobs/uploads/"))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), StatusCode::ACCEPTED);
    let location = header(&started, "location").unwrap();
    let separator = if location.contains('?') { '&' } else { '?' };
    let closed = http
        .put(format!("{location}{separator}digest={digest}"))
        .header("content-type", "application/octet-stream")
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), StatusCode::CREATED, "{digest}");
    (digest, location)
}

/// Pushes a config blob and an image manifest over `layers` through `base`, tagged `tag`;
/// returns the manifest bytes.
async fn push_image(http: &Client, base: &str, repo: &str, tag: &str, layers: &[&[u8]]) -> Vec<u8> {
    let config = br#"{"architecture":"amd64","os":"linux"}"#;
    let (config_digest, _) = push_blob(http, base, repo, config).await;
    let mut descriptors = Vec::new();
    for layer in layers {
        let (digest, _) = push_blob(http, base, repo, layer).await;
        descriptors.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": digest,
            "size": layer.len(),
        }));
    }
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len()},
        "layers": descriptors,
    })
    .to_string()
    .into_bytes();
    let put = http
        .put(format!("{base}/v2/{repo}/manifests/{tag}"))
        .header("content-type", OCI_MANIFEST)
        .body(manifest.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    manifest
}

#[tokio::test]
async fn proxy_forwards_pushes_and_pulls_and_rewrites_location_to_itself() {
    let Some((real, proxy)) = setup().await else {
        return;
    };
    let http = client();
    let layer = noise(1, 300_000);
    let (digest, location) = push_blob(&http, &proxy.url(), "lib/app", &layer).await;
    assert!(
        location.starts_with(&proxy.url()),
        "{location} does not point at the proxy {}",
        proxy.url()
    );
    // The blob reached the real registry, and comes back whole through the proxy.
    let direct = real
        .request("HEAD", &format!("/v2/lib/app/blobs/{digest}"))
        .await
        .unwrap();
    assert_eq!(direct.status, 200);
    let pulled = http
        .get(format!("{}/v2/lib/app/blobs/{digest}", proxy.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(pulled.status(), StatusCode::OK);
    assert_eq!(pulled.bytes().await.unwrap().as_ref(), layer.as_slice());

    let manifest = push_image(&http, &proxy.url(), "lib/app", "v1", &[&layer]).await;
    let got = http
        .get(format!("{}/v2/lib/app/manifests/v1", proxy.url()))
        .header("accept", OCI_MANIFEST)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(
        header(&got, "docker-content-digest").unwrap(),
        sha256_digest(&manifest)
    );
    assert_eq!(got.bytes().await.unwrap().as_ref(), manifest.as_slice());

    let stats = proxy.stats();
    assert_eq!(stats.op(OpKind::UploadStart), 3);
    assert_eq!(stats.op(OpKind::UploadPut), 3);
    assert_eq!(stats.op(OpKind::ManifestPut), 1);
    assert_eq!(stats.status(201), 4);
    assert_eq!(stats.blob_bytes(&digest), layer.len() as u64);
    assert_eq!(stats.too_many_requests, 0);
}

#[tokio::test]
async fn a_status_fault_is_answered_by_the_proxy_and_never_reaches_the_registry() {
    let Some((real, proxy)) = setup().await else {
        return;
    };
    let http = client();
    push_image(&http, &real.url(), "lib/app", "v1", &[b"layer"]).await;
    proxy.faults().push(
        FaultRule::on(
            OpKind::ManifestGet,
            FaultAction::Status {
                code: 503,
                retry_after: Some(RetryAfter::Seconds(1)),
            },
        )
        .times(2),
    );
    let url = format!("{}/v2/lib/app/manifests/v1", proxy.url());
    for _ in 0..2 {
        let refused = http.get(&url).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(header(&refused, "retry-after").as_deref(), Some("1"));
    }
    let log = real.access_log().await.unwrap();
    assert_eq!(log.count("GET", "/v2/lib/app/manifests/"), 0);
    let served = http
        .get(&url)
        .header("accept", OCI_MANIFEST)
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), StatusCode::OK);
    let log = real.access_log().await.unwrap();
    assert_eq!(log.count("GET", "/v2/lib/app/manifests/"), 1);
    assert_eq!(proxy.stats().status(503), 2);
}

#[tokio::test]
async fn a_lost_reply_after_commit_leaves_the_write_in_the_registry() {
    let Some((real, proxy)) = setup().await else {
        return;
    };
    let http = client();
    let manifest = push_image(&http, &real.url(), "lib/app", "v1", &[b"layer"]).await;
    proxy.faults().push(
        FaultRule::on(OpKind::ManifestPut, FaultAction::AfterCommit { code: 502 }).repo("lib/"),
    );
    let answer = http
        .put(format!("{}/v2/lib/app/manifests/v2", proxy.url()))
        .header("content-type", OCI_MANIFEST)
        .body(manifest)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_GATEWAY);
    let stored = http
        .head(format!("{}/v2/lib/app/manifests/v2", real.url()))
        .header("accept", OCI_MANIFEST)
        .send()
        .await
        .unwrap();
    assert_eq!(
        stored.status(),
        StatusCode::OK,
        "the upstream never got the write"
    );
    assert_eq!(proxy.stats().status(502), 1);
}

#[tokio::test]
async fn a_reset_cuts_a_blob_body_part_way_after_the_full_length_was_promised() {
    let Some((real, proxy)) = setup().await else {
        return;
    };
    let http = client();
    let layer = noise(2, 200_000);
    let (digest, _) = push_blob(&http, &real.url(), "lib/app", &layer).await;
    proxy.faults().push(FaultRule::on(
        OpKind::BlobGet,
        FaultAction::ResetBody {
            after_bytes: 70_000,
        },
    ));
    let url = format!("{}/v2/lib/app/blobs/{digest}", proxy.url());
    let cut = http.get(&url).send().await.unwrap();
    assert_eq!(cut.status(), StatusCode::OK);
    assert_eq!(
        header(&cut, "content-length").as_deref(),
        Some(layer.len().to_string().as_str())
    );
    assert!(cut.bytes().await.is_err(), "the body was not cut");
    assert_eq!(proxy.stats().blob_bytes(&digest), 70_000);
    let whole = http.get(&url).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(whole.as_ref(), layer.as_slice());
}

#[tokio::test]
async fn a_reset_on_an_upload_drops_it_unforwarded() {
    let Some((real, proxy)) = setup().await else {
        return;
    };
    let http = client();
    let started = http
        .post(format!("{}/v2/lib/app/blobs/uploads/", proxy.url()))
        .send()
        .await
        .unwrap();
    let location = header(&started, "location").unwrap();
    proxy.faults().push(FaultRule::on(
        OpKind::UploadPatch,
        FaultAction::ResetBody { after_bytes: 10 },
    ));
    let result = http
        .patch(&location)
        .header("content-type", "application/octet-stream")
        .body(noise(3, 50_000))
        .send()
        .await;
    assert!(result.is_err(), "{result:?}");
    let log = real.access_log().await.unwrap();
    assert_eq!(log.count("PATCH", "/v2/lib/app/blobs/uploads/"), 0);
    assert_eq!(proxy.stats().status(0), 1);
}

#[tokio::test]
async fn the_bucket_announces_itself_and_counts_its_429s() {
    let Some((_real, proxy)) = setup().await else {
        return;
    };
    let http = client();
    // 3 tokens and a refill too slow to matter: the fourth request is refused.
    proxy
        .faults()
        .set_rate_limit(Some(TokenBucket::new(0.001, 3).announced(1)));
    let ping = format!("{}/v2/", proxy.url());
    for left in [2, 1, 0] {
        let admitted = http.get(&ping).send().await.unwrap();
        assert_eq!(admitted.status(), StatusCode::OK);
        assert_eq!(
            header(&admitted, "docker-distribution-api-version").as_deref(),
            Some("registry/2.0")
        );
        assert_eq!(
            header(&admitted, "ratelimit-limit").as_deref(),
            Some("0;w=1")
        );
        assert_eq!(
            header(&admitted, "ratelimit-remaining"),
            Some(format!("{left};w=1"))
        );
    }
    let refused = http.get(&ping).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(header(&refused, "retry-after").is_some());
    assert_eq!(
        header(&refused, "ratelimit-remaining").as_deref(),
        Some("0;w=1")
    );
    let stats = proxy.stats();
    assert_eq!(stats.requests, 4);
    assert_eq!(stats.too_many_requests, 1);
}

#[tokio::test]
async fn one_throttled_repository_leaves_the_others_served() {
    let Some((real, proxy)) = setup().await else {
        return;
    };
    let http = client();
    push_image(&http, &real.url(), "slow/app", "v1", &[b"slow"]).await;
    push_image(&http, &real.url(), "fast/app", "v1", &[b"fast"]).await;
    for rule in FaultRule::throttle_manifests("slow/", 1) {
        proxy.faults().push(rule);
    }
    for _ in 0..10 {
        let slow = http
            .head(format!("{}/v2/slow/app/manifests/v1", proxy.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(slow.status(), StatusCode::TOO_MANY_REQUESTS);
        let fast = http
            .head(format!("{}/v2/fast/app/manifests/v1", proxy.url()))
            .header("accept", OCI_MANIFEST)
            .send()
            .await
            .unwrap();
        assert_eq!(fast.status(), StatusCode::OK);
    }
    assert_eq!(proxy.stats().too_many_requests, 10);
}

#[tokio::test]
async fn hostile_paths_get_the_registrys_own_answer_or_a_clear_refusal() {
    let Some((real, proxy)) = setup().await else {
        return;
    };
    let http = client();
    push_image(&http, &real.url(), "lib/app", "v1", &[b"layer"]).await;
    let proxy_addr: std::net::SocketAddr = proxy.host().parse().unwrap();
    // Forwarded byte for byte: the proxy answers what the registry answers.
    for path in [
        "/v2/lib%2fapp/manifests/v1",
        "/v2/lib/app%00/manifests/v1",
        "/v2/lib/app/tags/list?n=18446744073709551616",
        "/v2/lib/app/blobs/sha256:..%2f..%2fetc",
    ] {
        let direct = real.request("GET", path).await.unwrap();
        let proxied = ferry_testkit::distribution::http_request(proxy_addr, "GET", path)
            .await
            .unwrap();
        assert_eq!(proxied.status, direct.status, "{path}");
        assert_eq!(proxied.body, direct.body, "{path}");
    }
    // A dot segment cannot be forwarded as sent (URL parsing would resolve it into another
    // path): the proxy itself refuses it with a 400 that names the path.
    let refused = ferry_testkit::distribution::http_request(
        proxy_addr,
        "GET",
        "/v2/lib/app/../other/manifests/v1",
    )
    .await
    .unwrap();
    assert_eq!(refused.status, 400);
    let body = String::from_utf8_lossy(&refused.body);
    assert!(body.contains("/v2/lib/app/../other/manifests/v1"), "{body}");
    let encoded = ferry_testkit::distribution::http_request(
        proxy_addr,
        "GET",
        "/v2/lib/app/manifests/%2E%2e",
    )
    .await
    .unwrap();
    assert_eq!(encoded.status, 400);
    let stats = proxy.stats();
    assert_eq!(stats.status(400), 2);
}
