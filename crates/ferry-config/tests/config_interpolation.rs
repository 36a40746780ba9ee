//! `${VAR}` values stay the one string they are, whatever YAML they look like (`: `, ` #`, a
//! line break, a leading `*` `&` `!` `[` `{` `|` `>`), in plain, flow and quoted positions;
//! where they cannot, the error names the file, line, column and variable.

use std::path::Path;

use ferry_config::{AuthSettings, Config, ConfigError, parse};

/// Values that change a YAML document's meaning when pasted into it as they are.
const HOSTILE: &[&str] = &[
    "key: value",
    "secret #not a comment",
    "line one\nline two",
    "*alias",
    "&anchor x",
    "!!int 5",
    "[1, 2]",
    "{a: b}",
    "|",
    "> folded",
    "- item",
    "ends with colon:",
    "\"double\" and \\back",
    "it's",
    "  padded  ",
    "%percent",
    "@at",
    "`tick",
    "tab\there",
    "esc\u{1b}[31m",
    "plain-value_1.2",
];

fn parse_with(text: &str, value: &str) -> Result<Config, ConfigError> {
    let value = value.to_string();
    parse(text, Path::new("mirror.yaml"), &move |name| {
        (name == "VALUE").then(|| value.clone())
    })
}

/// A registry whose password is written as `password_yaml`, and a field after it.
fn config_with_password(password_yaml: &str, flow: bool) -> String {
    let auth = if flow {
        format!("    auth: {{ type: basic, username: robot, password: {password_yaml} }}\n")
    } else {
        format!(
            "    auth:\n      type: basic\n      username: robot\n      password: {password_yaml}\n"
        )
    };
    format!(
        "version: 1\nregistries:\n  - host: registry.example:5000\n{auth}    max_concurrent: 7\nmappings:\n  - source: registry.example:5000/app\n    targets: [\"oci:./out\"]\n"
    )
}

fn password_of(config: &Config) -> String {
    match &config.registries[0].auth {
        AuthSettings::Basic { password, .. } => password.expose().to_string(),
        other => panic!("not basic auth: {other:?}"),
    }
}

#[test]
fn a_value_stays_one_string_in_block_flow_and_quoted_positions() {
    for value in HOSTILE {
        let mut forms = vec![("block", "${VALUE}", false), ("flow", "${VALUE}", true)];
        forms.push(("double-quoted", "\"${VALUE}\"", false));
        if !value.chars().any(|c| c.is_control() && c != '\t') {
            forms.push(("single-quoted", "'${VALUE}'", true));
        }
        for (form, written, flow) in forms {
            let text = config_with_password(written, flow);
            let config = parse_with(&text, value)
                .unwrap_or_else(|e| panic!("{form} {value:?}: {e}\n{text}"));
            assert_eq!(password_of(&config), *value, "{form}");
            // The fields around it kept their meaning.
            assert_eq!(config.registries[0].max_concurrent, 7, "{form} {value:?}");
            assert_eq!(config.registries.len(), 1, "{form} {value:?}");
            assert_eq!(config.mappings.len(), 1, "{form} {value:?}");
        }
    }
}

#[test]
fn a_plain_value_keeps_its_plain_type() {
    let text = "version: 1\nconcurrency: ${VALUE}\nmappings:\n  - source: a\n    targets: [\"oci:./out\"]\n";
    assert_eq!(parse_with(text, "3").unwrap().concurrency, 3);
}

#[test]
fn a_value_that_cannot_stay_one_string_inside_a_larger_word_is_an_error_naming_where() {
    let text = "version: 1\nregistries:\n  - host: registry.example:5000\n    url: https://${VALUE}/v2\nmappings:\n  - source: registry.example:5000/app\n    targets: [\"oci:./out\"]\n";
    assert_eq!(
        parse_with(text, "reg.example").unwrap().registries[0]
            .url
            .as_deref(),
        Some("https://reg.example/v2")
    );
    for (value, named) in [
        ("evil: x", "\": \""),
        ("a #b", "\" #\""),
        ("a\nb", "a line break"),
    ] {
        let error = parse_with(text, value).unwrap_err();
        let problem = &error.problems()[0];
        assert_eq!(problem.file, Path::new("mirror.yaml"));
        assert_eq!((problem.line, problem.column), (4, 18), "{error}");
        assert_eq!(
            problem.field, "registries[0] (host registry.example:5000): url",
            "{error}"
        );
        let shown = error.to_string();
        assert!(shown.contains("VALUE") && shown.contains(named), "{shown}");
        assert!(!shown.contains(value), "the value is not echoed: {shown}");
    }
    let single = "version: 1\nmappings:\n  - source: a\n    targets: ['oci:${VALUE}']\n";
    let shown = parse_with(single, "a\nb").unwrap_err().to_string();
    assert!(
        shown.contains("single-quoted") && shown.contains("mirror.yaml:4:"),
        "{shown}"
    );
}

#[test]
fn later_errors_keep_their_line_after_a_multi_line_value() {
    let text = "version: 1\nregistries:\n  - host: registry.example:5000\n    auth: { type: basic, username: robot, password: ${VALUE} }\n    max_concurrent: lots\nmappings:\n  - source: registry.example:5000/app\n    targets: [\"oci:./out\"]\n";
    let error = parse_with(text, "one\ntwo\nthree").unwrap_err();
    let problem = &error.problems()[0];
    assert_eq!(problem.line, 5, "{error}");
    assert!(problem.field.contains("max_concurrent"), "{error}");
}
