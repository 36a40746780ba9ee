//! Tests of the resilience knobs over real HTTP: the token bucket's `ratelimit-*` announcement,
//! the persistent per-repository manifest throttle, stacked random sources and lost write replies.

use std::time::Duration;

use reqwest::{Client, StatusCode};

use super::*;

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

#[tokio::test(start_paused = true)]
async fn announced_bucket_states_limit_and_remaining_on_every_answer() {
    let reg = TestRegistry::builder()
        .rate_limit(TokenBucket::new(20.0, 3).announced(1))
        .start()
        .await
        .unwrap();
    let http = client();
    let ping = format!("{}/v2/", reg.url());
    for left in [2, 1, 0] {
        let answer = http.get(&ping).send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(header(&answer, "ratelimit-limit").unwrap(), "20;w=1");
        assert_eq!(
            header(&answer, "ratelimit-remaining").unwrap(),
            format!("{left};w=1")
        );
    }
    let refused = http.get(&ping).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, "ratelimit-limit").unwrap(), "20;w=1");
    assert_eq!(header(&refused, "ratelimit-remaining").unwrap(), "0;w=1");

    // An injected fault's answer carries the announcement too.
    tokio::time::advance(Duration::from_secs(1)).await;
    reg.faults().push(FaultRule::any(FaultAction::Status {
        code: 503,
        retry_after: None,
    }));
    let faulted = http.get(&ping).send().await.unwrap();
    assert_eq!(faulted.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(header(&faulted, "ratelimit-remaining").unwrap(), "2;w=1");

    // A Docker Hub style window: 100 per 6 h.
    reg.faults().set_rate_limit(Some(
        TokenBucket::new(100.0 / 21600.0, 100).announced(21600),
    ));
    let hub = http.get(&ping).send().await.unwrap();
    assert_eq!(header(&hub, "ratelimit-limit").unwrap(), "100;w=21600");
    assert_eq!(header(&hub, "ratelimit-remaining").unwrap(), "99;w=21600");
}

#[tokio::test(start_paused = true)]
async fn silent_bucket_sends_no_ratelimit_headers() {
    let reg = TestRegistry::builder()
        .rate_limit(TokenBucket::new(1.0, 1))
        .start()
        .await
        .unwrap();
    let http = client();
    let ping = format!("{}/v2/", reg.url());
    let admitted = http.get(&ping).send().await.unwrap();
    assert_eq!(admitted.status(), StatusCode::OK);
    let refused = http.get(&ping).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    for answer in [&admitted, &refused] {
        assert_eq!(header(answer, "ratelimit-limit"), None);
        assert_eq!(header(answer, "ratelimit-remaining"), None);
    }
}

