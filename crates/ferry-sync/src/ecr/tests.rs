//! ECR and ECR Public token tests against a loopback stub API (awsJson1.1 over HTTP): no call
//! ever reaches AWS, and the AWS keys are given to the SDK directly, not through the environment.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

const HOST: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
const PASSWORD: &str = "ecr-test-password-7f3a";
const TARGET: &str = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";
const PUBLIC_TARGET: &str = "SpencerFrontendService.GetAuthorizationToken";

/// One request the stub received: its `X-Amz-Target` and `Authorization` headers.
#[derive(Debug, Clone)]
struct Seen {
    target: Option<String>,
    authorization: Option<String>,
}

impl Seen {
    /// Whether the request was signed for this region and signing name.
    fn signed_for(&self, region: &str, service: &str) -> bool {
        let scope = format!("/{region}/{service}/aws4_request");
        self.authorization
            .as_deref()
            .is_some_and(|a| a.contains(&scope))
    }
}

/// A loopback ECR API that answers every request with one status and JSON body.
struct Stub {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Stub {
    async fn start(status: u16, body: String) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let log = Arc::clone(&log);
                let body = body.clone();
                tokio::spawn(async move {
                    let Some(head) = read_request(&mut socket).await else {
                        return;
                    };
                    let header = |name: &str| {
                        head.lines().find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                        })
                    };
                    log.lock().unwrap().push(Seen {
                        target: header("x-amz-target"),
                        authorization: header("authorization"),
                    });
                    let reason = match status {
                        200 => "OK",
                        500 => "Internal Server Error",
                        _ => "Bad Request",
                    };
                    // An error's type travels in the JSON body's `__type`.
                    let mut response = format!(
                        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-amz-json-1.1\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    response.push_str(&body);
                    let _ = socket.write_all(response.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Stub { url, seen }
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn tokens(&self) -> EcrTokens {
        EcrTokens::new()
            .with_endpoint_url(&self.url)
            .with_static_credentials("AKIDFERRYTEST", &Secret::new("ferry-test-secret-key"))
    }
}

/// Reads one request's head and its `Content-Length` body; returns the head.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let n = socket.read(&mut chunk).await.ok()?;
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some(head);
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A `GetAuthorizationToken` answer whose token expires `expires_in` from now.
fn token_body(user_password: &str, expires_in: Duration) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(user_password);
    let expires = (SystemTime::now() + expires_in)
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    format!(
        r#"{{"authorizationData":[{{"authorizationToken":"{token}","expiresAt":{expires},"proxyEndpoint":"https://{HOST}"}}]}}"#
    )
}

const TWELVE_HOURS: Duration = Duration::from_secs(12 * 3600);

#[tokio::test]
async fn the_token_becomes_basic_aws_credentials_that_never_print() {
    let stub = Stub::start(200, token_body(&format!("AWS:{PASSWORD}"), TWELVE_HOURS)).await;
    let tokens = stub.tokens();
    let credentials = EcrAuth::implied_by(HOST)
        .unwrap()
        .credentials(HOST, &tokens)
        .await
        .unwrap();
    match &credentials {
        Credentials::Basic { username, password } => {
            assert_eq!(username, "AWS");
            assert_eq!(password.expose(), PASSWORD);
            assert!(!format!("{password}").contains(PASSWORD));
        }
        other => panic!("expected Basic credentials, got {other:?}"),
    }
    assert!(!format!("{credentials:?}").contains(PASSWORD));
    assert!(!credentials.describe().contains(PASSWORD));
    assert!(!format!("{tokens:?}").contains(PASSWORD));
    assert!(!format!("{tokens:?}").contains("ferry-test-secret-key"));

    let requests = stub.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].target.as_deref(), Some(TARGET));
    assert!(
        requests[0].signed_for("eu-west-1", "ecr"),
        "signed for the host's region"
    );
}

#[tokio::test]
async fn a_cached_token_is_reused_without_a_second_request() {
    let stub = Stub::start(200, token_body(&format!("AWS:{PASSWORD}"), TWELVE_HOURS)).await;
    let tokens = stub.tokens();
    let auth = EcrAuth::default();
    let first = auth.credentials(HOST, &tokens).await.unwrap();
    let second = auth.credentials(HOST, &tokens).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(stub.requests().len(), 1, "the second lookup hit the cache");

    // Another AWS profile is another key: it asks again.
    let other_profile = EcrAuth {
        region: None,
        profile: Some("mirror".into()),
    };
    other_profile.credentials(HOST, &tokens).await.unwrap();
    assert_eq!(stub.requests().len(), 2);
}

