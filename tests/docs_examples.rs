//! Every shell example of README.md, docs/getting-started.md and docs/airgap.md, run as written
//! against the real binary and two real registries standing in for Docker Hub (and `ghcr.io`)
//! and `registry.local:5000` (and the air-gapped site's `registry.internal`).
//!
//! Each fenced `sh` block is preceded by a `<!-- docs-test: … -->` comment saying what it must
//! do (`exit N`, `shows "TEXT"`, `writes "FILE"`) or why it cannot run here (`skip, REASON`).
//! A block with neither fails the test. In docs/airgap.md every `yaml` block is a file the
//! commands after it read, written where they run: `<!-- docs-test: file "NAME" -->` (or
//! `skip, REASON`). The substitutions are the registries' addresses (`docker.io`, `ghcr.io`,
//! `registry.local:5000` and `registry.internal` in commands, files and config.example.yaml), and
//! `cargo install [--locked --profile dist] --path .`, which is the binary cargo built for this test, put on `PATH`.
//! Both registries serve TLS with a test CA that ferry trusts through `SSL_CERT_FILE`, so no
//! command needs a flag it does not show.

use std::path::Path;
use std::time::Duration;

use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::{RealRegistry, RealRegistryOptions, RealRegistryTls};
use ferry_testkit::pki::TestPki;
use serde_json::{Value, json};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const DOCS: &[&str] = &["README.md", "docs/getting-started.md", "docs/airgap.md"];
/// The documents whose `yaml` blocks are files their commands read (each needs a marker).
const YAML_FILES: &[&str] = &["docs/airgap.md"];
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// One fenced shell block and what its `docs-test` comment says of it.
#[derive(Debug)]
struct Example {
    file: &'static str,
    line: usize,
    script: String,
    /// A `yaml` block (a file the commands read), not a shell one.
    yaml: bool,
    /// `None` when the comment is missing.
    marker: Option<String>,
}

/// The `sh` blocks of `file`, each with the `docs-test` comment on a line just before it.
fn examples(file: &'static str) -> Vec<Example> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let yaml = fence == "```yaml" && YAML_FILES.contains(&file);
        if yaml || fence == "```sh" || fence == "```shell" || fence == "```bash" {
            let marker = lines[..i]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .and_then(|l| l.trim().strip_prefix("<!-- docs-test:"))
                .and_then(|l| l.strip_suffix("-->"))
                .map(|m| m.trim().to_owned());
            let start = i + 1;
            let end = (start..lines.len())
                .find(|&j| lines[j].trim_start().starts_with("```"))
                .unwrap_or_else(|| panic!("{file}:{}: an unclosed block", i + 1));
            // A file keeps its indentation; a command loses it.
            let script = lines[start..end]
                .iter()
                .map(|l| if yaml { *l } else { l.trim_start() })
                .collect::<Vec<_>>()
                .join("\n");
            out.push(Example {
                file,
                line: i + 1,
                script,
                yaml,
                marker,
            });
            i = end;
        }
        i += 1;
    }
    out
}

/// What a marker expects: an exit code, lines the output shows, files the run writes.
#[derive(Debug, Default)]
struct Expect {
    skip: Option<String>,
    exit: Option<i32>,
    shows: Vec<String>,
    writes: Vec<String>,
    /// `REPO:TAG`s pushed to the Docker Hub stand-in before the block runs: the source moving
    /// on between two steps of a walkthrough (a week between two bundles).
    seeds: Vec<String>,
}

fn parse_marker(marker: &str) -> Result<Expect, String> {
    if let Some(reason) = marker.strip_prefix("skip") {
        let reason = reason.trim_start_matches(',').trim();
        if reason.is_empty() {
            return Err("a skip must say why".into());
        }
        return Ok(Expect {
            skip: Some(reason.to_owned()),
            ..Expect::default()
        });
    }
    let mut e = Expect::default();
    let mut rest = marker.trim();
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ']);
        if let Some(r) = rest.strip_prefix("exit ") {
            let n: String = r.chars().take_while(char::is_ascii_digit).collect();
            e.exit = Some(n.parse().map_err(|_| format!("exit {r:?}"))?);
            rest = &r[n.len()..];
        } else if let Some((key, r)) = rest
            .strip_prefix("shows \"")
            .map(|r| ("shows", r))
            .or_else(|| rest.strip_prefix("writes \"").map(|r| ("writes", r)))
            .or_else(|| rest.strip_prefix("seeds \"").map(|r| ("seeds", r)))
        {
            let (value, after) = r.split_once('"').ok_or("an unclosed quote")?;
            match key {
                "shows" => e.shows.push(value.to_owned()),
                "seeds" => e.seeds.push(value.to_owned()),
                _ => e.writes.push(value.to_owned()),
            }
            rest = after;
        } else if !rest.is_empty() {
            return Err(format!("cannot read {rest:?}"));
        }
    }
    match e.exit {
        Some(_) => Ok(e),
        None => Err("say the exit code (`exit N`)".into()),
    }
}