#[tokio::test(start_paused = true)]
async fn hostile_bucket_numbers_announce_without_panicking() {
    let reg = TestRegistry::builder()
        .rate_limit(TokenBucket::new(f64::MAX, u32::MAX).announced(u64::MAX))
        .start()
        .await
        .unwrap();
    let answer = client()
        .get(format!("{}/v2/", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(
        header(&answer, "ratelimit-limit").unwrap(),
        format!("{};w={}", u64::MAX, u64::MAX)
    );
}

#[tokio::test]
async fn throttled_repository_answers_429_to_every_manifest_request_and_spares_the_rest() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let http = client();
    reg.seed_image("slow/app", "v1", &[b"slow layer"]);
    reg.seed_image("fast/app", "v1", &[b"fast layer"]);
    let layer = sha256_digest(b"slow layer");
    for rule in FaultRule::throttle_manifests("slow/", 1) {
        reg.faults().push(rule);
    }
    let slow = format!("{}/v2/slow/app/manifests/v1", reg.url());
    let fast = format!("{}/v2/fast/app/manifests/v1", reg.url());
    for _ in 0..50 {
        for answer in [
            http.get(&slow).send().await.unwrap(),
            http.head(&slow).send().await.unwrap(),
        ] {
            assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(header(&answer, "retry-after").unwrap(), "1");
        }
        assert_eq!(
            http.get(&fast).send().await.unwrap().status(),
            StatusCode::OK
        );
    }
    // Blobs of the throttled repository are served.
    let blob = http
        .get(format!("{}/v2/slow/app/blobs/{layer}", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(blob.status(), StatusCode::OK);
    assert_eq!(reg.stats().too_many_requests, 100);
    let pending = reg.faults().pending_rules();
    assert_eq!(pending.len(), 2);
    assert!(pending.iter().all(|r| r.times == FaultRule::FOREVER));
}

#[tokio::test]
async fn stacked_random_sources_fault_only_their_own_operations() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let http = client();
    reg.seed_image("app", "v1", &[&[9u8; 4096]]);
    let layer = sha256_digest(&[9u8; 4096]);
    reg.faults().set_random(RandomFaults {
        rate: 1.0,
        seed: 1,
        kinds: vec![RandomFaultKind::InternalErrorBeforeCommit],
        ops: vec![OpKind::ManifestGet],
    });
    reg.faults().add_random(RandomFaults {
        rate: 1.0,
        seed: 2,
        kinds: vec![RandomFaultKind::ResetBody { after_bytes: 1000 }],
        ops: vec![OpKind::BlobGet],
    });
    let manifest = http
        .get(format!("{}/v2/app/manifests/v1", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(manifest.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let blob = http
        .get(format!("{}/v2/app/blobs/{layer}", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(blob.status(), StatusCode::OK);
    assert!(blob.bytes().await.is_err());
    assert_eq!(reg.stats().blob_bytes(&layer), 1000);
    let head = http
        .head(format!("{}/v2/app/manifests/v1", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::OK);

    reg.faults().clear_random();
    let manifest = http
        .get(format!("{}/v2/app/manifests/v1", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(manifest.status(), StatusCode::OK);
}

#[tokio::test]
async fn random_lost_replies_on_writes_still_commit() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let http = client();
    reg.faults().set_random(RandomFaults {
        rate: 1.0,
        seed: 3,
        kinds: vec![RandomFaultKind::BadGatewayAfterCommit],
        ops: vec![OpKind::UploadMonolithic],
    });
    let data = b"committed anyway";
    let digest = sha256_digest(data);
    let answer = http
        .post(format!(
            "{}/v2/app/blobs/uploads/?digest={digest}",
            reg.url()
        ))
        .body(data.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_GATEWAY);
    assert!(reg.has_blob("app", &digest));
    // Reads are not eligible.
    let read = http
        .get(format!("{}/v2/app/blobs/{digest}", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_trickled_answer_arrives_whole_one_piece_per_interval() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("slow/app", "v1", &[b"layer"]);
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("slow/app"),
        vec![Hostility::Trickle {
            pieces: 4,
            every: Duration::from_millis(500),
        }],
    ));
    let start = tokio::time::Instant::now();
    let answer = client()
        .get(format!("{}/v2/slow/app/tags/list", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["tags"], serde_json::json!(["v1"]));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_millis(2100),
        "{took:?}"
    );
}

#[tokio::test]
async fn an_oci_error_knob_answers_any_code_and_message_as_given() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("odd/app", "v1", &[b"layer"]);
    let code = format!("{}\nFORGED", "C".repeat(15 * 1024));
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("odd/app"),
        vec![Hostility::OciError {
            status: 400,
            code: code.clone(),
            message: "m".into(),
        }],
    ));
    let answer = client()
        .get(format!("{}/v2/odd/app/tags/list", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["errors"][0]["code"], code.as_str());
    assert_eq!(body["errors"][0]["message"], "m");
}

/// Issue 39, nexus-public #117/#209, renovate #18447: a Nexus group answers its first page
/// without `n`, `n` tags with it (after `last`), and never a `Link`.
#[tokio::test]
async fn a_nexus_group_answers_n_in_full_and_never_links() {
    let reg = TestRegistry::builder()
        .personality(Personality::nexus())
        .page_size(100)
        .start()
        .await
        .unwrap();
    for i in 0..129 {
        reg.seed_image("team/app", &format!("t-{i:03}"), &[b"one layer"]);
    }
    let http = client();
    for (query, count, first) in [
        ("", 100, "t-000"),
        ("?n=120", 120, "t-000"),
        ("?n=10&last=t-120", 8, "t-121"),
    ] {
        let answer = http
            .get(format!("{}/v2/team/app/tags/list{query}", reg.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK, "{query}");
        assert_eq!(header(&answer, "link"), None, "{query}");
        let body: serde_json::Value = answer.json().await.unwrap();
        let tags = body["tags"].as_array().unwrap();
        assert_eq!(
            (tags.len(), tags[0].as_str()),
            (count, Some(first)),
            "{query}"
        );
    }
}

/// Issue 39, awslabs/soci-snapshotter#512: GAR sends a referrers request to a sign-in page,
/// HTML with a 200.
#[tokio::test]
async fn gar_redirects_referrers_to_a_sign_in_page() {
    let reg = TestRegistry::builder()
        .personality(Personality::gar())
        .start()
        .await
        .unwrap();
    let digest = reg.seed_image("team/app", "1.0", &[b"layer"]);
    let http = client();
    let answer = http
        .get(format!("{}/v2/team/app/referrers/{digest}", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::FOUND);
    let location = header(&answer, "location").unwrap();
    assert!(
        location.starts_with("/v3/signin/identifier?continue="),
        "{location}"
    );
    let page = http
        .get(format!("{}{location}", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(
        header(&page, "content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.text().await.unwrap().starts_with("<!DOCTYPE html>"));
}
