use super::*;
use config::config_yaml;

#[test]
fn a_skip_is_honoured_off_ci_and_refused_on_ci() {
    assert!(!skip_decision(None, false).unwrap());
    assert!(!skip_decision(Some("0"), false).unwrap());
    assert!(skip_decision(Some("1"), false).unwrap());
    assert!(!skip_decision(None, true).unwrap());
    assert!(matches!(
        skip_decision(Some("1"), true),
        Err(HarnessError::SkipRefusedInCi)
    ));
}

#[test]
fn parses_a_combined_log_line() {
    let line = r#"127.0.0.1 - - [30/Nov/2026:01:55:00 +0000] "PUT /v2/a/b/manifests/v1?x=1 HTTP/1.1" 201 0 "" "ferry/0.1 (x)""#;
    assert_eq!(
        parse_access_line(line),
        Some(AccessLogEntry {
            method: "PUT".into(),
            path: "/v2/a/b/manifests/v1?x=1".into(),
            status: 201,
            user_agent: "ferry/0.1 (x)".into(),
        })
    );
}

#[test]
fn rejects_a_line_that_is_not_an_access_line() {
    assert_eq!(parse_access_line("time=\"x\" level=warning msg=hi"), None);
    assert_eq!(parse_access_line(""), None);
}

#[test]
fn counts_by_method_and_path_prefix() {
    let entry = |method: &str, path: &str| AccessLogEntry {
        method: method.into(),
        path: path.into(),
        status: 200,
        user_agent: String::new(),
    };
    let log = AccessLog {
        entries: vec![
            entry("HEAD", "/v2/app/blobs/sha256:1"),
            entry("GET", "/v2/app/blobs/sha256:1"),
            entry("HEAD", "/v2/app/blobs/sha256:2"),
            entry("HEAD", "/v2/other/blobs/sha256:2"),
        ],
    };
    assert_eq!(log.count("HEAD", "/v2/app/blobs/"), 2);
    assert_eq!(log.count("GET", "/v2/"), 1);
    assert_eq!(log.len(), 4);
}

#[test]
fn reads_status_headers_and_body() {
    let raw = b"HTTP/1.1 200 OK\r\nDocker-Distribution-Api-Version: registry/2.0\r\nContent-Length: 2\r\n\r\n{}";
    let response = parse_response(raw).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("docker-distribution-api-version"),
        Some("registry/2.0")
    );
    assert_eq!(response.body, b"{}");
}

#[test]
fn config_names_storage_and_address() {
    let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
    let text = config_yaml(Path::new("/tmp/x y"), addr);
    assert!(text.contains("rootdirectory: \"/tmp/x y\""), "{text}");
    assert!(text.contains("addr: 127.0.0.1:4321"), "{text}");
    assert!(text.contains("delete:\n    enabled: true"), "{text}");
}

#[tokio::test]
async fn a_binary_that_exits_at_once_is_reported_with_its_status() {
    let options = RealRegistryOptions {
        binary: PathBuf::from("/bin/false"),
        ready_timeout: Duration::from_secs(10),
        ..RealRegistryOptions::default()
    };
    let error = RealRegistry::start_with(options).await.unwrap_err();
    assert!(matches!(error, HarnessError::Exited { .. }), "{error}");
    assert!(error.to_string().contains("/bin/false"), "{error}");
}

#[tokio::test]
async fn readiness_needs_a_200_from_v2() {
    // A stand-in server that answers every request with 503.
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buffer = [0_u8; 1024];
            let _ = socket.read(&mut buffer).await;
            let _ = socket
                .write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
                .await;
        }
    });
    let mut registry = RealRegistry {
        child: None,
        addr,
        binary: PathBuf::from("stand-in"),
        workdir: tempfile::tempdir().unwrap(),
        sentinel_counter: AtomicU64::new(0),
        ready_status: 200,
        tls: false,
    };
    let error = registry
        .wait_ready(Duration::from_millis(100))
        .await
        .unwrap_err();
    server.abort();
    assert!(matches!(error, HarnessError::NotReady { .. }), "{error}");
    assert!(error.to_string().contains("status 503"), "{error}");
}

#[tokio::test]
async fn a_missing_binary_names_the_package_to_install() {
    let options = RealRegistryOptions {
        binary: PathBuf::from("/nonexistent/docker-registry"),
        ready_timeout: Duration::from_secs(1),
        ..RealRegistryOptions::default()
    };
    let error = RealRegistry::start_with(options).await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, HarnessError::BinaryMissing { .. }));
    assert!(
        message.contains("/nonexistent/docker-registry"),
        "{message}"
    );
    assert!(
        message.contains("apt-get install -y docker-registry"),
        "{message}"
    );
}

#[tokio::test]
async fn a_registry_given_a_directory_keeps_its_work_and_storage_there() {
    let parent = tempfile::tempdir().unwrap();
    let options = RealRegistryOptions {
        work_in: Some(parent.path().to_owned()),
        ..RealRegistryOptions::default()
    };
    let Some(registry) = RealRegistry::start_for_test_with(options).await.unwrap() else {
        return;
    };
    let storage = registry.storage_dir();
    assert!(storage.starts_with(parent.path()), "{}", storage.display());
    assert!(storage.is_dir(), "{}", storage.display());
    let answer = registry.request("GET", "/v2/").await.unwrap();
    assert_eq!(answer.status, 200);
    registry.stop().await.unwrap();
    let left: Vec<_> = std::fs::read_dir(parent.path()).unwrap().collect();
    assert!(
        left.is_empty(),
        "the registry's work directory outlived it: {left:?}"
    );
}
