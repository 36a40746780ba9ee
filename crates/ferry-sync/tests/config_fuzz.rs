//! Bad input for the config parser and the manifest graph: mutated example configs, random YAML
//! and random manifest/index JSON end in a value or a clear error, never a panic.

use std::path::Path;

use ferry_config as config;
use ferry_distribution::Digest;
use ferry_distribution::client::{RegistryClient, RegistryOptions};
use ferry_sync::engine::graph::fetch_graph;
use ferry_sync::source::Source;
use ferry_testkit::registry::{OCI_INDEX, OCI_MANIFEST, TestRegistry};
use proptest::prelude::*;

const EXAMPLE: &str = include_str!("../../../config.example.yaml");

fn env(name: &str) -> Option<String> {
    (name == "DOCKERHUB_USER").then(|| "someone".to_string())
}

/// Parses `text`; an error must name the file and say something.
fn parse_checked(text: &str) -> Result<(), TestCaseError> {
    match config::parse(text, Path::new("fuzz.yaml"), &env) {
        Ok(_) => Ok(()),
        Err(e) => {
            let message = e.to_string();
            prop_assert!(message.contains("fuzz.yaml"), "{message}");
            prop_assert!(!e.problems().is_empty());
            for p in e.problems() {
                prop_assert!(p.line >= 1, "{p}");
                prop_assert!(!p.message.is_empty(), "{p}");
            }
            Ok(())
        }
    }
}

/// One edit of a text: delete, duplicate, or replace a span with a YAML-ish token.
#[derive(Debug, Clone)]
enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, what: String },
    Swap { at: usize, len: usize, what: String },
}

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(":".to_string()),
        Just("- ".to_string()),
        Just("\n".to_string()),
        Just("  ".to_string()),
        Just("\t".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("${".to_string()),
        Just("${DOCKERHUB_USER}".to_string()),
        Just("${NOPE}".to_string()),
        Just("&a ".to_string()),
        Just("*a".to_string()),
        Just("!!binary ".to_string()),
        Just("~".to_string()),
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("18446744073709551616".to_string()),
        Just("1e309".to_string()),
        Just("999999h".to_string()),
        Just("5 TiB".to_string()),
        Just("oci:".to_string()),
        Just("docker.io/".to_string()),
        Just("@sha256:".to_string()),
        Just(">=3.19, <4".to_string()),
        Just("[a-".to_string()),
        "[a-z0-9_./:-]{1,12}",
        any::<String>(),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), token()).prop_map(|(at, what)| Edit::Insert { at, what }),
        (any::<usize>(), 1usize..20, token()).prop_map(|(at, len, what)| Edit::Swap {
            at,
            len,
            what
        }),
    ]
}

fn floor_char(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &str, edit: &Edit) -> String {
    let mut out = text.to_string();
    match edit {
        Edit::Delete { at, len } => {
            let start = floor_char(&out, *at);
            let end = floor_char(&out, start + len).max(start);
            let end = if end < start { start } else { end };
            out.replace_range(start..end.min(out.len()), "");
        }
        Edit::Insert { at, what } => {
            let at = floor_char(&out, *at);
            out.insert_str(at, what);
        }
        Edit::Swap { at, len, what } => {
            let start = floor_char(&out, *at);
            let end = floor_char(&out, (start + len).min(out.len())).max(start);
            out.replace_range(start..end, what);
        }
    }
    out
}

/// Random YAML documents from scratch: nested maps, lists and scalars.
fn yaml_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("1".to_string()),
        Just("version".to_string()),
        Just("mappings".to_string()),
        Just("registries".to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        "\"[^\"\\\\]{0,10}\"",
        "[a-z]{1,8}",
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec((inner.clone(), inner), 0..5).prop_map(|v| {
                let pairs: Vec<String> = v.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", pairs.join(", "))
            }),
        ]
    })
}

fn config_keys() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            prop_oneof![
                Just("version"),
                Just("concurrency"),
                Just("engine"),
                Just("defaults"),
                Just("registries"),
                Just("target_groups"),
                Just("mappings"),
                Just("bogus"),
            ],
            yaml_value(),
        ),
        0..6,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(k, val)| format!("{k}: {val}\n"))
            .collect()
    })
}

#[test]
fn the_example_config_parses() {
    config::parse(EXAMPLE, Path::new("config.example.yaml"), &env).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn mutated_example_configs_parse_or_fail_clearly(edits in prop::collection::vec(edit(), 1..6)) {
        let text = edits.iter().fold(EXAMPLE.to_string(), |t, e| apply(&t, e));
        parse_checked(&text)?;
    }

    #[test]
    fn random_yaml_parses_or_fails_clearly(text in prop_oneof![config_keys(), yaml_value(), any::<String>()]) {
        parse_checked(&text)?;
    }
}

