//! `signatures:` in mirror.yaml: keys read relative to the config file, identities compiled, the
//! trusted root loaded, defaults inherited and replaced, and each problem named at its field.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_config::{ConfigError, parse};
use ferry_trust::{PrivateKey, SubjectMatch, TlogPolicy};

struct Dir {
    _tmp: tempfile::TempDir,
    config: PathBuf,
    key: PrivateKey,
}

/// A config directory holding `keys/release.pub` and `trust/root.json` (a test Sigstore's).
fn dir() -> Dir {
    let tmp = tempfile::tempdir().unwrap();
    let conf = tmp.path().join("conf");
    std::fs::create_dir_all(conf.join("keys")).unwrap();
    std::fs::create_dir_all(conf.join("trust")).unwrap();
    let key = PrivateKey::generate_p256();
    std::fs::write(conf.join("keys/release.pub"), key.public_key().to_pem()).unwrap();
    std::fs::write(conf.join("keys/not-a-key.pub"), "hello\n").unwrap();
    let sigstore = ferry_testkit::trust_signer::TestSigstore::new();
    std::fs::write(conf.join("trust/root.json"), sigstore.root_json()).unwrap();
    Dir {
        config: conf.join("mirror.yaml"),
        _tmp: tmp,
        key,
    }
}

fn load(d: &Dir, text: &str) -> Result<ferry_config::Config, ConfigError> {
    parse(text, &d.config, &|_| None)
}

fn problems(d: &Dir, text: &str) -> Vec<String> {
    load(d, text)
        .unwrap_err()
        .problems()
        .iter()
        .map(|p| format!("{}:{}: {}: {}", p.line, p.column, p.field, p.message))
        .collect()
}

#[test]
fn a_policy_reads_its_files_beside_the_config_and_defaults_are_inherited_or_replaced() {
    let d = dir();
    let text = r#"version: 1
defaults:
  signatures:
    keys: [keys/release.pub]
    tlog: skip
    min_age: 72h
mappings:
  - source: registry.test/app
    targets: [mirror.test/app]
  - source: registry.test/tool
    targets: [mirror.test/tool]
    signatures:
      identities:
        - {issuer: "https://token.actions.githubusercontent.com", subject_regexp: "^https://github.com/acme/.+$"}
        - {issuer: "https://accounts.google.com", subject: "release@acme.test"}
      trusted_root: trust/root.json
"#;
    let config = load(&d, text).unwrap();
    let app = config.mappings[0].signatures.as_ref().expect("inherited");
    assert_eq!(
        app.policy
            .keys
            .iter()
            .map(|k| k.fingerprint())
            .collect::<Vec<_>>(),
        [d.key.public_key().fingerprint()]
    );
    assert_eq!(app.policy.tlog, TlogPolicy::Skip);
    assert_eq!(app.min_age, Some(Duration::from_secs(72 * 3600)));
    assert_eq!(app.trusted_root, None, "the built-in root");
    let tool = config.mappings[1].signatures.as_ref().expect("its own");
    assert!(
        tool.policy.keys.is_empty(),
        "replaces the defaults as a whole"
    );
    assert_eq!(tool.policy.tlog, TlogPolicy::Require);
    assert_eq!(tool.min_age, None);
    assert_eq!(
        tool.trusted_root.as_deref(),
        Some(d.config.parent().unwrap().join("trust/root.json").as_path())
    );
    assert!(
        matches!(&tool.policy.identities[0].subject, SubjectMatch::Regex(r)
        if r.is_match("https://github.com/acme/app/.github/workflows/release.yml@refs/heads/main")
            && !r.is_match("https://github.com/evil/app"))
    );
    assert!(
        matches!(&tool.policy.identities[1].subject, SubjectMatch::Exact(s) if s == "release@acme.test")
    );
    assert_ne!(app, tool);
}

#[test]
fn no_signatures_means_no_policy() {
    let d = dir();
    let config = load(
        &d,
        "version: 1\nmappings:\n  - source: registry.test/app\n    targets: [mirror.test/app]\n",
    )
    .unwrap();
    assert!(config.mappings[0].signatures.is_none());
}

