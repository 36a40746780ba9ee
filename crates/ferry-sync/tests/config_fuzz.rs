//! Bad input for the config parser and the manifest graph: mutated example configs, random YAML
//! and random manifest/index JSON end in a value or a clear error, never a panic.

use std::path::Path;

use ferry_config as config;
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

#[test]
fn an_escaped_multibyte_character_in_a_quoted_string_is_no_panic() {
    // Found by `mutated_example_configs_parse_or_fail_clearly`: the interpolator sliced the
    // two bytes after a backslash, cutting `ͺ` in half.
    let text = "version: 1\nmappings:\n  - source: \"\\ͺ\"\n    targets: [\"oci:./m\"]\n";
    let _ = config::parse(text, Path::new("fuzz.yaml"), &env);
    let text = "version: 1\nregistries:\n  - host: \"r\\é.example\"\nmappings: []\n";
    let _ = config::parse(text, Path::new("fuzz.yaml"), &env);
}
