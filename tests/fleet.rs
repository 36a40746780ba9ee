//! The binary beyond one run on one machine: shards split a config disjointly (also from
//! JOB_COMPLETION_INDEX), the run lock turns a second run away with exit 5, `--prune` deletes
//! (or shows) stale tags, and `ferry watch` serves /healthz and /readyz and stops on SIGTERM;
//! shards, prune and watch also run against the real distribution registry.

mod common;

use common::{ferry, ferry_env, text, write_config};

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::registry::TestRegistry;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

/// The registry name the shard tests map through (its `url:` is the test's registry), so that
/// which shard takes which mapping does not depend on a random port.
const SHARDED_HOST: &str = "fleet.registry.test";

fn registry_entry(host: &str, url: &str) -> String {
    format!(
        "  - host: \"{host}\"\n    url: \"{url}\"\n    insecure: true\n    retry: {{ attempts: 2, base: 10ms, cap: 50ms }}\n"
    )
}

/// `src/appN` → `dst/appN` on the registry at `host`, for N in 0..count.
fn app_mappings(host: &str, count: usize) -> String {
    (0..count)
        .map(|i| {
            format!("  - source: \"{host}/src/app{i}\"\n    targets: [\"{host}/dst/app{i}\"]\n")
        })
        .collect()
}

