//! Every `yaml` block of docs/*.md that is a ferry config, checked by `ferry validate` (issue
//! 40), as docs_examples.rs runs the shell blocks. Each block is preceded by a
//! `<!-- docs-config: … -->` comment (among the comments just above its fence) saying what it is:
//!
//! - `config`: a whole mirror config, validated as written;
//! - `site`: a whole site config (`registries:` alone), validated with `--registries-only`;
//! - `fragment`: part of a config, completed by the test: `version: 1` put first when missing,
//!   and without a top-level `mappings:` it is validated as a site config (everything else in
//!   it is still checked);
//! - `skip, REASON`: not a ferry config (a Kubernetes manifest, a CI file, another program's
//!   config) or a piece of one shown for one field.
//!
//! A block with no such comment fails the test. Every `${VAR}` without a default is set to a
//! long value; every file the block names (`*.pem`, `*.key`, `*.crt`, `*.pub`, `*.json`) is made
//! of its kind beside the config (an absolute path is moved under the test's directory).

mod common;

use std::path::Path;

use common::{code, ferry_env};
use ferry_testkit::pki::TestPki;

struct Block {
    file: String,
    line: usize,
    text: String,
    marker: Option<String>,
}

fn blocks() -> Vec<Block> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let doc = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = doc.lines().collect();
        let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
        let mut i = 0;
        while i < lines.len() {
            if lines[i].trim_start() == "```yaml" {
                let indent = lines[i].len() - lines[i].trim_start().len();
                let end = (i + 1..lines.len())
                    .find(|&j| lines[j].trim_start().starts_with("```"))
                    .unwrap_or_else(|| panic!("{name}:{}: an unclosed block", i + 1));
                let text = lines[i + 1..end]
                    .iter()
                    .map(|l| l.get(indent..).unwrap_or(l.trim_start()))
                    .collect::<Vec<_>>()
                    .join("\n");
                // The comments just above the fence (blank lines between allowed).
                let marker = lines[..i]
                    .iter()
                    .rev()
                    .skip_while(|l| l.trim().is_empty())
                    .take_while(|l| l.trim_start().starts_with("<!--"))
                    .find_map(|l| {
                        l.trim()
                            .strip_prefix("<!-- docs-config:")
                            .and_then(|m| m.strip_suffix("-->"))
                            .map(|m| m.trim().to_owned())
                    });
                out.push(Block {
                    file: name.clone(),
                    line: i + 1,
                    text,
                    marker,
                });
                i = end;
            }
            i += 1;
        }
    }
    out
}

/// `${NAME}` references without a `:-default`.
fn variables(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find('}') else { break };
        let inner = &rest[..end];
        if !inner.contains(":-") && !out.iter().any(|v| v == inner) {
            out.push(inner.to_owned());
        }
    }
    out
}

/// RFC 7515 appendix A.2's RSA public key (2048 bits) as a JWK Set.
const RFC7515_A2_JWKS: &str = concat!(
    r#"{"keys":[{"kty":"RSA","kid":"2011-04-29","e":"AQAB","n":""#,
    "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4",
    "QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdb",
    "BYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-D",
    "WNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ",
    r#""}]}"#
);

/// Paths of files the block names, by their extension.
fn named_files(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .split(|c: char| c.is_whitespace() || "[]{},\"'".contains(c))
        .filter(|w| {
            [".pem", ".key", ".crt", ".pub", ".json"]
                .iter()
                .any(|e| w.ends_with(e))
                && !w.contains("://")
        })
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn every_config_sample_in_the_docs_validates() {
    let pki = TestPki::new().unwrap();
    let public_key = ferry_trust::PrivateKey::generate_p256()
        .public_key()
        .to_pem();
    let root_json = ferry_testkit::trust_signer::TestSigstore::new().root_json();
    let mut problems = Vec::new();
    let mut checked = 0;
    for b in blocks() {
        let at = format!("{}:{}", b.file, b.line);
        let Some(marker) = &b.marker else {
            problems.push(format!(
                "{at}: a yaml block without <!-- docs-config: config|site|fragment|skip, REASON -->"
            ));
            continue;
        };
        let kind = marker.split(',').next().unwrap_or("").trim();
        if kind == "skip" {
            if !marker.contains(',') {
                problems.push(format!("{at}: skip without a reason"));
            }
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut text = b.text.clone();
        for file in named_files(&text) {
            let local = dir.path().join(file.trim_start_matches('/'));
            std::fs::create_dir_all(local.parent().unwrap()).unwrap();
            let content = if file.ends_with(".pub") {
                public_key.clone().into_bytes()
            } else if file.ends_with(".json") && file.contains("jwks") {
                // An `events.oidc` key file: RFC 7515 appendix A.2's RSA public key as a JWK Set.
                RFC7515_A2_JWKS.as_bytes().to_vec()
            } else if file.ends_with(".json") {
                root_json.clone().into_bytes()
            } else if file.ends_with(".key") {
                std::fs::read(pki.client_key()).unwrap()
            } else {
                std::fs::read(pki.client_cert()).unwrap()
            };
            std::fs::write(&local, content).unwrap();
            if file.starts_with('/') {
                text = text.replace(&file, local.to_str().unwrap());
            }
        }
        let has_mappings = text.lines().any(|l| l.starts_with("mappings:"));
        let registries_only = match kind {
            "config" => false,
            "site" => true,
            "fragment" => {
                if !text.lines().any(|l| l.starts_with("version:")) {
                    text = format!("version: 1\n{text}");
                }
                !has_mappings
            }
            other => {
                problems.push(format!("{at}: unknown docs-config kind {other:?}"));
                continue;
            }
        };
        let config = dir.path().join("mirror.yaml");
        std::fs::write(&config, &text).unwrap();
        let vars = variables(&text);
        let env: Vec<(&str, &str)> = vars
            .iter()
            .map(|v| (v.as_str(), "docs-sample-value-0123456789"))
            .collect();
        let mut args = vec!["validate"];
        if registries_only {
            args.push("--registries-only");
        }
        let path = config.to_str().unwrap().to_owned();
        args.push(&path);
        let out = ferry_env(&args, &env).await;
        checked += 1;
        if code(&out) != 0 {
            problems.push(format!(
                "{at} ({kind}): ferry {} refused it:\n{}",
                args.join(" "),
                common::text(&out.stderr).replace(&path, "mirror.yaml")
            ));
        }
    }
    assert!(checked >= 14, "only {checked} samples checked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
