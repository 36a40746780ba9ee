//! A secret written once under a YAML anchor and used through an alias is a `Secret` like any
//! other: never in an error, a `Debug` or anything else the config prints.

use std::path::Path;

use ferry_config::{AuthSettings, parse};

const SECRET: &str = "anch0red-S3cret-7781";

#[test]
fn an_aliased_secret_is_held_in_secret_and_never_printed() {
    let text = format!(
        "version: 1\nregistries:\n  - host: a.example\n    auth: {{ type: basic, username: robot, password: &pw \"{SECRET}\" }}\n  - host: b.example\n    auth: {{ type: token, token: *pw }}\nmappings:\n  - source: a.example/app\n    targets: [\"b.example/app\"]\n"
    );
    let config = parse(&text, Path::new("mirror.yaml"), &|_| None).unwrap();
    match &config.registries[1].auth {
        AuthSettings::Token { token } => assert_eq!(token.expose(), SECRET),
        other => panic!("{other:?}"),
    }
    let shown = format!("{config:?}");
    assert!(!shown.contains(SECRET), "{shown}");
}

#[test]
fn an_error_never_echoes_a_secret_anchored_elsewhere_and_aliased_as_a_password() {
    // The anchor sits on a field that is not a secret (and is wrong there, so its error quotes
    // the value); only the alias says it is a password.
    let text = format!(
        "version: 1\nconcurrency: &pw \"{SECRET}\"\nregistries:\n  - host: a.example\n    auth: {{ type: basic, username: robot, password: *pw }}\nmappings:\n  - source: a.example/app\n    targets: [\"oci:./out\"]\n"
    );
    let error = parse(&text, Path::new("mirror.yaml"), &|_| None).unwrap_err();
    let shown = error.to_string();
    assert!(shown.contains("mirror.yaml:2:"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(!format!("{error:?}").contains(SECRET));
}
