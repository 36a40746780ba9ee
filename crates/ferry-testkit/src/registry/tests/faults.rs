//! Tests of the registry's fault knobs over real HTTP: scripted statuses, lost replies, reset
//! bodies, token buckets, redirects, referrers, latency, hangs, sheds and seeded random faults.

use super::*;

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
