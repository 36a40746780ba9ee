//! Benchmark: mirror on push (issue 26). The real distribution registry's
//! `notifications.endpoints` POSTs to `ferry watch --interval 1h`; 20 tags pushed one at a time,
//! each timed from the end of its push to the end of its event sync; then 100 events for 10
//! tags within a second (sent by the bench to a second registry's mapping); then a forged event.
//! Run: `cargo test --bench events --no-run` and the built `target/debug/deps/events-<hash>`
//! (the watch under test is `target/debug/ferry`), or `cargo bench --bench events`.

use std::time::{Duration, Instant};

use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions, ops::Manifest};
use ferry_testkit::distribution::{
    AccessLogEntry, RealRegistry, RealRegistryNotifications, RealRegistryOptions,
};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const TOKEN: &str = "events-bench-token-0123456789abcdef";

async fn push(client: &RegistryClient, repo: &str, tag: &str) -> Digest {
    let config = format!(r#"{{"architecture":"amd64","os":"linux","tag":"{tag}"}}"#);
    let layer = format!("layer of {repo}:{tag}");
    let mut descriptors = Vec::new();
    for bytes in [config.as_bytes(), layer.as_bytes()] {
        let digest = Digest::of_bytes(Algorithm::Sha256, bytes);
        client
            .push_blob_bytes(repo, &digest, bytes.to_vec().into())
            .await
            .expect("blob pushed");
        descriptors.push(serde_json::json!({"digest": digest.to_string(), "size": bytes.len()}));
    }
    let mut config_descriptor = descriptors.remove(0);
    config_descriptor["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    descriptors[0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
    let bytes = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_descriptor,
        "layers": descriptors,
    }))
    .expect("json");
    let digest = Digest::of_bytes(Algorithm::Sha256, &bytes);
    let manifest = Manifest {
        digest: digest.clone(),
        bytes: bytes.into(),
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
    };
    client
        .put_manifest(repo, tag, &manifest)
        .await
        .expect("manifest pushed");
    digest
}

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
    let _ = child.kill().await;
}
