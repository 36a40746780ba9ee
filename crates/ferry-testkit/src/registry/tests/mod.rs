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

mod faults;
