//! Mirror on push from every sender (issue 39): each registry's own payload (the samples in
//! tests/event_samples, host and tag set to the test's), posted to a running `ferry watch` with
//! that sender's own authentication, brings its tag to the target; each forged delivery (a wrong
//! HMAC per scheme, a JWT from another key, for another audience, expired, a wrong path secret,
//! no authentication) is refused and syncs nothing.
//!
//! The OIDC tokens are made here: a fresh P-256 key signs ES256 JWTs, and the test writes that
//! key's JWK Set to the `jwks_file` the config names (RFC 7515's published RS256 vector is
//! checked in ferry-trust's own tests).

mod common;

use std::time::Duration;

use base64::Engine as _;
use ferry_testkit::registry::TestRegistry;
use ferry_trust::PrivateKey;
use hmac::{Hmac, Mac as _};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

const EVENTUALLY: Duration = Duration::from_secs(90);
const SAMPLE_HOST: &str = "registry.example:5000";
const SAMPLE_DIGEST: &str =
    "sha256:6ec128e26cd5e3c2bb1a1f1cb9b4ea3e5a6b2f0c9e3d0c1b2a3f4e5d6c7b8a91";

const TOKEN: &str = "events-token-0123456789abcdef";
const PATH: &str = "events-path-0123456789abcdef";
const GITHUB: &str = "github-secret-0123456789abc";
const JFROG: &str = "jfrog-secret-0123456789abcd";
const NEXUS: &str = "nexus-secret-0123456789abcd";
const GOOGLE: &str = "https://accounts.google.com";
const AUDIENCE: &str = "https://ferry.example/v1/events";
const PUSHER: &str = "pubsub-push@project.iam.gserviceaccount.com";
const CHAINGUARD: &str = "https://issuer.enforce.dev";
const CG_SUBJECT: &str = "webhook:0475f6baca584a8964a6bce6b74dbe78dd8805b6";

