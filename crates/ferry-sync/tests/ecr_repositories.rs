//! ECR's repository API through a loopback awsJson1.1 stub (no call reaches AWS; the keys are
//! given to the SDK directly): `create_repositories` creates a missing target repository once,
//! before anything is pushed to it, with its settings passed through; a whole-registry mapping
//! on an ECR host lists repositories with `DescribeRepositories` (paged by `nextToken`).
//!
//! The target is the test kit with ECR's behaviour: a push to a repository nobody created is
//! answered 404 NAME_UNKNOWN (`writes_need_existing_repository`).

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{QUICK_RETRY, RunOptions, parse, run_sync_with};
use ferry_config::{self as config, Config};
use ferry_distribution::Secret;
use ferry_sync::dryrun::DryRun;
use ferry_sync::ecr::EcrTokens;
use ferry_sync::registries::Registries;
use ferry_sync::report::SyncReport;
use ferry_testkit::registry::{OpKind, Personality, TestRegistry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const ECR_HOST: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
const TARGET_PREFIX: &str = "AmazonEC2ContainerRegistry_V20150921.";

/// One ECR API call the stub answered: the action and the JSON body.
#[derive(Debug, Clone)]
struct Call {
    action: String,
    body: serde_json::Value,
    /// Writes the target registry had seen when the call arrived.
    target_writes_before: u64,
}

/// A loopback ECR API: tokens, CreateRepository (which creates the repository in the test kit
/// registry standing in for ECR) and DescribeRepositories over `repositories`, two per page.
struct Stub {
    url: String,
    calls: Arc<Mutex<Vec<Call>>>,
}

fn target_writes(reg: &TestRegistry) -> u64 {
    let s = reg.stats();
    [
        OpKind::ManifestPut,
        OpKind::UploadStart,
        OpKind::UploadMonolithic,
        OpKind::Mount,
    ]
    .iter()
    .map(|op| s.op(*op))
    .sum()
}

impl Stub {
    async fn start(ecr: Arc<TestRegistry>, repositories: Vec<String>) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let calls = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&calls);
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let Some((target, body)) = read_request(&mut socket).await else {
                    continue;
                };
                let action = target.trim_start_matches(TARGET_PREFIX).to_owned();
                let body: serde_json::Value =
                    serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                log.lock().unwrap().push(Call {
                    action: action.clone(),
                    body: body.clone(),
                    target_writes_before: target_writes(&ecr),
                });
                let (status, answer) = match action.as_str() {
                    "GetAuthorizationToken" => {
                        use base64::Engine as _;
                        let token = base64::engine::general_purpose::STANDARD
                            .encode("AWS:ecr-stub-password");
                        let expires = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap()
                            .as_secs()
                            + 43_200;
                        (
                            200,
                            format!(
                                r#"{{"authorizationData":[{{"authorizationToken":"{token}","expiresAt":{expires}}}]}}"#
                            ),
                        )
                    }
                    "CreateRepository" => {
                        let name = body["repositoryName"].as_str().unwrap_or_default();
                        if ecr.repositories().iter().any(|r| r == name) {
                            (400, r#"{"__type":"RepositoryAlreadyExistsException","message":"exists"}"#.to_owned())
                        } else {
                            ecr.create_repository(name);
                            (
                                200,
                                format!(
                                    r#"{{"repository":{{"repositoryName":"{name}","registryId":"123456789012"}}}}"#
                                ),
                            )
                        }
                    }
                    "DescribeRepositories" => {
                        let start: usize = body["nextToken"]
                            .as_str()
                            .and_then(|t| t.parse().ok())
                            .unwrap_or(0);
                        let page: Vec<serde_json::Value> = repositories
                            .iter()
                            .skip(start)
                            .take(2)
                            .map(|r| serde_json::json!({"repositoryName": r}))
                            .collect();
                        let mut answer = serde_json::json!({ "repositories": page });
                        if start + 2 < repositories.len() {
                            answer["nextToken"] = serde_json::json!((start + 2).to_string());
                        }
                        (200, answer.to_string())
                    }
                    _ => (
                        400,
                        r#"{"__type":"InvalidParameterException","message":"?"}"#.to_owned(),
                    ),
                };
                let reason = if status == 200 { "OK" } else { "Bad Request" };
                let response = format!(
                    "HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        Stub { url, calls }
    }

    fn calls(&self, action: &str) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.action == action)
            .cloned()
            .collect()
    }

    fn api(&self) -> EcrTokens {
        EcrTokens::new()
            .with_endpoint_url(&self.url)
            .with_static_credentials("AKIDFERRYTEST", &Secret::new("ferry-test-secret-key"))
    }
}

/// The `X-Amz-Target` header and the body of one request.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let header = |name: &str| {
                head.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                })
            };
            let length: usize = header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let n = socket.read(&mut chunk).await.ok()?;
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf.get(end + 4..end + 4 + length)?.to_vec();
            return Some((header("x-amz-target").unwrap_or_default(), body));
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The ECR host served by the test kit `ecr`, two quick attempts, then `create` (YAML lines).
fn ecr_yaml(ecr: &TestRegistry, create: &str) -> String {
    common::registry_entry(ECR_HOST, &ecr.url(), &[QUICK_RETRY]) + create
}

