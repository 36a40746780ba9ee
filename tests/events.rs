//! Mirror on push against the real distribution registry (issue 26): its `notifications`
//! endpoint POSTs to `ferry watch`'s /v1/events, and each tag pushed one at a time reaches the
//! target through an event sync of that tag, with no listing of the source and no poll.

mod common;

use common::{FERRY, write_config};

use std::time::Duration;

use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::{RealRegistry, RealRegistryNotifications, RealRegistryOptions};
use tokio::io::AsyncBufReadExt as _;

const EVENTUALLY: Duration = Duration::from_secs(90);
const TOKEN: &str = "events-token-for-the-test-0123456789";

/// Pushes a one-layer image under `tag` (its layer unique to the tag).
async fn push(client: &RegistryClient, repo: &str, tag: &str) {
    let config = format!(r#"{{"architecture":"amd64","os":"linux","tag":"{tag}"}}"#);
    let layer = format!("layer of {tag}");
    common::push_one_layer(client, repo, tag, &config, layer.as_bytes()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tag_pushed_reaches_the_target_through_its_event() {
    // The listener's port first: the registry's config names it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
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
    let listen = format!("127.0.0.1:{port}");
    let mut child = tokio::process::Command::new(FERRY)
        .args(["watch", "-c", config.to_str().unwrap(), "--interval", "1h"])
        .args(["--listen", &listen])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut wait_for = async |want: &str| {
        let found = tokio::time::timeout(EVENTUALLY, async {
            while let Ok(Some(line)) = lines.next_line().await {
                let hit = line.starts_with(want);
                seen.push(line);
                if hit {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(found, Ok(true), "{want:?} in {seen:#?}");
    };
    wait_for("watch: run finished with exit code 0").await;
    let before = real.access_log().await.unwrap();
    let listed = before.count("GET", "/v2/src/app/tags/list");
    for tag in ["t1", "t2", "t3", "t4", "t5"] {
        push(&client, "src/app", tag).await;
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
    let mut tags = client.list_tags("dst/app").await.unwrap();
    tags.sort();
    assert_eq!(tags, ["t0", "t1", "t2", "t3", "t4", "t5"]);
    let _ = child.kill().await;
}
