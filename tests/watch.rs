//! `ferry watch` against hostile peers (issue 30, items 3b and 4): a flood of idle connections
//! under a low open-file limit starves neither the runs nor /healthz, and a source that never
//! answers holds no run past `--run-timeout`, so the other mappings keep being refreshed.

mod common;

use common::write_config;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ferry_testkit::registry::TestRegistry;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long anything below may take before the test gives up ("eventually", not a timing claim).
const EVENTUALLY: Duration = Duration::from_secs(90);
/// Lines kept from ferry's stderr; the rest are only counted (today's code wrote millions).
const KEPT_LINES: u64 = 5_000;

fn registry_entry(host: &str, url: &str, retry: &str) -> String {
    format!("  - host: \"{host}\"\n    url: \"{url}\"\n    insecure: true\n{retry}")
}

/// A running `ferry watch` and its stderr, line by line.
struct Watch {
    child: tokio::process::Child,
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
    total: Arc<AtomicU64>,
    accept_failures: Arc<AtomicU64>,
}

impl Watch {
    /// `ferry watch args…`, under `prlimit --nofile=N` when `open_files` is given.
    fn start(args: &[&str], open_files: Option<u64>) -> Watch {
        let wrapper: Vec<String> = match open_files {
            Some(n) => vec!["prlimit".into(), format!("--nofile={n}:{n}"), "--".into()],
            None => Vec::new(),
        };
        let mut c = common::command_under(&wrapper, &[]);
        c.arg("watch").args(args);
        Watch::start_command(c)
    }

    /// `c` (a `ferry watch` command with its arguments), started with stderr read line by line.
    fn start_command(mut c: tokio::process::Command) -> Watch {
        c.env_remove("RUST_LOG")
            .env_remove("FERRY_CONFIG")
            .env_remove("JOB_COMPLETION_INDEX")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = c.spawn().expect("ferry watch started");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        let total = Arc::new(AtomicU64::new(0));
        let accept_failures = Arc::new(AtomicU64::new(0));
        let (t, a) = (Arc::clone(&total), Arc::clone(&accept_failures));
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if line.contains("accept failed") {
                    a.fetch_add(1, Ordering::SeqCst);
                }
                if t.fetch_add(1, Ordering::SeqCst) < KEPT_LINES {
                    let _ = tx.send(line);
                }
            }
        });
        Watch {
            child,
            lines,
            seen: Vec::new(),
            total,
            accept_failures,
        }
    }

    /// Reads lines until `want` has matched `count` of them (counting from now); returns those.
    async fn until(&mut self, count: usize, want: impl Fn(&str) -> bool) -> Vec<String> {
        let mut matched = Vec::new();
        let read = async {
            while matched.len() < count {
                let Some(line) = self.lines.recv().await else {
                    break;
                };
                if want(&line) {
                    matched.push(line.clone());
                }
                self.seen.push(line);
            }
        };
        let _ = tokio::time::timeout(EVENTUALLY, read).await;
        assert_eq!(
            matched.len(),
            count,
            "ferry watch's stderr ({} lines): {:#?}",
            self.total.load(Ordering::SeqCst),
            self.seen
        );
        matched
    }

    /// The listener's address, from the first line.
    async fn address(&mut self) -> String {
        let line = self
            .until(1, |l| l.starts_with("watch: listening on "))
            .await
            .remove(0);
        line.trim_start_matches("watch: listening on ")
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned()
    }
}

/// `GET path`, answered within [`EVENTUALLY`].
async fn http_get(addr: &str, path: &str) -> String {
    let get = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: ferry\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    };
    tokio::time::timeout(EVENTUALLY, get)
        .await
        .unwrap_or_else(|_| panic!("no answer to GET {path} from {addr}"))
}

