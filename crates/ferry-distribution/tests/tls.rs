//! TLS against a real handshake: a registry whose certificate a private CA signed is refused
//! by default, accepted with that CA as the registry's `ca_bundle`, and skipped only when the
//! registry is configured insecure. The server is a minimal HTTPS responder on loopback; mutual
//! TLS runs against the real distribution registry with `http.tls.clientcas`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferry_distribution::client::{RegistryClient, RegistryOptions};
use ferry_distribution::error::ErrorKind;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// Serves `/v2/` (200) and one tag list over TLS; counts completed requests.
async fn https_registry() -> (String, Arc<AtomicUsize>) {
    let (url, served, _) = https_registry_counting_connections().await;
    (url, served)
}

/// As [`https_registry`], also counting the TCP connections it accepted.
async fn https_registry_counting_connections() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture("server.pem"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicUsize::new(0));
    let connections = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&served);
    let accepted = Arc::clone(&connections);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            accepted.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            let count = Arc::clone(&count);
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 8192];
                let mut head = Vec::new();
                loop {
                    let Ok(n) = tls.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        let request = String::from_utf8_lossy(&head[..end]).to_string();
                        head.drain(..end + 4);
                        let path = request.split_whitespace().nth(1).unwrap_or("/");
                        let body = if path.starts_with("/v2/app/tags/list") {
                            r#"{"name":"app","tags":["1","2"]}"#
                        } else {
                            "{}"
                        };
                        let response = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if tls.write_all(response.as_bytes()).await.is_err() {
                            return;
                        }
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    (format!("https://127.0.0.1:{port}"), served, connections)
}

fn options(url: &str) -> RegistryOptions {
    let mut o = RegistryOptions::new(url.trim_start_matches("https://"));
    o.endpoint = Some(url.to_owned());
    o.gate.retry.attempts = 2;
    o.gate.retry.base = std::time::Duration::from_millis(10);
    o
}

#[tokio::test]
async fn a_private_ca_is_refused_by_default() {
    let (url, served) = https_registry().await;
    let client = RegistryClient::new(options(&url)).unwrap();
    let err = client.list_tags("app").await.unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Certificate(_)), "{err}");
    assert_eq!(served.load(Ordering::SeqCst), 0, "no request completed");
}

#[tokio::test]
async fn an_untrusted_certificate_is_tried_once_names_ca_bundle_and_leaves_the_breaker_closed() {
    let (url, served, connections) = https_registry_counting_connections().await;
    let mut o = options(&url);
    o.gate.retry.attempts = 5;
    let client = RegistryClient::new(o).unwrap();
    let err = client.list_tags("app").await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err.kind, ErrorKind::Certificate(_)), "{text}");
    assert!(
        text.contains("UnknownIssuer") && text.contains("ca_bundle") && text.contains("127.0.0.1"),
        "{text}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "one handshake, no retries"
    );
    assert_eq!(served.load(Ordering::SeqCst), 0);
    assert_eq!(
        client.gate().breaker.state(),
        ferry_distribution::breaker::BreakerState::Closed,
        "a certificate says nothing about the registry's health"
    );
    // A second operation is refused the same way, not by an open breaker.
    let again = client.list_tags("app").await.unwrap_err();
    assert!(!matches!(again.kind, ErrorKind::BreakerOpen), "{again}");
}

#[tokio::test]
async fn the_registrys_ca_bundle_makes_it_trusted() {
    let (url, served) = https_registry().await;
    let mut o = options(&url);
    o.ca_bundle = Some(fixture("ca.pem"));
    let client = RegistryClient::new(o).unwrap();
    assert_eq!(client.list_tags("app").await.unwrap(), ["1", "2"]);
    // The ping, the one page, and the `last=` probe that proves a registry's first Link-less
    // listing whole (issue 39; this server ignores `last` and answers the page again).
    assert_eq!(
        served.load(Ordering::SeqCst),
        3,
        "ping, one page, one probe"
    );
}

#[tokio::test]
async fn insecure_skips_verification_only_when_configured() {
    let (url, _) = https_registry().await;
    let mut o = options(&url);
    o.insecure = true;
    let client = RegistryClient::new(o).unwrap();
    assert_eq!(client.list_tags("app").await.unwrap(), ["1", "2"]);
}

