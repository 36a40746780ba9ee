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
        err.contains("plain HTTP") && err.contains("insecure: true") && err.contains("--insecure"),
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
