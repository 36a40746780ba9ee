//! docs/config.schema.json stays generated from the raw config types, and config.example.yaml
//! parses; regenerate the schema with `FERRY_BLESS=1 cargo test -p ferry-config --test config_schema`.

use std::path::{Path, PathBuf};

use ferry_config::{Target, parse, raw::RawConfig};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn schema_is_current() {
    let schema = schemars::schema_for!(RawConfig);
    let generated = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    let path = repo_root().join("docs/config.schema.json");
    if std::env::var_os("FERRY_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/config.schema.json is stale or missing; regenerate it with \
         `FERRY_BLESS=1 cargo test -p ferry-config --test config_schema`"
    );
}

#[test]
fn schema_refuses_unknown_fields_and_knows_auth_types() {
    let schema = serde_json::to_value(schemars::schema_for!(RawConfig)).unwrap();
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    let text = schema.to_string();
    for auth in ["anonymous", "basic", "token", "docker_config", "ecr"] {
        assert!(text.contains(&format!("\"{auth}\"")), "{auth}");
    }
    // `basic` may leave out its type (docs/airgap.md's site config); the others may not.
    let variants = schema["$defs"]["RawAuth"]["oneOf"].as_array().unwrap();
    for v in variants {
        let kind = v["properties"]["type"]["const"].as_str().unwrap();
        let required = v["required"].as_array().unwrap();
        let needs_type = required.iter().any(|r| r == "type");
        assert_eq!(needs_type, kind != "basic", "{kind}: {required:?}");
    }
}

#[test]
fn example_config_parses() {
    let path = repo_root().join("config.example.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let config = parse(&text, &path, &|_| None).unwrap();
    assert!(!config.mappings.is_empty());
    for mapping in &config.mappings {
        assert!(!mapping.targets.is_empty());
        for target in &mapping.targets {
            assert!(matches!(target, Target::OciLayout { .. }), "{target}");
        }
    }
}