/// `text` with the stand-ins' addresses for Docker Hub and `registry.local:5000`.
fn substitute(text: &str, hub: &str, local: &str) -> String {
    text.replace("cargo install --locked --profile dist --path .", "true")
        .replace("cargo install --path .", "true")
        .replace("docker.io", hub)
        .replace("ghcr.io", hub)
        .replace("registry.local:5000", local)
        .replace("registry.internal", local)
}

async fn tls_registry(pki: &TestPki) -> Option<RealRegistry> {
    RealRegistry::start_for_test_with(RealRegistryOptions {
        tls: Some(RealRegistryTls {
            certificate: pki.server_cert(),
            key: pki.server_key(),
            client_cas: Vec::new(),
        }),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("registry")
}

async fn put(c: &RegistryClient, repo: &str, tag: &str, kind: &str, doc: &Value) -> Manifest {
    let bytes = serde_json::to_vec(doc).unwrap();
    let m = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes: bytes.into(),
        media_type: kind.to_owned(),
    };
    c.put_manifest(repo, tag, &m).await.unwrap();
    m
}

/// A two-platform (linux/amd64, linux/arm64) image at `repo:tag`, small layers.
async fn seed(c: &RegistryClient, repo: &str, tag: &str, seed: u64) {
    let mut children = Vec::new();
    for (n, arch) in ["amd64", "arm64"].iter().enumerate() {
        let mut descriptors = Vec::new();
        let config =
            format!(r#"{{"architecture":"{arch}","os":"linux","tag":"{tag}"}}"#).into_bytes();
        for bytes in [config, ferry_testkit::noise(seed * 10 + n as u64, 3_000)] {
            let d = Digest::of_bytes(Algorithm::Sha256, &bytes);
            c.push_blob_bytes(repo, &d, bytes.clone().into())
                .await
                .unwrap();
            descriptors.push(json!({"digest": d.to_string(), "size": bytes.len()}));
        }
        descriptors[0]["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
        descriptors[1]["mediaType"] = "application/vnd.oci.image.layer.v1.tar".into();
        let doc = json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": descriptors[0], "layers": [descriptors[1]]});
        let bytes = serde_json::to_vec(&doc).unwrap();
        let m = Manifest {
            digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
            bytes: bytes.into(),
            media_type: OCI_MANIFEST.to_owned(),
        };
        c.put_manifest(repo, &m.digest.to_string(), &m)
            .await
            .unwrap();
        children.push(
            json!({"mediaType": OCI_MANIFEST, "digest": m.digest.to_string(),
            "size": m.bytes.len(), "platform": {"os": "linux", "architecture": arch}}),
        );
    }
    let doc = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children});
    put(c, repo, tag, OCI_INDEX, &doc).await;
}

/// Runs `script` with `sh -e` in `dir`, ferry first on `PATH`, the test CA trusted and no
/// logins or config from the machine the test runs on.
async fn run(script: &str, dir: &Path, home: &Path, ca: &Path) -> std::process::Output {
    let bin = Path::new(FERRY).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = tokio::process::Command::new("sh")
        .args(["-e", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", home)
        .env("SSL_CERT_FILE", ca)
        // The credentials docs/airgap.md's configs name (the stand-ins ask for none).
        .env("HUB_USER", "docs-user")
        .env("HUB_TOKEN", "docs-token")
        .env("MIRROR_PASSWORD", "docs-password")
        .env_remove("RUST_LOG")
        .env_remove("FERRY_CONFIG")
        .env_remove("DOCKER_CONFIG")
        .env_remove("REGISTRY_AUTH_FILE")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("JOB_COMPLETION_INDEX")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(120), child)
        .await
        .expect("the example finished within two minutes")
        .expect("sh ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shell_example_in_the_readme_and_getting_started_runs_as_written() {
    let pki = TestPki::new().expect("test CA");
    let Some(hub) = tls_registry(&pki).await else {
        return;
    };
    let Some(local) = tls_registry(&pki).await else {
        return;
    };
    let mut options = RegistryOptions::new(hub.host());
    options.ca_bundle = Some(pki.ca());
    let c = RegistryClient::new(options).unwrap();
    for (n, tag) in ["3.19", "3.20", "3.20.3", "3.21", "latest", "edge"]
        .iter()
        .enumerate()
    {
        seed(&c, "library/alpine", tag, n as u64 + 1).await;
    }
    for (n, tag) in ["1.36", "1.37"].iter().enumerate() {
        seed(&c, "library/busybox", tag, n as u64 + 20).await;
    }
    // ghcr.io/org/app of docs/airgap.md's mirror config (`v*` tags are mirrored).
    for (n, tag) in ["v1.0", "v1.1", "main"].iter().enumerate() {
        seed(&c, "org/app", tag, n as u64 + 30).await;
    }
    let (hub_host, local_host) = (hub.host(), local.host());
    let example_config =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.yaml"))
            .unwrap();

    let (mut ran, mut skipped, mut problems) = (0, Vec::new(), Vec::new());
    for file in DOCS {
        // Each document from a fresh directory, as a reader starts it.
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            work.path().join("config.example.yaml"),
            substitute(&example_config, &hub_host, &local_host),
        )
        .unwrap();
        for ex in examples(file) {
            let at = format!("{}:{}", ex.file, ex.line);
            let Some(marker) = &ex.marker else {
                problems.push(format!(
                    "{at}: a shell block with no <!-- docs-test: … --> comment before it"
                ));
                continue;
            };
            if ex.yaml {
                match marker.strip_prefix("file \"").and_then(|m| m.strip_suffix('"')) {
                    Some(name) => std::fs::write(
                        work.path().join(name),
                        substitute(&ex.script, &hub_host, &local_host) + "\n",
                    )
                    .unwrap(),
                    None if marker.starts_with("skip") => skipped.push(format!("{at}: {marker}")),
                    None => problems.push(format!(
                        "{at}: a yaml block's docs-test comment says `file \"NAME\"` or skips: {marker:?}"
                    )),
                }
                continue;
            }
            let expect = match parse_marker(marker) {
                Ok(e) => e,
                Err(why) => {
                    problems.push(format!("{at}: docs-test comment {marker:?}: {why}"));
                    continue;
                }
            };
            if let Some(reason) = expect.skip {
                skipped.push(format!("{at}: {reason}"));
                continue;
            }
            ran += 1;
            for (n, pushed) in expect.seeds.iter().enumerate() {
                let (repo, tag) = pushed.rsplit_once(':').expect("seeds \"REPO:TAG\"");
                seed(&c, repo, tag, 40 + n as u64).await;
            }
            let script = substitute(&ex.script, &hub_host, &local_host);
            let out = run(&script, work.path(), home.path(), &pki.ca()).await;
            let shown = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let code = out.status.code().unwrap_or(-1);
            if Some(code) != expect.exit {
                problems.push(format!(
                    "{at}: `{}` exited {code}, the docs say {:?}:\n{shown}",
                    ex.script, expect.exit
                ));
            }
            for line in &expect.shows {
                let line = substitute(line, &hub_host, &local_host);
                if !shown.contains(&line) {
                    problems.push(format!(
                        "{at}: `{}` does not show {line:?}:\n{shown}",
                        ex.script
                    ));
                }
            }
            for f in &expect.writes {
                if !work.path().join(f).exists() {
                    problems.push(format!("{at}: `{}` did not write {f}", ex.script));
                }
            }
        }
    }
    eprintln!("docs examples: {ran} run, {} skipped", skipped.len());
    for s in &skipped {
        eprintln!("  skipped {s}");
    }
    assert!(
        problems.is_empty(),
        "{} of the docs' examples do not hold:\n{}",
        problems.len(),
        problems.join("\n\n")
    );
    assert!(ran >= 12, "only {ran} examples ran");
    // docs/airgap.md's walkthrough ended with the site registry holding what the bundle carried.
    let mut options = RegistryOptions::new(local.host());
    options.ca_bundle = Some(pki.ca());
    let site = RegistryClient::new(options).unwrap();
    for (repo, tag) in [
        ("mirror/alpine", "3.20"),
        ("mirror/alpine", "3.21"),
        ("org/app", "v1.1"),
        // Pushed to the source before the weekly bundle, imported from it.
        ("org/app", "v1.2"),
    ] {
        let hub_copy = c
            .head_manifest(
                if repo == "org/app" {
                    "org/app"
                } else {
                    "library/alpine"
                },
                tag,
            )
            .await
            .unwrap();
        let site_copy = site.head_manifest(repo, tag).await.unwrap();
        assert_eq!(
            site_copy.map(|i| i.digest),
            hub_copy.map(|i| i.digest),
            "{repo}:{tag} imported at the site with the source's digest"
        );
    }
    assert!(
        site.head_manifest("org/app", "main")
            .await
            .unwrap()
            .is_none(),
        "main is not a v* tag"
    );
}

#[test]
fn markers_say_what_an_example_must_do() {
    let e =
        parse_marker(r#"exit 0, shows "synced", writes "plan.json", seeds "org/app:v2""#).unwrap();
    assert_eq!(
        (e.exit, e.shows, e.writes, e.seeds),
        (
            Some(0),
            vec!["synced".into()],
            vec!["plan.json".into()],
            vec!["org/app:v2".into()]
        )
    );
    assert_eq!(
        parse_marker("skip, runs the whole suite").unwrap().skip,
        Some("runs the whole suite".into())
    );
    assert!(parse_marker("skip").is_err());
    assert!(parse_marker(r#"shows "x""#).is_err());
    assert!(parse_marker("exit zero").is_err());
}
