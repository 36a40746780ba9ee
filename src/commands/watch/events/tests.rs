//! Each sender's event as its documentation shows it (the samples in tests/event_samples, their
//! sources named in its README), and the hostile cases.

use super::*;

const D: &str = "sha256:6ec128e26cd5e3c2bb1a1f1cb9b4ea3e5a6b2f0c9e3d0c1b2a3f4e5d6c7b8a91";
const H: &str = "registry.example:5000";

macro_rules! sample {
    ($name:literal) => {
        include_bytes!(concat!("../../../../tests/event_samples/", $name, ".json")).as_slice()
    };
}

fn notice(host: Option<&str>, repository: &str, tag: Option<&str>, digest: Option<&str>) -> Notice {
    Notice {
        host: host.map(str::to_owned),
        repository: repository.into(),
        tag: tag.map(str::to_owned),
        digest: digest.map(str::to_owned),
        delete: false,
    }
}

fn notices(body: &[u8], ce: CloudHeaders<'_>) -> Vec<Notice> {
    match parse(body, ce).unwrap() {
        Parsed::Notices(n, _) => n,
        other => panic!("{other:?}"),
    }
}

fn plain(body: &[u8]) -> Vec<Notice> {
    notices(body, CloudHeaders::default())
}

#[test]
fn every_sender_s_sample_names_its_push() {
    let full = [notice(Some(H), "src/app", Some("v1"), Some(D))];
    // distribution: the blob push before the manifest push is left out.
    assert_eq!(plain(sample!("distribution")), full);
    assert_eq!(plain(sample!("harbor")), full);
    assert_eq!(plain(sample!("harbor_cloudevent")), full);
    assert_eq!(plain(sample!("acr")), full);
    assert_eq!(plain(sample!("event_grid")), full);
    assert_eq!(plain(sample!("gar_pubsub")), full);
    // JFrog: the repository is the repo_key, then the image name (`src` + `app`).
    assert_eq!(plain(sample!("jfrog")), full);
    assert_eq!(
        plain(sample!("docker_hub")),
        [notice(Some("docker.io"), "src/app", Some("v1"), None)]
    );
    for github in [
        sample!("github_package"),
        sample!("github_registry_package"),
    ] {
        assert_eq!(
            plain(github),
            [notice(Some("ghcr.io"), "src/app", Some("v1"), Some(D))],
            "the owner's and name's case folded"
        );
    }
    assert_eq!(
        plain(sample!("quay")),
        [
            notice(Some(H), "src/app", Some("v1"), None),
            notice(Some(H), "src/app", Some("latest"), None)
        ]
    );
    assert_eq!(
        plain(sample!("nexus")),
        [notice(None, "src/app", Some("v1"), None)]
    );
    assert_eq!(
        plain(sample!("ecr")),
        [notice(
            Some("123456789012.dkr.ecr.eu-west-1.amazonaws.com"),
            "src/app",
            Some("v1"),
            Some(D)
        )]
    );
}

#[test]
fn binary_cloudevents_take_their_type_and_source_from_the_headers() {
    let zot = CloudHeaders {
        kind: Some("zotregistry.image.updated"),
        source: Some("https://registry.example:5000"),
    };
    assert_eq!(
        notices(sample!("zot"), zot),
        [notice(Some(H), "src/app", Some("v1"), Some(D))]
    );
    let deleted = CloudHeaders {
        kind: Some("zotregistry.image.deleted"),
        ..zot
    };
    assert!(notices(sample!("zot"), deleted)[0].delete);
    let linted = CloudHeaders {
        kind: Some("zotregistry.image.lint_failed"),
        ..zot
    };
    assert_eq!(notices(sample!("zot"), linted), []);
    let chainguard = CloudHeaders {
        kind: Some("dev.chainguard.registry.push.v1"),
        source: Some("cgr.dev"),
    };
    assert_eq!(
        notices(sample!("chainguard"), chainguard),
        [notice(Some("cgr.dev"), "src/app", Some("v1"), Some(D))]
    );
    // A repository named with its registry keeps that host; a blob push is left out.
    let named = String::from_utf8_lossy(sample!("chainguard")).replace(
        r#""repository":"src/app""#,
        r#""repository":"cgr.dev/src/app""#,
    );
    assert_eq!(
        notices(named.as_bytes(), chainguard)[0].repository,
        "src/app"
    );
    let blob = String::from_utf8_lossy(sample!("chainguard")).replace("\"manifest\"", "\"blob\"");
    assert_eq!(notices(blob.as_bytes(), chainguard), []);
}