/// Issue 30 item 4, as reported: `ulimit -n 128` and 200 idle connections held open. Today's
/// listener accepted until the descriptors ran out, then logged `accept failed` millions of
/// times in a hot loop while the runs could not open their config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_under_a_low_fd_limit_starve_neither_runs_nor_health() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app0", "v1", &[b"one"]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &registry_entry(
            &reg.host(),
            &reg.url(),
            "    retry: { attempts: 2, base: 10ms, cap: 50ms }\n",
        ),
        &format!(
            "  - source: \"{0}/src/app0\"\n    targets: [\"{0}/dst/app0\"]\n",
            reg.host()
        ),
    );
    let config = config.to_str().unwrap();
    let args = ["-c", config, "--interval", "1s", "--listen", "127.0.0.1:0"];
    let mut watch = Watch::start(&args, Some(128));
    let addr = watch.address().await;
    watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;

    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    // Runs go on while the connections are held: each finds its config and its registry.
    let runs = watch
        .until(3, |l| l.starts_with("watch: run finished"))
        .await;
    assert!(
        runs.iter().all(|l| l.ends_with("exit code 0")),
        "{runs:#?}\n{:#?}",
        watch.seen
    );
    // /healthz is answered through the flood, once the idle connections before it time out.
    let health = http_get(&addr, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    let ready = http_get(&addr, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200 OK\r\n"), "{ready}");
    drop(idle);
    let starved: Vec<_> = watch
        .seen
        .iter()
        .filter(|l| l.contains("Too many open files") && !l.contains("accept failed"))
        .collect();
    assert!(starved.is_empty(), "{starved:#?}");
    let failures = watch.accept_failures.load(Ordering::SeqCst);
    assert!(failures <= 20, "{failures} accept failures logged");
    assert!(
        watch.total.load(Ordering::SeqCst) < 1_000,
        "{} lines on stderr",
        watch.total.load(Ordering::SeqCst)
    );
}

/// A healthy source `reg` with `src/app0:v1` mapped to itself, and a mapping from `hang`, a
/// source that accepts connections and never answers (default retry settings: a 10 minute
/// deadline); the config written into `dir`.
fn healthy_and_stuck(
    reg: &TestRegistry,
    hang: &ferry_testkit::registry::HangingServer,
    dir: &std::path::Path,
) -> std::path::PathBuf {
    reg.seed_image("src/app0", "v1", &[b"one"]);
    let registries = registry_entry(&reg.host(), &reg.url(), "")
        + &registry_entry(&hang.host(), &hang.url(), "");
    let mappings = format!(
        "  - source: \"{0}/src/app0\"\n    targets: [\"{0}/dst/app0\"]\n  - source: \"{1}/src/stuck\"\n    targets: [\"{0}/dst/stuck\"]\n",
        reg.host(),
        hang.host()
    );
    write_config(dir, &registries, &mappings)
}

/// Issue 30 item 3, second half: a source that accepts connections and never answers held a
/// run (and so every other mapping's refresh) for its retry deadline, 10 minutes per request.
/// With `--run-timeout`, watch stops the run at the bound, says so, and the next run starts on
/// schedule: a tag pushed to a healthy source meanwhile reaches its target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_never_answers_holds_no_run_past_the_bound() {
    let (reg, hang, dir) = (
        TestRegistry::builder().start().await.unwrap(),
        TestRegistry::hanging_server().await.unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let config = healthy_and_stuck(&reg, &hang, dir.path());
    let config = config.to_str().unwrap();
    let args = [
        "-c",
        config,
        "--interval",
        "1s",
        "--run-timeout",
        "2s",
        "--listen",
        "127.0.0.1:0",
    ];
    let mut watch = Watch::start(&args, None);
    let addr = watch.address().await;
    watch
        .until(1, |l| l.contains("the run passed its bound of 2s"))
        .await;
    assert_eq!(reg.tags("dst/app0"), ["v1"], "{:#?}", watch.seen);
    // Pushed while the first run is held: only a later run can copy it.
    reg.seed_image("src/app0", "v2", &[b"two"]);
    let first = watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;
    assert_eq!(first, ["watch: run finished with exit code 2"]);
    assert!(
        watch.seen.iter().any(|l| l.contains("cancelled")),
        "{:#?}",
        watch.seen
    );
    // The second run starts on schedule, is stopped the same way, and copied v2 before it was.
    watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;
    let mut tags = reg.tags("dst/app0");
    tags.sort();
    assert_eq!(tags, ["v1", "v2"], "{:#?}", watch.seen);
    let metrics = http_get(&addr, "/metrics").await;
    assert!(
        metrics.contains("ferry_runs_total{code=\"2\"} 2"),
        "{metrics}"
    );
    // A cancelled run leaves nothing behind: one SIGTERM is seen by the run in flight alone
    // (not also by the signal watchers of the two runs dropped before), and watch stops.
    let pid = watch.child.id().unwrap().to_string();
    let kill = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(kill.success());
    watch
        .until(1, |l| l == "watch: signal received, stopping")
        .await;
    let status = tokio::time::timeout(EVENTUALLY, watch.child.wait())
        .await
        .expect("watch exited after SIGTERM")
        .unwrap();
    while let Some(line) = watch.lines.recv().await {
        watch.seen.push(line);
    }
    assert_eq!(status.code(), Some(0), "{:#?}", watch.seen);
    let watchers = watch
        .seen
        .iter()
        .filter(|l| l.contains("signal received: starting no new work"))
        .count();
    assert!(
        watchers <= 1,
        "{watchers} signal watchers: {:#?}",
        watch.seen
    );
}

/// The bound stops a long run gently first: past `--run-timeout` no new image starts, the ones
/// in flight finish within the grace, and the run's own report (written, interrupted) ends it,
/// not a cancellation. A slow but honest source: 10 images of 10 layers, 200 ms per request, one
/// image and one blob at a time (about 2.4 s an image, so some finish before the bound and most
/// are never started).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_is_stopped_at_the_bound_and_writes_its_report() {
    let reg = TestRegistry::builder()
        .repo_latency("src/slow", Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    for i in 0..10 {
        let layers: Vec<Vec<u8>> = (0..10)
            .map(|l| format!("image{i} layer{l}").into())
            .collect();
        let layers: Vec<&[u8]> = layers.iter().map(Vec::as_slice).collect();
        reg.seed_image("src/slow", &format!("v{i}"), &layers);
    }
    // The target is another registry, so every blob is read from the slow source (within one
    // registry each would be mounted, quickly: issue 42).
    let dst = TestRegistry::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "{}{}",
        registry_entry(&reg.host(), &reg.url(), ""),
        registry_entry(&dst.host(), &dst.url(), "")
    );
    let mappings = format!(
        "  - source: \"{}/src/slow\"\n    targets: [\"{}/dst/slow\"]\n",
        reg.host(),
        dst.host()
    );
    let config = write_config(dir.path(), &registries, &mappings);
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "version: 1\n",
            "version: 1\nengine: { images_in_flight: 1, blobs_in_flight: 1 }\n",
        ),
    )
    .unwrap();
    let report = dir.path().join("report.json");
    let args = [
        "-c",
        config.to_str().unwrap(),
        "--interval",
        "1h",
        "--run-timeout",
        "6s",
        "--report",
        report.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ];
    let mut watch = Watch::start(&args, None);
    watch
        .until(1, |l| l.contains("the run passed its bound of 6s"))
        .await;
    let finished = watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;
    assert_eq!(
        finished,
        ["watch: run finished with exit code 1"],
        "{:#?}",
        watch.seen
    );
    assert!(
        !watch.seen.iter().any(|l| l.contains("cancelled")),
        "{:#?}",
        watch.seen
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["interrupted"], true, "{json:#}");
    let totals = &json["totals"];
    let (synced, interrupted) = (
        totals["images_synced"].as_u64().unwrap(),
        totals["images_interrupted"].as_u64().unwrap(),
    );
    // Floors both ways: some images were copied before the bound, and many were never started.
    assert!(synced >= 1 && interrupted >= 4, "{totals:#}");
    let copied = dst.tags("dst/slow").len() as u64;
    assert_eq!(copied, synced, "{totals:#}");
}

