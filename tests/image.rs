//! The container image scripts/image builds, run under podman against real registries: its
//! labels and user, a sync of a config mounted read-only (read-only root filesystem, non-root),
//! `ferry watch` answering /readyz, and, last, ferry mirroring its own image digest for digest.
//!
//! The image holds the binary cargo built for these tests (scripts/image with
//! FERRY_IMAGE_BINARY): the packaging is what is tested; the dist build is measured apart
//! (docs/performance.md), as building it takes longer than every test together.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::containers::{RUN_LIMITS, Store, remote_digest, repo_root, run};
use ferry_testkit::distribution::RealRegistry;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

const TAG: &str = "localhost/ferry-under-test:latest";

async fn build_image(store: &Store) {
    let mut c = tokio::process::Command::new(repo_root().join("scripts/image"));
    c.env("FERRY_IMAGE_BINARY", common::FERRY)
        .env("FERRY_IMAGE_TAG", TAG)
        .env("CONTAINERS_STORAGE_CONF", store.path().join("storage.conf"))
        .kill_on_drop(true);
    let out = run(&mut c).await;
    assert!(
        out.status.success(),
        "scripts/image: {}",
        common::text(&out.stderr)
    );
    assert_eq!(common::text(&out.stdout).trim(), TAG);
}

/// `podman run` of the image as the tests run it: host network (the registries listen on
/// 127.0.0.1), read-only root filesystem, the config directory mounted read-only at /etc/ferry
/// and `state` at /var/lib/ferry.
fn run_image(
    store: &Store,
    name: Option<&str>,
    config_dir: &Path,
    state: &Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut c = store.podman();
    c.args(["run", "--rm", "--network", "host", "--read-only"]);
    if let Some(name) = name {
        c.args(["--name", name]);
    }
    c.args(RUN_LIMITS)
        .arg("-v")
        .arg(format!("{}:/etc/ferry:ro", config_dir.display()))
        .arg("-v")
        .arg(format!("{}:/var/lib/ferry", state.display()))
        .arg(TAG)
        .args(args);
    c
}

fn write_config(dir: &Path, src: &str, dst: &str, repo: &str) {
    std::fs::write(
        dir.join("mirror.yaml"),
        format!(
            "version: 1\nregistries:\n  - {{ host: \"{src}\", insecure: true }}\n  - {{ host: \"{dst}\", insecure: true }}\n\
             mappings:\n  - source: {src}/{repo}\n    targets: [{dst}/{repo}]\n"
        ),
    )
    .unwrap();
}

/// A directory anyone may write (the container's user is uid 10001, not ours).
fn open_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

async fn http_get(addr: &str, path: &str) -> String {
    let get = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: ferry\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    };
    tokio::time::timeout(Duration::from_secs(30), get)
        .await
        .unwrap_or_else(|_| panic!("no answer to GET {path} from {addr}"))
}

#[tokio::test]
async fn the_image_syncs_watches_and_mirrors_itself_read_only_as_non_root() {
    let Some(a) = RealRegistry::start_for_test().await.unwrap() else {
        return;
    };
    let Some(b) = RealRegistry::start_for_test().await.unwrap() else {
        return;
    };
    let (a_host, b_host) = (a.host(), b.host());
    let store = Store::new();
    build_image(&store).await;

    // What the image says of itself.
    let inspect = |format: &str| {
        let mut c = store.podman();
        c.args(["image", "inspect", "--format", format, TAG]);
        Store::ok(c)
    };
    assert_eq!(inspect("{{.Config.User}}").await.trim(), "10001:10001");
    let labels: serde_json::Value =
        serde_json::from_str(&inspect("{{json .Labels}}").await).unwrap();
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert!(
        labels["org.opencontainers.image.source"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert!(
        labels["org.opencontainers.image.revision"]
            .as_str()
            .is_some_and(|s| s.len() >= 40)
    );
    assert!(
        inspect("{{json .Config.Env}}")
            .await
            .contains("FERRY_LOCK_DIR=/var/lib/ferry")
    );

    // 1. A sync of a config mounted read-only: the lock and state land in /var/lib/ferry,
    //    written by uid 10001.
    let pushed = store
        .push_small_image(&format!("{a_host}/team/app:1.0"), "synced by the image\n")
        .await;
    let config_dir = tempfile::tempdir().unwrap();
    write_config(config_dir.path(), &a_host, &b_host, "team/app");
    let state = open_dir();
    let out = run(&mut run_image(
        &store,
        None,
        config_dir.path(),
        state.path(),
        &["sync", "-c", "/etc/ferry/mirror.yaml"],
    ))
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out.stderr));
    assert_eq!(
        remote_digest(&format!("{b_host}/team/app:1.0")).await,
        pushed
    );
    let lock = state.path().join("mirror.yaml.lock");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&lock).expect("the lock"));
    assert_ne!(owner, 0, "the container ran as root");
    if rustix::process::geteuid().is_root() {
        assert_eq!(owner, 10001);
    }
    assert!(state.path().join("mirror.yaml.state").is_dir());

    // 2. `ferry watch` in the image answers /readyz once its first run has finished, and stops
    //    with 0 on SIGTERM.
    let name = format!("ferry-watch-{}", std::process::id());
    let watch_state = open_dir();
    let mut c = run_image(
        &store,
        Some(&name),
        config_dir.path(),
        watch_state.path(),
        &[
            "watch",
            "-c",
            "/etc/ferry/mirror.yaml",
            "--interval",
            "1h",
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let mut child = c
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut addr = None;
    let mut seen = Vec::new();
    let finished = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.strip_prefix("watch: listening on ") {
                addr = rest.split_whitespace().next().map(str::to_owned);
            }
            let done = line.starts_with("watch: run finished");
            seen.push(line);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(finished, Ok(true), "watch in the image: {seen:#?}");
    let addr = addr.expect("the listening line");
    let ready = http_get(&addr, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let mut stop = store.podman();
    stop.args(["stop", "--time", "60", &name]);
    Store::ok(stop).await;
    let status = tokio::time::timeout(Duration::from_secs(90), child.wait())
        .await
        .expect("watch stopped")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{seen:#?}");

    // 3. Last: ferry, in its image, mirrors that image from one registry to another, digest
    //    for digest.
    let version = env!("CARGO_PKG_VERSION");
    let own = format!("{a_host}/tools/ferry:{version}");
    let mut push = store.podman();
    push.args(["push", "--quiet", "--tls-verify=false", TAG])
        .arg(format!("docker://{own}"));
    Store::ok(push).await;
    write_config(config_dir.path(), &a_host, &b_host, "tools/ferry");
    let self_state = open_dir();
    let out = run(&mut run_image(
        &store,
        None,
        config_dir.path(),
        self_state.path(),
        &["sync", "-c", "/etc/ferry/mirror.yaml"],
    ))
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out.stderr));
    let source_digest = remote_digest(&own).await;
    assert_eq!(
        remote_digest(&format!("{b_host}/tools/ferry:{version}")).await,
        source_digest
    );
}