#[test]
fn every_problem_is_named_at_its_field() {
    let d = dir();
    let text = r#"version: 1
mappings:
  - source: registry.test/app
    targets: [mirror.test/app]
    signatures:
      keys: [keys/missing.pub, keys/not-a-key.pub]
      identities:
        - {issuer: "https://issuer.test", subject: "a@b.test", subject_regexp: "x"}
        - {issuer: "https://issuer.test", subject_regexp: "(unclosed"}
        - {issuer: "", subject: "a@b.test"}
        - {issuer: "https://issuer.test"}
      trusted_root: trust/missing.json
      min_age: soon
  - source: registry.test/other
    targets: [mirror.test/other]
    signatures: {}
  - source: registry.test/third
    targets: [mirror.test/third]
    signatures:
      identities: [{issuer: "https://issuer.test", subject: "a@b.test"}]
      tlog: skip
  - source: registry.test/fourth
    targets: [mirror.test/fourth]
    signatures: {keys: [keys/release.pub], tlog: sometimes}
"#;
    let all = problems(&d, text);
    let shown = all.join("\n");
    // An unknown tlog value stops deserialisation: it is the one problem reported.
    assert_eq!(all.len(), 1, "{shown}");
    assert!(
        shown.contains("tlog") && shown.contains("sometimes"),
        "{shown}"
    );

    let text = text
        .split("  - source: registry.test/fourth")
        .next()
        .unwrap();
    let all = problems(&d, text);
    let shown = all.join("\n");
    let expect = [
        "6:14: mappings[0] (source registry.test/app): signatures.keys[0]: ",
        "missing.pub: reading public key: No such file",
        "6:32: mappings[0] (source registry.test/app): signatures.keys[1]: ",
        "not-a-key.pub: public key: not PEM",
        "signatures.identities[0]: set either subject or subject_regexp, not both",
        "signatures.identities[1].subject_regexp: not a regular expression",
        "signatures.identities[2].issuer: issuer is empty",
        "signatures.identities[3]: needs subject or subject_regexp",
        "signatures.trusted_root: reading trusted root",
        "signatures.min_age: ",
        "mappings[1] (source registry.test/other): signatures: names no signer",
        "mappings[2] (source registry.test/third): signatures.tlog: tlog: skip applies to key signatures only",
    ];
    for e in expect {
        assert!(shown.contains(e), "missing {e:?} in\n{shown}");
    }
    assert_eq!(all.len(), 10, "{shown}");
}

#[test]
fn an_absolute_key_path_is_taken_as_is() {
    let d = dir();
    let abs = d.config.parent().unwrap().join("keys/release.pub");
    let text = format!(
        "version: 1\nmappings:\n  - source: registry.test/app\n    targets: [mirror.test/app]\n    signatures: {{keys: [{}]}}\n",
        abs.display()
    );
    let other = Path::new("/elsewhere/mirror.yaml");
    let config = parse(&text, other, &|_| None).unwrap();
    assert_eq!(
        config.mappings[0]
            .signatures
            .as_ref()
            .unwrap()
            .policy
            .keys
            .len(),
        1
    );
}

/// docs/signatures.md's first YAML block, as written there (with the `version: 1` every config
/// starts with), beside the key and trusted-root files it names: the docs' sample is a config.
#[test]
fn the_sample_in_docs_signatures_md_is_a_config() {
    let d = dir();
    let conf = d.config.parent().unwrap();
    std::fs::copy(
        conf.join("trust/root.json"),
        conf.join("trust/trusted_root.json"),
    )
    .unwrap();
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/signatures.md"),
    )
    .unwrap();
    let block = doc
        .split("```yaml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a yaml block in docs/signatures.md");
    let config = load(&d, &format!("version: 1\n{block}")).expect("the docs' sample loads");
    let policy = config.mappings[0]
        .signatures
        .as_ref()
        .expect("the mapping's policy");
    assert_eq!(policy.policy.keys.len(), 1);
    assert_eq!(policy.policy.identities.len(), 1);
    assert_eq!(policy.policy.tlog, TlogPolicy::Require);
    assert_eq!(policy.min_age, Some(Duration::from_secs(72 * 3600)));
    assert!(
        policy
            .trusted_root
            .as_ref()
            .unwrap()
            .ends_with("trust/trusted_root.json")
    );
}
