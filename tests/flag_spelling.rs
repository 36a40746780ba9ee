//! One spelling per flag (issue 40): each command's plain-HTTP hint, met at a real plain-HTTP registry,
//! names only flags its own --help lists, and the first flag it names gets that command through.

mod common;

use common::{code, ferry, push_one_layer, text};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::fixtures::{ALL_TAGS, Images, mirror_yaml};

/// The long flags `ferry <command…> --help` lists.
async fn help_flags(command: &[&str]) -> Vec<String> {
    let mut args = command.to_vec();
    args.push("--help");
    let out = ferry(&args).await;
    assert_eq!(code(&out), 0, "{args:?}");
    text(&out.stdout)
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_owned()
        })
        .collect()
}

/// Every `--flag` (and its `=value`, if any) named on the hint lines of `stderr`.
fn hinted(stderr: &str) -> Vec<(String, String)> {
    stderr
        .lines()
        .filter(|l| l.starts_with("hint: "))
        .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == ','))
        .filter(|w| w.starts_with("--"))
        .map(|w| {
            let w = w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
            match w.split_once('=') {
                Some((flag, value)) => (flag.to_owned(), format!("{flag}={value}")),
                None => (w.to_owned(), w.to_owned()),
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_commands_plain_http_hint_names_only_its_own_flags_and_they_work() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let host = registry.host();
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    push_one_layer(&client, "src/app", "v1", r#"{"os":"linux"}"#, b"layer one").await;
    let dir = tempfile::tempdir().unwrap();
    let config = mirror_yaml()
        .within(&host, "src/app", "dst/app", &[ALL_TAGS])
        .write(dir.path());
    let config = config.to_str().unwrap().to_owned();
    // A bundle whose one image goes to this registry, for import.
    let mut images = Images::new();
    let image = images.platform_image("amd64", &[b"bundled layer"]);
    images.tag(&image, Some(&format!("{host}/imported/app:v1")));
    let bundle = dir.path().join("bundle.tar");
    images.write_oci_archive(&bundle);
    let bundle = bundle.to_str().unwrap().to_owned();
    let out_tar = dir.path().join("out.tar").to_str().unwrap().to_owned();
    let repo = format!("{host}/src/app");
    let image = format!("{host}/src/app:v1");
    let target = format!("{host}/dst/copied:v1");

    let commands: Vec<Vec<&str>> = vec![
        vec!["sync", "-c", &config],
        vec!["sync", "-c", &config, "--dry-run"],
        vec!["export", "-c", &config, "-o", &out_tar],
        vec!["verify", "-c", &config],
        vec!["tags", &repo],
        vec!["inspect", &image],
        vec!["doctor", &host],
        vec!["copy", &image, &target],
        vec!["import", &bundle],
    ];
    for args in &commands {
        let out = ferry(args).await;
        let stderr = text(&out.stderr);
        assert_ne!(code(&out), 0, "{args:?}: {stderr}");
        assert!(
            stderr.contains("hint: the registry serves plain HTTP"),
            "{args:?} prints the plain-HTTP hint: {stderr}"
        );
        let accepted = help_flags(&args[..1]).await;
        let named = hinted(&stderr);
        assert!(!named.is_empty(), "{args:?} names a flag: {stderr}");
        for (flag, _) in &named {
            assert!(
                accepted.contains(flag),
                "ferry {} does not take {flag}, yet its hint names it: {stderr}",
                args[0]
            );
        }
        // The first flag the hint names lets the command through the plain-HTTP registry.
        let mut again = args.clone();
        again.push(&named[0].1);
        let out = ferry(&again).await;
        let stderr = text(&out.stderr);
        assert!(
            !stderr.contains("plain HTTP"),
            "{again:?} still meets the plain-HTTP registry: {stderr}"
        );
        assert!(code(&out) < 2, "{again:?} exits {}: {stderr}", code(&out));
    }
    // verify takes --report as sync does: the findings' JSON, as --json prints them.
    let report = dir.path().join("audit.json");
    let out = ferry(&[
        "verify",
        "-c",
        &config,
        "--tls-verify=false",
        "--report",
        report.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let audit: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(audit["verdict"], "complete", "{audit:#}");
}
