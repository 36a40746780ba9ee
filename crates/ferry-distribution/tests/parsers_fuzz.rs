//! Bad input for the protocol parsers and responses: random references, `WWW-Authenticate`,
//! `Link`, `Retry-After`, digests and token bodies never panic, and oversized or lying answers
//! (huge manifests, absurd tag lists, mismatched digests) are refused with a clear error.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ferry_distribution::Secret;
use ferry_distribution::auth::Credentials;
use ferry_distribution::challenge::{Challenge, parse_www_authenticate};
use ferry_distribution::client::RegistryClient;
use ferry_distribution::digest::Digest;
use ferry_distribution::error::ErrorKind;
use ferry_distribution::link::next_link;
use ferry_distribution::reference::Reference;
use ferry_distribution::retry::retry_after::parse_retry_after;
use ferry_testkit::registry::{OCI_MANIFEST, TestRegistry};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use common::{fast_policy, options_at};

/// Text built from the characters these headers and references are made of, so random inputs
/// come near the grammar instead of being rejected at the first byte.
fn near_grammar() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => "[a-zA-Z0-9]{1,8}",
            1 => Just("=".to_string()),
            1 => Just("\"".to_string()),
            1 => Just(",".to_string()),
            1 => Just(";".to_string()),
            1 => Just(":".to_string()),
            1 => Just("/".to_string()),
            1 => Just("@".to_string()),
            1 => Just("<".to_string()),
            1 => Just(">".to_string()),
            1 => Just(" ".to_string()),
            1 => Just("\\".to_string()),
            1 => Just("sha256:".to_string()),
            1 => Just("Bearer ".to_string()),
            1 => Just("realm=".to_string()),
            1 => Just("rel=\"next\"".to_string()),
            1 => Just("https://".to_string()),
            1 => Just("é✓".to_string()),
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![near_grammar(), any::<String>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn references_parse_or_refuse_and_a_parsed_one_round_trips(input in any_text()) {
        if let Ok(reference) = Reference::parse(&input) {
            prop_assert!(!reference.registry.is_empty());
            prop_assert!(!reference.repository.is_empty());
            let again = Reference::parse(&reference.to_string());
            prop_assert_eq!(again.as_ref().ok(), Some(&reference), "{}", reference);
        }
    }

    #[test]
    fn www_authenticate_parses_or_refuses(input in any_text()) {
        if let Ok(challenges) = parse_www_authenticate(&input) {
            for c in challenges {
                if let Challenge::Bearer { realm, .. } = c {
                    prop_assert!(!realm.is_empty());
                }
            }
        }
    }

    #[test]
    fn a_bearer_challenge_keeps_its_realm(realm in "https://[a-z]{1,10}\\.example/[a-z/]{0,10}", service in "[a-z.]{1,10}") {
        let value = format!("Bearer realm=\"{realm}\",service=\"{service}\"");
        let challenges = parse_www_authenticate(&value).unwrap();
        let found = challenges.iter().any(|c| matches!(c, Challenge::Bearer { realm: r, .. } if *r == realm));
        prop_assert!(found, "{:?}", challenges);
    }

    #[test]
    fn link_headers_never_panic_and_a_next_link_is_found(input in any_text(), path in "/v2/[a-z]{1,8}/tags/list\\?n=[0-9]{1,3}&last=[a-z0-9]{1,8}") {
        let _ = next_link(&input);
        let value = format!("<{path}>; rel=\"next\"");
        prop_assert_eq!(next_link(&value), Some(path));
    }

    #[test]
    fn retry_after_never_panics_and_reads_delta_seconds(input in any_text(), secs in 0u64..1_000_000) {
        let now = SystemTime::now();
        let _ = parse_retry_after(&input, now);
        prop_assert_eq!(parse_retry_after(&secs.to_string(), now), Some(Duration::from_secs(secs)));
        let date = httpdate_like(now + Duration::from_secs(secs % 100_000));
        let wait = parse_retry_after(&date, now);
        prop_assert!(wait.is_some_and(|w| w <= Duration::from_secs(secs % 100_000 + 1)), "{date}: {wait:?}");
    }

    #[test]
    fn digests_parse_or_refuse_and_round_trip(input in prop_oneof![any_text(), "sha(256|512):[0-9a-fA-F]{0,130}"]) {
        if let Ok(digest) = Digest::parse(&input) {
            prop_assert_eq!(Digest::parse(&digest.to_string()).ok(), Some(digest));
        }
    }
}