/// Issue 29: what one watch run learned about a registry's health carries into the next. A
/// target answering 503 to everything trips its breaker in the first run (its ping); the
/// second run, well inside the breaker's 30 s cool-down, sends it nothing at all (a fresh
/// breaker pinged it again, and more).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_found_down_is_not_asked_again_by_the_next_run() {
    use ferry_testkit::registry::{FaultAction, FaultRule};
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"one"]);
    let target = TestRegistry::builder().start().await.unwrap();
    target.faults().push(
        FaultRule::any(FaultAction::Status {
            code: 503,
            retry_after: None,
        })
        .forever(),
    );
    let dir = tempfile::tempdir().unwrap();
    let retry = "    retry: { attempts: 3, base: 10ms, cap: 50ms }\n";
    let registries = registry_entry(&source.host(), &source.url(), retry)
        + &registry_entry(&target.host(), &target.url(), retry);
    let mappings = format!(
        "  - source: \"{}/src/app\"\n    targets: [\"{}/dst/app\"]\n",
        source.host(),
        target.host()
    );
    let config = write_config(dir.path(), &registries, &mappings);
    let config = config.to_str().unwrap();
    let args = ["-c", config, "--interval", "1s", "--listen", "127.0.0.1:0"];
    let mut watch = Watch::start(&args, None);
    watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;
    let first = target.requests().len();
    assert!(first > 0, "the first run asked the target");
    assert!(
        watch.seen.iter().any(|l| l.contains("breaker open")),
        "{:#?}",
        watch.seen
    );
    watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;
    let second = target.requests().len() - first;
    assert_eq!(
        second, 0,
        "the second run asked the down target again: {:#?}",
        watch.seen
    );
    let _ = watch.child.kill().await;
}

