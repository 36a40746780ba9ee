//! Credentials found in a user's login files (not configured for the registry) go only to the
//! host they are stored for: a token realm on another host is asked anonymously, while a realm
//! on the registry's own host still gets them.

mod common;

use std::sync::{Arc, Mutex};

use ferry_distribution::Secret;
use ferry_distribution::auth::Credentials;
use ferry_distribution::client::RegistryClient;
use ferry_testkit::pki::TestPki;
use ferry_testkit::registry::{HostileRule, Hostility, OpKind, TestRegistry, TokenAuthConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;

use common::{fast_policy, options_at};

const PASSWORD: &str = "found-in-login-file-5";

/// An HTTPS token service on `localhost` (a host other than the registry's `127.0.0.1`) that
/// records each request's `Authorization` header and hands out a token.
async fn foreign_realm(pki: &TestPki) -> (String, Arc<Mutex<Vec<Option<String>>>>) {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(pki.server_cert())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(pki.server_key()).unwrap();
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
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let record = Arc::clone(&record);
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).to_string();
                let authorization = text.lines().find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("authorization")
                        .then(|| value.trim().to_owned())
                });
                record.lock().unwrap().push(authorization);
                let body = r#"{"token":"foreign-token","expires_in":300}"#;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (format!("https://localhost:{port}/token"), seen)
}

fn alice(reg: &TestRegistry, pki: &TestPki, bound: bool) -> RegistryClient {
    let mut options = options_at(&reg.url(), fast_policy(2));
    options.ca_bundle = Some(pki.ca());
    options.credentials = Credentials::Basic {
        username: "alice".into(),
        password: Secret::new(PASSWORD),
    };
    options.credentials_bound_to = bound.then(|| reg.host());
    RegistryClient::new(options).unwrap()
}

async fn token_registry() -> TestRegistry {
    let reg = TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![("alice".into(), PASSWORD.into())],
            anonymous_pull: false,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap();
    reg.seed_image("team/app", "v1", &[b"layer"]);
    reg
}

#[tokio::test]
async fn a_realm_on_another_host_gets_found_credentials_never() {
    let pki = TestPki::new().unwrap();
    let (realm, seen) = foreign_realm(&pki).await;
    let reg = token_registry().await;
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

    // Found credentials: the foreign realm is asked, but anonymously.
    let _ = alice(&reg, &pki, true).list_tags("team/app").await;
    let found: Vec<_> = seen.lock().unwrap().drain(..).collect();
    assert!(!found.is_empty(), "the foreign realm was asked");
    assert!(found.iter().all(Option::is_none), "{found:?}");

    // The same credentials configured for the registry do go there (as docker sends them):
    // the test can see a header when one is sent.
    let _ = alice(&reg, &pki, false).list_tags("team/app").await;
    let configured: Vec<_> = seen.lock().unwrap().drain(..).collect();
    assert!(
        configured
            .iter()
            .any(|a| a.as_deref().is_some_and(|a| a.starts_with("Basic "))),
        "{configured:?}"
    );
}

#[tokio::test]
async fn a_realm_on_the_registrys_own_host_gets_found_credentials() {
    let pki = TestPki::new().unwrap();
    let reg = token_registry().await;
    let client = alice(&reg, &pki, true);
    assert_eq!(client.list_tags("team/app").await.unwrap(), ["v1"]);
    assert!(reg.stats().op(OpKind::Token) >= 1);
}