#[tokio::test]
async fn a_token_close_to_expiry_is_fetched_again() {
    // One minute left is inside the refresh margin: not worth keeping.
    let stub = Stub::start(
        200,
        token_body(&format!("AWS:{PASSWORD}"), Duration::from_secs(60)),
    )
    .await;
    let tokens = stub.tokens();
    let auth = EcrAuth::default();
    auth.credentials(HOST, &tokens).await.unwrap();
    auth.credentials(HOST, &tokens).await.unwrap();
    assert_eq!(stub.requests().len(), 2);
}

#[tokio::test]
async fn an_endpoint_error_names_the_registry_and_the_cause() {
    let stub = Stub::start(
        400,
        r#"{"__type":"AccessDeniedException","message":"User is not authorized to perform ecr:GetAuthorizationToken"}"#
            .to_owned(),
    )
    .await;
    let tokens = stub.tokens();
    let error = EcrAuth::default()
        .credentials(HOST, &tokens)
        .await
        .unwrap_err();
    assert!(error.is_auth());
    let text = error.to_string();
    assert!(text.starts_with(HOST), "{text}");
    assert!(text.contains("AccessDeniedException"), "{text}");
    assert!(text.contains("eu-west-1"), "{text}");
    assert!(!text.contains("ferry-test-secret-key"), "{text}");
    assert_eq!(stub.requests().len(), 1, "not retried by the SDK");
}

#[tokio::test]
async fn a_host_without_a_region_needs_one_in_the_config() {
    let tokens = EcrTokens::new().with_endpoint_url("http://127.0.0.1:9");
    let error = EcrAuth::default()
        .credentials("mirror.example.com", &tokens)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("auth.region"), "{error}");
}

#[test]
fn ecr_hosts_name_their_account_and_region() {
    assert_eq!(
        EcrHost::parse(HOST),
        Some(EcrHost {
            account: "123456789012",
            region: "eu-west-1"
        })
    );
    assert_eq!(
        EcrHost::parse("210987654321.dkr.ecr.cn-north-1.amazonaws.com.cn:443"),
        Some(EcrHost {
            account: "210987654321",
            region: "cn-north-1"
        })
    );
    assert_eq!(EcrHost::parse("public.ecr.aws"), None);
    assert!(
        EcrAuth::implied_by(ECR_PUBLIC_HOST).is_none(),
        "ECR Public pulls stay anonymous unless `type: ecr`"
    );
    assert!(is_ecr_public("public.ecr.aws"));
    assert!(is_ecr_public("Public.ECR.aws:443"));
    assert!(!is_ecr_public(HOST));
    assert!(!is_ecr_public("public.ecr.aws.example.com"));
    assert_eq!(EcrHost::parse("ghcr.io"), None);
    assert!(EcrAuth::implied_by("docker.io").is_none());
    assert!(EcrAuth::implied_by(HOST).is_some());
}

#[test]
fn tokens_decode_or_fail_without_echoing_them() {
    let ok = base64::engine::general_purpose::STANDARD.encode("AWS:pa:ss");
    let (user, password) = decode_token(&ok).unwrap();
    assert_eq!(user, "AWS");
    assert_eq!(password.expose(), "pa:ss", "split at the first colon only");

    let no_colon = base64::engine::general_purpose::STANDARD.encode("AWSsecretvalue");
    let error = decode_token(&no_colon).unwrap_err().to_string();
    assert!(!error.contains("secretvalue"), "{error}");
    assert!(decode_token("***not base64***").is_err());
    let empty = base64::engine::general_purpose::STANDARD.encode("AWS:");
    assert!(decode_token(&empty).is_err());
}

#[tokio::test]
async fn a_server_error_is_not_retried_by_the_sdk() {
    let stub = Stub::start(
        500,
        r#"{"__type":"ServerException","message":"internal failure"}"#.to_owned(),
    )
    .await;
    let error = EcrAuth::default()
        .credentials(HOST, &stub.tokens())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("ServerException"), "{error}");
    assert_eq!(stub.requests().len(), 1, "ferry retries in one place only");
}

/// An ECR Public `GetAuthorizationToken` answer: one `authorizationData` object, not a list.
fn public_token_body(user_password: &str, expires_in: Duration) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(user_password);
    let expires = (SystemTime::now() + expires_in)
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    format!(r#"{{"authorizationData":{{"authorizationToken":"{token}","expiresAt":{expires}}}}}"#)
}