fn mirrored(reg: &TestRegistry) -> BTreeSet<String> {
    reg.repositories()
        .into_iter()
        .filter(|r| r.starts_with("dst/") && !reg.tags(r).is_empty())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_split_the_mappings_disjointly_and_together_cover_them() {
    let reg = TestRegistry::builder().start().await.unwrap();
    for i in 0..8 {
        reg.seed_image(
            &format!("src/app{i}"),
            "v1",
            &[format!("app{i}").as_bytes()],
        );
    }
    let dir = tempfile::tempdir().unwrap();
    // A fixed registry name: a mapping's shard is a hash of its text, so with the test's random
    // port in it, 8 mappings all fell into one shard in 1 run of 128 (seen in the gate).
    let registries = registry_entry(SHARDED_HOST, &reg.url());
    let config = write_config(dir.path(), &registries, &app_mappings(SHARDED_HOST, 8));
    let config = config.to_str().unwrap();

    let first = ferry(&["sync", "-c", config, "--shard", "0/2"]).await;
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let after_first = mirrored(&reg);
    assert!(
        !after_first.is_empty() && after_first.len() < 8,
        "shard 0/2 took {after_first:?}"
    );
    assert!(
        text(&first.stderr).contains(&format!("shard 0/2: {} of 8 mappings", after_first.len())),
        "{}",
        text(&first.stderr)
    );

    // The second half, as pod 1 of an Indexed Job: nothing the first shard copied is written.
    reg.reset_stats();
    let second = ferry_env(
        &["sync", "-c", config, "--shards", "2"],
        &[("JOB_COMPLETION_INDEX", "1")],
    )
    .await;
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    assert_eq!(
        mirrored(&reg).len(),
        8,
        "together the shards cover every mapping"
    );
    let touched: BTreeSet<String> = reg
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT" && r.path.contains("/manifests/"))
        .map(|r| {
            r.path
                .trim_start_matches("/v2/")
                .split("/manifests/")
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(touched.len(), 8 - after_first.len(), "{touched:?}");
    assert!(
        touched.is_disjoint(&after_first),
        "{touched:?} vs {after_first:?}"
    );

    // The same split every time.
    let again = ferry(&[
        "sync",
        "-c",
        config,
        "--shard",
        "0/2",
        "--dry-run",
        "--json",
    ])
    .await;
    let plan: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let sources: BTreeSet<String> = plan["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["source"]
                .as_str()
                .unwrap()
                .replace(&format!("{SHARDED_HOST}/src/"), "dst/")
        })
        .collect();
    assert_eq!(sources, after_first);

    let unset = ferry(&["sync", "-c", config, "--shards", "2"]).await;
    assert_eq!(unset.status.code(), Some(2));
    assert!(
        text(&unset.stderr).contains("JOB_COMPLETION_INDEX"),
        "{}",
        text(&unset.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_a_locked_config_exits_5_and_sends_nothing() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app0", "v1", &[b"one"]);
    let dir = tempfile::tempdir().unwrap();
    let registries = registry_entry(&reg.host(), &reg.url());
    let config = write_config(dir.path(), &registries, &app_mappings(&reg.host(), 1));
    let config = config.to_str().unwrap();

    let held = std::fs::File::create(format!("{config}.lock")).unwrap();
    held.try_lock().unwrap();
    let out = ferry(&["sync", "-c", config]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(
        err.contains("holds the lock") && err.contains("mirror.yaml.lock"),
        "{err}"
    );
    assert_eq!(reg.stats().requests, 0, "nothing was sent");

    // A dry run writes nothing and takes no lock.
    let out = ferry(&["sync", "-c", config, "--dry-run"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(reg.tags("dst/app0").is_empty());

    // Another lock file is another run.
    let other = dir.path().join("other.lock");
    let out = ferry(&["sync", "-c", config, "--lock", other.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(reg.tags("dst/app0"), vec!["v1".to_string()]);

    drop(held);
    let out = ferry(&["sync", "-c", config]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(reg.tags("dst/app0"), vec!["v1".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_shows_then_deletes_only_stale_tags_the_filter_selects() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"one"]);
    reg.seed_image("dst/app", "v0", &[b"zero"]);
    reg.seed_image("dst/app", "keep", &[b"mine"]);
    let dir = tempfile::tempdir().unwrap();
    let registries = registry_entry(&reg.host(), &reg.url());
    let mapping = format!(
        "  - source: \"{h}/src/app\"\n    targets: [\"{h}/dst/app\"]\n    tags: {{ include: [\"v*\"] }}\n",
        h = reg.host()
    );
    let config = write_config(dir.path(), &registries, &mapping);
    let config = config.to_str().unwrap();

    let dry = ferry(&["sync", "-c", config, "--prune", "--dry-run"]).await;
    let out = text(&dry.stdout);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry.stderr));
    assert!(
        out.contains(&format!("would prune  {}/dst/app:v0", reg.host())),
        "{out}"
    );
    assert!(!out.contains("keep"), "{out}");
    assert!(reg.requests().iter().all(|r| r.method != "DELETE"));

    let without = ferry(&["sync", "-c", config, "--json"]).await;
    let report: serde_json::Value = serde_json::from_slice(&without.stdout).unwrap();
    assert!(
        report.get("prune").is_none(),
        "no prune member without --prune"
    );

    let run = ferry(&["sync", "-c", config, "--prune", "--json"]).await;
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(report["prune"]["deleted"], 1, "{report:#}");
    assert_eq!(report["prune"]["tags"][0]["tag"], "v0");
    assert_eq!(
        reg.tags("dst/app"),
        vec!["keep".to_string(), "v1".to_string()]
    );
}

/// A real distribution 2.8 target cannot delete tags: the run says so and exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_against_a_real_registry_reports_unsupported_and_exits_1() {
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let src = TestRegistry::builder().start().await.unwrap();
    src.seed_image("src/app", "v1", &[b"one"]);
    src.seed_image("src/old", "v0", &[b"zero"]);
    let dir = tempfile::tempdir().unwrap();
    let registries =
        registry_entry(&src.host(), &src.url()) + &registry_entry(&real.host(), &real.url());
    let mapping = format!(
        "  - source: \"{}/src/app\"\n    targets: [\"{}/dst/app\"]\n    tags: {{ include: [\"v*\"] }}\n    prune: true\n",
        src.host(),
        real.host()
    );
    let config = write_config(dir.path(), &registries, &mapping);
    let config = config.to_str().unwrap();
    // The target holds v0, which the source's src/app never had.
    let copy = ferry(&[
        "copy",
        &format!("{}/src/old:v0", src.host()),
        &format!("{}/dst/app", real.host()),
        "-c",
        config,
    ])
    .await;
    assert_eq!(copy.status.code(), Some(0), "{}", text(&copy.stderr));

    let out = ferry(&["sync", "-c", config]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "PRUNE UNSUPPORTED  {} does not delete tags",
            real.host()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("not pruned  {}/dst/app:v0", real.host())),
        "{err}"
    );
    let tags = ferry(&["tags", &format!("{}/dst/app", real.host()), "-c", config]).await;
    assert!(
        text(&tags.stdout).contains("v0"),
        "v0 is still there: {}",
        text(&tags.stdout)
    );
}

async fn http_get(addr: &str, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: ferry\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_syncs_serves_health_holds_the_lock_and_stops_on_sigterm() {
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = ferry_distribution::RegistryClient::new(
        ferry_distribution::RegistryOptions::insecure_at(&real.url()),
    )
    .unwrap();
    push_app(&client, "src/app0", b"one").await;
    let dir = tempfile::tempdir().unwrap();
    let registries = registry_entry(&real.host(), &real.url());
    let config = write_config(dir.path(), &registries, &app_mappings(&real.host(), 1));
    let config = config.to_str().unwrap();

    let mut child = common::command(&[])
        .args([
            "watch",
            "-c",
            config,
            "--interval",
            "1h",
            "--listen",
            "127.0.0.1:0",
        ])
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut addr = None;
    // The listener first, then the first run (which starts at once).
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line.clone());
        if let Some(rest) = line.strip_prefix("watch: listening on ") {
            addr = rest.split_whitespace().next().map(str::to_owned);
        }
        if line.starts_with("watch: run finished") {
            break;
        }
    }
    let addr = addr.unwrap_or_else(|| panic!("no listening line: {seen:#?}"));
    assert!(
        seen.iter()
            .any(|l| l == "watch: run finished with exit code 0"),
        "{seen:#?}"
    );
    let held = client.head_manifest("dst/app0", "v1").await.unwrap();
    assert!(held.is_some(), "the first run did not copy dst/app0:v1");

    let health = http_get(&addr, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200 OK"), "{health}");
    let ready = http_get(&addr, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200 OK"), "{ready}");
    assert!(ready.contains("exit code 0"), "{ready}");

    // A cron run of the same config is turned away while watch lives.
    let out = ferry(&["sync", "-c", config]).await;
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));

    let kill = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(kill.success());
    let stopped = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push(line);
        }
        child.wait().await.unwrap()
    };
    let status = tokio::time::timeout(Duration::from_secs(60), stopped)
        .await
        .expect("watch stopped after SIGTERM");
    assert_eq!(status.code(), Some(0), "{seen:#?}");
    assert!(seen.iter().any(|l| l.contains("stopping")), "{seen:#?}");
    // Nothing was written after the first run: the lock turned the cron run away.
    let log = real.access_log().await.unwrap();
    assert_eq!(log.count("PUT", "/v2/dst/app0/manifests/"), 1, "{log:?}");
    // Only one run: the next was an hour away.
    assert_eq!(
        seen.iter()
            .filter(|l| l.starts_with("watch: run finished"))
            .count(),
        1
    );
}

/// `ferry watch` serves /metrics: scraped after the first run and read with a Prometheus text
/// parser, the per-registry counters equal what the real registry's access log shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_metrics_match_the_registry_access_log() {
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = ferry_distribution::RegistryClient::new(
        ferry_distribution::RegistryOptions::insecure_at(&real.url()),
    )
    .unwrap();
    push_app(&client, "src/app0", b"one").await;
    push_app(&client, "src/app1", b"two").await;
    let before = real.access_log().await.unwrap().len();
    let dir = tempfile::tempdir().unwrap();
    let registries = registry_entry(&real.host(), &real.url());
    let config = write_config(dir.path(), &registries, &app_mappings(&real.host(), 2));
    let config = config.to_str().unwrap();

    let (mut child, body) = watch_first_run(config).await;
    let scrape = parse_metrics(&body);
    let value = |name: &str, label: (&str, &str)| metric(&scrape, &body, name, label);
    let host = real.host();
    let registry = ("registry", host.as_str());

    let log = real.access_log().await.unwrap();
    let sent = (log.len() - before) as f64;
    assert!(sent > 0.0);
    assert_eq!(
        value("ferry_registry_requests_total", registry),
        sent,
        "{body}"
    );
    assert_eq!(value("ferry_registry_retries_total", registry), 0.0);
    assert_eq!(value("ferry_registry_throttled_total", registry), 0.0);
    assert_eq!(value("ferry_registry_breaker_state", registry), 0.0);
    // Source and target are one registry: every blob is mounted from the source repository
    // (issue 42), so no blob is read, as the log shows, and the metric says so.
    assert_eq!(
        log.count("GET", "/v2/src/app0/blobs") + log.count("GET", "/v2/src/app1/blobs"),
        0
    );
    assert_eq!(value("ferry_registry_read_bytes_total", registry), 0.0);
    assert!(value("ferry_registry_written_bytes_total", registry) > 0.0);
    // Two images, one manifest PUT each, as the log shows.
    assert_eq!(
        log.count("PUT", "/v2/dst/"),
        2 + log.count("PUT", "/v2/dst/app0/blobs") + log.count("PUT", "/v2/dst/app1/blobs")
    );
    assert_eq!(
        value("ferry_last_run_images", ("status", "synced")),
        2.0,
        "{body}"
    );
    assert_eq!(value("ferry_last_run_images", ("status", "failed")), 0.0);
    assert_eq!(value("ferry_runs_total", ("code", "0")), 1.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let last = scrape
        .samples
        .iter()
        .find(|s| s.metric == "ferry_last_success_timestamp_seconds")
        .map(|s| match s.value {
            prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .expect("the last success");
    assert!(last > 0.0 && last <= now + 1.0, "{last}");
    let _ = child.start_kill();
}

/// From the CLI: a whole-registry mapping's dry run lists what it expands to and copies
/// nothing; the real run copies each repository and its JSON report lists the expansion; a
/// referrer filter and require_referrers are read from the same file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_registry_mapping_from_the_cli_dry_run_then_sync() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("team/app", "v1", &[b"app"]);
    reg.seed_image("team/db", "v1", &[b"db"]);
    reg.seed_image("other/x", "v1", &[b"x"]);
    let dir = tempfile::tempdir().unwrap();
    let host = reg.host();
    let mappings = format!(
        "  - source: \"{host}/team/*\"\n    targets: [\"{host}/mirror\"]\n    referrers: {{ include: [\"application/spdx+json\"] }}\n"
    );
    let config = write_config(dir.path(), &registry_entry(&host, &reg.url()), &mappings);
    let config = config.to_str().unwrap();

    let dry = ferry(&["sync", "-c", config, "--dry-run", "--json"]).await;
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(
        plan["mappings"][0]["expanded"],
        serde_json::json!([format!("{host}/team/app"), format!("{host}/team/db")])
    );
    assert_eq!(plan["mappings"][1]["source"], format!("{host}/team/app"));
    assert!(
        reg.tags("mirror/app").is_empty(),
        "a dry run copies nothing"
    );

    let run = ferry(&["sync", "-c", config, "--json"]).await;
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(
        report["expansions"][0]["repositories"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(report["totals"]["images_synced"], 2);
    assert_eq!(reg.tags("mirror/app"), ["v1"]);
    assert_eq!(reg.tags("mirror/db"), ["v1"]);
    assert!(reg.tags("mirror/x").is_empty());

    // A required signature nobody made: both images fail, nothing more is written, exit 2.
    let required = format!(
        "{mappings}    require_referrers: [\"application/vnd.dev.sigstore.bundle.v0.3+json\"]\n"
    )
    .replace("/mirror\"", "/signed\"");
    let config = write_config(dir.path(), &registry_entry(&host, &reg.url()), &required);
    let run = ferry(&["sync", "-c", config.to_str().unwrap()]).await;
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    assert!(
        text(&run.stderr).contains("has no referrer of type"),
        "{}",
        text(&run.stderr)
    );
    assert!(reg.tags("signed/app").is_empty());
}

/// Starts `ferry watch` on `config`, waits for its first run and scrapes /metrics once.
async fn watch_first_run(config: &str) -> (tokio::process::Child, String) {
    let mut child = common::command(&[])
        .args([
            "watch",
            "-c",
            config,
            "--interval",
            "1h",
            "--listen",
            "127.0.0.1:0",
        ])
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut addr = None;
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line.clone());
        if let Some(rest) = line.strip_prefix("watch: listening on ") {
            addr = rest.split_whitespace().next().map(str::to_owned);
        }
        if line.starts_with("watch: run finished") {
            break;
        }
    }
    let addr = addr.unwrap_or_else(|| panic!("no listening line: {seen:#?}"));
    let response = http_get(&addr, "/metrics").await;
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("application/openmetrics-text"), "{head}");
    (child, body.to_owned())
}

/// /metrics read with a Prometheus text parser.
fn parse_metrics(body: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("the Prometheus text parser reads /metrics")
}

/// The value of `name{label}` in `scrape`.
fn metric(scrape: &prometheus_parse::Scrape, body: &str, name: &str, label: (&str, &str)) -> f64 {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && s.labels.get(label.0) == Some(label.1))
        .unwrap_or_else(|| panic!("no {name}{{{}={}}} in\n{body}", label.0, label.1));
    match sample.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => v,
        _ => panic!("{name} is not a number"),
    }
}

/// Throttling through the test kit: a 429 answered to one manifest GET is one throttled answer
/// and one retry on /metrics, and every request the registry counted is counted there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_metrics_count_throttles_and_retries_as_the_registry_saw_them() {
    use ferry_testkit::registry::{FaultAction, FaultRule, OpKind, RetryAfter};
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app0", "v1", &[b"one"]);
    reg.faults().push(
        FaultRule::on(
            OpKind::ManifestGet,
            FaultAction::Status {
                code: 429,
                retry_after: Some(RetryAfter::Seconds(0)),
            },
        )
        .times(1),
    );
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &registry_entry(&reg.host(), &reg.url()),
        &app_mappings(&reg.host(), 1),
    );
    let (mut child, body) = watch_first_run(config.to_str().unwrap()).await;
    let scrape = parse_metrics(&body);
    let host = reg.host();
    let registry = ("registry", host.as_str());
    let stats = reg.stats();
    let seen: u64 = stats.ops.values().sum();
    assert_eq!(
        metric(&scrape, &body, "ferry_registry_requests_total", registry),
        seen as f64,
        "{body}"
    );
    assert_eq!(
        metric(&scrape, &body, "ferry_registry_throttled_total", registry),
        1.0,
        "{body}"
    );
    assert_eq!(
        metric(&scrape, &body, "ferry_registry_retries_total", registry),
        1.0,
        "{body}"
    );
    assert_eq!(
        metric(
            &scrape,
            &body,
            "ferry_last_run_images",
            ("status", "synced")
        ),
        1.0
    );
    let _ = child.start_kill();
}

