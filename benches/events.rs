//! Benchmark: mirror on push (issues 26, 39). The real distribution registry's
//! `notifications.endpoints` POSTs to `ferry watch --interval 1h`; 20 tags pushed one at a time,
//! each timed from the end of its push to the end of its event sync; then 100 events for 10
//! tags within a second (sent by the bench to a second registry's mapping); then a forged event;
//! then an event flood (junk and unique digests: answer times, the process's RSS, what the
//! queue holds); then recovery after `kill -9` of a second watch with 20 events queued.
//! Run: `cargo test --bench events --no-run` and the built `target/debug/deps/events-<hash>`
//! (the watch under test is `target/debug/ferry`), or `cargo bench --bench events`.

use std::time::{Duration, Instant};

#[path = "shared/push_image.rs"]
mod push_image;

use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::{
    AccessLogEntry, RealRegistry, RealRegistryNotifications, RealRegistryOptions,
};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

use push_image::push;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const TOKEN: &str = "events-bench-token-0123456789abcdef";

async fn post(addr: &str, auth: &str, body: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("listener");
    let request = format!(
        "POST /v1/events HTTP/1.1\r\nHost: ferry\r\nContent-Length: {}\r\n{auth}\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.expect("sent");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out.lines().next().unwrap_or_default().to_owned()
}

/// Waits for a line starting with `want` (or `within` passes): whether it came.
async fn line(lines: &mut mpsc::UnboundedReceiver<String>, want: &str, within: Duration) -> bool {
    tokio::time::timeout(within, async {
        while let Some(l) = lines.recv().await {
            if l.starts_with(want) {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let notifying = RealRegistry::start_with(RealRegistryOptions {
        notifications: Some(RealRegistryNotifications {
            url: format!("http://{listen}/v1/events"),
            headers: vec![("Authorization".into(), format!("Bearer {TOKEN}"))],
        }),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("the notifying registry starts");
    let quiet = RealRegistry::start()
        .await
        .expect("the second registry starts");
    let client =
        RegistryClient::new(RegistryOptions::insecure_at(&notifying.url())).expect("client");
    let client2 = RegistryClient::new(RegistryOptions::insecure_at(&quiet.url())).expect("client");
    push(&client, "src/app", "t00").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, q) = (notifying.host(), quiet.host());
    let config = dir.path().join("mirror.yaml");
    std::fs::write(
        &config,
        format!(
            "version: 1\nregistries:\n  - {{ host: \"{h}\", url: \"{}\", insecure: true }}\n  - {{ host: \"{q}\", url: \"{}\", insecure: true }}\nmappings:\n  - {{ source: \"{h}/src/app\", targets: [\"{h}/dst/app\"], tags: {{ include: [\"t*\"] }} }}\n  - {{ source: \"{q}/src/burst\", targets: [\"{h}/dst/burst\"], tags: {{ include: [\"b*\"] }} }}\nevents:\n  token: \"{TOKEN}\"\n",
            notifying.url(),
            quiet.url()
        ),
    )
    .expect("config written");
    let mut child = tokio::process::Command::new(FERRY)
        .args([
            "watch",
            "-c",
            config.to_str().expect("utf-8"),
            "--interval",
            "1h",
        ])
        .args(["--listen", &listen, "--progress", "none"])
        .env_remove("RUST_LOG")
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
    assert!(line(&mut lines, "watch: run finished", Duration::from_secs(120)).await);
    let listed = notifying
        .access_log()
        .await
        .expect("log")
        .count("GET", "/v2/src/app/tags/list");

    // 20 tags pushed one at a time; each tag's window of the access log runs from the start of
    // its push to the start of the next one; the push's own writes to the source are left out.
    let mut latencies = Vec::new();
    let mut windows: Vec<usize> = Vec::new();
    for i in 1..=20 {
        let tag = format!("t{i:02}");
        windows.push(notifying.access_log().await.expect("log").entries.len());
        push(&client, "src/app", &tag).await;
        let pushed = Instant::now();
        let want = format!("watch: event sync of mapping 0 (tag {tag}) finished with exit code 0");
        let ok = line(&mut lines, &want, Duration::from_secs(30)).await;
        latencies.push((tag, ok, pushed.elapsed()));
    }
    let arrived = latencies.iter().filter(|(_, ok, _)| *ok).count();
    let mut secs: Vec<f64> = latencies.iter().map(|(_, _, d)| d.as_secs_f64()).collect();
    secs.sort_by(f64::total_cmp);
    let log = notifying.access_log().await.expect("log");
    let listed_after = log.count("GET", "/v2/src/app/tags/list");
    windows.push(log.entries.len());
    // ferry's own requests in each tag's window, at the source repository and the target one.
    let mut per_tag: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for w in windows.windows(2) {
        let pushing = |e: &&AccessLogEntry| {
            e.path.starts_with("/v2/src/") && matches!(e.method.as_str(), "POST" | "PUT" | "PATCH")
        };
        let ferry: Vec<_> = log.entries[w[0]..w[1]]
            .iter()
            .filter(|e| e.user_agent.starts_with("ferry/"))
            .filter(|e| !pushing(e))
            .collect();
        let at = |prefix: &str| ferry.iter().filter(|e| e.path.starts_with(prefix)).count();
        let shape = ferry
            .iter()
            .map(|e| {
                let kind = e.path.split('/').nth(4).unwrap_or("");
                let side = match e.path.as_str() {
                    p if p.starts_with("/v2/src/") => "source",
                    p if p.starts_with("/v2/dst/") => "target",
                    _ => "ping",
                };
                format!("{side} {} {kind} {}", e.method, e.status)
            })
            .collect();
        per_tag.push((at("/v2/src/app/"), at("/v2/dst/app/"), shape));
    }
    let mut source: Vec<usize> = per_tag.iter().map(|t| t.0).collect();
    let mut target: Vec<usize> = per_tag.iter().map(|t| t.1).collect();
    source.sort_unstable();
    target.sort_unstable();
    println!(
        "ferry's requests per event sync (access log, user agent ferry/): source median {} (min {}, max {}), target median {} (min {}, max {}); t10's: {:?}",
        source[source.len() / 2],
        source[0],
        source[source.len() - 1],
        target[target.len() / 2],
        target[0],
        target[target.len() - 1],
        per_tag.get(9).map(|t| &t.2)
    );
    println!(
        "push -> on target, 20 tags one at a time: {arrived}/20 through their event; median {:.2} s, max {:.2} s, min {:.2} s; source tag listings during them: {}",
        secs[secs.len() / 2],
        secs[secs.len() - 1],
        secs[0],
        listed_after - listed
    );

    // 100 events for 10 tags within a second, at a registry that sends none of its own.
    let mut digests = Vec::new();
    for i in 0..10 {
        digests.push((
            format!("b{i}"),
            push(&client2, "src/burst", &format!("b{i}")).await,
        ));
    }
    let started = Instant::now();
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    for round in 0..10 {
        for (tag, digest) in &digests {
            let body = format!(
                r#"{{"events":[{{"id":"{round}-{tag}","action":"push","target":{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{digest}","repository":"src/burst","tag":"{tag}","url":"http://{q}/v2/src/burst/manifests/{digest}"}},"request":{{"host":"{q}"}}}}]}}"#
            );
            post(&listen, &auth, &body).await;
        }
    }
    let sent_in = started.elapsed();
    let mut syncs = 0;
    while line(
        &mut lines,
        "watch: event sync of mapping 1",
        Duration::from_secs(5),
    )
    .await
    {
        syncs += 1;
    }
    let landed = futures::future::join_all(
        digests
            .iter()
            .map(|(tag, _)| client.head_manifest("dst/burst", tag)),
    )
    .await
    .into_iter()
    .filter(|r| r.as_ref().is_ok_and(Option::is_some))
    .count();
    println!(
        "100 events for 10 tags sent in {:.2} s: {syncs} syncs, {landed}/10 tags on the target",
        sent_in.as_secs_f64()
    );

    // A forged event: no token, then a wrong one.
    let forged_digest = push(&client2, "src/burst", "b-forged").await;
    let body = format!(
        r#"{{"events":[{{"action":"push","target":{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{forged_digest}","repository":"src/burst","tag":"b-forged"}},"request":{{"host":"{q}"}}}}]}}"#
    );
    let none = post(&listen, "", &body).await;
    let wrong = post(
        &listen,
        "Authorization: Bearer not-the-token-0123456789\r\n",
        &body,
    )
    .await;
    let synced = line(
        &mut lines,
        "watch: event sync of mapping 1",
        Duration::from_secs(5),
    )
    .await;
    println!("forged events: {none:?} and {wrong:?}; a sync followed: {synced}");

    flood(&listen, child.id().expect("pid"), &q).await;
    let _ = child.kill().await;
    recovery(&quiet, &client2).await;
}

/// The resident set of process `pid`, in KiB (Linux).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// The value of the series `name` (labels included) in `addr`'s /metrics.
async fn metric(addr: &str, name: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("listener");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: ferry\r\n\r\n")
        .await
        .expect("sent");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim().to_owned())
        .unwrap_or_default()
}

fn median_max(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[v.len() - 1])
}

/// 300 requests of notices for one tag naming unique 1 KB junk "digests" (the issue's flood),
/// then 300 of 1000 unique well-formed digests: answer times, RSS, and what the queue holds.
async fn flood(listen: &str, pid: u32, q: &str) {
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let before = rss_kib(pid);
    let mut n = 0u64;
    for (what, per_request, junk) in [
        ("1 KB junk digests", 700, true),
        ("unique sha256 digests", 1000, false),
    ] {
        let mut answers = Vec::new();
        let mut statuses = std::collections::BTreeMap::<String, usize>::new();
        for _ in 0..300 {
            let events: Vec<String> = (0..per_request)
                .map(|_| {
                    n += 1;
                    let digest = if junk {
                        format!("sha256:{n:0>1024}")
                    } else {
                        format!("sha256:{n:064x}")
                    };
                    format!(
                        r#"{{"action":"push","target":{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{digest}","repository":"src/burst","tag":"b0"}},"request":{{"host":"{q}"}}}}"#
                    )
                })
                .collect();
            let body = format!(r#"{{"events":[{}]}}"#, events.join(","));
            let started = Instant::now();
            let status = post(listen, &auth, &body).await;
            answers.push(started.elapsed().as_secs_f64());
            *statuses
                .entry(status.split_whitespace().nth(1).unwrap_or("?").to_owned())
                .or_default() += 1;
        }
        let (median, max) = median_max(answers);
        println!(
            "flood of {what}: 300 requests x {per_request} notices: answers {statuses:?}, answer time median {:.3} s, max {:.3} s; RSS {} -> {} KiB; queue holds keys {}, digests {}, bytes {}, journal {}; ignored bad_digest {}",
            median,
            max,
            before,
            rss_kib(pid),
            metric(listen, "ferry_events_held{what=\"keys\"} ").await,
            metric(listen, "ferry_events_held{what=\"digests\"} ").await,
            metric(listen, "ferry_events_held{what=\"bytes\"} ").await,
            metric(listen, "ferry_events_held{what=\"journal\"} ").await,
            metric(listen, "ferry_events_ignored_total{reason=\"bad_digest\"} ").await,
        );
    }
}

/// A second watch, its target held by a fault proxy so 20 accepted events stay queued, is
/// killed with SIGKILL; restarted with the target answering and the source refusing every
/// listing (the periodic run cannot help), the time until the 20 tags are on the target.
async fn recovery(quiet: &RealRegistry, client: &RegistryClient) {
    use ferry_testkit::registry::{FaultAction, FaultProxy, FaultRule, OpKind};
    let mut digests = Vec::new();
    for i in 0..20 {
        let tag = format!("r{i:02}");
        digests.push((tag.clone(), push(client, "src/recover", &tag).await));
    }
    let source = FaultProxy::start(&quiet.url()).await.expect("proxy");
    let target = FaultProxy::start(&quiet.url()).await.expect("proxy");
    target
        .faults()
        .push(FaultRule::any(FaultAction::Hang).forever());
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("mirror.yaml");
    std::fs::write(
        &config,
        format!(
            "version: 1\nregistries:\n  - {{ host: \"src.test\", url: \"{}\", insecure: true }}\n  - {{ host: \"dst.test\", url: \"{}\", insecure: true }}\nmappings:\n  - {{ source: \"src.test/src/recover\", targets: [\"dst.test/dst/recover\"], tags: {{ include: [\"r*\"] }} }}\nevents:\n  token: \"{TOKEN}\"\n",
            source.url(),
            target.url()
        ),
    )
    .expect("config written");
    let start = || {
        let mut child = tokio::process::Command::new(FERRY)
            .args([
                "watch",
                "-c",
                config.to_str().expect("utf-8"),
                "--interval",
                "1h",
            ])
            .args(["--listen", "127.0.0.1:0", "--progress", "none"])
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("ferry watch starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut r = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(l)) = r.next_line().await {
                let _ = tx.send(l);
            }
        });
        (child, lines)
    };
    let listening = |l: &str| {
        l.strip_prefix("watch: listening on ")
            .and_then(|r| r.split_whitespace().next())
            .map(str::to_owned)
    };
    let (mut child, mut lines) = start();
    let mut addr = None;
    while addr.is_none() {
        addr = listening(&lines.recv().await.expect("a line"));
    }
    let addr = addr.expect("address");
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let mut answers = Vec::new();
    for (tag, digest) in &digests {
        let body = format!(
            r#"{{"events":[{{"action":"push","target":{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{digest}","repository":"src/recover","tag":"{tag}"}},"request":{{"host":"src.test"}}}}]}}"#
        );
        let started = Instant::now();
        let status = post(&addr, &auth, &body).await;
        answers.push((status, started.elapsed().as_secs_f64()));
    }
    let accepted = answers.iter().filter(|(s, _)| s.contains(" 202 ")).count();
    let (median, max) = median_max(answers.iter().map(|a| a.1).collect());
    let journaled = std::fs::read_dir(dir.path().join("mirror.yaml.state/events"))
        .map(|d| d.count())
        .unwrap_or(0);
    child.start_kill().expect("SIGKILL");
    let _ = child.wait().await;
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
    let restarted = Instant::now();
    let (mut child, mut lines) = start();
    let mut synced = 0;
    let mut listening_at = None;
    let _ = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(l) = lines.recv().await {
            if listening(&l).is_some() {
                listening_at = Some(restarted.elapsed());
            }
            if l.starts_with("watch: event sync of mapping 0 (tag r") && l.contains("exit code 0") {
                synced += 1;
                if synced == digests.len() {
                    break;
                }
            }
        }
    })
    .await;
    let took = restarted.elapsed();
    let mut landed = 0;
    for (tag, _) in &digests {
        if client
            .head_manifest("dst/recover", tag)
            .await
            .is_ok_and(|m| m.is_some())
        {
            landed += 1;
        }
    }
    let ferry_requests = source.requests().len() + target.requests().len();
    println!(
        "kill -9 with 20 events queued (target held): {accepted}/20 answered 202 (median {median:.3} s, max {max:.3} s), {journaled} journal files; restart to listening {:.2} s, to {synced}/20 event syncs done {:.2} s; {landed}/20 tags on the target; {ferry_requests} requests through the proxies (both lives)",
        listening_at.map_or(f64::NAN, |d| d.as_secs_f64()),
        took.as_secs_f64()
    );
    let _ = child.kill().await;
}
