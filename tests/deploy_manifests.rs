//! deploy/kubernetes/: every manifest passes the pinned Kubernetes schema check, is the one
//! docs/kubernetes.md shows, and agrees with the binary (each `args:` flag in its `--help`) and
//! with scripts/image (image tag, user, the writable lock directory, read-only config mount).

mod common;

use std::path::{Path, PathBuf};

use serde_yaml::Value;

/// The validator and the Kubernetes version the manifests are checked against (scripts/test
/// installs this version of kubernetes-validate from PyPI; it carries the schemas, offline).
const VALIDATOR_VERSION: &str = "1.37.0";
const KUBERNETES_VERSION: &str = "1.33.0";
const DOC: &str = "docs/kubernetes.md";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("deploy/kubernetes"))
        .expect("deploy/kubernetes exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 7, "{files:?}");
    files
}

fn parse(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `yaml` blocks of the doc: (line, the marker comment on the line before, the text).
fn doc_blocks() -> Vec<(usize, Option<String>, String)> {
    let text = std::fs::read_to_string(root().join(DOC)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "```yaml" {
            let marker = i
                .checked_sub(1)
                .and_then(|p| lines[p].trim().strip_prefix("<!-- file: "))
                .and_then(|m| m.strip_suffix(" -->"))
                .map(str::to_owned);
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && lines[end].trim() != "```" {
                end += 1;
            }
            out.push((start, marker, lines[start..end].join("\n") + "\n"));
            i = end;
        }
        i += 1;
    }
    out
}

#[test]
fn the_doc_shows_each_manifest_as_the_file_holds_it() {
    let mut shown = Vec::new();
    for (line, marker, text) in doc_blocks() {
        let is_manifest = text.lines().any(|l| l.starts_with("apiVersion:"));
        match marker {
            Some(file) => {
                let on_disk = std::fs::read_to_string(root().join(&file))
                    .unwrap_or_else(|e| panic!("{DOC}:{line}: {file}: {e}"));
                assert_eq!(text, on_disk, "{DOC}:{line} differs from {file}");
                shown.push(root().join(file));
            }
            None => assert!(
                !is_manifest,
                "{DOC}:{line}: a manifest not marked `<!-- file: deploy/kubernetes/… -->`: \
                 put it in deploy/kubernetes/ and show that file"
            ),
        }
    }
    shown.sort();
    assert_eq!(
        shown,
        manifests(),
        "each file of deploy/kubernetes/ shown once"
    );
}

#[test]
fn every_manifest_passes_the_pinned_schema_check() {
    let version = std::process::Command::new("kubernetes-validate")
        .arg("--version")
        .output()
        .expect("kubernetes-validate installed (scripts/test installs it: pip install kubernetes-validate==1.37.0)");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        VALIDATOR_VERSION,
        "the pinned kubernetes-validate"
    );
    let out = std::process::Command::new("kubernetes-validate")
        .args(["--strict", "--quiet", "-k", KUBERNETES_VERSION])
        .args(manifests())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        common::text(&out.stdout),
        common::text(&out.stderr)
    );
}