/// Pushes a one-layer image to `repo:v1` on a real registry.
async fn push_app(client: &ferry_distribution::RegistryClient, repo: &str, layer: &[u8]) {
    let config = format!(r#"{{"architecture":"amd64","os":"linux","repo":"{repo}"}}"#);
    common::push_one_layer(client, repo, "v1", &config, layer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_against_a_real_registry_write_disjoint_halves_that_cover_the_config() {
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = ferry_distribution::RegistryClient::new(
        ferry_distribution::RegistryOptions::insecure_at(&real.url()),
    )
    .unwrap();
    for i in 0..8 {
        push_app(
            &client,
            &format!("src/app{i}"),
            format!("app{i}").as_bytes(),
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &registry_entry(SHARDED_HOST, &real.url()),
        &app_mappings(SHARDED_HOST, 8),
    );
    let config = config.to_str().unwrap();
    // Which target repositories a run wrote a manifest into, from the registry's own log.
    let written = |log: &ferry_testkit::distribution::AccessLog, skip: usize| -> BTreeSet<String> {
        log.entries[skip..]
            .iter()
            .filter(|e| e.method == "PUT" && e.path.starts_with("/v2/dst/"))
            .filter_map(|e| {
                e.path
                    .split_once("/manifests/")
                    .map(|(repo, _)| repo.to_owned())
            })
            .collect()
    };

    let before = real.access_log().await.unwrap().len();
    let first = ferry(&["sync", "-c", config, "--shard", "0/2"]).await;
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let log = real.access_log().await.unwrap();
    let first_half = written(&log, before);
    assert!(
        !first_half.is_empty() && first_half.len() < 8,
        "shard 0/2 wrote {first_half:?}"
    );

    let before = log.len();
    let second = ferry_env(
        &["sync", "-c", config, "--shards", "2"],
        &[("JOB_COMPLETION_INDEX", "1")],
    )
    .await;
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    let second_half = written(&real.access_log().await.unwrap(), before);
    assert!(
        first_half.is_disjoint(&second_half),
        "{first_half:?} vs {second_half:?}"
    );
    assert_eq!(first_half.len() + second_half.len(), 8);
    // Every mapping landed: the real registry serves each target tag.
    for i in 0..8 {
        let held = client
            .head_manifest(&format!("dst/app{i}"), "v1")
            .await
            .unwrap();
        assert!(held.is_some(), "dst/app{i} is missing");
    }
}

/// Issue 27: under faults the target's `ferry_registry_requests_total` was below what its proxy
/// saw. Against the real registry behind a FaultProxy answering about 10% of requests with 429,
/// 503 + Retry-After, 500 or 502 (and resetting 5% of blob bodies), every request the proxy
/// received is counted on /metrics, and the images still all land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_metrics_match_the_proxy_s_count_under_faults() {
    use ferry_testkit::registry::{FaultProxy, OpKind, RandomFaultKind, RandomFaults};
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = ferry_distribution::RegistryClient::new(
        ferry_distribution::RegistryOptions::insecure_at(&real.url()),
    )
    .unwrap();
    for i in 0..4 {
        push_app(
            &client,
            &format!("src/app{i}"),
            format!("layer {i}").as_bytes(),
        )
        .await;
    }
    let proxy = FaultProxy::start(&real.url()).await.unwrap();
    proxy.faults().set_random(RandomFaults {
        rate: 0.10,
        seed: 27,
        kinds: vec![
            RandomFaultKind::TooManyRequests {
                retry_after_secs: 1,
            },
            RandomFaultKind::Shed {
                retry_after_base_secs: 1,
                jitter_secs: 0,
            },
            RandomFaultKind::InternalErrorBeforeCommit,
            RandomFaultKind::BadGatewayBeforeCommit,
        ],
        ops: Vec::new(),
    });
    proxy.faults().add_random(RandomFaults {
        rate: 0.05,
        seed: 28,
        kinds: vec![RandomFaultKind::ResetBody { after_bytes: 4 }],
        ops: vec![OpKind::BlobGet],
    });
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    retry: {{ attempts: 8, base: 10ms, cap: 100ms }}\n",
        proxy.host(),
        proxy.url()
    );
    let config = write_config(dir.path(), &registries, &app_mappings(&proxy.host(), 4));
    let (mut child, body) = watch_first_run(config.to_str().unwrap()).await;
    let scrape = parse_metrics(&body);
    let host = proxy.host();
    let seen = proxy.stats().requests as f64;
    assert!(seen > 0.0);
    assert_eq!(
        metric(
            &scrape,
            &body,
            "ferry_registry_requests_total",
            ("registry", &host)
        ),
        seen,
        "{body}"
    );
    assert!(
        metric(
            &scrape,
            &body,
            "ferry_registry_retries_total",
            ("registry", &host)
        ) > 0.0,
        "the faults were met: {body}"
    );
    assert_eq!(
        metric(
            &scrape,
            &body,
            "ferry_last_run_images",
            ("status", "synced")
        ),
        4.0,
        "{body}"
    );
    let _ = child.kill().await;
}
