//! Nothing leaked: credentials never reach another host (blob redirects, foreign Link pages) nor
//! any output of the `ferry` binary, and TLS is never quietly dropped or misconfigured silently.

mod common;

use common::ferry;

use std::path::Path;
use std::sync::{Arc, Mutex};

use ferry_distribution::Secret;
use ferry_distribution::auth::Credentials;
use ferry_distribution::client::{RegistryClient, RegistryOptions};
use ferry_distribution::error::ErrorKind;
use ferry_testkit::registry::{OpKind, TestRegistry, TokenAuthConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

const PASSWORD: &str = "s3cret-Pa55word-4417";
const STATIC_TOKEN: &str = "static-T0ken-9c1e77";

fn token_registry() -> ferry_testkit::registry::TestRegistryBuilder {
    TestRegistry::builder().token_auth(TokenAuthConfig {
        users: vec![("alice".into(), PASSWORD.into())],
        anonymous_pull: false,
        token_ttl_secs: 300,
    })
}

fn entry(reg: &TestRegistry, auth: &str) -> String {
    format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    retry: {{ attempts: 2, base: 10ms, cap: 50ms }}\n    auth: {auth}\n",
        reg.host(),
        reg.url()
    )
}

/// Bearer tokens a registry saw (issued by its token endpoint during the run).
fn bearer_tokens(reg: &TestRegistry) -> Vec<String> {
    let mut tokens: Vec<String> = reg
        .requests()
        .iter()
        .flat_map(|r| r.headers.iter())
        .filter(|(k, _)| k == "authorization")
        .filter_map(|(_, v)| v.strip_prefix("Bearer ").map(str::to_string))
        .collect();
    tokens.sort();
    tokens.dedup();
    tokens
}