// Manifest graphs: random JSON served as a manifest or an index goes through `fetch_graph`.

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::json;
    let digest = prop_oneof![
        "sha256:[0-9a-f]{64}",
        "sha256:[0-9a-f]{0,70}",
        "sha512:[0-9a-f]{128}",
        "[a-z0-9:]{0,12}",
    ];
    let leaf = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(|b| json!(b)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        digest.prop_map(|d| json!(d)),
        Just(json!(OCI_MANIFEST)),
        Just(json!(OCI_INDEX)),
        any::<String>().prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("schemaVersion".to_string()),
                        Just("mediaType".to_string()),
                        Just("config".to_string()),
                        Just("layers".to_string()),
                        Just("manifests".to_string()),
                        Just("digest".to_string()),
                        Just("size".to_string()),
                        Just("platform".to_string()),
                        "[a-z]{1,6}",
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|v| serde_json::Value::Object(v.into_iter().collect())),
        ]
    })
}

fn document() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        json_value().prop_map(|v| v.to_string().into_bytes()),
        any::<Vec<u8>>(),
        Just(b"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"sha256:zz\"}]}".to_vec()),
    ]
}

fn source(client: RegistryClient) -> Source {
    Source::Registry {
        client,
        repository: "app".into(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn any_manifest_or_index_bytes_give_a_graph_or_an_error(bytes in document(), as_index in any::<bool>()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let reg = TestRegistry::builder().start().await.unwrap();
            let media_type = if as_index { OCI_INDEX } else { OCI_MANIFEST };
            let digest = reg.seed_manifest("app", "v1", media_type, &bytes);
            let client = RegistryClient::new(RegistryOptions::insecure_at(&reg.url())).unwrap();
            let digest = Digest::parse(&digest).unwrap();
            match fetch_graph(&source(client.clone()), &digest, &[], false, None).await {
                Ok(graph) => prop_assert_eq!(&graph.root().digest, &digest),
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn an_index_chain_deeper_than_any_real_image_is_refused() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let leaf = reg.seed_image("app", "leaf", &[b"layer"]);
    // A chain of indexes, each over the one before: deeper than any real image.
    let mut child = leaf;
    for depth in 0..8 {
        child = reg.seed_index("app", &format!("i{depth}"), &[child]);
    }
    let client = RegistryClient::new(RegistryOptions::insecure_at(&reg.url())).unwrap();
    let error = fetch_graph(
        &source(client.clone()),
        &Digest::parse(&child).unwrap(),
        &[],
        false,
        None,
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("too deep"), "{error}");
}

#[tokio::test]
async fn a_manifest_served_with_a_wrong_media_type_is_refused_clearly() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let image = reg.seed_image("app", "v1", &[b"layer"]);
    let (_, bytes) = reg.manifest("app", &image).unwrap();
    // The bytes of an image manifest, served as an index: they do not parse as one.
    reg.seed_manifest("app", "as-index", OCI_INDEX, &bytes);
    // An index served as an image manifest.
    let index = reg.seed_index("app", "idx", std::slice::from_ref(&image));
    let (_, index_bytes) = reg.manifest("app", &index).unwrap();
    reg.seed_manifest("app", "as-image", OCI_MANIFEST, &index_bytes);
    let client = RegistryClient::new(RegistryOptions::insecure_at(&reg.url())).unwrap();
    for tag in ["as-index", "as-image"] {
        let (_, served) = reg.manifest("app", tag).unwrap();
        let digest = Digest::of_bytes(ferry_distribution::Algorithm::Sha256, &served);
        match fetch_graph(&source(client.clone()), &digest, &[], false, None).await {
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("invalid response") && text.contains("does not parse"),
                    "{tag}: {text}"
                );
            }
            Ok(graph) => panic!("{tag}: a graph from mislabelled bytes: {graph:?}"),
        }
    }
}

#[test]
fn an_escaped_multibyte_character_in_a_quoted_string_is_no_panic() {
    // Found by `mutated_example_configs_parse_or_fail_clearly`: the interpolator sliced the
    // two bytes after a backslash, cutting `ͺ` in half.
    let text = "version: 1\nmappings:\n  - source: \"\\ͺ\"\n    targets: [\"oci:./m\"]\n";
    let _ = config::parse(text, Path::new("fuzz.yaml"), &env);
    let text = "version: 1\nregistries:\n  - host: \"r\\é.example\"\nmappings: []\n";
    let _ = config::parse(text, Path::new("fuzz.yaml"), &env);
}