#[tokio::test]
async fn an_ecr_public_token_becomes_basic_aws_credentials_that_never_print() {
    let stub = Stub::start(
        200,
        public_token_body(&format!("AWS:{PASSWORD}"), TWELVE_HOURS),
    )
    .await;
    let tokens = stub.tokens();
    // A configured region does not move ECR Public's API out of us-east-1.
    let auth = EcrAuth {
        region: Some("eu-west-1".into()),
        profile: None,
    };
    let credentials = auth.credentials(ECR_PUBLIC_HOST, &tokens).await.unwrap();
    match &credentials {
        Credentials::Basic { username, password } => {
            assert_eq!(username, "AWS");
            assert_eq!(password.expose(), PASSWORD);
            assert!(!format!("{password}").contains(PASSWORD));
        }
        other => panic!("expected Basic credentials, got {other:?}"),
    }
    assert!(!format!("{credentials:?}").contains(PASSWORD));
    assert!(!credentials.describe().contains(PASSWORD));
    assert!(!format!("{tokens:?}").contains(PASSWORD));

    let requests = stub.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].target.as_deref(), Some(PUBLIC_TARGET));
    assert!(
        requests[0].signed_for(ECR_PUBLIC_REGION, "ecr-public"),
        "{:?}",
        requests[0].authorization
    );
}

#[tokio::test]
async fn an_ecr_public_token_is_cached() {
    let stub = Stub::start(
        200,
        public_token_body(&format!("AWS:{PASSWORD}"), TWELVE_HOURS),
    )
    .await;
    let tokens = stub.tokens();
    let auth = EcrAuth::default();
    let first = auth.credentials(ECR_PUBLIC_HOST, &tokens).await.unwrap();
    let second = auth
        .credentials("public.ecr.aws:443", &tokens)
        .await
        .unwrap();
    assert_eq!(first, second);
    assert_eq!(stub.requests().len(), 1, "the second lookup hit the cache");
}

#[tokio::test]
async fn an_ecr_public_error_names_the_host_and_the_service() {
    let stub = Stub::start(
        400,
        r#"{"__type":"AccessDeniedException","message":"not authorized to perform ecr-public:GetAuthorizationToken"}"#
            .to_owned(),
    )
    .await;
    let error = EcrAuth::default()
        .credentials(ECR_PUBLIC_HOST, &stub.tokens())
        .await
        .unwrap_err();
    assert!(error.is_auth());
    let text = error.to_string();
    assert!(text.starts_with(ECR_PUBLIC_HOST), "{text}");
    assert!(text.contains("ECR Public GetAuthorizationToken"), "{text}");
    assert!(text.contains("AccessDeniedException"), "{text}");
    assert!(text.contains(ECR_PUBLIC_REGION), "{text}");
    assert!(!text.contains("ferry-test-secret-key"), "{text}");
    assert_eq!(stub.requests().len(), 1, "not retried by the SDK");
}

#[tokio::test]
async fn an_ecr_public_answer_without_a_token_is_an_error() {
    let stub = Stub::start(200, r#"{"authorizationData":{}}"#.to_owned()).await;
    let error = EcrAuth::default()
        .credentials(ECR_PUBLIC_HOST, &stub.tokens())
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("returned no authorization token"),
        "{error}"
    );
}

/// Issue 39: an explicit `auth` wins over the ECR host rule; no `auth` keeps it. Through the
/// config's loading and the run's client selection (`Registries::client`).
#[tokio::test]
async fn an_explicit_auth_wins_over_the_ecr_host_rule() {
    let stub = Stub::start(200, token_body(&format!("AWS:{PASSWORD}"), TWELVE_HOURS)).await;
    let cases = [
        ("    auth: { type: anonymous }\n", 0, "anonymous", false),
        (
            "    auth: { type: basic, username: mirror, password: s3cret }\n",
            0,
            "basic as mirror",
            false,
        ),
        ("", 1, "basic as AWS", true),
        ("    auth: { type: ecr }\n", 1, "basic as AWS", true),
    ];
    for (auth, calls, described, ecr_api) in cases {
        let before = stub.requests().len();
        let yaml = format!(
            "version: 1\nregistries:\n  - host: {HOST}\n{auth}mappings:\n  - source: {HOST}/team/app\n    targets: [\"oci:/tmp/out\"]\n"
        );
        let config = ferry_config::parse(&yaml, std::path::Path::new("mirror.yaml"), &|_| None)
            .unwrap_or_else(|e| panic!("{auth}: {e}"));
        let registries = crate::registries::Registries::new(&config).with_ecr_api(stub.tokens());
        let client = registries.client(HOST).await.unwrap();
        assert_eq!(client.credentials().describe(), described, "{auth:?}");
        assert_eq!(stub.requests().len() - before, calls, "{auth:?}: AWS asked");
        assert_eq!(registries.lists_with_ecr_api(HOST), ecr_api, "{auth:?}");
    }
}
