//! Events are durable (issue 39): an event `ferry watch` accepted (202) is in its state
//! directory's journal before the answer; after a `kill -9` with its sync still queued, the next
//! process replays it and mirrors the tag through an event sync, not through the poll.
//!
//! The target sits behind a fault proxy that holds every request in the first process's life,
//! so the sync never ends there; in the second, the proxy forwards, and the source's proxy
//! refuses every tag listing, so the periodic run cannot bring the tag: only the replayed
//! event can (its sync resolves the one tag, with no listing). Five deliveries of one event to
//! a live process are one sync, counted in the process's log and the registry's requests.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::registry::{FaultAction, FaultProxy, FaultRule, OpKind};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::Child;

const EVENTUALLY: Duration = Duration::from_secs(90);
const TOKEN: &str = "events-token-for-the-test-0123456789";

/// The lines of a watch's standard error, read as they come.
struct Watch {
    child: Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
    seen: Vec<String>,
    addr: SocketAddr,
}

impl Watch {
    async fn start(config: &Path, state: &Path) -> Watch {
        let args = [
            "watch",
            "-c",
            config.to_str().unwrap(),
            "--interval",
            "1h",
            "--state-dir",
            state.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ];
        let mut child = common::command(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut watch = Watch {
            child,
            lines,
            seen: Vec::new(),
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        let listening = watch.wait_for("watch: listening on ").await;
        watch.addr = listening["watch: listening on ".len()..]
            .split_whitespace()
            .next()
            .and_then(|a| a.parse().ok())
            .expect("ferry watch says where it listens");
        watch
    }

    /// The first line from now on starting with `want`.
    async fn wait_for(&mut self, want: &str) -> String {
        let found = tokio::time::timeout(EVENTUALLY, async {
            while let Ok(Some(line)) = self.lines.next_line().await {
                let hit = line.starts_with(want).then(|| line.clone());
                self.seen.push(line);
                if hit.is_some() {
                    return hit;
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            _ => panic!("{want:?} in {:#?}", self.seen),
        }
    }

    /// GETs `path`: the whole answer.
    async fn get(&self, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: ferry\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        tokio::time::timeout(EVENTUALLY, s.read_to_string(&mut out))
            .await
            .expect("answered")
            .unwrap();
        out
    }

    /// POSTs `body` to /v1/events: the answer's status line and body.
    async fn post(&self, body: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let request = format!(
            "POST /v1/events HTTP/1.1\r\nHost: ferry\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(EVENTUALLY, s.read_to_string(&mut out))
            .await
            .expect("answered")
            .unwrap();
        out
    }
}

/// distribution's envelope for a push of `repo:tag` at `digest` on `host`.
fn event(host: &str, repo: &str, tag: &str, digest: &str) -> String {
    format!(
        r#"{{"events":[{{"id":"e-{tag}","action":"push","target":{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{digest}","repository":"{repo}","tag":"{tag}","url":"http://{host}/v2/{repo}/manifests/{digest}"}},"request":{{"host":"{host}"}}}}]}}"#
    )
}

async fn push(client: &RegistryClient, repo: &str, tag: &str) -> String {
    let config = format!(r#"{{"architecture":"amd64","os":"linux","tag":"{tag}"}}"#);
    let layer = format!("layer of {tag}");
    common::push_one_layer(client, repo, tag, &config, layer.as_bytes()).await;
    client
        .head_manifest(repo, tag)
        .await
        .unwrap()
        .expect("pushed")
        .digest
        .to_string()
}

fn journal(state: &Path) -> Vec<String> {
    std::fs::read_dir(state.join("events"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_accepted_before_a_kill_is_mirrored_after_the_restart() {
    let Some(real) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = RegistryClient::new(RegistryOptions::insecure_at(&real.url())).unwrap();
    let digest = push(&client, "src/app", "t1").await;
    let source = FaultProxy::start(&real.url()).await.unwrap();
    let target = FaultProxy::start(&real.url()).await.unwrap();
    // First life: every request to the target is held; no sync can end.
    target
        .faults()
        .push(FaultRule::any(FaultAction::Hang).forever());
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let registries = format!(
        "  - {{ host: \"src.test\", url: \"{}\", insecure: true }}\n  - {{ host: \"dst.test\", url: \"{}\", insecure: true }}\n",
        source.url(),
        target.url()
    );
    let mappings = format!(
        "  - source: \"src.test/src/app\"\n    targets: [\"dst.test/dst/app\"]\n    tags: {{ include: [\"t*\"] }}\nevents:\n  token: \"{TOKEN}\"\n"
    );
    let config = common::write_config(dir.path(), &registries, &mappings);

    let mut first = Watch::start(&config, &state).await;
    let answer = first
        .post(&event("src.test", "src/app", "t1", &digest))
        .await;
    assert!(answer.starts_with("HTTP/1.1 202 "), "{answer}");
    assert!(answer.contains("\"queued\":1"), "{answer}");
    assert_eq!(journal(&state).len(), 1, "journaled before the answer");
    first.child.start_kill().unwrap();
    first.child.wait().await.unwrap();
    assert_eq!(journal(&state).len(), 1, "still there after kill -9");
    assert!(
        client
            .head_manifest("dst/app", "t1")
            .await
            .unwrap()
            .is_none(),
        "nothing reached the target in the first life"
    );

    // Second life: the target answers; the source refuses every listing (no poll can copy).
    target.faults().clear_rules();
    source.faults().push(
        FaultRule::on(
            OpKind::TagList,
            FaultAction::Status {
                code: 404,
                retry_after: None,
            },
        )
        .forever(),
    );
    let mut second = Watch::start(&config, &state).await;
    second
        .wait_for("watch: 1 event syncs queued from the journal")
        .await;
    second
        .wait_for("watch: event sync of mapping 0 (tag t1) finished with exit code 0")
        .await;
    let on_target = client.head_manifest("dst/app", "t1").await.unwrap();
    assert_eq!(
        on_target.map(|m| m.digest.to_string()),
        Some(digest.clone()),
        "the replayed event brought the tag"
    );
    assert!(journal(&state).is_empty(), "removed once synced clean");
    let listed_ok = source
        .requests()
        .iter()
        .filter(|r| r.op == OpKind::TagList && r.status == 200)
        .count();
    assert_eq!(listed_ok, 0, "no listing of the source was answered");

    // Five deliveries of one event to the live process are one sync.
    target.reset_stats();
    let digest2 = push(&client, "src/app", "t2").await;
    for _ in 0..5 {
        let answer = second
            .post(&event("src.test", "src/app", "t2", &digest2))
            .await;
        assert!(answer.starts_with("HTTP/1.1 202 "), "{answer}");
    }
    second
        .wait_for("watch: event sync of mapping 0 (tag t2) finished with exit code 0")
        .await;
    // Every delivery has its answer and the sync has ended: anything more would be queued now.
    let metrics = second.get("/metrics").await;
    let held = metrics
        .lines()
        .find(|l| l.starts_with("ferry_events_held{what=\"keys\"}"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        held.ends_with(" 0"),
        "nothing queued after the one sync: {held}\n{metrics}"
    );
    assert!(
        metrics.contains("ferry_event_syncs_total{code=\"0\"} 2\n"),
        "two event syncs in this life: t1 replayed, t2 once for five deliveries\n{metrics}"
    );
    let puts = target
        .requests()
        .iter()
        .filter(|r| r.op == OpKind::ManifestPut)
        .count();
    assert_eq!(puts, 1, "t2's manifest written to the target once");
    let _ = second.child.kill().await;
}
