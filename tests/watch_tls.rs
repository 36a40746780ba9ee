//! `ferry watch` serving its listener over TLS from the config's `listener.tls` (issue 26): a
//! client that trusts the CA gets /healthz and posts events over HTTPS; plain HTTP gets no
//! answer; a wrong key or a missing file is a config error naming the field, never the key.

mod common;

use common::write_config;

use std::sync::Arc;
use std::time::Duration;

use ferry_testkit::pki::TestPki;
use ferry_testkit::registry::TestRegistry;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

const EVENTUALLY: Duration = Duration::from_secs(60);
const TOKEN: &str = "a-long-random-events-token-0123456789";

fn config(dir: &std::path::Path, registry: &TestRegistry, tls: &str) -> std::path::PathBuf {
    let registries = format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n",
        registry.host(),
        registry.url()
    );
    let mappings = format!(
        "  - source: \"{h}/src/app\"\n    targets: [\"{h}/dst/app\"]\nevents:\n  token: \"{TOKEN}\"\n{tls}",
        h = registry.host()
    );
    write_config(dir, &registries, &mappings)
}

/// A TLS client trusting only the test CA.
fn connector(pki: &TestPki) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(pki.ca()).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// Sends `request` over TLS to `addr` and reads the whole answer.
async fn over_tls(pki: &TestPki, addr: &str, request: &str) -> String {
    let exchange = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = connector(pki).connect(name, tcp).await.expect("handshake");
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        let _ = tls.read_to_string(&mut out).await;
        out
    };
    tokio::time::timeout(EVENTUALLY, exchange).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_serves_https_from_the_config_and_nothing_in_plain_text() {
    let pki = TestPki::new().unwrap();
    let registry = TestRegistry::builder().start().await.unwrap();
    registry.seed_image("src/app", "v1", &[b"one"]);
    let dir = tempfile::tempdir().unwrap();
    let tls = format!(
        "listener:\n  tls:\n    certificate: {:?}\n    key: {:?}\n",
        pki.server_cert(),
        pki.server_key()
    );
    let config = config(dir.path(), &registry, &tls);
    let mut child = common::command(&["watch", "-c", config.to_str().unwrap()])
        .args(["--interval", "1h", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = tokio::time::timeout(EVENTUALLY, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let rest = first.strip_prefix("watch: listening on ").expect(&first);
    let addr = rest.split_whitespace().next().unwrap().to_owned();
    assert!(rest.contains("(https: "), "{first}");

    let out = over_tls(&pki, &addr, "GET /healthz HTTP/1.1\r\nHost: ferry\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    let event = format!(
        r#"{{"events":[{{"action":"push","target":{{"repository":"src/app","tag":"v1"}},"request":{{"host":"{}"}}}}]}}"#,
        registry.host()
    );
    let post = format!(
        "POST /v1/events HTTP/1.1\r\nHost: ferry\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{event}",
        event.len()
    );
    let out = over_tls(&pki, &addr, &post).await;
    assert!(out.starts_with("HTTP/1.1 202 "), "{out}");

    // Plain HTTP to the TLS port: the handshake fails, no HTTP answer comes back.
    let plain = async {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: ferry\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        out
    };
    let out = tokio::time::timeout(EVENTUALLY, plain).await.unwrap();
    assert!(
        !String::from_utf8_lossy(&out).contains("HTTP/1.1 200"),
        "{out:?}"
    );
    let _ = child.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_tls_file_that_cannot_serve_is_a_config_error_naming_the_field() {
    let pki = TestPki::new().unwrap();
    let registry = TestRegistry::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such.key");
    let key_text = std::fs::read_to_string(pki.server_key()).unwrap();
    let secret_line = key_text.lines().nth(1).unwrap().to_owned();
    for (tls, field) in [
        (
            format!(
                "listener:\n  tls:\n    certificate: {:?}\n    key: {missing:?}\n",
                pki.server_cert()
            ),
            "listener.tls.key",
        ),
        (
            // The key swapped in for the certificate: no certificate in it.
            format!(
                "listener:\n  tls:\n    certificate: {:?}\n    key: {:?}\n",
                pki.server_key(),
                pki.server_key()
            ),
            "listener.tls.certificate",
        ),
        (
            // A key that does not go with the certificate.
            format!(
                "listener:\n  tls:\n    certificate: {:?}\n    key: {:?}\n",
                pki.server_cert(),
                pki.client_key()
            ),
            "listener.tls",
        ),
    ] {
        let config = config(dir.path(), &registry, &tls);
        let out = common::command(&["watch", "-c", config.to_str().unwrap()])
            .args(["--interval", "1h", "--listen", "127.0.0.1:0"])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(common::code(&out), 3, "{stderr}");
        assert!(stderr.contains(field), "{field}: {stderr}");
        assert!(
            !stderr.contains(&secret_line),
            "the key's bytes never: {stderr}"
        );
    }
}