fn sample(name: &str) -> String {
    let path = format!(
        "{}/tests/event_samples/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).unwrap()
}

/// `name`'s sample, naming `host` and `tag` (and no digest of its own: the digest is the
/// source's, which the test does not know before it seeds; the samples' made-up one is cut).
fn payload(name: &str, host: &str, tag: &str) -> String {
    let text = sample(name);
    if name == "gar_pubsub" {
        // The reference is inside base64: decoded, set, encoded again.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let data = v["message"]["data"].as_str().unwrap();
        let engine = base64::engine::general_purpose::STANDARD;
        let inner = String::from_utf8(engine.decode(data).unwrap()).unwrap();
        let inner = inner
            .replace(SAMPLE_HOST, host)
            .replace(":v1\"", &format!(":{tag}\""))
            .replace(
                &format!(r#""digest":"{host}/src/app@{SAMPLE_DIGEST}","#),
                "",
            );
        return text.replace(data, &engine.encode(inner));
    }
    text.replace(SAMPLE_HOST, host)
        .replace("\"v1\"", &format!("\"{tag}\""))
        .replace(&format!("\"{SAMPLE_DIGEST}\""), "null")
        .replace(&format!("\"{}\"", &SAMPLE_DIGEST[7..]), "null")
}

fn hmac256(key: &str, body: &str) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn hmac1(key: &str, body: &str) -> String {
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An ES256 JWT signed by `key`: `iss`, `aud`, `email`/`sub`, expiring at `exp`.
fn jwt(key: &PrivateKey, iss: &str, aud: &str, subject: &str, exp: u64) -> String {
    let claims = format!(
        r#"{{"iss":"{iss}","aud":"{aud}","email":"{subject}","sub":"{subject}","iat":{},"exp":{exp}}}"#,
        exp - 600
    );
    let input = format!(
        "{}.{}",
        b64(br#"{"alg":"ES256","typ":"JWT","kid":"test-key"}"#),
        b64(claims.as_bytes())
    );
    let der = key.sign(input.as_bytes());
    let raw = p256::ecdsa::Signature::from_der(&der).unwrap().to_bytes();
    format!("{input}.{}", b64(&raw))
}

/// `key`'s public half as a JWK Set.
fn jwks(key: &PrivateKey) -> String {
    let ferry_trust::PublicKey::P256(k) = key.public_key() else {
        unreachable!()
    };
    let point = k.to_encoded_point(false);
    format!(
        r#"{{"keys":[{{"kty":"EC","crv":"P-256","use":"sig","kid":"test-key","x":"{}","y":"{}"}}]}}"#,
        b64(point.x().unwrap()),
        b64(point.y().unwrap())
    )
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `POST path` with `headers` (each ending `\r\n`) and `body`: the answer's status code.
async fn post(addr: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let post = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: ferry\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    };
    let out = tokio::time::timeout(EVENTUALLY, post)
        .await
        .expect("answered");
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out)
}

/// A running `ferry watch`, its stderr line by line.
struct Watch {
    _child: tokio::process::Child,
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
}

impl Watch {
    fn start(config: &str) -> Watch {
        let mut c = common::command(&[]);
        c.args([
            "watch",
            "-c",
            config,
            "--interval",
            "1h",
            "--listen",
            "127.0.0.1:0",
        ])
        .env_remove("RUST_LOG")
        .env_remove("FERRY_CONFIG")
        .env("FERRY_EVENTS_TOKEN", TOKEN)
        .env("FERRY_EVENTS_PATH", PATH)
        .env("FERRY_GITHUB_SECRET", GITHUB)
        .env("FERRY_JFROG_SECRET", JFROG)
        .env("FERRY_NEXUS_SECRET", NEXUS)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
        let mut child = c.spawn().expect("ferry watch started");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let _ = tx.send(line);
            }
        });
        Watch {
            _child: child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line from now that `want` matches.
    async fn until(&mut self, want: impl Fn(&str) -> bool) -> String {
        let read = async {
            while let Some(line) = self.lines.recv().await {
                self.seen.push(line.clone());
                if want(&line) {
                    return Some(line);
                }
            }
            None
        };
        match tokio::time::timeout(EVENTUALLY, read).await {
            Ok(Some(line)) => line,
            _ => panic!("not seen; ferry watch's stderr: {:#?}", self.seen),
        }
    }

    async fn address(&mut self) -> String {
        let line = self.until(|l| l.starts_with("watch: listening on ")).await;
        line["watch: listening on ".len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned()
    }
}

/// A source and a target, a config naming every sender's scheme, a watch past its first run.
/// The senders whose host is fixed (docker.io, ghcr.io, cgr.dev) reach the source through a
/// `registries:` entry for that host.
async fn setup(
    dir: &std::path::Path,
    key: &PrivateKey,
    keys: &str,
) -> (TestRegistry, TestRegistry, Watch, String) {
    let source = TestRegistry::builder().start().await.unwrap();
    let target = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "base", &[b"base"]);
    let from = (source.host(), source.url());
    let to = (target.host(), target.url());
    let (watch, addr) = start_watch(dir, key, keys, &from, &to).await;
    (source, target, watch, addr)
}

/// `ferry watch` on a config naming every sender's scheme, mapping `source`'s `src/app` (and
/// the same under docker.io, ghcr.io and cgr.dev, all served by `source`) to `target`, past its
/// first run.
async fn start_watch(
    dir: &std::path::Path,
    key: &PrivateKey,
    keys: &str,
    (source_host, source_url): &(String, String),
    (target_host, target_url): &(String, String),
) -> (Watch, String) {
    std::fs::write(dir.join("jwks.json"), jwks(key)).unwrap();
    let entry = |host: &str, url: &str| {
        format!("  - host: \"{host}\"\n    url: \"{url}\"\n    insecure: true\n")
    };
    let mut registries = [source_host.as_str(), "docker.io", "ghcr.io", "cgr.dev"]
        .iter()
        .map(|h| entry(h, source_url))
        .collect::<String>();
    if target_host != source_host {
        registries += &entry(target_host, target_url);
    }
    let mapping = |from: &str, to: &str| {
        format!("  - source: \"{from}/src/app\"\n    targets: [\"{target_host}/{to}/app\"]\n")
    };
    let mappings = mapping(source_host, "dst")
        + &mapping("docker.io", "hub")
        + &mapping("ghcr.io", "ghcr")
        + &mapping("cgr.dev", "cgr")
        + &format!(
            r#"events:
  token: "${{FERRY_EVENTS_TOKEN}}"
  path_secret: "${{FERRY_EVENTS_PATH}}"
  hmac:
    github: "${{FERRY_GITHUB_SECRET}}"
    jfrog: "${{FERRY_JFROG_SECRET}}"
    nexus: "${{FERRY_NEXUS_SECRET}}"
  oidc:
    - issuer: "{GOOGLE}"
      audience: "{AUDIENCE}"
      subject: "{PUSHER}"
      {keys}
    - issuer: "{CHAINGUARD}"
      audience: "{AUDIENCE}"
      subject: "{CG_SUBJECT}"
      jwks_file: jwks.json
"#
        );
    let config = common::write_config(dir, &registries, &mappings);
    let mut watch = Watch::start(config.to_str().unwrap());
    let addr = watch.address().await;
    watch
        .until(|l| l.starts_with("watch: run finished with exit code 0"))
        .await;
    (watch, addr)
}

/// One sender's delivery: its sample, the path it posts to, the headers it sets.
struct Delivery {
    sample: &'static str,
    path: &'static str,
    headers: String,
}

/// Each sender's delivery of `tag` pushed to `host`, authenticated as that sender does.
fn delivery(sender: &str, host: &str, tag: &str, key: &PrivateKey) -> (Delivery, String) {
    let bearer = format!("Authorization: Bearer {TOKEN}\r\n");
    let oidc = |iss: &str, subject: &str| {
        format!(
            "Authorization: Bearer {}\r\n",
            jwt(key, iss, AUDIENCE, subject, now() + 600)
        )
    };
    let (sample, path, headers): (&'static str, &'static str, String) = match sender {
        "distribution" => ("distribution", "/v1/events", bearer),
        "harbor" => ("harbor", "/v1/events", bearer),
        "harbor_cloudevent" => ("harbor_cloudevent", "/v1/events", bearer),
        "acr" => ("acr", "/v1/events", bearer),
        "event_grid" => ("event_grid", "/v1/events/PATH", String::new()),
        "docker_hub" => ("docker_hub", "/v1/events/PATH", String::new()),
        "quay" => ("quay", "/v1/events/PATH", String::new()),
        "github_package" => ("github_package", "/v1/events", String::new()),
        "github_registry_package" => ("github_registry_package", "/v1/events", String::new()),
        "jfrog" => ("jfrog", "/v1/events", String::new()),
        "nexus" => ("nexus", "/v1/events", String::new()),
        "zot" => (
            "zot",
            "/v1/events",
            format!(
                "{bearer}ce-specversion: 1.0\r\nce-id: 1\r\nce-type: zotregistry.image.updated\r\nce-source: http://{host}\r\n"
            ),
        ),
        "gar" => ("gar_pubsub", "/v1/events", oidc(GOOGLE, PUSHER)),
        "chainguard" => (
            "chainguard",
            "/v1/events",
            oidc(CHAINGUARD, CG_SUBJECT)
                + "ce-specversion: 1.0\r\nce-id: 1\r\nce-type: dev.chainguard.registry.push.v1\r\nce-source: cgr.dev\r\n",
        ),
        other => panic!("{other}"),
    };
    let body = payload(sample, host, tag);
    let headers = match sender {
        "github_package" | "github_registry_package" => {
            format!("X-Hub-Signature-256: sha256={}\r\n", hmac256(GITHUB, &body))
        }
        "jfrog" => format!("X-JFrog-Event-Auth: {}\r\n", hmac256(JFROG, &body)),
        "nexus" => format!("X-Nexus-Webhook-Signature: {}\r\n", hmac1(NEXUS, &body)),
        _ => headers,
    };
    (
        Delivery {
            sample,
            path,
            headers,
        },
        body,
    )
}

fn path_of(d: &Delivery) -> String {
    d.path.replace("PATH", PATH)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sender_s_push_reaches_the_target_through_its_own_payload_and_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let key = PrivateKey::generate_p256();
    let (source, target, mut watch, addr) = setup(dir.path(), &key, "jwks_file: jwks.json").await;
    // (sender, the host its payload names, the mapping that covers it, the target repository)
    let senders = [
        ("distribution", source.host(), 0, "dst/app"),
        ("harbor", source.host(), 0, "dst/app"),
        ("harbor_cloudevent", source.host(), 0, "dst/app"),
        ("acr", source.host(), 0, "dst/app"),
        ("event_grid", source.host(), 0, "dst/app"),
        ("quay", source.host(), 0, "dst/app"),
        ("jfrog", source.host(), 0, "dst/app"),
        ("zot", source.host(), 0, "dst/app"),
        ("gar", source.host(), 0, "dst/app"),
        ("docker_hub", "docker.io".into(), 1, "hub/app"),
        ("github_package", "ghcr.io".into(), 2, "ghcr/app"),
        ("github_registry_package", "ghcr.io".into(), 2, "ghcr/app"),
        ("chainguard", "cgr.dev".into(), 3, "cgr/app"),
    ];
    for (i, (sender, host, mapping, repo)) in senders.iter().enumerate() {
        let tag = format!("t{i}");
        source.seed_image("src/app", &tag, &[tag.as_bytes()]);
        let (d, body) = delivery(sender, host, &tag, &key);
        let (code, answer) = post(&addr, &path_of(&d), &d.headers, &body).await;
        assert_eq!(code, 202, "{sender} ({}): {answer}", d.sample);
        watch
            .until(|l| {
                l.starts_with(&format!(
                    "watch: event sync of mapping {mapping} (tag {tag}) finished with exit code 0"
                ))
            })
            .await;
        assert!(
            target.tags(repo).contains(&tag),
            "{sender}: {tag} in {repo}"
        );
    }
    // Nexus names no host: its tag reaches every mapping of that repository.
    source.seed_image("src/app", "nx", &[b"nx"]);
    let (d, body) = delivery("nexus", "", "nx", &key);
    let (code, answer) = post(&addr, &path_of(&d), &d.headers, &body).await;
    assert_eq!(code, 202, "nexus: {answer}");
    watch
        .until(|l| {
            l.starts_with("watch: event sync of mapping 0 (tag nx) finished with exit code 0")
        })
        .await;
    assert!(target.tags("dst/app").contains(&"nx".to_owned()));
    // Event Grid's handshake is answered with its code.
    let (code, answer) = post(
        &addr,
        &format!("/v1/events/{PATH}"),
        "",
        &sample("event_grid_validation"),
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    assert!(answer.contains(r#"{"validationResponse":"512d38b6-c7b8-40c8-89fe-f46f9e9622b6"}"#));
    for secret in [TOKEN, PATH, GITHUB, JFROG, NEXUS] {
        assert!(
            watch.seen.iter().all(|l| !l.contains(secret)),
            "a secret in the log"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_deliveries_are_refused_and_sync_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let key = PrivateKey::generate_p256();
    let other = PrivateKey::generate_p256();
    let (source, target, mut watch, addr) = setup(dir.path(), &key, "jwks_file: jwks.json").await;
    let host = source.host();
    source.seed_image("src/app", "forged", &[b"forged"]);
    let body = |sample: &str| payload(sample, &host, "forged");
    let token_of = |k: &PrivateKey, aud: &str, exp: u64| {
        format!(
            "Authorization: Bearer {}\r\n",
            jwt(k, GOOGLE, aud, PUSHER, exp)
        )
    };
    let later = now() + 600;
    let forged: Vec<(&str, String, String, String, u16)> = vec![
        (
            "no authentication",
            "/v1/events".into(),
            String::new(),
            body("distribution"),
            401,
        ),
        (
            "a wrong bearer token",
            "/v1/events".into(),
            "Authorization: Bearer events-token-0123456789abcdeF\r\n".into(),
            body("distribution"),
            401,
        ),
        (
            "a wrong path secret",
            "/v1/events/events-path-0123456789abcdeX".into(),
            String::new(),
            body("docker_hub"),
            404,
        ),
        (
            "GitHub's header keyed with another secret",
            "/v1/events".into(),
            format!(
                "X-Hub-Signature-256: sha256={}\r\n",
                hmac256("github-secret-0123456789abX", &body("github_package"))
            ),
            body("github_package"),
            401,
        ),
        (
            "JFrog's header keyed with another secret",
            "/v1/events".into(),
            format!(
                "X-JFrog-Event-Auth: {}\r\n",
                hmac256("jfrog-secret-0123456789abcX", &body("jfrog"))
            ),
            body("jfrog"),
            401,
        ),
        (
            "Nexus's header over another body",
            "/v1/events".into(),
            format!(
                "X-Nexus-Webhook-Signature: {}\r\n",
                hmac1(NEXUS, &body("quay"))
            ),
            body("nexus"),
            401,
        ),
        (
            "a JWT from another key",
            "/v1/events".into(),
            token_of(&other, AUDIENCE, later),
            body("gar_pubsub"),
            401,
        ),
        (
            "a JWT for another audience",
            "/v1/events".into(),
            token_of(&key, "https://elsewhere/", later),
            body("gar_pubsub"),
            401,
        ),
        (
            "an expired JWT",
            "/v1/events".into(),
            token_of(&key, AUDIENCE, now() - 600),
            body("gar_pubsub"),
            401,
        ),
    ];
    for (what, path, headers, body, want) in &forged {
        let (code, answer) = post(&addr, path, headers, body).await;
        assert_eq!(code, *want, "{what}: {answer}");
    }
    // Authenticated but naming a path out of the repository: dropped, counted as ignored.
    let traversal = body("quay").replace("\"src/app\"", "\"../etc\"");
    let (code, answer) = post(&addr, &format!("/v1/events/{PATH}"), "", &traversal).await;
    assert_eq!(code, 202, "{answer}");
    assert!(
        answer.contains(r#""queued":0,"coalesced":0,"ignored":2"#),
        "{answer}"
    );
    // A genuine delivery after them: its tag comes, the forged one never did.
    source.seed_image("src/app", "real", &[b"real"]);
    let (d, real) = delivery("distribution", &host, "real", &key);
    let (code, answer) = post(&addr, &path_of(&d), &d.headers, &real).await;
    assert_eq!(code, 202, "{answer}");
    watch
        .until(|l| l.starts_with("watch: event sync of mapping 0 (tag real) finished"))
        .await;
    assert!(
        !watch.seen.iter().any(|l| l.contains("(tag forged)")),
        "no sync for a forged delivery: {:#?}",
        watch.seen
    );
    let tags = target.tags("dst/app");
    assert!(
        tags.contains(&"real".to_owned()) && !tags.contains(&"forged".to_owned()),
        "{tags:?}"
    );
}

/// Serves `body` as JSON to every GET, counting them.
async fn serve_keys(body: String) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/keys", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let (body, counted) = (body.clone(), std::sync::Arc::clone(&counted));
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && s.read_exact(&mut byte).await.is_ok() {
                    head.push(byte[0]);
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    (url, count)
}

/// A `jwks_url` sender: its keys fetched once when first needed and kept, not fetched again for
/// every token (nor for a token that does not verify, within a minute of the last fetch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_from_a_jwks_url_are_fetched_once_and_kept() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let key = PrivateKey::generate_p256();
    let (url, fetches) = serve_keys(jwks(&key)).await;
    let keys = format!("jwks_url: \"{url}\"");
    let (source, target, mut watch, addr) = setup(dir.path(), &key, &keys).await;
    assert_eq!(
        fetches.load(Ordering::SeqCst),
        0,
        "not fetched before a token needs them"
    );
    for tag in ["u1", "u2"] {
        source.seed_image("src/app", tag, &[tag.as_bytes()]);
        let (d, body) = delivery("gar", &source.host(), tag, &key);
        let (code, answer) = post(&addr, &path_of(&d), &d.headers, &body).await;
        assert_eq!(code, 202, "{answer}");
        watch
            .until(|l| {
                l.starts_with(&format!(
                    "watch: event sync of mapping 0 (tag {tag}) finished with exit code 0"
                ))
            })
            .await;
    }
    let other = PrivateKey::generate_p256();
    let forged = format!(
        "Authorization: Bearer {}\r\n",
        jwt(&other, GOOGLE, AUDIENCE, PUSHER, now() + 600)
    );
    let (code, _) = post(
        &addr,
        "/v1/events",
        &forged,
        &payload("gar_pubsub", &source.host(), "u3"),
    )
    .await;
    assert_eq!(code, 401);
    assert_eq!(
        fetches.load(Ordering::SeqCst),
        1,
        "one fetch for all three tokens"
    );
    let tags = target.tags("dst/app");
    assert!(
        tags.contains(&"u1".to_owned()) && tags.contains(&"u2".to_owned()),
        "{tags:?}"
    );
}

/// The issue's `events:` sample, as written there (its key file given a real path here).
const ISSUE_SAMPLE: &str = r#"events:
  token: "${FERRY_EVENTS_TOKEN}"          # Authorization: Bearer (distribution, Harbor, ACR, zot, EventBridge API destinations, JFrog custom headers)
  path_secret: "${FERRY_EVENTS_PATH}"     # for senders that cannot set a header (Docker Hub, Quay): POST /v1/events/<path_secret>
  hmac:
    github: "${FERRY_GITHUB_SECRET}"      # X-Hub-Signature-256
    jfrog: "${FERRY_JFROG_SECRET}"        # X-JFrog-Event-Auth (HMAC-SHA256 of the body)
    nexus: "${FERRY_NEXUS_SECRET}"        # X-Nexus-Webhook-Signature (HMAC-SHA1 of the body)
  oidc:                                   # GAR Pub/Sub push, Chainguard: a signed JWT in Authorization: Bearer
    - issuer: "https://accounts.google.com"
      audience: "https://ferry.example/v1/events"
      subject: "pubsub-push@project.iam.gserviceaccount.com"   # matched against `email` or `sub`
      jwks_file: /etc/ferry/google-jwks.json                   # keys from a file (offline); jwks_url to fetch and cache them
"#;

/// `ferry validate` takes the issue's sample; a secret too short is exit 3 at its field and
/// the secret is not printed.
#[tokio::test]
async fn ferry_validate_takes_the_issue_s_sample() {
    let dir = tempfile::tempdir().unwrap();
    let jwks_path = dir.path().join("google-jwks.json");
    std::fs::write(&jwks_path, jwks(&PrivateKey::generate_p256())).unwrap();
    let events = ISSUE_SAMPLE.replace("/etc/ferry/google-jwks.json", jwks_path.to_str().unwrap());
    let config = dir.path().join("mirror.yaml");
    std::fs::write(
        &config,
        format!("version: 1\nmappings:\n  - source: registry.test/app\n    targets: [mirror.test/app]\n{events}"),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let env = [
        ("FERRY_EVENTS_TOKEN", TOKEN),
        ("FERRY_EVENTS_PATH", PATH),
        ("FERRY_GITHUB_SECRET", GITHUB),
        ("FERRY_JFROG_SECRET", JFROG),
        ("FERRY_NEXUS_SECRET", NEXUS),
    ];
    let out = common::ferry_env(&["validate", "-c", config], &env).await;
    assert_eq!(common::code(&out), 0, "{}", common::text(&out.stderr));
    let mut short = env;
    short[4] = ("FERRY_NEXUS_SECRET", "tiny-secret");
    let out = common::ferry_env(&["validate", "-c", config], &short).await;
    let stderr = common::text(&out.stderr) + &common::text(&out.stdout);
    assert_eq!(common::code(&out), 3, "{stderr}");
    assert!(stderr.contains("events.hmac.nexus"), "{stderr}");
    assert!(!stderr.contains("tiny-secret"), "{stderr}");
}

/// The same deliveries with the real distribution registry (`docker-registry`) as source and
/// target: each sender's payload and authentication bring its tag across.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sender_s_push_reaches_a_real_distribution_target() {
    use ferry_distribution::{RegistryClient, RegistryOptions};
    use ferry_testkit::distribution::RealRegistry;
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = RegistryClient::new(RegistryOptions::insecure_at(&real.url())).unwrap();
    let push = async |tag: &str| {
        let config = format!(r#"{{"architecture":"amd64","os":"linux","tag":"{tag}"}}"#);
        common::push_one_layer(&client, "src/app", tag, &config, tag.as_bytes()).await;
    };
    push("base").await;
    let dir = tempfile::tempdir().unwrap();
    let key = PrivateKey::generate_p256();
    let at = (real.host(), real.url());
    let (mut watch, addr) = start_watch(dir.path(), &key, "jwks_file: jwks.json", &at, &at).await;
    let senders = [
        ("distribution", real.host(), 0, "dst/app"),
        ("harbor_cloudevent", real.host(), 0, "dst/app"),
        ("event_grid", real.host(), 0, "dst/app"),
        ("quay", real.host(), 0, "dst/app"),
        ("jfrog", real.host(), 0, "dst/app"),
        ("zot", real.host(), 0, "dst/app"),
        ("gar", real.host(), 0, "dst/app"),
        ("docker_hub", "docker.io".into(), 1, "hub/app"),
        ("github_package", "ghcr.io".into(), 2, "ghcr/app"),
        ("chainguard", "cgr.dev".into(), 3, "cgr/app"),
    ];
    for (i, (sender, host, mapping, repo)) in senders.iter().enumerate() {
        let tag = format!("r{i}");
        push(&tag).await;
        let (d, body) = delivery(sender, host, &tag, &key);
        let (code, answer) = post(&addr, &path_of(&d), &d.headers, &body).await;
        assert_eq!(code, 202, "{sender}: {answer}");
        let done =
            format!("watch: event sync of mapping {mapping} (tag {tag}) finished with exit code 0");
        watch.until(|l| l.starts_with(&done)).await;
        let tags = client.list_tags(repo).await.unwrap();
        assert!(tags.contains(&tag), "{sender}: {tag} in {repo}: {tags:?}");
    }
}