/// Issue 29: with the target down, the prepare line named the source as the slowest. A target
/// that accepts connections and never answers holds the mapping at its listing (the ping's
/// bound is 15 s, twice); the plain line written after 5 s names the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slowest_mapping_is_named_by_the_target_that_holds_it_up() {
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"one"]);
    let hang = TestRegistry::hanging_server().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let registries = registry_entry(&source.host(), &source.url(), "")
        + &registry_entry(&hang.host(), &hang.url(), "");
    let mappings = format!(
        "  - source: \"{}/src/app\"\n    targets: [\"{}/dst/app\"]\n",
        source.host(),
        hang.host()
    );
    let config = write_config(dir.path(), &registries, &mappings);
    let config = config.to_str().unwrap();
    let args = ["-c", config, "--interval", "60s", "--listen", "127.0.0.1:0"];
    let mut watch = Watch::start(&args, None);
    let line = watch
        .until(1, |l| {
            l.starts_with("prepare ") && l.contains("in_flight=1") && !l.contains("slowest_secs=0")
        })
        .await
        .remove(0);
    assert!(
        line.contains(&format!("slowest={}/dst/app ", hang.host())),
        "{line}"
    );
    let _ = watch.child.kill().await;
}

/// Issue 29: per-mapping schedules, as regsync has them. With `--interval 1s`, a mapping with
/// `interval: 1h` is synced by the first run only; the other is synced by every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapping_on_its_own_interval_is_left_out_of_the_runs_between() {
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/often", "v1", &[b"often"]);
    source.seed_image("src/hourly", "v1", &[b"hourly"]);
    let target = TestRegistry::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let registries = registry_entry(&source.host(), &source.url(), "")
        + &registry_entry(&target.host(), &target.url(), "");
    let mappings = format!(
        "  - source: \"{s}/src/often\"\n    targets: [\"{t}/dst/often\"]\n  - source: \"{s}/src/hourly\"\n    targets: [\"{t}/dst/hourly\"]\n    interval: 1h\n",
        s = source.host(),
        t = target.host()
    );
    let config = write_config(dir.path(), &registries, &mappings);
    let config = config.to_str().unwrap();
    let args = ["-c", config, "--interval", "1s", "--listen", "127.0.0.1:0"];
    let asked = |repo: &str| {
        source
            .requests()
            .iter()
            .filter(|r| r.repo.as_deref() == Some(repo))
            .count()
    };
    let mut watch = Watch::start(&args, None);
    watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;
    let (often, hourly) = (asked("src/often"), asked("src/hourly"));
    assert!(often > 0 && hourly > 0, "the first run syncs both mappings");
    let narrowed = watch
        .until(2, |l| l.starts_with("watch: syncing the 1 of 2 mappings"))
        .await;
    assert_eq!(narrowed.len(), 2);
    watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;
    assert!(
        asked("src/often") > often,
        "the mapping on --interval is synced again"
    );
    assert_eq!(
        asked("src/hourly"),
        hourly,
        "the hourly mapping was synced again: {:#?}",
        watch.seen
    );
    let _ = watch.child.kill().await;
}

