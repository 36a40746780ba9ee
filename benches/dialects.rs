//! Benchmark: push-to-target time per webhook dialect (issue 39). Each sender's own payload (its
//! tests/event_samples shape, naming the image just pushed) and its own authentication, posted to
//! the real `ferry watch` between two real distribution registries; timed from the push's end to
//! the moment the tag answers on the target with the pushed digest.
//!
//! Run (release build, 5 deliveries per dialect; `--runs N` to change it, `--json` for every
//! sample as a JSON line after the table):
//! `cargo bench --bench dialects -- --runs 5`
//! or `cargo test --bench dialects --no-run` and `target/debug/deps/dialects-<hash> --runs 5`
//! (the watch under test is then `target/debug/ferry`).
//!
//! Setup: one source registry serves five registry names (its own, docker.io, ghcr.io, cgr.dev
//! and an ECR private host with `auth: {type: anonymous}`), each mapped to its own repository of
//! one target registry, as in tests/event_senders.rs; the config enables every scheme: a bearer
//! token, a path secret, the GitHub, JFrog and Nexus HMACs, and two OIDC issuers whose JWK Set
//! (a fresh P-256 key made here, ES256 tokens) is a file. Rounds go over every dialect in turn,
//! each delivery a new tag of a new image; the target is polled with HEAD every 5 ms. A tag that
//! lands with another digest, a delivery not answered 202, or one that is not on the target
//! within 30 s fails the bench (exit 101) after the table is printed. Nexus names no registry:
//! its event reaches every mapping of `src/app` (five syncs), timed at the first target.

use std::time::{Duration, Instant};

use base64::Engine as _;
#[path = "shared/push_image.rs"]
mod push_image;