#[tokio::test]
async fn a_token_realm_on_another_host_keeps_verified_tls_for_an_insecure_registry() {
    use ferry_testkit::registry::{HostileRule, Hostility, TestRegistry, TokenAuthConfig};
    let (tls_url, served) = https_registry().await;
    let reg = TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![],
            anonymous_pull: true,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap();
    reg.seed_image("mine", "v1", &[b"layer"]);
    // The realm is a host with a certificate only the insecure client would accept.
    let realm = tls_url.replace("127.0.0.1", "localhost") + "/token";
    reg.hostile().add(HostileRule {
        op: None,
        repo: None,
        answer: vec![Hostility::Header(
            "www-authenticate",
            format!("Bearer realm=\"{realm}\",service=\"testkit\"").into_bytes(),
        )],
        times: None,
        skip: 0,
    });
    let mut o = RegistryOptions::insecure_at(&reg.url());
    o.gate.retry.attempts = 2;
    o.gate.retry.base = std::time::Duration::from_millis(10);
    let err = RegistryClient::new(o)
        .unwrap()
        .list_tags("mine")
        .await
        .unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Certificate(_)), "{err}");
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "nothing reached the realm"
    );
}

/// A real distribution registry serving TLS with a private CA and requiring client
/// certificates signed by it (`http.tls.clientcas`).
async fn mutual_tls_registry(
    pki: &ferry_testkit::pki::TestPki,
) -> Option<ferry_testkit::distribution::RealRegistry> {
    use ferry_testkit::distribution::{RealRegistry, RealRegistryOptions, RealRegistryTls};
    RealRegistry::start_for_test_with(RealRegistryOptions {
        tls: Some(RealRegistryTls {
            certificate: pki.server_cert(),
            key: pki.server_key(),
            client_cas: vec![pki.ca()],
        }),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("registry")
}

fn mutual_tls_options(url: &str, pki: &ferry_testkit::pki::TestPki) -> RegistryOptions {
    let mut o = options(url);
    o.gate.retry.attempts = 1;
    o.ca_bundle = Some(pki.ca());
    o
}

#[tokio::test]
async fn a_registry_requiring_client_certificates_accepts_ours_and_refuses_without() {
    use ferry_distribution::identity::ClientIdentity;
    let pki = ferry_testkit::pki::TestPki::new().unwrap();
    let Some(registry) = mutual_tls_registry(&pki).await else {
        return;
    };
    let url = registry.url();
    assert!(url.starts_with("https://"), "{url}");

    let mut with_cert = mutual_tls_options(&url, &pki);
    with_cert.client_identity = Some(ClientIdentity {
        certificate: pki.client_cert(),
        key: pki.client_key(),
    });
    let client = RegistryClient::new(with_cert).unwrap();
    client.ensure_ready().await.unwrap();
    assert!(
        client
            .list_tags_or_empty("nothing/here")
            .await
            .unwrap()
            .is_empty()
    );

    let without = RegistryClient::new(mutual_tls_options(&url, &pki)).unwrap();
    let err = without.ensure_ready().await.unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Transport(_)), "{err}");
    // The registry says why it closed the connection: in its log, which its connection's
    // goroutine may write after our error is back (a gate run read it first once), so read
    // until the line is there, within a bound that is not a timing claim.
    let path = registry.stderr_log_path();
    let said = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let log = std::fs::read_to_string(&path).unwrap_or_default();
            if log.contains("didn't provide a certificate") {
                return log;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        said.is_ok(),
        "{}",
        std::fs::read_to_string(&path).unwrap_or_default()
    );
}

#[test]
fn a_client_key_that_is_missing_or_not_a_key_is_named() {
    use ferry_distribution::identity::{ClientIdentity, IdentityFile};
    let pki = ferry_testkit::pki::TestPki::new().unwrap();
    let missing = ClientIdentity {
        certificate: pki.client_cert(),
        key: pki.dir().join("absent.key"),
    };
    let err = missing.load().unwrap_err();
    assert_eq!(err.file, IdentityFile::Key);
    assert!(err.message.contains("absent.key"), "{}", err.message);

    // A certificate given as the key: not a private key, and its text is not echoed.
    let swapped = ClientIdentity {
        certificate: pki.client_cert(),
        key: pki.client_cert(),
    };
    let err = swapped.load().unwrap_err();
    assert_eq!(err.file, IdentityFile::Key);
    assert!(!err.message.contains("BEGIN"), "{}", err.message);

    let swapped = ClientIdentity {
        certificate: pki.client_key(),
        key: pki.client_key(),
    };
    let err = swapped.load().unwrap_err();
    assert_eq!(err.file, IdentityFile::Certificate);
    assert!(!err.message.contains("PRIVATE"), "{}", err.message);
}
