//! Messages that say what happened and what to do (issue 29): the `ferry` binary against plain
//! TCP listeners and test registries, for the failures a newcomer meets in the first hour.

mod common;

use common::{code, ferry, text};

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A plain-HTTP server on a loopback port that answers every connection `400 Bad Request` (as
/// a registry without TLS answers a TLS ClientHello) and counts the connections.
async fn plain_http() -> (String, Arc<AtomicU32>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let count = Arc::new(AtomicU32::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (addr, count)
}

#[tokio::test]
async fn https_to_a_plain_http_registry_fails_at_once_and_says_to_set_insecure() {
    let (addr, connections) = plain_http().await;
    let out = ferry(&["tags", &format!("{addr}/app")]).await;
    let err = text(&out.stderr);
    assert_ne!(code(&out), 0, "{err}");
    assert!(
        err.contains("plain HTTP")
            && err.contains("insecure: true")
            && err.contains("--tls-verify=false"),
        "names the cause and the fix: {err}"
    );
    assert!(!err.contains("InvalidContentType"), "{err}");
    assert!(!err.contains("attempts"), "not retried: {err}");
    assert!(!err.contains("breaker open"), "not a registry fault: {err}");
    assert_eq!(connections.load(Ordering::SeqCst), 1, "{err}");
}

#[tokio::test]
async fn a_host_name_that_does_not_resolve_is_named_so() {
    let out = ferry(&["tags", "ferry-no-such-host.invalid/app"]).await;
    let err = text(&out.stderr);
    assert_ne!(code(&out), 0, "{err}");
    assert!(
        err.contains("name not resolved: ferry-no-such-host.invalid"),
        "{err}"
    );
    assert!(
        !err.contains("refused"),
        "nothing refused a connection: {err}"
    );
    if err.contains("reason=") {
        assert!(
            err.contains("did not resolve"),
            "the breaker's reason: {err}"
        );
    }
}

#[tokio::test]
async fn validate_reports_a_plain_http_url_without_insecure_at_the_url_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mirror.yaml");
    std::fs::write(
        &path,
        "version: 1\nregistries:\n  - host: 127.0.0.1:5991\n    url: http://127.0.0.1:5991\n\
         mappings:\n  - source: 127.0.0.1:5991/app\n    targets: [\"oci:./out\"]\n",
    )
    .unwrap();
    let out = ferry(&["validate", "-c", path.to_str().unwrap()]).await;
    let err = text(&out.stderr);
    assert_eq!(code(&out), 3, "{err}");
    let file = path.display().to_string();
    assert!(
        err.contains(&format!("{file}:4:10: ")),
        "at the url value: {err}"
    );
    assert!(
        err.contains("add insecure: true or use https://"),
        "says the fix: {err}"
    );

    // With `insecure: true` the same url is valid.
    std::fs::write(
        &path,
        "version: 1\nregistries:\n  - host: 127.0.0.1:5991\n    url: http://127.0.0.1:5991\n\
         \x20   insecure: true\nmappings:\n  - source: 127.0.0.1:5991/app\n    targets: [\"oci:./out\"]\n",
    )
    .unwrap();
    let out = ferry(&["validate", "-c", path.to_str().unwrap()]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
}

/// A registry stub on a loopback port: `/v2/` answers 200 (or a Bearer challenge when
/// `catalog_needs_admin`), `/token` hands out an anonymous token, and `/v2/_catalog` answers 404
/// `404 page not found` (no catalog served) or, when `catalog_needs_admin`, the challenge again.
async fn catalog_stub(catalog_needs_admin: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let realm = format!("http://{addr}/token");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let realm = realm.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end);
                    let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                    let path = path.split('?').next().unwrap_or("").to_owned();
                    let challenge = format!(
                        "www-authenticate: Bearer realm=\"{realm}\",service=\"stub\",scope=\"registry:catalog:*\"\r\n"
                    );
                    let (status, extra, body) = match path.as_str() {
                        "/token" => ("200 OK", String::new(), "{\"token\":\"anon\"}".to_owned()),
                        "/v2/_catalog" if catalog_needs_admin => (
                            "401 Unauthorized",
                            challenge,
                            "{\"errors\":[{\"code\":\"UNAUTHORIZED\",\"message\":\"unauthorized\"}]}"
                                .to_owned(),
                        ),
                        "/v2/_catalog" => {
                            ("404 Not Found", String::new(), "404 page not found".to_owned())
                        }
                        "/v2/" if catalog_needs_admin && !head.contains("uthorization") => {
                            ("401 Unauthorized", challenge, "{}".to_owned())
                        }
                        "/v2/" => ("200 OK", String::new(), "{}".to_owned()),
                        _ => ("404 Not Found", String::new(), "{}".to_owned()),
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if conn.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// `sync --dry-run` of a whole-registry mapping on the stub; stdout and stderr together.
async fn whole_registry_dry_run(addr: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = common::write_config(
        dir.path(),
        &format!(
            "  - host: \"{addr}\"\n    url: \"http://{addr}\"\n    insecure: true\n    retry: {{ attempts: 1 }}\n"
        ),
        &format!("  - source: \"{addr}/team/*\"\n    targets: [\"{addr}/mirror\"]\n"),
    );
    let out = ferry(&[
        "sync",
        "-c",
        config.to_str().unwrap(),
        "--dry-run",
        "--progress",
        "none",
    ])
    .await;
    (
        code(&out),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

#[tokio::test]
async fn a_registry_without_a_catalog_is_said_so_with_what_to_do() {
    let addr = catalog_stub(false).await;
    let (code, all) = whole_registry_dry_run(&addr).await;
    assert_ne!(code, 0, "{all}");
    assert!(
        all.contains("the registry serves no catalog (/v2/_catalog)")
            && all.contains("list its repositories in the config"),
        "{all}"
    );
    assert!(!all.contains("404 page not found"), "{all}");
}

#[tokio::test]
async fn a_catalog_that_needs_other_credentials_says_so_not_that_credentials_were_refused() {
    let addr = catalog_stub(true).await;
    let (code, all) = whole_registry_dry_run(&addr).await;
    assert_ne!(code, 0, "{all}");
    assert!(
        all.contains("the catalog (/v2/_catalog) needs credentials")
            && all.contains("Harbor: a system administrator's")
            && all.contains("sent: anonymous"),
        "{all}"
    );
    assert!(!all.contains("refused the credentials"), "{all}");
}

/// Every `attempts` member anywhere in a JSON value.
fn attempts_in(v: &serde_json::Value, out: &mut Vec<u64>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if k == "attempts" {
                    out.extend(x.as_u64());
                }
                attempts_in(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| attempts_in(x, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_mismatch_reports_the_read_it_made_not_zero_attempts() {
    use ferry_testkit::registry::{OCI_MANIFEST, TestRegistry};
    let src = TestRegistry::builder().start().await.unwrap();
    let dst = TestRegistry::builder().start().await.unwrap();
    let config_digest = src.seed_blob("lib/bad", b"{}");
    let layer = b"layer bytes";
    let layer_digest = src.seed_blob("lib/bad", layer);
    // The manifest claims one more byte than the blob has: the read does not match.
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config_digest}","size":2}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{layer_digest}","size":{}}}]}}"#,
        layer.len() + 1
    );
    src.seed_manifest("lib/bad", "1", OCI_MANIFEST, manifest.as_bytes());
    let out = ferry(&[
        "copy",
        &format!("{}/lib/bad:1", src.host()),
        &format!("{}/m/bad:1", dst.host()),
        "--insecure",
        "--json",
    ])
    .await;
    let stdout = text(&out.stdout);
    assert_ne!(code(&out), 0, "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("digest mismatch"), "{stdout}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let mut attempts = Vec::new();
    attempts_in(&json, &mut attempts);
    assert!(!attempts.is_empty(), "{stdout}");
    assert!(attempts.iter().all(|&a| a >= 1), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_by_digest_names_the_source_with_an_at_sign() {
    use ferry_testkit::registry::TestRegistry;
    let src = TestRegistry::builder().start().await.unwrap();
    let dst = TestRegistry::builder().start().await.unwrap();
    let digest = src.seed_image("lib/app", "v1", &[b"layer"]);
    let source = format!("{}/lib/app@{digest}", src.host());
    let out = ferry(&[
        "copy",
        &source,
        &format!("{}/m/app", dst.host()),
        "--insecure",
        "--progress",
        "none",
    ])
    .await;
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 0, "{all}");
    assert!(all.contains(&format!("synced  {source} -> ")), "{all}");
    assert!(!all.contains(&format!("lib/app:{digest}")), "{all}");
}