/// The value of the metric line starting with `name{labels}` in an OpenMetrics text.
fn metric_value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// Issue 27: `ferry_registry_requests_total` was below what the registry saw. A run cancelled
/// at its bound has no report, and its requests went uncounted; they are counted now, so the
/// metric matches the registry's own count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_s_requests_are_counted_as_the_registry_saw_them() {
    let (reg, hang, dir) = (
        TestRegistry::builder().start().await.unwrap(),
        TestRegistry::hanging_server().await.unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let config = healthy_and_stuck(&reg, &hang, dir.path());
    let config = config.to_str().unwrap();
    let args = [
        "-c",
        config,
        "--interval",
        "1h",
        "--run-timeout",
        "2s",
        "--listen",
        "127.0.0.1:0",
    ];
    let mut watch = Watch::start(&args, None);
    let addr = watch.address().await;
    let finished = watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;
    assert_eq!(finished, ["watch: run finished with exit code 2"]);
    assert!(watch.seen.iter().any(|l| l.contains("cancelled")));
    let metrics = http_get(&addr, "/metrics").await;
    let seen = reg.stats().requests as f64;
    assert!(seen > 0.0);
    let series = format!(
        "ferry_registry_requests_total{{registry=\"{}\"}}",
        reg.host()
    );
    assert_eq!(metric_value(&metrics, &series), Some(seen), "{metrics}");
    let _ = watch.child.kill().await;
}

/// Issue 27: `ferry_last_run_images` showed `failed=0` for runs in which mappings failed (a
/// mapping that fails at its listing has no image to count). They are counted apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mappings_that_failed_before_any_image_are_counted_in_the_metrics() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/app", "v1", &[b"one"]);
    let dir = tempfile::tempdir().unwrap();
    let mappings = format!(
        "  - source: \"{0}/src/app\"\n    targets: [\"{0}/dst/app\"]\n  - source: \"{0}/src/absent\"\n    targets: [\"{0}/dst/absent\"]\n    tags: {{ include: [\"*\"] }}\n",
        reg.host()
    );
    let config = write_config(
        dir.path(),
        &registry_entry(&reg.host(), &reg.url(), ""),
        &mappings,
    );
    let config = config.to_str().unwrap();
    let args = ["-c", config, "--interval", "1h", "--listen", "127.0.0.1:0"];
    let mut watch = Watch::start(&args, None);
    let addr = watch.address().await;
    watch
        .until(1, |l| l == "watch: run finished with exit code 1")
        .await;
    let metrics = http_get(&addr, "/metrics").await;
    let failed = metric_value(&metrics, "ferry_last_run_mappings{status=\"failed\"}");
    assert_eq!(failed, Some(1.0), "{metrics}");
    let images = metric_value(&metrics, "ferry_last_run_images{status=\"synced\"}");
    assert_eq!(images, Some(1.0), "{metrics}");
    let _ = watch.child.kill().await;
}

