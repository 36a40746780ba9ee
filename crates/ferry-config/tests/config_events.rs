//! `events:` in mirror.yaml (issue 39): the issue's sample loads with each secret as a `Secret`
//! and the OIDC key set read beside the config; a short secret, a bad key file, a sender with
//! both or neither key source, and an `events:` with no way in are errors at their fields, and
//! no message quotes a secret.

use std::path::PathBuf;

use ferry_config::{OidcKeys, parse};

/// The issue's sample, as docs/operations.md shows it.
const SAMPLE: &str = r#"version: 1
mappings:
  - source: registry.test/app
    targets: [mirror.test/app]
events:
  token: "${FERRY_EVENTS_TOKEN}"
  path_secret: "${FERRY_EVENTS_PATH}"
  hmac:
    github: "${FERRY_GITHUB_SECRET}"
    jfrog: "${FERRY_JFROG_SECRET}"
    nexus: "${FERRY_NEXUS_SECRET}"
  oidc:
    - issuer: "https://accounts.google.com"
      audience: "https://ferry.example/v1/events"
      subject: "pubsub-push@project.iam.gserviceaccount.com"
      jwks_file: google-jwks.json
"#;

/// A P-256 JWK Set (the public half of RFC 7515 Appendix A.3's key).
const JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;

fn env(name: &str) -> Option<String> {
    let value = match name {
        "FERRY_EVENTS_TOKEN" => "token-0123456789abcdef",
        "FERRY_EVENTS_PATH" => "path-0123456789abcdef",
        "FERRY_GITHUB_SECRET" => "github-0123456789abcdef",
        "FERRY_JFROG_SECRET" => "jfrog-0123456789abcdef",
        "FERRY_NEXUS_SECRET" => "short",
        _ => return None,
    };
    Some(value.to_owned())
}

fn dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("google-jwks.json"), JWKS).unwrap();
    let config = tmp.path().join("mirror.yaml");
    (tmp, config)
}

fn problems(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let (_tmp, config) = dir();
    parse(text, &config, env)
        .unwrap_err()
        .problems()
        .iter()
        .map(|p| format!("{}:{}: {}: {}", p.line, p.column, p.field, p.message))
        .collect()
}

#[test]
fn the_issue_s_sample_loads_with_every_scheme() {
    let (_tmp, config) = dir();
    let long = |n: &str| {
        env(n).map(|v| {
            if v == "short" {
                "nexus-0123456789abcdef".into()
            } else {
                v
            }
        })
    };
    let loaded = parse(SAMPLE, &config, &long).unwrap();
    let events = loaded.events.unwrap();
    assert_eq!(events.token.unwrap().expose(), "token-0123456789abcdef");
    assert_eq!(
        events.path_secret.unwrap().expose(),
        "path-0123456789abcdef"
    );
    assert!(events.github.is_some() && events.jfrog.is_some() && events.nexus.is_some());
    assert_eq!(events.oidc.len(), 1);
    let sender = &events.oidc[0];
    assert_eq!(
        sender.subject,
        "pubsub-push@project.iam.gserviceaccount.com"
    );
    match &sender.keys {
        OidcKeys::File { path, set } => {
            assert_eq!(path, &config.parent().unwrap().join("google-jwks.json"));
            assert_eq!(set.len(), 1);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(events.queue, 1024);
    // A debug print of the settings shows no secret.
    let shown = format!(
        "{events:?}",
        events = parse(SAMPLE, &config, &long).unwrap().events
    );
    assert!(!shown.contains("0123456789abcdef"), "{shown}");
}

#[test]
fn a_short_secret_is_an_error_at_its_field_never_quoted() {
    let got = problems(SAMPLE, &env);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("11:12: events.hmac.nexus: "), "{got:?}");
    assert!(got[0].contains("at least 16 characters"), "{got:?}");
    assert!(
        !got[0].contains("short"),
        "the secret is not quoted: {got:?}"
    );
}

#[test]
fn oidc_senders_and_an_events_block_with_no_way_in_are_checked() {
    let base =
        "version: 1\nmappings:\n  - source: registry.test/app\n    targets: [mirror.test/app]\n";
    let sender = |keys: &str| {
        format!(
            "{base}events:\n  oidc:\n    - issuer: \"https://i\"\n      audience: \"a\"\n      subject: \"s\"\n{keys}"
        )
    };
    let missing = problems(&sender("      jwks_file: absent.json\n"), &env);
    assert!(
        missing[0].contains("events.oidc[0].jwks_file") && missing[0].contains("absent.json"),
        "{missing:?}"
    );
    let both = problems(
        &sender("      jwks_file: google-jwks.json\n      jwks_url: \"https://k\"\n"),
        &env,
    );
    assert!(
        both[0].contains("exactly one of jwks_file and jwks_url"),
        "{both:?}"
    );
    let plain_http = problems(&sender("      jwks_url: \"http://keys.example/\"\n"), &env);
    assert!(plain_http[0].contains("https://"), "{plain_http:?}");
    let empty = problems(&format!("{base}events:\n  queue: 4\n"), &env);
    assert!(empty[0].contains("at least one way in"), "{empty:?}");
    let bad_path = problems(
        &format!("{base}events:\n  path_secret: \"has/a/slash/0123456789\"\n"),
        &env,
    );
    assert!(bad_path[0].contains("events.path_secret"), "{bad_path:?}");
    assert!(!bad_path[0].contains("has/a/slash"), "{bad_path:?}");
}
