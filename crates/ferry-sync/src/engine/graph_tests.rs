//! Manifest graphs fuzzed: random JSON (or bytes) served as a manifest or an index goes through
//! `fetch_graph` to a graph or a clear error; an index chain too deep, or mislabelled, is refused.

use ferry_distribution::Digest;
use ferry_distribution::client::{RegistryClient, RegistryOptions};
use ferry_testkit::registry::{OCI_INDEX, OCI_MANIFEST, TestRegistry};
use proptest::prelude::*;

use super::fetch_graph;
use crate::source::Source;

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