/// `POST body` to /v1/events with `headers`, answered within [`EVENTUALLY`]: the status line.
async fn post_event(addr: &str, headers: &str, body: &str) -> String {
    let post = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "POST /v1/events HTTP/1.1\r\nHost: ferry\r\nContent-Type: application/vnd.docker.distribution.events.v1+json\r\nContent-Length: {}\r\n{headers}\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    };
    tokio::time::timeout(EVENTUALLY, post)
        .await
        .expect("an answer to POST /v1/events")
}

/// Issue 26: a push announced by distribution's notification envelope is mirrored at once, that
/// one tag only (no listing of the source), and a forged event changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_tag_announced_by_an_event_is_mirrored_without_a_listing() {
    use ferry_testkit::registry::OpKind;
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"one"]);
    let target = TestRegistry::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let registries = registry_entry(&source.host(), &source.url(), "")
        + &registry_entry(&target.host(), &target.url(), "");
    let mappings = format!(
        "  - source: \"{}/src/app\"\n    targets: [\"{}/dst/app\"]\n    tags: {{ include: [\"v*\"] }}\nevents:\n  token: \"${{FERRY_TEST_EVENTS_TOKEN}}\"\n",
        source.host(),
        target.host()
    );
    let config = write_config(dir.path(), &registries, &mappings);
    let config = config.to_str().unwrap();
    let token = "a-long-random-events-token-0123456789";
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
    .env("FERRY_TEST_EVENTS_TOKEN", token);
    let mut watch = Watch::start_command(c);
    let addr = watch.address().await;
    watch
        .until(1, |l| l.starts_with("watch: run finished"))
        .await;
    assert_eq!(target.tags("dst/app"), ["v1"]);
    let listed = source.stats().op(OpKind::TagList);

    let digest = source.seed_image("src/app", "v2", &[b"two"]);
    let event = format!(
        r#"{{"events":[{{"id":"e1","action":"push","target":{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{digest}","repository":"src/app","tag":"v2","url":"http://{h}/v2/src/app/manifests/{digest}"}},"request":{{"host":"{h}"}}}},{{"id":"e2","action":"push","target":{{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":"src/other","tag":"v9"}}}}]}}"#,
        h = source.host()
    );
    // Forged: no token, a wrong one. Nothing is queued.
    assert!(
        post_event(&addr, "", &event)
            .await
            .starts_with("HTTP/1.1 401 ")
    );
    let wrong = "Authorization: Bearer a-long-random-events-token-0123456788\r\n";
    assert!(
        post_event(&addr, wrong, &event)
            .await
            .starts_with("HTTP/1.1 401 ")
    );
    assert!(
        post_event(&addr, "", "{")
            .await
            .starts_with("HTTP/1.1 401 "),
        "malformed and unauthenticated: the token is checked first"
    );
    let right = format!("Authorization: Bearer {token}\r\n");
    assert!(
        post_event(&addr, &right, "{not json")
            .await
            .starts_with("HTTP/1.1 400 ")
    );
    let answer = post_event(&addr, &right, &event).await;
    assert!(answer.starts_with("HTTP/1.1 202 "), "{answer}");
    assert!(
        answer.contains(r#""queued":1,"coalesced":0,"ignored":1"#),
        "{answer}"
    );
    watch
        .until(1, |l| {
            l.starts_with("watch: event sync of mapping 0 (tag v2) finished with exit code 0")
        })
        .await;
    let mut tags = target.tags("dst/app");
    tags.sort();
    assert_eq!(tags, ["v1", "v2"]);
    assert_eq!(
        source.stats().op(OpKind::TagList),
        listed,
        "the event's tag was synced without listing the source"
    );
    let metrics = http_get(&addr, "/metrics").await;
    for (series, want) in [
        ("ferry_events_total{outcome=\"queued\"}", 1.0),
        ("ferry_events_total{outcome=\"ignored\"}", 1.0),
        ("ferry_events_total{outcome=\"rejected_unauthorized\"}", 3.0),
        ("ferry_events_total{outcome=\"rejected_malformed\"}", 1.0),
        ("ferry_event_syncs_total{code=\"0\"}", 1.0),
    ] {
        assert_eq!(
            metric_value(&metrics, series),
            Some(want),
            "{series}: {metrics}"
        );
    }
    assert!(
        !metrics.contains(token),
        "the token is never in the metrics"
    );
    assert!(
        watch.seen.iter().all(|l| !l.contains(token)),
        "nor in the logs"
    );
    let _ = watch.child.kill().await;
}

