//! A hostile registry cannot widen what ferry's credentials are exchanged for, nor draw them (or
//! blob reads) off the configured host over plain http: `insecure` covers that host alone.

mod common;

use ferry_distribution::Secret;
use ferry_distribution::auth::Credentials;
use ferry_distribution::client::RegistryClient;
use ferry_distribution::error::ErrorKind;
use ferry_testkit::registry::{HostileRule, Hostility, OpKind, TestRegistry, TokenAuthConfig};

use common::{Blob, fast_policy, noise, options_at, read_blob};

fn auth_config() -> TokenAuthConfig {
    TokenAuthConfig {
        users: vec![("alice".into(), "wonderland-7".into())],
        anonymous_pull: true,
        token_ttl_secs: 300,
    }
}

fn alice_at(url: &str) -> RegistryClient {
    let mut options = options_at(url, fast_policy(3));
    options.credentials = Credentials::Basic {
        username: "alice".into(),
        password: Secret::new("wonderland-7"),
    };
    RegistryClient::new(options).unwrap()
}

fn challenge(realm: &str, scope: &str) -> Hostility {
    Hostility::Header(
        "www-authenticate",
        format!("Bearer realm=\"{realm}\",service=\"testkit\",scope=\"{scope}\"").into_bytes(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_challenge_asking_for_another_repository_does_not_widen_the_token() {
    let reg = TestRegistry::builder()
        .token_auth(auth_config())
        .start()
        .await
        .unwrap();
    reg.seed_image("mine", "v1", &[b"layer"]);
    reg.seed_image("victim", "v1", &[b"theirs"]);
    let client = alice_at(&reg.url());
    // The first tag listing is answered 401 with a challenge for much more than it needs.
    let wide = "repository:mine:pull repository:victim:pull,push,delete registry:catalog:*";
    reg.hostile().add(
        HostileRule::new(
            OpKind::TagList,
            Some("mine"),
            vec![
                Hostility::Status(401),
                challenge(&format!("{}/token", reg.url()), wide),
            ],
        )
        .times(1),
    );
    assert_eq!(client.list_tags("mine").await.unwrap(), ["v1"]);

    let token_requests: Vec<String> = reg
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::Token)
        .map(|r| r.query.unwrap_or_default())
        .collect();
    assert!(token_requests.len() >= 2, "{token_requests:?}");
    for query in &token_requests {
        assert!(!query.contains("victim"), "scope widened: {query}");
        assert!(!query.contains("catalog"), "scope widened: {query}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_http_token_realm_on_another_host_is_refused_even_for_an_insecure_registry() {
    let reg = TestRegistry::builder()
        .token_auth(auth_config())
        .start()
        .await
        .unwrap();
    reg.seed_image("mine", "v1", &[b"layer"]);
    // The same token service, named by another host: credentials would go there over http.
    let port = reg.host().rsplit_once(':').unwrap().1.to_owned();
    let elsewhere = format!("http://localhost:{port}/token");
    reg.hostile().add(HostileRule {
        op: None,
        repo: None,
        answer: vec![challenge(&elsewhere, "repository:mine:pull")],
        times: None,
        skip: 0,
    });
    let err = alice_at(&reg.url()).list_tags("mine").await.unwrap_err();
    assert!(
        matches!(&err.kind, ErrorKind::Refused(m) if m.contains("localhost")),
        "{err}"
    );
    assert_eq!(reg.stats().op(OpKind::Token), 0, "no credentials sent");

    // The good registry beside it: the realm on its own host works over http.
    reg.hostile().clear();
    assert_eq!(
        alice_at(&reg.url()).list_tags("mine").await.unwrap(),
        ["v1"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_blob_redirect_to_another_host_over_http_is_not_followed() {
    let reg = TestRegistry::builder()
        .redirect_blobs(true)
        .start()
        .await
        .unwrap();
    let blob = Blob::new(noise(3, 10_000));
    reg.seed_blob("team/app", &blob.bytes);
    let client = alice_at(&reg.url());
    // Storage on the configured host (another port) is still followed over http...
    assert_eq!(
        read_blob(&client, "team/app", &blob.digest).await,
        blob.bytes
    );
    // ...but not storage on another host.
    let port = reg.redirect_url().rsplit_once(':').unwrap().1.to_owned();
    reg.hostile().add(HostileRule::new(
        OpKind::BlobGet,
        Some("team/app"),
        vec![Hostility::Header(
            "location",
            format!("http://localhost:{port}/blobs/{}", blob.digest).into_bytes(),
        )],
    ));
    let err = client
        .get_blob("team/app", &blob.digest, 0)
        .await
        .unwrap_err();
    assert!(
        matches!(&err.kind, ErrorKind::Refused(m) if m.contains("localhost")),
        "{err}"
    );
    assert_eq!(
        reg.stats().op(OpKind::RedirectBlobGet),
        1,
        "only the first read"
    );
}
