//! Mirror on push against the real distribution registry (issue 26): its `notifications`
//! endpoint POSTs to `ferry watch`'s /v1/events, and each tag pushed one at a time reaches the
//! target through an event sync of that tag, with no listing of the source and no poll.
//!
//! The registry needs the listener's address before ferry runs (its config names it), and ferry
//! the registry's before it starts: the test holds a port of its own for the registry's
//! notifications and forwards each connection to where `ferry watch --listen 127.0.0.1:0`
//! says it listens. No port is taken, released and hoped to be free for a child.

mod common;

use common::write_config;

use std::net::SocketAddr;
use std::time::Duration;

use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::{RealRegistry, RealRegistryNotifications, RealRegistryOptions};
use tokio::io::AsyncBufReadExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const EVENTUALLY: Duration = Duration::from_secs(90);
const TOKEN: &str = "events-token-for-the-test-0123456789";

/// Pushes a one-layer image under `tag` (its layer unique to the tag).
async fn push(client: &RegistryClient, repo: &str, tag: &str) {
    let config = format!(r#"{{"architecture":"amd64","os":"linux","tag":"{tag}"}}"#);
    let layer = format!("layer of {tag}");
    common::push_one_layer(client, repo, tag, &config, layer.as_bytes()).await;
}

/// Forwards every connection to `listener` to the address `to` holds once it holds one, for as
/// long as the test runs; one that comes while `pushing` is true waits until it is false.
///
/// distribution notifies a push once the manifest is written and links the tag just after, so
/// a sync on warm clients can ask for the tag before it is there (and ferry queues it again,
/// at most twice, at once). The test holds each notice until the push that sent it has its
/// answer, when the tag is linked: what it checks is that the event reaches the target.
fn forward(
    listener: TcpListener,
    mut to: watch::Receiver<Option<SocketAddr>>,
    pushing: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let Ok(addr) = to.wait_for(Option::is_some).await.map(|a| a.unwrap()) else {
                return;
            };
            let mut pushing = pushing.clone();
            tokio::spawn(async move {
                let _ = pushing.wait_for(|p| !p).await;
                if let Ok(mut outbound) = TcpStream::connect(addr).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
}

/// `ferry watch`'s /metrics at `addr`.
async fn get_metrics(addr: SocketAddr) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: ferry\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(EVENTUALLY, s.read_to_string(&mut out))
        .await
        .expect("/metrics answered")
        .unwrap();
    out
}

/// `GET /v2/` requests in `log` (a client's ping), the testkit's own markers left out.
fn pings(log: &ferry_testkit::distribution::AccessLog) -> usize {
    log.entries
        .iter()
        .filter(|e| e.method == "GET" && e.path == "/v2/")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tag_pushed_reaches_the_target_through_its_event() {
    // The test's own port for the notifications, held for the whole test: the registry's
    // config names it, and it leads to wherever ferry listens.
    let events = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = events.local_addr().unwrap().port();
    let (ferry_addr, to_ferry) = watch::channel(None);
    let (pushing, pushed) = watch::channel(false);
    forward(events, to_ferry, pushed);
    let options = RealRegistryOptions {
        notifications: Some(RealRegistryNotifications {
            url: format!("http://127.0.0.1:{port}/v1/events"),
            headers: vec![("Authorization".into(), format!("Bearer {TOKEN}"))],
        }),
        ..RealRegistryOptions::default()
    };
    let Some(real) = RealRegistry::start_for_test_with(options)
        .await
        .expect("registry")
    else {
        return;
    };
    let client = RegistryClient::new(RegistryOptions::insecure_at(&real.url())).unwrap();
    push(&client, "src/app", "t0").await;
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n",
        real.host(),
        real.url()
    );
    let mappings = format!(
        "  - source: \"{h}/src/app\"\n    targets: [\"{h}/dst/app\"]\n    tags: {{ include: [\"t*\"] }}\nevents:\n  token: \"{TOKEN}\"\n",
        h = real.host()
    );
    let config = write_config(dir.path(), &registries, &mappings);
    // The test's own client pinged before ferry started.
    let pinged = pings(&real.access_log().await.unwrap());
    let config = config.to_str().unwrap();
    let args = ["watch", "-c", config, "--interval", "1h"];
    let mut child = common::command(&args)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut wait_for = async |want: &str| {
        let found = tokio::time::timeout(EVENTUALLY, async {
            while let Ok(Some(line)) = lines.next_line().await {
                let hit = line.starts_with(want).then(|| line.clone());
                seen.push(line);
                if hit.is_some() {
                    return hit;
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            _ => panic!("{want:?} in {seen:#?}"),
        }
    };
    let listening = wait_for("watch: listening on ").await;
    let addr = listening["watch: listening on ".len()..]
        .split_whitespace()
        .next()
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .expect("ferry watch says where it listens");
    ferry_addr.send_replace(Some(addr));
    wait_for("watch: run finished with exit code 0").await;
    let before = real.access_log().await.unwrap();
    let listed = before.count("GET", "/v2/src/app/tags/list");
    for tag in ["t1", "t2", "t3", "t4", "t5"] {
        pushing.send_replace(true);
        push(&client, "src/app", tag).await;
        pushing.send_replace(false);
        wait_for(&format!(
            "watch: event sync of mapping 0 (tag {tag}) finished with exit code 0"
        ))
        .await;
    }
    let log = real.access_log().await.unwrap();
    assert_eq!(
        log.count("GET", "/v2/src/app/tags/list"),
        listed,
        "events synced their tags without listing the source"
    );
    // One client for the registry (source and target) for the whole process: one ping, not
    // one more per event sync.
    assert_eq!(
        pings(&log) - pinged,
        1,
        "ferry watch pinged the registry once, for the first run and the five event syncs"
    );
    // The metrics count each of ferry's requests once, however many runs shared the clients:
    // what the registry logged, less the test's own client and the testkit's markers.
    let logged = log
        .entries
        .iter()
        .filter(|e| !e.path.starts_with("/v2/?ferry-testkit-marker"))
        .count();
    let ours = client.gate().stats.snapshot().http_requests as usize;
    let metrics = get_metrics(addr).await;
    let series = format!(
        "ferry_registry_requests_total{{registry=\"{}\"}} ",
        real.host()
    );
    let counted = metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(logged > ours, "ferry sent requests");
    assert_eq!(counted, Some((logged - ours) as f64), "{metrics}");
    let mut tags = client.list_tags("dst/app").await.unwrap();
    tags.sort();
    assert_eq!(tags, ["t0", "t1", "t2", "t3", "t4", "t5"]);
    let _ = child.kill().await;
}