/// Issue 26: a delete announced for a tag prunes it from the targets of a mapping that prunes,
/// only after the source is read in full and no longer has the tag (`--prune`'s checks); a
/// mapping that does not prune, and a delete of a tag the source still has, delete nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_tag_is_pruned_by_its_event_only_where_the_mapping_prunes() {
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"one"]);
    source.seed_image("src/app", "v2", &[b"two"]);
    let target = TestRegistry::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let registries = registry_entry(&source.host(), &source.url(), "")
        + &registry_entry(&target.host(), &target.url(), "");
    let mappings = format!(
        "  - source: \"{s}/src/app\"\n    targets: [\"{t}/pruned/app\"]\n    prune: true\n  - source: \"{s}/src/app\"\n    targets: [\"{t}/kept/app\"]\nevents:\n  token: \"${{FERRY_TEST_EVENTS_TOKEN}}\"\n",
        s = source.host(),
        t = target.host()
    );
    let config = write_config(dir.path(), &registries, &mappings);
    let token = "a-long-random-events-token-0123456789";
    let mut c = common::command(&[]);
    c.args(["watch", "-c", config.to_str().unwrap()])
        .args(["--interval", "1h", "--listen", "127.0.0.1:0"])
        .env("FERRY_TEST_EVENTS_TOKEN", token);
    let mut watch = Watch::start_command(c);
    let addr = watch.address().await;
    watch
        .until(1, |l| l.starts_with("watch: run finished with exit code 0"))
        .await;
    for repo in ["pruned/app", "kept/app"] {
        let mut tags = target.tags(repo);
        tags.sort();
        assert_eq!(tags, ["v1", "v2"], "{repo}");
    }
    // v1 leaves the source; a delete is announced for it, and (wrongly) for v2, still there.
    source.untag("src/app", "v1");
    let delete = |tag: &str| {
        format!(
            r#"{{"id":"d-{tag}","action":"delete","target":{{"repository":"src/app","tag":"{tag}"}},"request":{{"host":"{h}"}}}}"#,
            h = source.host()
        )
    };
    let event = format!(r#"{{"events":[{},{}]}}"#, delete("v1"), delete("v2"));
    let right = format!("Authorization: Bearer {token}\r\n");
    let answer = post_event(&addr, &right, &event).await;
    assert!(answer.starts_with("HTTP/1.1 202 "), "{answer}");
    // Each delete asks the pruning mapping only (one sync each; the other mapping asks none).
    assert!(
        answer.contains(r#""queued":2,"coalesced":0,"ignored":0"#),
        "{answer}"
    );
    for tag in ["v1", "v2"] {
        watch
            .until(1, |l| {
                l.starts_with(&format!(
                    "watch: event sync of mapping 0 (tag {tag}) finished with exit code 0"
                ))
            })
            .await;
    }
    assert_eq!(target.tags("pruned/app"), ["v2"], "v1 pruned, v2 kept");
    let mut kept = target.tags("kept/app");
    kept.sort();
    assert_eq!(
        kept,
        ["v1", "v2"],
        "a mapping that does not prune deletes nothing"
    );
    let _ = watch.child.kill().await;
}
