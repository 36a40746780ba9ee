//! Starts the real distribution registry through the testkit harness and checks its lifecycle:
//! `/v2/` answers 200 with the API version header, requests are logged, and stop closes the port.

use ferry_testkit::distribution::RealRegistry;
use tokio::net::TcpStream;

#[tokio::test]
async fn real_registry_answers_v2_and_closes_its_port_on_stop() {
    let Some(registry) = RealRegistry::start_for_test().await.unwrap() else {
        return;
    };
    let addr = registry.addr();
    assert_eq!(registry.url(), format!("http://{addr}"));
    assert_eq!(registry.host(), addr.to_string());
    assert!(addr.ip().is_loopback());

    let response = registry.request("GET", "/v2/").await.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("Docker-Distribution-Api-Version"),
        Some("registry/2.0")
    );

    let unknown = registry
        .request("GET", "/v2/no/such/tags/list")
        .await
        .unwrap();
    assert_eq!(unknown.status, 404);

    // The harness's own requests are left out; a client's are counted by method and path.
    let log = registry.access_log().await.unwrap();
    assert!(
        log.is_empty(),
        "harness requests leaked into the log: {log:?}"
    );

    let storage = registry.storage_dir();
    assert!(storage.is_dir());
    registry.stop().await.unwrap();
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "{addr} still accepts connections after stop"
    );
}

#[tokio::test]
async fn access_log_counts_client_requests_by_method_and_path() {
    let Some(registry) = RealRegistry::start_for_test().await.unwrap() else {
        return;
    };
    let addr = registry.addr();
    // A client other than the harness: a hand-written request with its own User-Agent.
    for _ in 0..3 {
        raw_request(addr, "HEAD", "/v2/app/manifests/v1").await;
    }
    raw_request(addr, "GET", "/v2/").await;

    let log = registry.access_log().await.unwrap();
    assert_eq!(log.count("HEAD", "/v2/app/manifests/"), 3, "{log:?}");
    assert_eq!(log.count("GET", "/v2/"), 1, "{log:?}");
    assert_eq!(log.len(), 4, "{log:?}");
    assert!(
        log.entries
            .iter()
            .all(|entry| entry.user_agent == "real-registry-test")
    );
    registry.stop().await.unwrap();
}

async fn raw_request(addr: std::net::SocketAddr, method: &str, path: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: real-registry-test\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 "),
        "{method} {path}: no HTTP answer"
    );
}
