//! Tests of the in-process registry over real HTTP with reqwest: uploads, mounts, pagination,
//! manifest checks, token auth, and every fault knob.

use std::time::Duration;

use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

use super::routes::{Route, parse_route};
use super::*;

fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn registry() -> TestRegistry {
    TestRegistry::builder().start().await.unwrap()
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

async fn error_code(response: reqwest::Response) -> String {
    let body: Value = response.json().await.unwrap();
    body["errors"][0]["code"].as_str().unwrap().to_string()
}

/// Opens an upload session and returns its absolute URL.
async fn open_upload(reg: &TestRegistry, http: &Client, repo: &str) -> String {
    let response = http
        .post(format!("{}/v2/{repo}/blobs/uploads/", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert_eq!(header(&response, "range"), "0-0");
    assert!(!header(&response, "docker-upload-uuid").is_empty());
    let location = header(&response, "location");
    assert!(location.starts_with(&format!("/v2/{repo}/blobs/uploads/")));
    format!("{}{location}", reg.url())
}

#[test]
fn routes_parse_names_with_slashes() {
    assert_eq!(
        parse_route("/v2/a/b/c/manifests/v1"),
        Route::Manifest {
            repo: "a/b/c".into(),
            reference: "v1".into()
        }
    );
    assert_eq!(
        parse_route("/v2/x/manifests/y/manifests/sha256:ab"),
        Route::Manifest {
            repo: "x/manifests/y".into(),
            reference: "sha256:ab".into()
        }
    );
    assert_eq!(
        parse_route("/v2/a/b/blobs/uploads/"),
        Route::Uploads { repo: "a/b".into() }
    );
    assert_eq!(
        parse_route("/v2/a/b/blobs/uploads/u1"),
        Route::Upload {
            repo: "a/b".into(),
            id: "u1".into()
        }
    );
    assert_eq!(
        parse_route("/v2/a/blobs/sha256:00"),
        Route::Blob {
            repo: "a".into(),
            digest: "sha256:00".into()
        }
    );
    assert_eq!(
        parse_route("/v2/a/b/tags/list"),
        Route::TagList { repo: "a/b".into() }
    );
    assert_eq!(parse_route("/v2/"), Route::Ping);
    assert_eq!(parse_route("/v2/manifests/x"), Route::Unknown);
}

#[tokio::test]
async fn monolithic_push_then_pull_with_range() {
    let reg = registry().await;
    let http = client();
    let data = b"hello layer bytes".to_vec();
    let digest = sha256_digest(&data);

    let session = open_upload(&reg, &http, "lib/app").await;
    let response = http
        .put(format!("{session}?digest={digest}"))
        .body(data.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(header(&response, "docker-content-digest"), digest);
    assert!(reg.has_blob("lib/app", &digest));
    assert!(!reg.has_blob("other", &digest));
    assert_eq!(reg.open_uploads(), 0);

    // Single-request POST into a second repository.
    let single = b"single post".to_vec();
    let single_digest = sha256_digest(&single);
    let response = http
        .post(format!(
            "{}/v2/lib/other/blobs/uploads/?digest={single_digest}",
            reg.url()
        ))
        .body(single.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(reg.blob(&single_digest).unwrap(), single);

    let blob_url = format!("{}/v2/lib/app/blobs/{digest}", reg.url());
    let head = http.head(&blob_url).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(header(&head, "content-length"), data.len().to_string());
    assert_eq!(header(&head, "docker-content-digest"), digest);

    let body = http
        .get(&blob_url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(body.as_ref(), data.as_slice());

    let partial = http
        .get(&blob_url)
        .header("range", "bytes=6-")
        .send()
        .await
        .unwrap();
    assert_eq!(partial.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        header(&partial, "content-range"),
        format!("bytes 6-{}/{}", data.len() - 1, data.len())
    );
    assert_eq!(partial.bytes().await.unwrap().as_ref(), &data[6..]);

    let stats = reg.stats();
    assert_eq!(stats.op(OpKind::UploadStart), 1);
    assert_eq!(stats.op(OpKind::UploadPut), 1);
    assert_eq!(stats.op(OpKind::UploadMonolithic), 1);
    assert_eq!(stats.op(OpKind::BlobGet), 2);
    assert_eq!(
        stats.blob_bytes(&digest),
        (data.len() + data.len() - 6) as u64
    );
}

#[tokio::test]
async fn chunked_push_checks_order_and_digest() {
    let reg = registry().await;
    let http = client();
    let data: Vec<u8> = (0..100u8).collect();
    let digest = sha256_digest(&data);
    let session = open_upload(&reg, &http, "chunks").await;

    let response = http
        .patch(&session)
        .header("content-range", "0-39")
        .header("content-type", "application/octet-stream")
        .body(data[..40].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert_eq!(header(&response, "range"), "0-39");
    let session = format!("{}{}", reg.url(), header(&response, "location"));

    // Out of order: starts at 50 while the session holds 40.
    let response = http
        .patch(&session)
        .header("content-range", "50-59")
        .body(data[50..60].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::RANGE_NOT_SATISFIABLE);

    let status = http.get(&session).send().await.unwrap();
    assert_eq!(status.status(), StatusCode::NO_CONTENT);
    assert_eq!(header(&status, "range"), "0-39");

    // A PATCH without Content-Range appends (streamed style).
    let response = http
        .patch(&session)
        .body(data[40..90].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert_eq!(header(&response, "range"), "0-89");

    let wrong = sha256_digest(b"not it");
    let response = http
        .put(format!("{session}?digest={wrong}"))
        .body(data[90..].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_code(response).await, "DIGEST_INVALID");
    assert!(!reg.has_blob("chunks", &digest));

    let response = http
        .put(format!("{session}?digest={digest}"))
        .body(data[90..].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(reg.blob(&digest).unwrap(), data);

    // Cancel a fresh session.
    let other = open_upload(&reg, &http, "chunks").await;
    assert_eq!(reg.open_uploads(), 1);
    let response = http.delete(&other).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert_eq!(reg.open_uploads(), 0);
    let response = http.get(&other).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(error_code(response).await, "BLOB_UPLOAD_UNKNOWN");
}

#[tokio::test]
async fn mount_links_only_from_a_repository_holding_the_blob() {
    let reg = registry().await;
    let http = client();
    let digest = reg.seed_blob("src/repo", b"shared layer");

    let response = http
        .post(format!(
            "{}/v2/dst/repo/blobs/uploads/?mount={digest}&from=src/repo",
            reg.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(header(&response, "docker-content-digest"), digest);
    assert!(reg.has_blob("dst/repo", &digest));

    // Not in `elsewhere` (although stored globally): 202 and a usable session.
    let response = http
        .post(format!(
            "{}/v2/third/blobs/uploads/?mount={digest}&from=elsewhere",
            reg.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert!(!reg.has_blob("third", &digest));
    let session = format!("{}{}", reg.url(), header(&response, "location"));
    let response = http
        .put(format!("{session}?digest={digest}"))
        .body(b"shared layer".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert!(reg.has_blob("third", &digest));
    assert_eq!(reg.stats().op(OpKind::Mount), 2);
}

#[tokio::test]
async fn tag_list_paginates_with_link() {
    let reg = TestRegistry::builder().page_size(5).start().await.unwrap();
    let http = client();
    let mut expected = Vec::new();
    for i in 0..12 {
        let tag = format!("v{i:02}");
        reg.seed_image("many/tags", &tag, &[b"layer"]);
        expected.push(tag);
    }
    let mut next = Some("/v2/many/tags/tags/list".to_string());
    let mut seen = Vec::new();
    let mut pages = 0;
    while let Some(path) = next.take() {
        let response = http
            .get(format!("{}{path}", reg.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let link = header(&response, "link");
        let body: Value = response.json().await.unwrap();
        let tags: Vec<String> = serde_json::from_value(body["tags"].clone()).unwrap();
        assert!(tags.len() <= 5);
        seen.extend(tags);
        pages += 1;
        if !link.is_empty() {
            assert!(link.ends_with("; rel=\"next\""), "{link}");
            next = Some(link[1..link.find('>').unwrap()].to_string());
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, expected);

    let response = http
        .get(format!("{}/v2/many/tags/tags/list?n=3&last=v04", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&response, "link"),
        "</v2/many/tags/tags/list?n=3&last=v07>; rel=\"next\""
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["tags"], json!(["v05", "v06", "v07"]));

    let response = http
        .get(format!("{}/v2/nothing/here/tags/list", reg.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(error_code(response).await, "NAME_UNKNOWN");
}

fn manifest_over(config: &str, layers: &[&str]) -> Vec<u8> {
    json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config, "size": 2},
        "layers": layers.iter().map(|d| json!({"mediaType": OCI_LAYER_TAR, "digest": d, "size": 1})).collect::<Vec<_>>(),
    })
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn manifest_put_refuses_missing_blobs_and_wrong_digest() {
    let reg = registry().await;
    let http = client();
    let config = reg.seed_blob("app", b"{}");
    let layer = reg.seed_blob("app", b"L");
    let absent = sha256_digest(b"absent");
    let url = |reference: &str| format!("{}/v2/app/manifests/{reference}", reg.url());

    let bad = manifest_over(&config, &[&layer, &absent]);
    let response = http
        .put(url("v1"))
        .header("content-type", OCI_MANIFEST)
        .body(bad)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_code(response).await, "MANIFEST_BLOB_UNKNOWN");
    assert!(reg.tags("app").is_empty());

    let good = manifest_over(&config, &[&layer]);
    let good_digest = sha256_digest(&good);
    let response = http
        .put(url(&sha256_digest(b"other bytes")))
        .header("content-type", OCI_MANIFEST)
        .body(good.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_code(response).await, "DIGEST_INVALID");

    let response = http
        .put(url("v1"))
        .header("content-type", OCI_MANIFEST)
        .body(good.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(header(&response, "docker-content-digest"), good_digest);
    assert_eq!(reg.tags("app"), vec!["v1".to_string()]);

    let response = http.get(url(&good_digest)).send().await.unwrap();
    assert_eq!(header(&response, "content-type"), OCI_MANIFEST);
    assert_eq!(header(&response, "docker-content-digest"), good_digest);
    assert_eq!(response.bytes().await.unwrap().as_ref(), good.as_slice());

    let head = http.head(url("v1")).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(header(&head, "content-length"), good.len().to_string());

    let response = http.delete(url("v1")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert!(reg.tags("app").is_empty());
    assert!(reg.manifest("app", &good_digest).is_some());
}

#[tokio::test]
async fn seeded_index_lists_children() {
    let reg = registry().await;
    let a = reg.seed_image("multi", "amd", &[b"a"]);
    let b = reg.seed_image("multi", "arm", &[b"b"]);
    let index = reg.seed_index("multi", "latest", &[a.clone(), b.clone()]);
    let (media_type, bytes) = reg.manifest("multi", "latest").unwrap();
    assert_eq!(media_type, OCI_INDEX);
    assert_eq!(sha256_digest(&bytes), index);
    let document: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(document["manifests"][0]["digest"], json!(a));
    assert_eq!(
        document["manifests"][1]["platform"]["architecture"],
        json!("arm64")
    );
    let (_, child) = reg.manifest("multi", &b).unwrap();
    assert_eq!(document["manifests"][1]["size"], json!(child.len()));
}

#[tokio::test(start_paused = true)]
async fn token_auth_challenges_then_grants_by_scope() {
    let reg = TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![("alice".into(), "s3cret".into())],
            anonymous_pull: true,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap();
    let http = client();
    let digest = reg.seed_image("team/app", "v1", &[b"x"]);
    let manifest_url = format!("{}/v2/team/app/manifests/v1", reg.url());

    let ping = http.get(format!("{}/v2/", reg.url())).send().await.unwrap();
    assert_eq!(ping.status(), StatusCode::UNAUTHORIZED);
    let challenge = header(&ping, "www-authenticate");
    assert!(challenge.starts_with(&format!("Bearer realm=\"{}/token\"", reg.url())));

    let response = http.get(&manifest_url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        header(&response, "www-authenticate"),
        format!(
            "Bearer realm=\"{}/token\",service=\"testkit\",scope=\"repository:team/app:pull\"",
            reg.url()
        )
    );

    let token_for = |user: Option<(&str, &str)>, scope: &str| {
        let mut request = http
            .get(format!("{}/token", reg.url()))
            .query(&[("service", "testkit"), ("scope", scope)]);
        if let Some((name, password)) = user {
            request = request.basic_auth(name, Some(password));
        }
        request.send()
    };
    let anonymous: Value = token_for(None, "repository:team/app:pull,push")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let anonymous = anonymous["token"].as_str().unwrap().to_string();
    let response = http
        .get(&manifest_url)
        .bearer_auth(&anonymous)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, "docker-content-digest"), digest);

    // Anonymous was granted pull only: a push is refused with insufficient_scope.
    let response = http
        .post(format!("{}/v2/team/app/blobs/uploads/", reg.url()))
        .bearer_auth(&anonymous)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let challenge = header(&response, "www-authenticate");
    assert!(
        challenge.contains("scope=\"repository:team/app:pull,push\""),
        "{challenge}"
    );
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );

    let refused = token_for(Some(("alice", "wrong")), "repository:team/app:pull,push")
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);

    let alice: Value = token_for(Some(("alice", "s3cret")), "repository:team/app:pull,push")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(alice["expires_in"], json!(300));
    let alice = alice["token"].as_str().unwrap().to_string();
    let response = http
        .post(format!("{}/v2/team/app/blobs/uploads/", reg.url()))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);

    tokio::time::advance(Duration::from_secs(301)).await;
    let response = http
        .get(&manifest_url)
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(header(&response, "www-authenticate").contains("error=\"invalid_token\""));

    let stats = reg.stats();
    assert_eq!(stats.op(OpKind::Token), 3);
    assert_eq!(stats.status(401), 5);
    assert!(
        reg.requests()
            .iter()
            .any(|r| r.authorization && r.status == 200)
    );
}

#[tokio::test]
async fn scripted_status_fault_answers_once_with_retry_after() {
    let reg = registry().await;
    let http = client();
    reg.seed_image("app", "v1", &[b"x"]);
    reg.faults().push(FaultRule::on(
        OpKind::ManifestGet,
        FaultAction::Status {
            code: 429,
            retry_after: Some(RetryAfter::Seconds(7)),
        },
    ));
    let url = format!("{}/v2/app/manifests/v1", reg.url());
    // HEAD is another operation kind: not affected.
    assert_eq!(
        http.head(&url).send().await.unwrap().status(),
        StatusCode::OK
    );
    let first = http.get(&url).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&first, "retry-after"), "7");
    assert_eq!(error_code(first).await, "TOOMANYREQUESTS");
    assert_eq!(
        http.get(&url).send().await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(reg.stats().too_many_requests, 1);
    assert!(reg.faults().pending_rules().is_empty());
}

#[tokio::test]
async fn after_commit_stores_the_manifest_yet_answers_502() {
    let reg = registry().await;
    let http = client();
    let config = reg.seed_blob("app", b"{}");
    let manifest = manifest_over(&config, &[]);
    reg.faults().push(
        FaultRule::on(OpKind::ManifestPut, FaultAction::AfterCommit { code: 502 }).repo("app"),
    );
    let response = http
        .put(format!("{}/v2/app/manifests/v9", reg.url()))
        .header("content-type", OCI_MANIFEST)
        .body(manifest.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let (media_type, stored) = reg.manifest("app", "v9").unwrap();
    assert_eq!(media_type, OCI_MANIFEST);
    assert_eq!(stored, manifest);
}

#[tokio::test]
async fn reset_body_cuts_a_blob_get_after_n_bytes() {
    let reg = registry().await;
    let http = client();
    let data = vec![7u8; 64 * 1024];
    let digest = reg.seed_blob("big", &data);
    reg.faults().push(FaultRule::on(
        OpKind::BlobGet,
        FaultAction::ResetBody { after_bytes: 1000 },
    ));
    let url = format!("{}/v2/big/blobs/{digest}", reg.url());
    let response = http.get(&url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, "content-length"), data.len().to_string());
    assert!(response.bytes().await.is_err());
    assert_eq!(reg.stats().blob_bytes(&digest), 1000);

    let whole = http.get(&url).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(whole.len(), data.len());
}

#[tokio::test]
async fn reset_body_drops_an_upload_unanswered() {
    let reg = registry().await;
    let http = client();
    let session = open_upload(&reg, &http, "up").await;
    reg.faults().push(FaultRule::on(
        OpKind::UploadPatch,
        FaultAction::ResetBody { after_bytes: 10 },
    ));
    let result = http.patch(&session).body(vec![1u8; 5000]).send().await;
    assert!(result.is_err(), "{result:?}");
    let status = http.get(&session).send().await.unwrap();
    assert_eq!(header(&status, "range"), "0-0");
    assert_eq!(reg.stats().status(0), 1);
}

#[tokio::test(start_paused = true)]
async fn token_bucket_answers_429_past_the_burst() {
    let reg = TestRegistry::builder()
        .rate_limit(TokenBucket {
            per_second: 2.0,
            burst: 3,
            retry_after: RetryAfterStyle::Seconds,
            announce_window_secs: None,
        })
        .start()
        .await
        .unwrap();
    let http = client();
    let ping = format!("{}/v2/", reg.url());
    for _ in 0..3 {
        assert_eq!(
            http.get(&ping).send().await.unwrap().status(),
            StatusCode::OK
        );
    }
    let refused = http.get(&ping).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, "retry-after"), "1");
    tokio::time::advance(Duration::from_millis(600)).await;
    assert_eq!(
        http.get(&ping).send().await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(reg.stats().too_many_requests, 1);

    reg.faults().set_rate_limit(Some(TokenBucket {
        per_second: 0.5,
        burst: 1,
        retry_after: RetryAfterStyle::HttpDate,
        announce_window_secs: None,
    }));
    assert_eq!(
        http.get(&ping).send().await.unwrap().status(),
        StatusCode::OK
    );
    let refused = http.get(&ping).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let date = httpdate::parse_http_date(&header(&refused, "retry-after")).unwrap();
    let ahead = date.duration_since(std::time::SystemTime::now()).unwrap();
    assert!(ahead <= Duration::from_secs(2), "{ahead:?}");
}

#[tokio::test]
async fn redirect_listener_serves_bytes_and_records_authorization() {
    let reg = TestRegistry::builder()
        .redirect_blobs(true)
        .start()
        .await
        .unwrap();
    let http = client();
    let digest = reg.seed_blob("r", b"redirected bytes");
    let url = format!("{}/v2/r/blobs/{digest}", reg.url());
    let response = http
        .get(&url)
        .bearer_auth("secret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TEMPORARY_REDIRECT);
    let location = header(&response, "location");
    assert!(location.starts_with(&reg.redirect_url()));

    // A careless client forwards its Authorization header: the listener records it.
    let body = http
        .get(&location)
        .bearer_auth("secret-token")
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(body.as_ref(), b"redirected bytes");
    assert_eq!(
        reg.redirect_authorizations(),
        vec!["Bearer secret-token".to_string()]
    );

    // reqwest's default policy strips it on a cross-port redirect.
    let following = Client::new();
    let body = following
        .get(&url)
        .bearer_auth("other-token")
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(body.as_ref(), b"redirected bytes");
    assert_eq!(reg.redirect_authorizations().len(), 1);
    let stats = reg.stats();
    assert_eq!(stats.op(OpKind::RedirectBlobGet), 2);
    assert_eq!(
        stats.blob_bytes(&digest),
        2 * b"redirected bytes".len() as u64
    );
}

#[tokio::test]
async fn referrers_api_indexes_subjects_and_can_be_switched_off() {
    for enabled in [true, false] {
        let reg = TestRegistry::builder()
            .referrers_api(enabled)
            .start()
            .await
            .unwrap();
        let http = client();
        let subject = reg.seed_image("app", "v1", &[b"x"]);
        let config = reg.seed_blob("app", b"{}");
        let (_, subject_bytes) = reg.manifest("app", &subject).unwrap();
        let artifact = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": "application/vnd.example.sig",
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": config, "size": 2},
            "layers": [],
            "subject": {"mediaType": OCI_MANIFEST, "digest": subject, "size": subject_bytes.len()},
        })
        .to_string();
        let artifact_digest = sha256_digest(artifact.as_bytes());
        let response = http
            .put(format!("{}/v2/app/manifests/{artifact_digest}", reg.url()))
            .header("content-type", OCI_MANIFEST)
            .body(artifact)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let referrers = format!("{}/v2/app/referrers/{subject}", reg.url());
        if enabled {
            assert_eq!(header(&response, "oci-subject"), subject);
            let index: Value = http
                .get(&referrers)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(index["manifests"][0]["digest"], json!(artifact_digest));
            assert_eq!(
                index["manifests"][0]["artifactType"],
                json!("application/vnd.example.sig")
            );
            let filtered = http
                .get(format!("{referrers}?artifactType=application/other"))
                .send()
                .await
                .unwrap();
            assert_eq!(header(&filtered, "oci-filters-applied"), "artifactType");
            let index: Value = filtered.json().await.unwrap();
            assert_eq!(index["manifests"], json!([]));
        } else {
            assert_eq!(header(&response, "oci-subject"), "");
            let response = http.get(&referrers).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::NOT_FOUND);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn repo_latency_and_delay_show_in_the_in_flight_series() {
    let reg = TestRegistry::builder()
        .repo_latency("deep/", Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    let http = client();
    reg.seed_image("deep/a", "v1", &[b"x"]);
    reg.seed_image("shallow", "v1", &[b"x"]);
    let started = tokio::time::Instant::now();
    let deep = format!("{}/v2/deep/a/manifests/v1", reg.url());
    let (a, b) = tokio::join!(http.get(&deep).send(), http.get(&deep).send());
    assert_eq!(a.unwrap().status(), StatusCode::OK);
    assert_eq!(b.unwrap().status(), StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(reg.stats().max_in_flight, 2);
    let series = reg.in_flight_series();
    assert_eq!(series.iter().map(|(_, n)| *n).max(), Some(2));
    assert_eq!(series.last().map(|(_, n)| *n), Some(0));

    reg.reset_stats();
    let shallow = format!("{}/v2/shallow/manifests/v1", reg.url());
    let before = tokio::time::Instant::now();
    http.get(&shallow).send().await.unwrap();
    assert!(before.elapsed() < Duration::from_secs(2));

    reg.faults()
        .push(FaultRule::any(FaultAction::Delay(Duration::from_secs(30))).repo("shallow"));
    let before = tokio::time::Instant::now();
    assert_eq!(
        http.get(&shallow).send().await.unwrap().status(),
        StatusCode::OK
    );
    assert!(before.elapsed() >= Duration::from_secs(30));
    assert_eq!(reg.requests().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn hang_fault_and_hanging_server_never_answer() {
    let reg = registry().await;
    reg.faults()
        .push(FaultRule::on(OpKind::Ping, FaultAction::Hang));
    let http = Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let error = http
        .get(format!("{}/v2/", reg.url()))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert_eq!(reg.requests()[0].status, 0);

    let hanging = TestRegistry::hanging_server().await.unwrap();
    let error = http
        .get(format!("{}/v2/", hanging.url()))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error:?}");

    let port = TestRegistry::closed_port().unwrap();
    let error = http
        .get(format!("http://127.0.0.1:{port}/v2/"))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error:?}");
}

#[tokio::test]
async fn shed_jitter_stays_in_range() {
    let reg = registry().await;
    let http = client();
    reg.faults().push(
        FaultRule::on(
            OpKind::Ping,
            FaultAction::Shed {
                retry_after_base_secs: 10,
                jitter_secs: 5,
            },
        )
        .times(20),
    );
    for _ in 0..20 {
        let response = http.get(format!("{}/v2/", reg.url())).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let secs: u64 = header(&response, "retry-after").parse().unwrap();
        assert!((10..=15).contains(&secs), "{secs}");
    }
    assert_eq!(
        http.get(format!("{}/v2/", reg.url()))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
}

async fn random_fault_statuses(seed: u64) -> (Vec<u16>, usize) {
    let reg = registry().await;
    let http = client();
    let config = reg.seed_blob("app", b"{}");
    reg.faults().set_random(RandomFaults {
        rate: 0.3,
        seed,
        kinds: vec![
            RandomFaultKind::TooManyRequests {
                retry_after_secs: 1,
            },
            RandomFaultKind::BadGatewayBeforeCommit,
            RandomFaultKind::BadGatewayAfterCommit,
        ],
        ops: vec![],
    });
    let mut statuses = Vec::new();
    for i in 0..40 {
        let manifest = manifest_over(&config, &[]);
        let mut document: Value = serde_json::from_slice(&manifest).unwrap();
        document["annotations"] = json!({"n": i.to_string()});
        let response = http
            .put(format!("{}/v2/app/manifests/t{i:02}", reg.url()))
            .header("content-type", OCI_MANIFEST)
            .body(document.to_string())
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    (statuses, reg.tags("app").len())
}

#[tokio::test]
async fn random_faults_are_seeded_and_deterministic() {
    let (first, stored_first) = random_fault_statuses(42).await;
    let (again, stored_again) = random_fault_statuses(42).await;
    let (other, _) = random_fault_statuses(7).await;
    assert_eq!(first, again);
    assert_eq!(stored_first, stored_again);
    assert_ne!(first, other);
    let created = first.iter().filter(|s| **s == 201).count();
    assert!(created < 40 && created > 15, "{first:?}");
    // After-commit 502s stored their manifest: more tags than 201s.
    assert!(stored_first >= created);
}

#[tokio::test]
async fn token_post_form_grants_push_and_records_headers() {
    let reg = TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![("alice".into(), "s3cret".into())],
            anonymous_pull: false,
            token_ttl_secs: 60,
        })
        .start()
        .await
        .unwrap();
    let http = client();
    let form = "grant_type=password&username=alice&password=s3cret&service=testkit\
                &scope=repository%3Aa%3Apull%2Cpush+repository%3Ab%3Apull";
    let response = http
        .post(format!("{}/token", reg.url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let token: Value = response.json().await.unwrap();
    let token = token["access_token"].as_str().unwrap().to_string();
    let digest = reg.seed_blob("b", b"from b");
    // Mount needs push on `a` and pull on `b`: both were granted by one token.
    let response = http
        .post(format!(
            "{}/v2/a/blobs/uploads/?mount={digest}&from=b",
            reg.url()
        ))
        .bearer_auth(&token)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let record = reg
        .requests()
        .into_iter()
        .find(|r| r.op == OpKind::Mount)
        .unwrap();
    assert!(
        record
            .headers
            .contains(&("accept".to_string(), "application/json".to_string()))
    );

    // Without anonymous pull, an anonymous token grants nothing.
    let anonymous: Value = http
        .get(format!(
            "{}/token?service=testkit&scope=repository:b:pull",
            reg.url()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let response = http
        .head(format!("{}/v2/b/blobs/{digest}", reg.url()))
        .bearer_auth(anonymous["token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}
