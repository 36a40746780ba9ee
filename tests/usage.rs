//! The command line itself: a config given by position as well as by `-c`, and a command line
//! ferry cannot read exiting 64 (its own documented code), never 2 ("every image failed").

mod common;

use common::{code, ferry, ferry_env, text};

/// A layout-to-layout config that is valid without any registry.
fn valid_config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("mirror.yaml");
    std::fs::write(
        &path,
        "version: 1\nmappings:\n  - { source: \"oci:./in\", targets: [\"oci:./out\"] }\n",
    )
    .unwrap();
    path
}

#[tokio::test]
async fn the_config_may_be_given_by_position_or_by_flag() {
    let dir = tempfile::tempdir().unwrap();
    let path = valid_config(dir.path());
    let path = path.to_str().unwrap();
    for args in [["validate", "-c", path], ["validate", path, "--quiet"]] {
        let out = ferry(&args).await;
        assert_eq!(code(&out), 0, "{args:?}: {}", text(&out.stderr));
    }
    let out = ferry_env(&["validate"], &[("FERRY_CONFIG", path)]).await;
    assert_eq!(code(&out), 0, "FERRY_CONFIG: {}", text(&out.stderr));
    // A dry run by position reads the same config (the source layout is missing: not a usage error).
    let out = ferry(&["sync", path, "--dry-run"]).await;
    assert_ne!(code(&out), 64, "{}", text(&out.stderr));
    let out = ferry(&["validate", "/nonexistent/mirror.yaml"]).await;
    assert_eq!(code(&out), 3, "{}", text(&out.stderr));
}

#[tokio::test]
async fn a_command_line_ferry_cannot_read_exits_64_and_help_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let path = valid_config(dir.path());
    let path = path.to_str().unwrap();
    for args in [
        vec!["sync", "-c", path, "--no-such-flag"],
        vec!["sync"],
        vec!["sync", "-c", path, path],
        vec!["no-such-command"],
        vec!["watch", "-c", path, "--interval", "soon"],
    ] {
        let out = ferry(&args).await;
        assert_eq!(code(&out), 64, "{args:?}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).is_empty(), "{args:?} says what is wrong");
    }
    for args in [vec!["--help"], vec!["sync", "--help"], vec!["--version"]] {
        let out = ferry(&args).await;
        assert_eq!(code(&out), 0, "{args:?}");
        assert!(!text(&out.stdout).is_empty(), "{args:?} prints on stdout");
    }
    let help = text(&ferry(&["--help"]).await.stdout);
    assert!(help.contains("64 the command line is wrong"), "{help}");
}
