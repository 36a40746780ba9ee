//! Each registry's event as its documentation shows it, and the hostile cases.

use super::*;

fn notice(host: &str, repository: &str, tag: Option<&str>, delete: bool) -> Notice {
    Notice {
        host: Some(host.into()),
        repository: repository.into(),
        tag: tag.map(str::to_owned),
        digest: None,
        delete,
    }
}

fn without_digests(mut n: Vec<Notice>) -> Vec<Notice> {
    for n in &mut n {
        n.digest = None;
    }
    n
}

/// distribution's envelope (docs "Notifications": `application/vnd.docker.distribution.events.v1+json`):
/// a blob push and a pull are left out, a tagged manifest push and a delete are read.
#[test]
fn distribution_s_envelope() {
    let body = br#"{"events":[
      {"id":"1","action":"push","target":{"mediaType":"application/octet-stream","digest":"sha256:aa","repository":"src/app","url":"http://127.0.0.1:5000/v2/src/app/blobs/sha256:aa"},"request":{"host":"127.0.0.1:5000"}},
      {"id":"2","action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:bb","repository":"src/app","tag":"v1","url":"http://127.0.0.1:5000/v2/src/app/manifests/sha256:bb"},"request":{"host":"127.0.0.1:5000"}},
      {"id":"3","action":"pull","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":"src/app","tag":"v1"}},
      {"id":"4","action":"delete","target":{"repository":"src/app","tag":"old","digest":"sha256:cc"},"request":{"host":"127.0.0.1:5000"}}
    ]}"#;
    let got = parse(body).unwrap();
    assert_eq!(got[0].digest.as_deref(), Some("sha256:bb"));
    assert_eq!(
        without_digests(got),
        [
            notice("127.0.0.1:5000", "src/app", Some("v1"), false),
            notice("127.0.0.1:5000", "src/app", Some("old"), true)
        ]
    );
}

/// Harbor's webhook payload (`PUSH_ARTIFACT`, goharbor.io "Configure Webhook Notifications").
#[test]
fn harbor_s_push_artifact() {
    let body = br#"{"type":"PUSH_ARTIFACT","occur_at":1680501893,"operator":"admin","event_data":{"resources":[{"digest":"sha256:dd","tag":"v2","resource_url":"harbor.example/library/app:v2"}],"repository":{"date_created":1680501893,"name":"app","namespace":"library","repo_full_name":"library/app","repo_type":"private"}}}"#;
    assert_eq!(
        without_digests(parse(body).unwrap()),
        [notice("harbor.example", "library/app", Some("v2"), false)]
    );
}

/// Quay's `repo_push` notification (docs.quay.io "Repository notifications").
#[test]
fn quay_s_repo_push() {
    let body = br#"{"name":"app","repository":"team/app","namespace":"team","docker_url":"quay.io/team/app","homepage":"https://quay.io/repository/team/app","updated_tags":["latest","v3"]}"#;
    assert_eq!(
        parse(body).unwrap(),
        [
            notice("quay.io", "team/app", Some("latest"), false),
            notice("quay.io", "team/app", Some("v3"), false)
        ]
    );
}

/// GitHub's `registry_package` webhook for a container on ghcr.io; the owner's case folded.
#[test]
fn github_s_registry_package() {
    let body = br#"{"action":"published","registry_package":{"name":"App","package_type":"CONTAINER","owner":{"login":"Octo"},"package_version":{"version":"sha256:ee","container_metadata":{"tag":{"name":"v4","digest":"sha256:ee"}}}}}"#;
    assert_eq!(
        without_digests(parse(body).unwrap()),
        [notice("ghcr.io", "octo/app", Some("v4"), false)]
    );
}

/// ECR's EventBridge event, bare (an API destination) and inside a structured CloudEvent.
#[test]
fn ecr_s_image_action_bare_and_as_a_cloudevent() {
    let ecr = r#"{"version":"0","detail-type":"ECR Image Action","source":"aws.ecr","account":"123456789012","region":"eu-west-1","detail":{"result":"SUCCESS","repository-name":"team/app","image-digest":"sha256:ff","action-type":"PUSH","image-tag":"v5"}}"#;
    let want = [notice(
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com",
        "team/app",
        Some("v5"),
        false,
    )];
    assert_eq!(without_digests(parse(ecr.as_bytes()).unwrap()), want);
    let cloud =
        format!(r#"{{"specversion":"1.0","type":"aws.ecr","id":"x","source":"aws","data":{ecr}}}"#);
    assert_eq!(without_digests(parse(cloud.as_bytes()).unwrap()), want);
    let failed = ecr.replace("SUCCESS", "FAILURE");
    assert_eq!(parse(failed.as_bytes()).unwrap(), []);
}

#[test]
fn hostile_bodies_are_refused_or_read_as_nothing() {
    assert!(parse(b"").unwrap_err().contains("not JSON"));
    assert!(parse(b"<html>").unwrap_err().contains("not JSON"));
    assert!(
        parse(br#"{"hello":1}"#)
            .unwrap_err()
            .contains("not an event")
    );
    // Entries of the wrong type are skipped, not trusted.
    assert_eq!(
        parse(br#"{"events":[1,"x",{"action":"push","target":{"repository":7,"tag":"v1"}}]}"#)
            .unwrap(),
        []
    );
    let many = format!(
        r#"{{"events":[{}]}}"#,
        vec![r#"{"action":"push","target":{"repository":"a","tag":"t"}}"#; MAX_NOTICES + 1]
            .join(",")
    );
    assert!(parse(many.as_bytes()).unwrap_err().contains("more than"));
}

#[test]
fn the_token_or_github_s_signature_is_required() {
    let token = Secret::new("0123456789abcdef-token");
    let body = b"{}";
    assert!(authorized(
        Some(b"Bearer 0123456789abcdef-token"),
        None,
        body,
        &token
    ));
    assert!(!authorized(
        Some(b"Bearer 0123456789abcdef-tokeN"),
        None,
        body,
        &token
    ));
    assert!(!authorized(Some(b"Bearer "), None, body, &token));
    assert!(!authorized(
        Some(b"Basic 0123456789abcdef-token"),
        None,
        body,
        &token
    ));
    assert!(!authorized(None, None, body, &token));
    let mut mac = Hmac::<Sha256>::new_from_slice(token.expose().as_bytes()).unwrap();
    mac.update(body);
    let good = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    assert!(authorized(None, Some(good.as_bytes()), body, &token));
    assert!(
        !authorized(None, Some(good.as_bytes()), b"{ }", &token),
        "another body"
    );
    assert!(!authorized(None, Some(b"sha256=zz"), body, &token));
    assert!(!authorized(None, Some(b"sha1=00"), body, &token));
}
