//! `client_cert` / `client_key` in mirror.yaml: both or neither, each a readable PEM file of the
//! right kind; a problem names the file, the line and the field, never the key's contents.

use std::path::Path;

use ferry_config::{ClientIdentity, parse};
use ferry_testkit::pki::TestPki;

fn config(cert: &Path, key: &Path) -> String {
    format!(
        "version: 1\nregistries:\n  - host: registry.local:5000\n    client_cert: {:?}\n    client_key: {:?}\n\
         mappings:\n  - source: registry.local:5000/a\n    targets: [\"oci:./m\"]\n",
        cert.display().to_string(),
        key.display().to_string()
    )
}

fn problem(text: &str) -> String {
    let err = parse(text, Path::new("mirror.yaml"), &|_| None).unwrap_err();
    assert_eq!(err.problems().len(), 1, "{err}");
    err.to_string()
}

#[test]
fn a_client_certificate_and_key_are_read_into_the_registrys_settings() {
    let pki = TestPki::new().unwrap();
    let parsed = parse(
        &config(&pki.client_cert(), &pki.client_key()),
        Path::new("mirror.yaml"),
        &|_| None,
    )
    .unwrap();
    assert_eq!(
        parsed.registry_for("registry.local:5000").client_identity,
        Some(ClientIdentity {
            certificate: pki.client_cert(),
            key: pki.client_key(),
        })
    );
    assert_eq!(parsed.registry_for("other.io").client_identity, None);
}

#[test]
fn a_missing_or_wrong_key_file_names_file_line_and_field() {
    let pki = TestPki::new().unwrap();
    let absent = pki.dir().join("absent.key");
    let shown = problem(&config(&pki.client_cert(), &absent));
    assert!(
        shown.starts_with("mirror.yaml:5:") && shown.contains("client_key"),
        "{shown}"
    );
    assert!(shown.contains(&absent.display().to_string()), "{shown}");

    // The certificate given as the key.
    let shown = problem(&config(&pki.client_cert(), &pki.client_cert()));
    assert!(shown.starts_with("mirror.yaml:5:"), "{shown}");
    assert!(shown.contains("no PEM private key"), "{shown}");

    // The key given as the certificate: the certificate's line, and no key text.
    let shown = problem(&config(&pki.client_key(), &pki.client_key()));
    assert!(
        shown.starts_with("mirror.yaml:4:") && shown.contains("client_cert"),
        "{shown}"
    );
    assert!(!shown.contains("PRIVATE KEY-----"), "{shown}");
    let key_text = std::fs::read_to_string(pki.client_key()).unwrap();
    let body_line = key_text.lines().nth(1).unwrap();
    assert!(!shown.contains(body_line), "{shown}");
}

#[test]
fn a_certificate_without_its_key_is_refused() {
    let pki = TestPki::new().unwrap();
    let text = format!(
        "version: 1\nregistries:\n  - host: registry.local:5000\n    client_cert: {:?}\n\
         mappings:\n  - source: registry.local:5000/a\n    targets: [\"oci:./m\"]\n",
        pki.client_cert().display().to_string()
    );
    let shown = problem(&text);
    assert!(shown.contains("mirror.yaml:4:"), "{shown}");
    assert!(shown.contains("needs client_key"), "{shown}");
}