use ferry_distribution::{Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_trust::PrivateKey;
use hmac::{Hmac, Mac as _};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

use push_image::push;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const SAMPLE_HOST: &str = "registry.example:5000";
const SAMPLE_DIGEST: &str =
    "sha256:6ec128e26cd5e3c2bb1a1f1cb9b4ea3e5a6b2f0c9e3d0c1b2a3f4e5d6c7b8a91";
const TOKEN: &str = "dialects-bench-token-0123456789";
const PATH: &str = "dialects-bench-path-0123456789";
const GITHUB: &str = "dialects-github-secret-012345";
const JFROG: &str = "dialects-jfrog-secret-0123456";
const NEXUS: &str = "dialects-nexus-secret-0123456";
const GOOGLE: &str = "https://accounts.google.com";
const AUDIENCE: &str = "https://ferry.example/v1/events";
const PUSHER: &str = "pubsub-push@project.iam.gserviceaccount.com";
const CHAINGUARD: &str = "https://issuer.enforce.dev";
const CG_SUBJECT: &str = "webhook:0475f6baca584a8964a6bce6b74dbe78dd8805b6";
const ECR_HOST: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
const POLL: Duration = Duration::from_millis(5);
const WITHIN: Duration = Duration::from_secs(30);

/// Where a dialect's payload says the image is.
#[derive(Clone, Copy)]
enum Host {
    /// The source registry's own address.
    Source,
    /// A fixed name (the sender's own registry), served by the source through `registries:`.
    Named(&'static str),
    /// None: the payload names only the repository (Nexus).
    Unnamed,
}

/// A dialect: its name in the table, its sample, its authentication, where it points.
struct Dialect {
    name: &'static str,
    sample: &'static str,
    auth: &'static str,
    host: Host,
    target_repo: &'static str,
}

const fn dialect(
    name: &'static str,
    sample: &'static str,
    auth: &'static str,
    host: Host,
    target_repo: &'static str,
) -> Dialect {
    Dialect {
        name,
        sample,
        auth,
        host,
        target_repo,
    }
}

const DIALECTS: [Dialect; 15] = [
    dialect(
        "distribution",
        "distribution",
        "token",
        Host::Source,
        "dst/app",
    ),
    dialect("harbor", "harbor", "token", Host::Source, "dst/app"),
    dialect(
        "harbor cloudevent",
        "harbor_cloudevent",
        "token",
        Host::Source,
        "dst/app",
    ),
    dialect(
        "docker hub",
        "docker_hub",
        "path_secret",
        Host::Named("docker.io"),
        "hub/app",
    ),
    dialect(
        "github package",
        "github_package",
        "hmac github",
        Host::Named("ghcr.io"),
        "ghcr/app",
    ),
    dialect(
        "github registry_package",
        "github_registry_package",
        "hmac github",
        Host::Named("ghcr.io"),
        "ghcr/app",
    ),
    dialect(
        "quay repo_push",
        "quay",
        "path_secret",
        Host::Source,
        "dst/app",
    ),
    dialect("jfrog", "jfrog", "hmac jfrog", Host::Source, "dst/app"),
    dialect("nexus", "nexus", "hmac nexus", Host::Unnamed, "dst/app"),
    dialect("acr", "acr", "token", Host::Source, "dst/app"),
    dialect(
        "acr event grid",
        "event_grid",
        "path_secret",
        Host::Source,
        "dst/app",
    ),
    dialect(
        "zot (binary cloudevent)",
        "zot",
        "token",
        Host::Source,
        "dst/app",
    ),
    dialect(
        "gar pub/sub",
        "gar_pubsub",
        "oidc jwks_file",
        Host::Source,
        "dst/app",
    ),
    dialect(
        "chainguard",
        "chainguard",
        "oidc jwks_file",
        Host::Named("cgr.dev"),
        "cgr/app",
    ),
    dialect(
        "ecr eventbridge",
        "ecr",
        "token",
        Host::Named(ECR_HOST),
        "ecr/app",
    ),
];

fn sample(name: &str) -> String {
    let path = format!(
        "{}/tests/event_samples/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `text` naming `host`, `tag` and `digest` where the sample names its own (Quay's second tag,
/// `latest`, left out: only the pushed tag is timed).
fn rewrite(text: &str, host: &str, tag: &str, digest: &Digest) -> String {
    let digest = digest.to_string();
    text.replace(SAMPLE_HOST, host)
        .replace(SAMPLE_DIGEST, &digest)
        .replace(&SAMPLE_DIGEST[7..], &digest[7..])
        .replace("\"v1\"", &format!("\"{tag}\""))
        .replace(":v1\"", &format!(":{tag}\""))
        .replace("/v1/manifest.json", &format!("/{tag}/manifest.json"))
        .replace(",\"latest\"", "")
}

/// `name`'s sample naming the pushed image (GAR's references are inside base64 `data`).
fn payload(name: &str, host: &str, tag: &str, digest: &Digest) -> String {
    let text = sample(name);
    if name != "gar_pubsub" {
        return rewrite(&text, host, tag, digest);
    }
    let v: serde_json::Value = serde_json::from_str(&text).expect("gar sample is JSON");
    let data = v["message"]["data"].as_str().expect("message.data");
    let engine = base64::engine::general_purpose::STANDARD;
    let inner = String::from_utf8(engine.decode(data).expect("base64")).expect("utf-8");
    text.replace(data, &engine.encode(rewrite(&inner, host, tag, digest)))
}

fn hmac256(key: &str, body: &str) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).expect("key");
    mac.update(body.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn hmac1(key: &str, body: &str) -> String {
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(key.as_bytes()).expect("key");
    mac.update(body.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// An ES256 JWT signed by `key` for `iss`, naming `subject` as `email` and `sub`, ten minutes.
fn jwt(key: &PrivateKey, iss: &str, subject: &str) -> String {
    let exp = now() + 600;
    let claims = format!(
        r#"{{"iss":"{iss}","aud":"{AUDIENCE}","email":"{subject}","sub":"{subject}","iat":{},"exp":{exp}}}"#,
        exp - 600
    );
    let input = format!(
        "{}.{}",
        b64(br#"{"alg":"ES256","typ":"JWT","kid":"bench-key"}"#),
        b64(claims.as_bytes())
    );
    let der = key.sign(input.as_bytes());
    let raw = p256::ecdsa::Signature::from_der(&der)
        .expect("DER signature")
        .to_bytes();
    format!("{input}.{}", b64(&raw))
}

/// `key`'s public half as a JWK Set.
fn jwks(key: &PrivateKey) -> String {
    let ferry_trust::PublicKey::P256(k) = key.public_key() else {
        unreachable!("a P-256 key")
    };
    let point = k.to_encoded_point(false);
    format!(
        r#"{{"keys":[{{"kty":"EC","crv":"P-256","use":"sig","kid":"bench-key","x":"{}","y":"{}"}}]}}"#,
        b64(point.x().expect("x")),
        b64(point.y().expect("y"))
    )
}

/// The request line's path and the headers (each ending `\r\n`) `d` sends `body` with.
fn delivery(d: &Dialect, host: &str, body: &str, key: &PrivateKey) -> (String, String) {
    let bearer = format!("Authorization: Bearer {TOKEN}\r\n");
    let events = "/v1/events".to_owned();
    let by_path = format!("/v1/events/{PATH}");
    let oidc =
        |iss: &str, subject: &str| format!("Authorization: Bearer {}\r\n", jwt(key, iss, subject));
    match d.sample {
        "docker_hub" | "quay" | "event_grid" => (by_path, String::new()),
        "github_package" | "github_registry_package" => (
            events,
            format!("X-Hub-Signature-256: sha256={}\r\n", hmac256(GITHUB, body)),
        ),
        "jfrog" => (
            events,
            format!("X-JFrog-Event-Auth: {}\r\n", hmac256(JFROG, body)),
        ),
        "nexus" => (
            events,
            format!("X-Nexus-Webhook-Signature: {}\r\n", hmac1(NEXUS, body)),
        ),
        "zot" => (
            events,
            format!(
                "{bearer}ce-specversion: 1.0\r\nce-id: 1\r\nce-type: zotregistry.image.updated\r\nce-source: http://{host}\r\n"
            ),
        ),
        "gar_pubsub" => (events, oidc(GOOGLE, PUSHER)),
        "chainguard" => (
            events,
            oidc(CHAINGUARD, CG_SUBJECT)
                + "ce-specversion: 1.0\r\nce-id: 1\r\nce-type: dev.chainguard.registry.push.v1\r\nce-source: cgr.dev\r\n",
        ),
        _ => (events, bearer),
    }
}

/// `POST path` with `headers` and `body` to `addr`: the status code and the whole answer.
async fn post(addr: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("listener");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: ferry\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.expect("sent");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out)
}

/// Polls `repo:tag` on the target until it answers: the time since `since`, or why not (another
/// digest there, or nothing within [`WITHIN`]).
async fn on_target(
    target: &RegistryClient,
    repo: &str,
    tag: &str,
    want: &Digest,
    since: Instant,
) -> Result<Duration, String> {
    loop {
        if let Ok(Some(info)) = target.head_manifest(repo, tag).await {
            if info.digest == *want {
                return Ok(since.elapsed());
            }
            return Err(format!(
                "{repo}:{tag} on the target is {}, pushed {want}",
                info.digest
            ));
        }
        if since.elapsed() > WITHIN {
            return Err(format!("{repo}:{tag} not on the target within {WITHIN:?}"));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The config: five registry names served by `source`, each mapped to its own repository of
/// `target`, and every sender's scheme.
fn config(source: &RealRegistry, target: &RealRegistry) -> String {
    let entry = |host: &str, url: &str, extra: &str| {
        format!("  - host: \"{host}\"\n    url: \"{url}\"\n    insecure: true\n{extra}")
    };
    let src = source.url();
    let mut text = "version: 1\nregistries:\n".to_owned();
    for host in [source.host().as_str(), "docker.io", "ghcr.io", "cgr.dev"] {
        text += &entry(host, &src, "");
    }
    text += &entry(ECR_HOST, &src, "    auth: { type: anonymous }\n");
    text += &entry(&target.host(), &target.url(), "");
    text += "mappings:\n";
    let to = target.host();
    for (from, repo) in [
        (source.host(), "dst"),
        ("docker.io".into(), "hub"),
        ("ghcr.io".into(), "ghcr"),
        ("cgr.dev".into(), "cgr"),
        (ECR_HOST.into(), "ecr"),
    ] {
        text += &format!("  - source: \"{from}/src/app\"\n    targets: [\"{to}/{repo}/app\"]\n");
    }
    text + &format!(
        r#"events:
  token: "{TOKEN}"
  path_secret: "{PATH}"
  hmac:
    github: "{GITHUB}"
    jfrog: "{JFROG}"
    nexus: "{NEXUS}"
  oidc:
    - issuer: "{GOOGLE}"
      audience: "{AUDIENCE}"
      subject: "{PUSHER}"
      jwks_file: jwks.json
    - issuer: "{CHAINGUARD}"
      audience: "{AUDIENCE}"
      subject: "{CG_SUBJECT}"
      jwks_file: jwks.json
"#
    )
}

/// Waits for a line `want` accepts, keeping every line in `seen`; the line, if it came.
async fn line(
    lines: &mut mpsc::UnboundedReceiver<String>,
    seen: &mut Vec<String>,
    want: impl Fn(&str) -> bool,
) -> Option<String> {
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(l) = lines.recv().await {
            seen.push(l.clone());
            if want(&l) {
                return Some(l);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
}

fn median_max(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[v.len() - 1])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut runs = 5usize;
    let mut json = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" | "-n" => {
                runs = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .expect("--runs takes a positive number");
            }
            "--json" => json = true,
            _ => {} // `cargo bench` passes `--bench`
        }
    }
    let source = RealRegistry::start()
        .await
        .expect("the source registry starts");
    let target = RealRegistry::start()
        .await
        .expect("the target registry starts");
    let to_source =
        RegistryClient::new(RegistryOptions::insecure_at(&source.url())).expect("client");
    let to_target =
        RegistryClient::new(RegistryOptions::insecure_at(&target.url())).expect("client");
    push(&to_source, "src/app", "base").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = PrivateKey::generate_p256();
    std::fs::write(dir.path().join("jwks.json"), jwks(&key)).expect("jwks written");
    let config_path = dir.path().join("mirror.yaml");
    std::fs::write(&config_path, config(&source, &target)).expect("config written");
    let mut child = tokio::process::Command::new(FERRY)
        .args(["watch", "-c", config_path.to_str().expect("utf-8")])
        .args([
            "--interval",
            "1h",
            "--listen",
            "127.0.0.1:0",
            "--progress",
            "none",
        ])
        .env_remove("RUST_LOG")
        .env_remove("FERRY_CONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("ferry watch starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, mut lines) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut r = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(l)) = r.next_line().await {
            let _ = tx.send(l);
        }
    });
    let mut seen = Vec::new();
    let addr = line(&mut lines, &mut seen, |l| {
        l.starts_with("watch: listening on ")
    })
    .await
    .unwrap_or_else(|| panic!("ferry watch never listened: {seen:#?}"))
        ["watch: listening on ".len()..]
        .split_whitespace()
        .next()
        .expect("address")
        .to_owned();
    line(&mut lines, &mut seen, |l| {
        l.starts_with("watch: run finished with exit code 0")
    })
    .await
    .unwrap_or_else(|| panic!("the first run did not finish clean: {seen:#?}"));

    // (dialect index, round, tag, seconds or why not)
    let mut samples: Vec<(usize, usize, String, Result<f64, String>)> = Vec::new();
    for round in 0..runs {
        for (i, d) in DIALECTS.iter().enumerate() {
            let tag = format!("d{i:02}r{round:02}");
            let digest = push(&to_source, "src/app", &tag).await;
            let pushed = Instant::now();
            let host = match d.host {
                Host::Source => source.host(),
                Host::Named(h) => h.to_owned(),
                Host::Unnamed => String::new(),
            };
            let body = payload(d.sample, &host, &tag, &digest);
            let (path, headers) = delivery(d, &host, &body, &key);
            let (code, answer) = post(&addr, &path, &headers, &body).await;
            let outcome = if code == 202 {
                on_target(&to_target, d.target_repo, &tag, &digest, pushed)
                    .await
                    .map(|t| t.as_secs_f64())
            } else {
                Err(format!("answered {code}: {answer}"))
            };
            while let Ok(l) = lines.try_recv() {
                seen.push(l);
            }
            samples.push((i, round, tag, outcome));
        }
    }
    let _ = child.kill().await;

    println!(
        "push -> tag on the target with the pushed digest, per dialect ({runs} deliveries each, ferry {FERRY}):"
    );
    println!(
        "{:<26} {:<15} {:>8} {:>8} {:>4}",
        "dialect", "auth", "median", "max", "n"
    );
    let mut all = Vec::new();
    for (i, d) in DIALECTS.iter().enumerate() {
        let secs: Vec<f64> = samples
            .iter()
            .filter(|s| s.0 == i)
            .filter_map(|s| s.3.as_ref().ok().copied())
            .collect();
        all.extend(&secs);
        let n = secs.len();
        let (median, max) = if n == 0 {
            ("-".to_owned(), "-".to_owned())
        } else {
            let (median, max) = median_max(secs);
            (format!("{median:.3}s"), format!("{max:.3}s"))
        };
        println!(
            "{:<26} {:<15} {median:>8} {max:>8} {n:>2}/{runs}",
            d.name, d.auth
        );
    }
    if !all.is_empty() {
        let (median, max) = median_max(all.clone());
        println!(
            "{:<26} {:<15} {:>7.3}s {:>7.3}s {:>2}/{}",
            "all",
            "",
            median,
            max,
            all.len(),
            runs * DIALECTS.len()
        );
    }
    if json {
        for (i, round, tag, outcome) in &samples {
            println!(
                "{}",
                serde_json::json!({
                    "dialect": DIALECTS[*i].name,
                    "auth": DIALECTS[*i].auth,
                    "round": round,
                    "tag": tag,
                    "seconds": outcome.as_ref().ok(),
                    "error": outcome.as_ref().err(),
                })
            );
        }
    }
    let failed: Vec<String> = samples
        .iter()
        .filter_map(|(i, _, tag, o)| {
            o.as_ref()
                .err()
                .map(|e| format!("{} ({tag}): {e}", DIALECTS[*i].name))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} deliveries did not bring their image: {failed:#?}\nferry watch's stderr: {seen:#?}",
        failed.len()
    );
}