/// An IMF-fixdate for `at` (what `Retry-After` carries), built here to keep the test
/// independent of the parser's own formatting helpers.
fn httpdate_like(at: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm, restated).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A tiny HTTP/1.1 server: `/v2/` and everything else answer 401 with a Bearer challenge whose
/// realm is this server's `/token`; `/token` answers `token_body` with `token_status`.
async fn token_stub(token_status: u16, token_body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let realm = format!("{base}/token");
    let body = Arc::new(token_body);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            let realm = realm.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or_default();
                let response = if path.starts_with("/token") {
                    let mut r = format!(
                        "HTTP/1.1 {token_status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    r.extend_from_slice(&body);
                    r
                } else {
                    format!(
                        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"{realm}\",service=\"stub\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                    .into_bytes()
                };
                let _ = socket.write_all(&response).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    base
}

fn token_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<Vec<u8>>(),
        any_text().prop_map(String::into_bytes),
        (any_text(), any::<i64>()).prop_map(|(t, e)| {
            serde_json::json!({"token": t, "expires_in": e})
                .to_string()
                .into_bytes()
        }),
        (any::<bool>(), any::<u32>()).prop_map(|(b, n)| {
            serde_json::json!({"access_token": b, "token": n})
                .to_string()
                .into_bytes()
        }),
        Just(b"{}".to_vec()),
        Just(b"{\"token\":\"\"}".to_vec()),
        Just(b"null".to_vec()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_token_response_is_an_error_or_a_token_never_a_panic(status in prop_oneof![Just(200u16), Just(400), Just(401), Just(500)], body in token_body()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (result, password_leaked) = runtime.block_on(async {
            let base = token_stub(status, body).await;
            let mut options = options_at(&base, fast_policy(2));
            options.credentials = Credentials::Basic {
                username: "alice".into(),
                password: Secret::new("fuzz-password-7"),
            };
            let client = RegistryClient::new(options).unwrap();
            let result = match client.ensure_ready().await {
                Ok(()) => client.get_manifest("app", "v1").await.map(|_| ()),
                Err(e) => Err(e),
            };
            let leaked = result.as_ref().err().is_some_and(|e| e.to_string().contains("fuzz-password-7"));
            (result, leaked)
        });
        // The stub never serves a manifest: every path ends in an error, none in a panic.
        let error = result.unwrap_err();
        prop_assert!(!password_leaked, "{error}");
        prop_assert!(!error.to_string().is_empty());
    }
}

#[tokio::test]
async fn a_manifest_above_the_size_limit_is_refused() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let padding = "x".repeat(5 * 1024 * 1024);
    let huge = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","annotations":{{"pad":"{padding}"}}}}"#
    );
    reg.seed_manifest("app", "big", OCI_MANIFEST, huge.as_bytes());
    let client = RegistryClient::new(options_at(&reg.url(), fast_policy(3))).unwrap();
    let error = client.get_manifest("app", "big").await.unwrap_err();
    assert!(
        matches!(error.kind, ErrorKind::TooLarge { what: "manifest", limit } if limit == 4 * 1024 * 1024),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("manifest larger than"),
        "{error}"
    );
    assert_eq!(
        error.attempts, 1,
        "a too-large answer is final, not retried"
    );
}

#[tokio::test]
async fn a_manifest_whose_bytes_do_not_match_its_digest_is_refused() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let digest = reg.seed_image("app", "v1", &[b"layer"]);
    let (_, bytes) = reg.manifest("app", &digest).unwrap();
    // Stored under a digest its bytes do not hash to.
    let liar = format!("sha256:{}", "ab".repeat(32));
    let mut other = bytes.clone();
    other.push(b' ');
    reg.seed_manifest("app", &liar, OCI_MANIFEST, &other);
    let client = RegistryClient::new(options_at(&reg.url(), fast_policy(3))).unwrap();
    let error = client.get_manifest("app", &liar).await.unwrap_err();
    assert!(
        matches!(&error.kind, ErrorKind::DigestMismatch { expected, .. } if *expected == liar),
        "{error:?}"
    );
    assert!(error.to_string().contains("digest mismatch"), "{error}");
}

/// A stub answering the ping with 200 and every tag list with `tags` tags in one page.
async fn tag_stub(tags: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut list = String::from("{\"name\":\"app\",\"tags\":[");
    for i in 0..tags {
        if i > 0 {
            list.push(',');
        }
        list.push_str(&format!("\"t{i}\""));
    }
    list.push_str("]}");
    let list = Arc::new(list.into_bytes());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let list = list.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let body: &[u8] = if head.starts_with("GET /v2/ ") {
                    b"{}"
                } else {
                    &list
                };
                let mut response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                response.extend_from_slice(body);
                let _ = socket.write_all(&response).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    base
}

#[tokio::test]
async fn a_tag_list_of_absurd_length_is_refused_as_too_large() {
    let base = tag_stub(300_000).await;
    let client = RegistryClient::new(options_at(&base, fast_policy(2))).unwrap();
    let error = client.list_tags("app").await.unwrap_err();
    assert!(
        matches!(error.kind, ErrorKind::TooLarge { what, .. } if what.starts_with("tag list")),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("tag list larger than"),
        "{error}"
    );

    // The floor: a long but believable list is accepted whole.
    let base = tag_stub(50_000).await;
    let client = RegistryClient::new(options_at(&base, fast_policy(2))).unwrap();
    assert_eq!(client.list_tags("app").await.unwrap().len(), 50_000);
}