fn assert_absent(what: &str, haystack: &str, secrets: &[String]) {
    for secret in secrets {
        assert!(
            !haystack.contains(secret.as_str()),
            "{what} carries the secret {secret}:\n{haystack}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_and_tokens_appear_in_no_log_error_report_or_plan() {
    let src = token_registry().start().await.unwrap();
    let dst = token_registry().start().await.unwrap();
    src.seed_image("src/app", "v1", &[b"layer one"]);
    src.seed_image("src/app", "v2", &[b"layer two"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mirror.yaml");
    // The source takes the password; the target is given a static token it does not accept,
    // so the run goes through the error paths too.
    let text = format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{s}/src/app\"\n    targets: [\"{s}/src/copy\"]\n    tags: {{ include: [\"*\"] }}\n  - source: \"{s}/src/app\"\n    targets: [\"{d}/dst/app\"]\n    tags: {{ include: [\"*\"] }}\n",
        entry(
            &src,
            &format!("{{ type: basic, username: alice, password: \"{PASSWORD}\" }}")
        ),
        entry(
            &dst,
            &format!("{{ type: token, token: \"{STATIC_TOKEN}\" }}")
        ),
        s = src.host(),
        d = dst.host(),
    );
    std::fs::write(&config, text).unwrap();
    let report = dir.path().join("report.json");
    let config = config.to_str().unwrap();
    let runs = [
        vec!["sync", "-c", config, "-vv", "--progress", "plain"],
        vec![
            "sync",
            "-c",
            config,
            "-vv",
            "--json",
            "--report",
            report.to_str().unwrap(),
        ],
        vec!["sync", "-c", config, "-vv", "--dry-run"],
        vec!["sync", "-c", config, "--dry-run", "--json"],
        vec!["validate", "-c", config, "-vv"],
    ];
    let mut outputs = Vec::new();
    for args in &runs {
        let out = ferry(args).await;
        outputs.push((
            args.join(" "),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        ));
    }
    // The runs did real work: the copy within the source landed and tokens were minted.
    assert_eq!(src.tags("src/copy"), ["v1", "v2"], "{:#?}", outputs[0]);
    let tokens = bearer_tokens(&src);
    assert!(!tokens.is_empty());
    assert!(
        dst.requests().iter().any(|r| r
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v.contains(STATIC_TOKEN))),
        "the static token was offered to the target"
    );
    let basic = ferry_testkit_basic("alice", PASSWORD);
    let mut secrets = vec![PASSWORD.to_string(), STATIC_TOKEN.to_string(), basic];
    secrets.extend(tokens);
    for (args, output) in &outputs {
        assert_absent(args, output, &secrets);
    }
    let written = std::fs::read_to_string(&report).unwrap();
    assert!(written.contains("\"images\""), "{written}");
    assert_absent("the --report file", &written, &secrets);

    // Debug output of the loaded config redacts the secrets too.
    let loaded = ferry_config::load(Path::new(config)).unwrap();
    assert_absent("Debug of the config", &format!("{loaded:?}"), &secrets);
}

/// The `Authorization` value for Basic credentials, as it would appear if leaked.
fn ferry_testkit_basic(user: &str, password: &str) -> String {
    // Standard base64 of "user:password", written out here so the test needs no crate for it.
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_redirect_to_another_host_carries_no_authorization() {
    let src = token_registry().redirect_blobs(true).start().await.unwrap();
    let dst = TestRegistry::builder().start().await.unwrap();
    src.seed_image("src/app", "v1", &[&vec![3u8; 200_000], b"small"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mirror.yaml");
    let text = format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/src/app\"\n    targets: [\"{}/dst/app\"]\n    tags: {{ include: [\"*\"] }}\n",
        entry(
            &src,
            &format!("{{ type: basic, username: alice, password: \"{PASSWORD}\" }}")
        ),
        entry(&dst, "{ type: anonymous }"),
        src.host(),
        dst.host(),
    );
    std::fs::write(&config, text).unwrap();
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(dst.tags("dst/app"), ["v1"]);
    let s = src.stats();
    assert!(
        s.op(OpKind::RedirectBlobGet) >= 3,
        "blobs came via the redirect: {s:?}"
    );
    assert_eq!(
        src.redirect_authorizations(),
        Vec::<String>::new(),
        "Authorization sent to the redirect host"
    );
    // The registry itself did get credentials (the floor: auth was in play).
    assert!(
        src.requests()
            .iter()
            .any(|r| r.op == OpKind::BlobGet && r.authorization)
    );
}

/// A one-route HTTP/1.1 stub: answers every request with `reply(path)` and records
/// `(path, authorization header)` of each.
struct Stub {
    url: String,
    seen: Seen,
}

/// `(path, Authorization)` of every request a stub received.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

async fn stub(reply: impl Fn(&str, &str) -> String + Send + Sync + 'static) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let reply = Arc::new(reply);
    let base = url.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let record = record.clone();
            let reply = reply.clone();
            let base = base.clone();
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
                let path = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_string();
                let authorization = head.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("authorization")
                        .then(|| v.trim().to_string())
                });
                record.lock().unwrap().push((path.clone(), authorization));
                let response = reply(&base, &path);
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Stub { url, seen }
}

fn http_json(status: &str, extra_headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n{body}",
        body.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_list_link_to_another_host_is_refused_and_gets_no_credentials() {
    let elsewhere =
        stub(|_, _| http_json("200 OK", "", r#"{"name":"app","tags":["stolen"]}"#)).await;
    let target = elsewhere.url.clone();
    let registry = stub(move |_, path| {
        if path == "/v2/" {
            http_json("200 OK", "", "{}")
        } else {
            http_json(
                "200 OK",
                &format!("Link: <{target}/v2/app/tags/list?last=a>; rel=\"next\"\r\n"),
                r#"{"name":"app","tags":["a"]}"#,
            )
        }
    })
    .await;
    let mut options = RegistryOptions::insecure_at(&registry.url);
    options.credentials = Credentials::Basic {
        username: "alice".into(),
        password: Secret::new(PASSWORD),
    };
    let client = RegistryClient::new(options).unwrap();
    client.ensure_ready().await.unwrap();
    let error = client.list_tags("app").await.unwrap_err();
    assert!(matches!(error.kind, ErrorKind::Refused(_)), "{error:?}");
    assert!(!error.to_string().contains(PASSWORD));
    assert!(
        elsewhere.seen.lock().unwrap().is_empty(),
        "nothing sent to the other host"
    );
    assert!(
        registry
            .seen
            .lock()
            .unwrap()
            .iter()
            .any(|(p, _)| p.starts_with("/v2/app/tags/list")),
        "the first page was asked for"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_not_configured_insecure_is_never_spoken_to_over_http() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let mut options = RegistryOptions::insecure_at(&reg.url());
    options.insecure = false;
    let error = RegistryClient::new(options).unwrap_err();
    assert!(matches!(error.kind, ErrorKind::Refused(_)), "{error:?}");
    assert!(error.to_string().contains("insecure"), "{error}");
    assert_eq!(reg.stats().requests, 0);

    // Through the CLI: the same registry without `insecure: true` is refused, nothing is sent.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mirror.yaml");
    reg.seed_image("src/app", "v1", &[b"one"]);
    std::fs::write(
        &config,
        format!(
            "version: 1\nregistries:\n  - host: \"{h}\"\n    url: \"{u}\"\nmappings:\n  - source: \"{h}/src/app\"\n    targets: [\"{h}/dst/app\"]\n    tags: {{ include: [\"*\"] }}\n",
            h = reg.host(),
            u = reg.url()
        ),
    )
    .unwrap();
    let out = ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("insecure"), "{stderr}");
    assert_eq!(reg.stats().requests, 0, "{stderr}");
}

#[test]
fn a_ca_bundle_that_does_not_exist_is_a_clear_error() {
    let mut options = RegistryOptions::new("registry.example:5000");
    options.ca_bundle = Some("/nonexistent/ferry-ca.pem".into());
    let error = RegistryClient::new(options).unwrap_err();
    assert!(matches!(error.kind, ErrorKind::Local(_)), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("/nonexistent/ferry-ca.pem") && text.contains("CA bundle"),
        "{text}"
    );
}

/// Writes an OCI layout at `dir` with one single-layer image per ref name (each its own layer).
fn write_layout(dir: &Path, ref_names: &[&str]) {
    let mut images = ferry_testkit::fixtures::Images::new();
    for (i, name) in ref_names.iter().enumerate() {
        let manifest = images.platform_image("amd64", &[format!("layer {i}").as_bytes()]);
        images.tag(&manifest, Some(name));
    }
    images.write_layout(dir);
}

/// The ref names of a layout's index.
fn layout_ref_names(dir: &Path) -> Vec<String> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    let mut names: Vec<String> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["annotations"]["org.opencontainers.image.ref.name"].as_str())
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_text_with_terminal_controls_is_printed_escaped_and_good_content_still_syncs() {
    // A registry whose every error text carries a title change, a bell, a screen clear and a
    // carriage return; a layout with a tag name carrying a colour change beside a good tag.
    const HOSTILE_TEXT: &str = r#"denied \u001b]0;pwned\u0007\u001b[2J\rOVERWRITTEN"#;
    let registry = stub(|_, path| {
        if path == "/v2/" {
            http_json("200 OK", "", "{}")
        } else {
            // A 500: retried once, so the text reaches the retry log line as well.
            http_json(
                "500 Internal Server Error",
                "",
                &format!(
                    r#"{{"errors":[{{"code":"DENIED\u001b[5m","message":"{HOSTILE_TEXT}"}}]}}"#
                ),
            )
        }
    })
    .await;
    let host = registry.url.trim_start_matches("http://").to_string();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    write_layout(&source, &["good", "ev\u{1b}[31mil"]);
    let (from_registry, from_layout) = (dir.path().join("out-r"), dir.path().join("out-l"));
    let config = dir.path().join("mirror.yaml");
    std::fs::write(
        &config,
        format!(
            "version: 1\nregistries:\n  - host: \"{host}\"\n    url: \"{}\"\n    insecure: true\n    retry: {{ attempts: 2, base: 10ms, cap: 20ms }}\nmappings:\n  - source: \"{host}/app\"\n    targets: [\"oci:{}\"]\n    tags: {{ include: [\"*\"] }}\n  - source: \"oci:{}\"\n    targets: [\"oci:{}\"]\n    tags: {{ include: [\"*\"] }}\n",
            registry.url,
            from_registry.display(),
            source.display(),
            from_layout.display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let layout_ref = format!("oci:{}", source.display());
    let mut outputs = Vec::new();
    for args in [
        vec!["sync", "-c", config, "-vv", "--progress", "plain"],
        vec!["sync", "-c", config, "--dry-run", "-vv"],
        vec!["sync", "-c", config, "--json"],
        vec!["tags", &layout_ref],
    ] {
        let out = ferry(&args).await;
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            outputs.push((
                format!("{} ({stream})", args.join(" ")),
                String::from_utf8_lossy(bytes).into_owned(),
            ));
        }
    }
    for (what, text) in &outputs {
        for control in ['\u{1b}', '\u{7}', '\r'] {
            assert!(
                !text.contains(control),
                "{what} carries {control:?} unescaped:\n{text}"
            );
        }
    }
    let all: String = outputs.iter().map(|(_, t)| t.as_str()).collect();
    // The registry's text and the layout's name were shown, escaped, not dropped.
    assert!(
        all.contains(r"\x1b]0;pwned\x07\x1b[2J\rOVERWRITTEN"),
        "the error text is shown escaped:\n{all}"
    );
    assert!(
        all.contains(r"ev\x1b[31mil") || all.contains(r"ev\u{1b}[31mil"),
        "the name is shown escaped:\n{all}"
    );
    // At -vv the retry's log line carries the registry's error code: escaped there too.
    let logged = &outputs[1].1;
    assert!(
        logged.contains("retrying") && logged.contains(r"DENIED\x1b[5m"),
        "{logged}"
    );
    // The good tag beside it was mirrored.
    assert!(
        layout_ref_names(&from_layout).contains(&"good".to_string()),
        "{all}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_used_through_a_yaml_alias_is_printed_nowhere_at_any_verbosity() {
    let src = token_registry().start().await.unwrap();
    src.seed_image("src/app", "v1", &[b"aliased layer"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // The password is written once, under an anchor on the username of an entry for another
    // host, and used through aliases.
    let text = format!(
        "version: 1\nregistries:\n  - host: other.example\n    auth: {{ type: basic, username: &pw \"{PASSWORD}\", password: *pw }}\n  - host: \"{h}\"\n    url: \"{u}\"\n    insecure: true\n    retry: {{ attempts: 2, base: 10ms, cap: 50ms }}\n    auth: {{ type: basic, username: alice, password: *pw }}\nmappings:\n  - source: \"{h}/src/app\"\n    targets: [\"oci:{o}\"]\n    tags: {{ include: [\"*\"] }}\n",
        h = src.host(),
        u = src.url(),
        o = out.display()
    );
    let config = dir.path().join("mirror.yaml");
    std::fs::write(&config, &text).unwrap();
    // The same with a mistake: the password anchored on `concurrency`, whose error quotes it.
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        text.replace(
            "version: 1\n",
            &format!("version: 1\nconcurrency: &pw2 \"{PASSWORD}\"\n"),
        )
        .replace("password: *pw }}\nmappings", "password: *pw2 }}\nmappings"),
    )
    .unwrap();
    let (config, broken) = (config.to_str().unwrap(), broken.to_str().unwrap());
    let mut outputs = Vec::new();
    for args in [
        vec!["sync", "-c", config, "-vv", "--progress", "plain"],
        vec!["sync", "-c", config, "-v", "--json"],
        vec!["sync", "-c", config, "--dry-run", "-vv"],
        vec!["sync", "-c", config, "--dry-run", "--json"],
        vec!["validate", "-c", config, "-vv"],
        vec!["validate", "-c", broken, "-vv"],
        vec!["sync", "-c", broken, "-q"],
    ] {
        let run = ferry(&args).await;
        outputs.push((
            args.join(" "),
            String::from_utf8_lossy(&run.stdout).into_owned()
                + &String::from_utf8_lossy(&run.stderr),
        ));
    }
    // Real work was done with the aliased password, and the broken config was refused.
    assert_eq!(layout_ref_names(&out), ["v1"], "{outputs:#?}");
    assert!(outputs[5].1.contains("concurrency"), "{}", outputs[5].1);
    let mut secrets = vec![PASSWORD.to_string(), ferry_testkit_basic("alice", PASSWORD)];
    secrets.extend(bearer_tokens(&src));
    for (args, output) in &outputs {
        assert_absent(args, output, &secrets);
    }
}