fn source_yaml(src: &TestRegistry) -> String {
    common::registry_entry(&src.host(), &src.url(), &[])
}

/// The dry run, or the sync, of `config`, its ECR API calls answered by `stub`.
async fn run(config: &Config, stub: &Stub, dry: bool) -> (Option<DryRun>, Option<SyncReport>) {
    let registries = Registries::new(config).with_ecr_api(stub.api());
    if dry {
        return (
            Some(common::dry_run(config, Some(registries)).await.dry),
            None,
        );
    }
    let options = RunOptions {
        registries: Some(registries),
        ..RunOptions::default()
    };
    (None, Some(run_sync_with(config, options).await.report))
}

async fn ecr_like() -> Arc<TestRegistry> {
    Arc::new(
        TestRegistry::builder()
            .personality(Personality {
                writes_need_existing_repository: true,
                ..Personality::default()
            })
            .start()
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_ecr_repository_is_created_once_before_any_push_with_its_settings() {
    let src = common::started().await;
    for tag in ["v1", "v2", "v3"] {
        src.seed_image("lib/app", tag, &[tag.as_bytes()]);
    }
    let ecr = ecr_like().await;
    let stub = Stub::start(Arc::clone(&ecr), Vec::new()).await;
    let mapping = format!(
        "mappings:\n  - source: \"{}/lib/app\"\n    targets: [\"{ECR_HOST}/mirror/app\"]\n",
        src.host()
    );

    // Without create_repositories: ECR refuses the push, every image fails.
    let plain = parse(&format!(
        "version: 1\nregistries:\n{}{}{mapping}",
        source_yaml(&src),
        ecr_yaml(&ecr, "")
    ));
    let (_, report) = run(&plain, &stub, false).await;
    let report = report.unwrap();
    assert_eq!(report.totals.images_failed, 3, "{}", report.render_text());
    assert!(
        report.render_text().contains("NAME_UNKNOWN"),
        "{}",
        report.render_text()
    );
    assert!(stub.calls("CreateRepository").is_empty());

    let create = parse(&format!(
        "version: 1\nregistries:\n{}{}{mapping}",
        source_yaml(&src),
        ecr_yaml(
            &ecr,
            "    create_repositories: { tag_immutability: true, scan_on_push: true }\n"
        )
    ));
    // The dry run says what would be created, and creates nothing.
    let (dry, _) = run(&create, &stub, true).await;
    let dry = dry.unwrap();
    assert_eq!(
        dry.repositories_to_create,
        [format!("{ECR_HOST}/mirror/app")]
    );
    assert!(dry.render_text().contains("create  repository"));
    assert!(
        stub.calls("CreateRepository").is_empty(),
        "a dry run creates nothing"
    );

    ecr.reset_stats();
    let (_, report) = run(&create, &stub, false).await;
    let report = report.unwrap();
    assert_eq!(report.totals.images_synced, 3, "{}", report.render_text());
    assert_eq!(
        report.repositories_created,
        [format!("{ECR_HOST}/mirror/app")]
    );
    let created = stub.calls("CreateRepository");
    assert_eq!(created.len(), 1, "learned once for three images");
    assert_eq!(
        created[0].target_writes_before, 0,
        "created before anything was pushed"
    );
    assert_eq!(created[0].body["repositoryName"], "mirror/app");
    assert_eq!(created[0].body["registryId"], "123456789012");
    assert_eq!(created[0].body["imageTagMutability"], "IMMUTABLE");
    assert_eq!(
        created[0].body["imageScanningConfiguration"]["scanOnPush"],
        true
    );
    assert_eq!(ecr.tags("mirror/app"), ["v1", "v2", "v3"]);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["repositories_created"][0],
        format!("{ECR_HOST}/mirror/app")
    );

    // Warm: the repository exists; nothing is created again.
    let (_, warm) = run(&create, &stub, false).await;
    assert_eq!(warm.unwrap().totals.images_up_to_date, 3);
    assert_eq!(stub.calls("CreateRepository").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_registry_mapping_on_ecr_lists_repositories_through_describe_repositories() {
    let src = ecr_like().await;
    for repo in ["team/app", "team/db", "team/tools/cli", "other/x"] {
        src.seed_image(repo, "v1", &[repo.as_bytes()]);
    }
    let dst = common::started().await;
    let names: Vec<String> = [
        "team/app",
        "team/db",
        "team/tools/cli",
        "other/x",
        "team/../etc",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let stub = Stub::start(Arc::clone(&src), names).await;
    let cfg = parse(&format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{ECR_HOST}/team/*\"\n    targets: [\"{}/m\"]\n",
        ecr_yaml(&src, ""),
        source_yaml(&dst),
        dst.host()
    ));
    let (_, report) = run(&cfg, &stub, false).await;
    let report = report.unwrap();
    assert_eq!(
        dst.repositories(),
        ["m/app", "m/db"],
        "{}",
        report.render_text()
    );
    assert_eq!(
        stub.calls("DescribeRepositories").len(),
        3,
        "five names, two a page"
    );
    assert_eq!(src.stats().op(OpKind::Catalog), 0, "ECR serves no catalog");
    assert_eq!(report.rejected_names.len(), 1);
    assert_eq!(report.rejected_names[0].rejected.name, "team/../etc");
}

#[test]
fn create_repositories_is_refused_on_a_registry_that_is_not_ecr() {
    let e = config::parse(
        "version: 1\nregistries:\n  - host: ghcr.io\n    create_repositories: true\nmappings:\n  - { source: a.io/a, targets: [ghcr.io/a] }\n",
        Path::new("c.yaml"),
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("create_repositories applies to ECR registries only"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_is_created_only_for_an_image_that_was_fetched_and_verified() {
    use ferry_testkit::registry::{HostileRule, Hostility};
    // Issue 30 item 7: a hostile source lists an image it never serves (the index resolves,
    // its child does not match its digest). No repository is made for it; the image it does
    // serve gets one.
    let src = TestRegistry::builder().start().await.unwrap();
    src.seed_image("lib/app", "v1", &[b"app"]);
    let child = src.seed_image("lib/bad", "child", &[b"bad"]);
    src.seed_index("lib/bad", "v1", &[child]);
    src.untag("lib/bad", "child");
    // The index's own GET (the prepare phase's) goes through; every later one is mangled.
    src.hostile().add(
        HostileRule::new(
            OpKind::ManifestGet,
            Some("lib/bad"),
            vec![Hostility::Body(bytes::Bytes::from_static(
                b"{\"not\":\"it\"}",
            ))],
        )
        .after(1),
    );
    let ecr = ecr_like().await;
    let stub = Stub::start(Arc::clone(&ecr), Vec::new()).await;
    let cfg = parse(&format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{h}/lib/app\"\n    targets: [\"{ECR_HOST}/mirror/app\"]\n  - source: \"{h}/lib/bad\"\n    targets: [\"{ECR_HOST}/mirror/bad\"]\n",
        source_yaml(&src),
        ecr_yaml(&ecr, "    create_repositories: true\n"),
        h = src.host()
    ));
    let (_, report) = run(&cfg, &stub, false).await;
    let report = report.unwrap();
    let text = report.render_text();
    assert_eq!(report.totals.images_synced, 1, "{text}");
    assert_eq!(report.totals.images_failed, 1, "{text}");
    let created: Vec<_> = stub
        .calls("CreateRepository")
        .iter()
        .map(|c| {
            c.body["repositoryName"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(created, ["mirror/app"], "{text}");
    assert_eq!(ecr.repositories(), ["mirror/app"]);
    assert_eq!(
        report.repositories_created,
        [format!("{ECR_HOST}/mirror/app")]
    );
}

/// `ferry watch` keeps one `Registries` for all its runs: each run sees the clients through its
/// own view, so its report names only the repositories it created and counts only the requests
/// it sent, while what the clients learned (the repository exists) carries over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_on_shared_clients_report_only_what_each_run_did() {
    let src = common::started().await;
    src.seed_image("lib/app", "v1", &[b"v1"]);
    let ecr = ecr_like().await;
    let stub = Stub::start(Arc::clone(&ecr), Vec::new()).await;
    let config = parse(&format!(
        "version: 1\nregistries:\n{}{}mappings:\n  - source: \"{}/lib/app\"\n    targets: [\"{ECR_HOST}/mirror/app\"]\n",
        source_yaml(&src),
        ecr_yaml(&ecr, "    create_repositories: {}\n"),
        src.host()
    ));
    let shared = Registries::new(&config).with_ecr_api(stub.api());
    let sync = || {
        let options = RunOptions {
            registries: Some(shared.clone()),
            ..RunOptions::default()
        };
        run_sync_with(&config, options)
    };
    let first = sync().await.report;
    assert_eq!(first.totals.images_synced, 1, "{}", first.render_text());
    assert_eq!(
        first.repositories_created,
        [format!("{ECR_HOST}/mirror/app")]
    );

    src.seed_image("lib/app", "v2", &[b"v2"]);
    ecr.reset_stats();
    let second = sync().await.report;
    assert_eq!(second.totals.images_synced, 1, "{}", second.render_text());
    assert!(
        second.repositories_created.is_empty(),
        "the first run created it: {:?}",
        second.repositories_created
    );
    assert_eq!(stub.calls("CreateRepository").len(), 1);
    let target = second
        .registries
        .iter()
        .find(|r| r.registry == ECR_HOST)
        .expect("the target's counters");
    assert_eq!(
        target.stats.http_requests,
        ecr.requests().len() as u64,
        "this run's requests alone"
    );
}
