//! `ferry pull-config` through the real binary: containerd hosts.toml files checked against the
//! schema containerd documents, IDMS/ITMS contents, exit codes, and podman pulling a source image
//! by tag and by digest through the registries.conf it wrote, with the source registry stopped.

mod common;

use common::containers::Store;
use common::{code, ferry, text};
use ferry_testkit::distribution::RealRegistry;

/// Four mappings: one keeping its path to an insecure mirror, one renaming, one filtering
/// platforms (digests change), one to a layout on disk.
const CONFIG: &str = "\
version: 1
registries:
  - host: mirror.local:5000
    insecure: true
  - host: secure.example:443
mappings:
  - source: docker.io/library/alpine
    targets: [mirror.local:5000/library/alpine, secure.example:443/library/alpine]
  - source: ghcr.io/org/app
    targets: [mirror.local:5000/m/app]
  - source: quay.io/org/tool
    targets: [mirror.local:5000/org/tool]
    platforms: [linux/amd64]
  - source: docker.io/library/busybox
    targets: [\"oci:./out/busybox\"]
";

fn config(dir: &std::path::Path) -> String {
    let path = dir.join("mirror.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    path.display().to_string()
}

#[tokio::test]
async fn containerd_hosts_files_follow_containerds_schema() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let root = dir.path().join("certs.d");
    let out = ferry(&[
        "pull-config",
        "-c",
        &cfg,
        "--format",
        "containerd",
        "--root",
        root.to_str().unwrap(),
    ])
    .await;
    let err = text(&out.stderr);
    // The rename, and the layout target, are named; the rest is written: exit 1.
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("ghcr.io/org/app -> mirror.local:5000/m/app"),
        "{err}"
    );
    assert!(err.contains("same repository path"), "{err}");
    assert!(err.contains("docker.io/library/busybox"), "{err}");
    let mut hosts: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    hosts.sort();
    assert_eq!(hosts, ["docker.io", "quay.io"]);

    let read = |host: &str| -> toml::Table {
        let text = std::fs::read_to_string(root.join(host).join("hosts.toml")).unwrap();
        text.parse()
            .unwrap_or_else(|e| panic!("{host}/hosts.toml: {e}\n{text}"))
    };
    let hub = read("docker.io");
    // The keys containerd's hosts.toml documents: server, and host."URL" tables with
    // capabilities and skip_verify; nothing else.
    for key in hub.keys() {
        assert!(
            ["server", "host"].contains(&key.as_str()),
            "unknown key {key}"
        );
    }
    assert_eq!(hub["server"].as_str(), Some("https://registry-1.docker.io"));
    let host = hub["host"].as_table().expect("[host.\"…\"] tables");
    let urls: Vec<&String> = host.keys().collect();
    assert_eq!(
        urls,
        ["https://mirror.local:5000", "https://secure.example:443"]
    );
    for (url, table) in host {
        for key in table.as_table().expect("a table").keys() {
            assert!(
                ["capabilities", "skip_verify"].contains(&key.as_str()),
                "{url}: {key}"
            );
        }
        let caps: Vec<&str> = table["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert_eq!(caps, ["pull", "resolve"], "{url}");
    }
    // skip_verify only where the config says insecure.
    assert_eq!(
        host["https://mirror.local:5000"]
            .get("skip_verify")
            .and_then(|v| v.as_bool()),
        Some(true)
    );
    assert_eq!(host["https://secure.example:443"].get("skip_verify"), None);
    assert_eq!(read("quay.io")["server"].as_str(), Some("https://quay.io"));
}

#[tokio::test]
async fn idms_holds_only_mappings_that_keep_digests_and_itms_every_registry_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let out = ferry(&["pull-config", "-c", &cfg, "--format", "idms", "--json"]).await;
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let idms: serde_json::Value =
        serde_yaml::from_str(json["files"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(idms["kind"], "ImageDigestMirrorSet");
    let sources: Vec<&str> = idms["spec"]["imageDigestMirrors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["docker.io/library/alpine", "ghcr.io/org/app"]);
    let left: Vec<&str> = json["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["source"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["quay.io/org/tool", "docker.io/library/busybox"]);
    assert!(
        json["left_out"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("platforms_keep_digest")
    );

    let out = ferry(&[
        "pull-config",
        "-c",
        &cfg,
        "--format",
        "itms",
        "--name",
        "site",
    ])
    .await;
    assert_eq!(code(&out), 1);
    let itms: serde_json::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    assert_eq!(itms["kind"], "ImageTagMirrorSet");
    assert_eq!(itms["metadata"]["name"], "site");
    let entries = itms["spec"]["imageTagMirrors"].as_array().unwrap();
    assert_eq!(entries.len(), 3, "{itms}");
    assert_eq!(
        entries[0]["mirrors"],
        serde_json::json!([
            "mirror.local:5000/library/alpine",
            "secure.example:443/library/alpine"
        ])
    );
}

#[tokio::test]
async fn bad_command_lines_and_configs_get_their_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let out = ferry(&["pull-config", "-c", &cfg, "--format", "idms", "--root", "x"]).await;
    assert_eq!(code(&out), 64, "{}", text(&out.stderr));
    assert!(!dir.path().join("x").exists());
    let out = ferry(&["pull-config", "-c", &cfg, "--format", "nginx"]).await;
    assert_eq!(code(&out), 64);
    std::fs::write(dir.path().join("bad.yaml"), "version: 1\nmappings: 3\n").unwrap();
    let bad = dir.path().join("bad.yaml");
    let out = ferry(&[
        "pull-config",
        "-c",
        bad.to_str().unwrap(),
        "--format",
        "itms",
    ])
    .await;
    assert_eq!(code(&out), 3);
    // Only layouts: nothing at all can be said.
    std::fs::write(
        dir.path().join("disk.yaml"),
        "version: 1\nmappings:\n  - source: docker.io/library/a\n    targets: [\"oci:./a\"]\n",
    )
    .unwrap();
    let disk = dir.path().join("disk.yaml");
    let out = ferry(&[
        "pull-config",
        "-c",
        disk.to_str().unwrap(),
        "--format",
        "itms",
    ])
    .await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
}

#[tokio::test]
async fn podman_pulls_through_the_mirror_with_the_registries_conf_written() {
    let Some(source) = RealRegistry::start_for_test().await.unwrap() else {
        return;
    };
    let Some(mirror) = RealRegistry::start_for_test().await.unwrap() else {
        return;
    };
    let store = Store::new();
    let (src, dst) = (source.host(), mirror.host());
    let kept = store
        .push_small_image(&format!("{src}/team/app:1.0"), "kept path\n")
        .await;
    let renamed = store
        .push_small_image(&format!("{src}/team/tool:2.0"), "renamed\n")
        .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mirror.yaml");
    std::fs::write(
        &cfg,
        format!(
            "version: 1\nregistries:\n  - {{ host: \"{src}\", insecure: true }}\n  - {{ host: \"{dst}\", insecure: true }}\n\
             mappings:\n  - source: {src}/team/app\n    targets: [{dst}/team/app]\n\
             \x20 - source: {src}/team/tool\n    targets: [{dst}/renamed/tool]\n"
        ),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let out = ferry(&["sync", "-c", cfg, "--no-lock"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = ferry(&["pull-config", "-c", cfg, "--format", "registries-conf"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    std::fs::write(store.path().join("registries.conf"), &out.stdout).unwrap();
    source.stop().await.unwrap();

    for reference in [
        format!("{src}/team/app:1.0"),
        format!("{src}/team/app@{kept}"),
        format!("{src}/team/tool:2.0"),
        format!("{src}/team/tool@{renamed}"),
    ] {
        let out =
            common::containers::run(store.podman().args(["pull", "--quiet", &reference])).await;
        assert!(
            out.status.success(),
            "podman pull {reference} through\n{}\n{}",
            std::fs::read_to_string(store.path().join("registries.conf")).unwrap(),
            text(&out.stderr)
        );
    }
    let log = mirror.access_log().await.unwrap();
    assert!(log.count("GET", "/v2/renamed/tool/manifests/") >= 1);
}
