//! One read of a config reports every problem in it (issue 40): unknown fields anywhere, each
//! with "did you mean" or the ferry name of a regsync/skopeo spelling, beside the semantic
//! problems (a bad digest, an unknown target group) of the rest of the file.

use std::path::Path;

use ferry_config::parse;

fn problems(text: &str) -> Vec<String> {
    parse(text, Path::new("mirror.yaml"), &|_| None)
        .unwrap_err()
        .problems()
        .iter()
        .map(|p| format!("{}:{}: {}: {}", p.line, p.column, p.field, p.message))
        .collect()
}

#[test]
fn four_mistakes_in_four_places_are_reported_in_one_read() {
    // The newcomer config: an unknown field in two mappings, a bad digest, an unknown
    // target group.
    let text = "\
version: 1
target_groups:
  mirrors: [\"registry.local:5000/mirror\"]
mappings:
  - source: docker.io/library/alpine
    target: [\"registry.local:5000/alpine\"]
    tags: { include: [\"3.*\"] }
  - source: docker.io/library/busybox
    targets: [\"registry.local:5000/busybox\"]
    tagz: { latest: 2 }
    digests: [\"sha256:1234\"]
  - source: docker.io/library/nginx
    target_group: mirorrs
";
    let found = problems(text);
    assert_eq!(found.len(), 5, "{found:#?}");
    // The misspelt `target` leaves mapping 0 without targets, which is said too.
    assert_eq!(
        found[0],
        "5:11: mappings[0] (source docker.io/library/alpine): needs targets or target_group"
    );
    assert_eq!(
        found[1],
        "6:5: mappings[0] (source docker.io/library/alpine): unknown field `target`: did you mean `targets`?"
    );
    assert_eq!(
        found[2],
        "10:5: mappings[1] (source docker.io/library/busybox): unknown field `tagz`: did you mean `tags`?"
    );
    assert!(
        found[3].starts_with("11:15: mappings[1] (source docker.io/library/busybox): digests[0]"),
        "{found:#?}"
    );
    assert!(
        found[4].starts_with("13:19: mappings[2] (source docker.io/library/nginx): target_group")
            && found[4].contains("mirorrs"),
        "{found:#?}"
    );
}

#[test]
fn regsync_and_skopeo_spellings_name_the_ferry_field_and_the_converter() {
    let found = problems(
        "version: 1\ncreds:\n  - registry: docker.io\nsync:\n  - source: a\n    target: b\n",
    );
    assert_eq!(found.len(), 3, "{found:#?}");
    let found = &found[1..];
    assert!(
        found[0].starts_with(
            "2:1: : unknown field `creds`: regsync's spelling; ferry's is `registries`"
        ) && found[0].contains("`ferry convert regsync FILE`"),
        "{found:#?}"
    );
    assert!(
        found[1]
            .starts_with("4:1: : unknown field `sync`: regsync's spelling; ferry's is `mappings`"),
        "{found:#?}"
    );

    let found = problems(
        "version: 1\nregistries:\n  - host: quay.io\n    tls-verify: false\n    credentials: { username: u, password: p }\nmappings:\n  - source: quay.io/a\n    targets: [r.io/a]\n    images-by-tag-regex: { a: x }\n    tags: { allow: [\"v1\"], deny: [\"v1-rc\"] }\n",
    );
    let messages: Vec<&str> = found
        .iter()
        .map(|f| {
            f.split_once(": unknown field ")
                .map_or(f.as_str(), |(_, m)| m)
        })
        .collect();
    assert_eq!(messages.len(), 4, "{found:#?}");
    assert!(
        messages[0].starts_with("`tls-verify`: skopeo sync's spelling; ferry's is `insecure`"),
        "{found:#?}"
    );
    assert!(
        messages[1].starts_with("`credentials`: skopeo sync's spelling; ferry's is `auth`"),
        "{found:#?}"
    );
    assert!(
        messages[2].starts_with(
            "`images-by-tag-regex`: skopeo sync's spelling; ferry's is a mapping's `tags.regex`"
        ),
        "{found:#?}"
    );
    assert!(
        messages[2].contains("ferry convert skopeo-sync FILE --dest PREFIX"),
        "{found:#?}"
    );
    assert!(
        messages[3].starts_with("`allow`: regsync's spelling; ferry's is `regex`"),
        "{found:#?}"
    );
    // A skopeo sync file as a whole: its registry hosts at the top.
    let found = problems("version: 1\nquay.io:\n  images: { a: [] }\nmappings: []\n");
    assert!(
        found[0].contains("reads like a skopeo sync file"),
        "{found:#?}"
    );
}

#[test]
fn an_unknown_field_in_a_flow_mapping_or_last_in_a_block_is_blanked_and_the_rest_read() {
    // The rest of the file is still read as written: the mapping's tag filter and its exact
    // tag `3.10` (a plain scalar a string field takes as written).
    let text = "version: 1\nmappings:\n  - { source: a, tagz: 1, targets: [x], tags: { exact: [3.10], incude: [\"*\"] } }\n  - source: b\n    targets: [y]\n    colour: blue\n      # a comment under it\n  - source: c\n    targets: [z]\n";
    let found = problems(text);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_eq!(
        found[0],
        "3:18: mappings[0] (source a): unknown field `tagz`: did you mean `tags`?"
    );
    assert!(
        found[1].starts_with(
            "3:64: mappings[0] (source a): tags: unknown field `incude`: did you mean `include`?"
        ),
        "{found:#?}"
    );
    assert!(found[2].starts_with("6:5: mappings[1] (source b): unknown field `colour`, expected one of `concurrency`, `digests`"), "{found:#?}");
    // Without the unknown fields the same text loads, `3.10` kept as written.
    let clean = text
        .replace("tagz: 1, ", "")
        .replace(", incude: [\"*\"]", "")
        .replace("    colour: blue\n      # a comment under it\n", "");
    let config = parse(&clean, Path::new("mirror.yaml"), &|_| None).unwrap();
    assert_eq!(config.mappings[0].tags.spec().exact, ["3.10"]);
    assert_eq!(config.mappings.len(), 3);
}