#[test]
fn event_grid_s_handshake_is_answered_not_queued() {
    assert_eq!(
        parse(sample!("event_grid_validation"), CloudHeaders::default()).unwrap(),
        Parsed::Validation("512d38b6-c7b8-40c8-89fe-f46f9e9622b6".into())
    );
    let bad = br#"[{"eventType":"Microsoft.EventGrid.SubscriptionValidationEvent","data":{"validationCode":"a\u0001b"}}]"#;
    assert!(parse(bad, CloudHeaders::default()).is_err());
}

#[test]
fn deletes_and_failures_are_read_as_such() {
    let harbor =
        String::from_utf8_lossy(sample!("harbor")).replace("PUSH_ARTIFACT", "DELETE_ARTIFACT");
    assert!(plain(harbor.as_bytes())[0].delete);
    let nexus = String::from_utf8_lossy(sample!("nexus")).replace("CREATED", "DELETED");
    assert!(plain(nexus.as_bytes())[0].delete);
    let maven = String::from_utf8_lossy(sample!("nexus")).replace("\"docker\"", "\"maven2\"");
    assert_eq!(plain(maven.as_bytes()), []);
    let ecr = String::from_utf8_lossy(sample!("ecr")).replace("SUCCESS", "FAILURE");
    assert_eq!(plain(ecr.as_bytes()), []);
    let cloud = format!(
        r#"{{"specversion":"1.0","type":"aws.ecr","id":"x","source":"aws","data":{}}}"#,
        String::from_utf8_lossy(sample!("ecr"))
    );
    assert_eq!(
        plain(cloud.as_bytes()).len(),
        1,
        "ECR inside a structured CloudEvent"
    );
}

#[test]
fn hostile_bodies_are_refused_or_read_as_nothing() {
    let none = CloudHeaders::default();
    assert!(parse(b"", none).unwrap_err().contains("not JSON"));
    assert!(parse(b"<html>", none).unwrap_err().contains("not JSON"));
    assert!(
        parse(br#"{"hello":1}"#, none)
            .unwrap_err()
            .contains("not an event")
    );
    // Deeply nested: serde_json's recursion limit refuses it, no stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(parse(deep.as_bytes(), none).is_err());
    let deep_events = format!(r#"{{"events":{}1{}}}"#, "[".repeat(5000), "]".repeat(5000));
    assert!(parse(deep_events.as_bytes(), none).is_err());
    // Entries of the wrong type are skipped, not trusted.
    assert_eq!(
        plain(br#"{"events":[1,"x",{"action":"push","target":{"repository":7,"tag":"v1"}}]}"#),
        []
    );
    assert_eq!(
        plain(br#"{"updated_tags":[1,null,{}],"repository":"a/b"}"#),
        []
    );
    assert!(parse(br#"{"updated_tags":"v1","repository":"a/b"}"#, none).is_err());
    assert!(parse(br#"{"message":{"data":"!!!"},"subscription":"s"}"#, none).is_err());
    // Names that are not references are dropped: `..`, control characters, upper case, a
    // malformed digest or tag, a host with a slash or a space.
    let hostile = [
        r#"{"name":"a","repository":"../etc","docker_url":"q.io/x","updated_tags":["v1"]}"#,
        r#"{"name":"a","repository":"a/../b","docker_url":"q.io/x","updated_tags":["v1"]}"#,
        r#"{"name":"a","repository":"a/b\u0000","docker_url":"q.io/x","updated_tags":["v1"]}"#,
        r#"{"name":"a","repository":"A/B","docker_url":"q.io/x","updated_tags":["v1"]}"#,
        r#"{"name":"a","repository":"a/b","docker_url":"q.io/x","updated_tags":["v1\n"]}"#,
        r#"{"name":"a","repository":"a/b","docker_url":"q.io/x","updated_tags":["../v1"]}"#,
        r#"{"name":"a","repository":"a/b","docker_url":"q io/x","updated_tags":["v1"]}"#,
    ];
    for body in hostile {
        assert_eq!(
            parse(body.as_bytes(), none).unwrap(),
            Parsed::Notices(Vec::new(), 1),
            "dropped and counted: {body}"
        );
    }
    let bad_digest = String::from_utf8_lossy(sample!("acr")).replace(D, "sha256:zz");
    assert_eq!(
        plain(bad_digest.as_bytes()),
        [],
        "a bad digest is not trusted"
    );
    let many = format!(
        r#"{{"events":[{}]}}"#,
        vec![r#"{"action":"push","target":{"repository":"a","tag":"t"}}"#; MAX_NOTICES + 1]
            .join(",")
    );
    assert!(
        parse(many.as_bytes(), none)
            .unwrap_err()
            .contains("more than")
    );
}