/// What scripts/image sets: (user id, FERRY_LOCK_DIR).
fn image_settings() -> (u64, String) {
    let script = std::fs::read_to_string(root().join("scripts/image")).unwrap();
    let user = script
        .split("--user ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .and_then(|u| u.parse().ok())
        .expect("scripts/image sets --user UID:GID");
    let lock_dir = script
        .split("--env FERRY_LOCK_DIR=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("scripts/image sets FERRY_LOCK_DIR")
        .to_owned();
    (user, lock_dir)
}

/// The pod spec of a workload manifest (Deployment, Job, CronJob), if it is one.
fn pod_spec(doc: &Value) -> Option<&Value> {
    match doc["kind"].as_str()? {
        "Deployment" | "Job" => Some(&doc["spec"]["template"]["spec"]),
        "CronJob" => Some(&doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]),
        _ => None,
    }
}

fn flags_of_help(subcommand: &str) -> Vec<String> {
    let out = std::process::Command::new(common::FERRY)
        .args([subcommand, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ferry {subcommand} --help");
    let help = String::from_utf8(out.stdout).unwrap();
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| {
            l.split([' ', ','])
                .take_while(|w| w.is_empty() || w.starts_with('-'))
                .filter(|w| !w.is_empty())
                .map(|w| w.split(['=', '[']).next().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn workloads_agree_with_the_binary_and_the_image() {
    let (uid, lock_dir) = image_settings();
    let image = format!(
        "registry.local:5000/tools/ferry:{}",
        env!("CARGO_PKG_VERSION")
    );
    let mut workloads = 0;
    for path in manifests() {
        let doc = parse(&path);
        let Some(pod) = pod_spec(&doc) else { continue };
        workloads += 1;
        let at = path.display();
        assert_eq!(
            pod["securityContext"]["runAsUser"].as_u64(),
            Some(uid),
            "{at}"
        );
        assert_eq!(
            pod["securityContext"]["runAsNonRoot"].as_bool(),
            Some(true),
            "{at}"
        );
        let volumes = pod["volumes"].as_sequence().expect("volumes");
        for c in pod["containers"].as_sequence().expect("containers") {
            assert_eq!(c["image"].as_str(), Some(image.as_str()), "{at}");
            assert_eq!(
                c["securityContext"]["readOnlyRootFilesystem"].as_bool(),
                Some(true),
                "{at}"
            );
            let mounts: Vec<(&str, &str, bool)> = c["volumeMounts"]
                .as_sequence()
                .expect("volumeMounts")
                .iter()
                .map(|m| {
                    let name = m["name"].as_str().unwrap();
                    assert!(
                        volumes.iter().any(|v| v["name"].as_str() == Some(name)),
                        "{at}: mount of an undeclared volume {name}"
                    );
                    (
                        name,
                        m["mountPath"].as_str().unwrap(),
                        m["readOnly"].as_bool().unwrap_or(false),
                    )
                })
                .collect();
            let under = |file: &str, writable: bool| {
                mounts
                    .iter()
                    .any(|(_, dir, ro)| Path::new(file).starts_with(dir) && (!writable || !ro))
            };
            assert!(
                mounts.iter().any(|(_, dir, ro)| *dir == lock_dir && !ro),
                "{at}: the image's lock directory {lock_dir} is not a writable mount"
            );
            let args: Vec<String> = c["args"]
                .as_sequence()
                .expect("args")
                .iter()
                .map(|a| a.as_str().expect("args are strings").to_owned())
                .collect();
            let subcommand = args[0].as_str();
            let flags = flags_of_help(subcommand);
            for a in args.iter().filter(|a| a.starts_with('-')) {
                let name = a.split('=').next().unwrap();
                assert!(
                    flags.iter().any(|f| f == name),
                    "{at}: `{name}` is not a flag of `ferry {subcommand} --help` ({flags:?})"
                );
            }
            let value_of = |flag: &str| {
                args.iter()
                    .position(|a| a == flag)
                    .map(|i| args[i + 1].as_str())
            };
            let config = value_of("-c").expect("-c CONFIG");
            assert!(under(config, false), "{at}: {config} is on no mount");
            assert!(
                mounts
                    .iter()
                    .any(|(_, dir, ro)| Path::new(config).starts_with(dir) && *ro),
                "{at}: the config mount is not read-only"
            );
            if let Some(report) = value_of("--report") {
                assert!(
                    under(report, true),
                    "{at}: --report {report} is not writable"
                );
            }
            if let Some(listen) = value_of("--listen") {
                let port: u64 = listen.rsplit(':').next().unwrap().parse().unwrap();
                let ports = c["ports"].as_sequence().expect("ports");
                assert!(
                    ports
                        .iter()
                        .any(|p| p["containerPort"].as_u64() == Some(port)),
                    "{at}: --listen {listen} is no containerPort"
                );
                assert_eq!(
                    c["readinessProbe"]["httpGet"]["path"].as_str(),
                    Some("/readyz")
                );
                assert_eq!(
                    c["livenessProbe"]["httpGet"]["path"].as_str(),
                    Some("/healthz")
                );
            }
            let secret = &c["envFrom"][0]["secretRef"]["name"];
            assert_eq!(secret.as_str(), Some("ferry-credentials"), "{at}");
        }
    }
    assert_eq!(
        workloads, 4,
        "CronJob, sharded CronJob, Indexed Job, watch Deployment"
    );
}

#[tokio::test]
async fn the_configmaps_mirror_config_is_valid() {
    let doc = parse(&root().join("deploy/kubernetes/configmap.yaml"));
    let text = doc["data"]["mirror.yaml"]
        .as_str()
        .expect("data.mirror.yaml");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mirror.yaml");
    std::fs::write(&path, text).unwrap();
    let secret = parse(&root().join("deploy/kubernetes/secret.yaml"));
    let env: Vec<(String, String)> = secret["stringData"]
        .as_mapping()
        .expect("stringData")
        .iter()
        .map(|(k, v)| (k.as_str().unwrap().into(), v.as_str().unwrap().into()))
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = common::ferry_env(&["validate", "-c", path.to_str().unwrap()], &env).await;
    assert_eq!(common::code(&out), 0, "{}", common::text(&out.stderr));
}
