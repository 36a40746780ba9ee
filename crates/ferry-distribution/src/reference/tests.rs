//! Tests of reference parsing and of the name types: normalisation, round trips, and the
//! hostile names (`..`, `/`, `%2f`, control characters) none of them accepts.

use super::*;
use crate::digest::Algorithm;
use proptest::prelude::*;

fn parse(s: &str) -> Reference {
    Reference::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
}

fn problem(s: &str) -> ReferenceProblem {
    match Reference::parse(s) {
        Ok(r) => panic!("{s:?} should not parse, got {r:?}"),
        Err(e) => {
            assert_eq!(e.input, s);
            e.problem
        }
    }
}

fn sha() -> Digest {
    Digest::of_bytes(Algorithm::Sha256, b"x")
}

#[test]
fn normalises_docker_hub_names() {
    let r = parse("alpine");
    assert_eq!(
        (r.registry.as_str(), r.repository.as_str()),
        ("docker.io", "library/alpine")
    );
    assert_eq!(r.tag, None);
    assert_eq!(r.digest, None);
    assert_eq!(parse("user/app").repository, "user/app");
    assert_eq!(parse("user/app").registry, "docker.io");
    for host in [
        "index.docker.io",
        "registry-1.docker.io",
        "docker.io",
        "Docker.IO",
    ] {
        let r = parse(&format!("{host}/alpine:3"));
        assert_eq!(r.registry, "docker.io", "{host}");
        assert_eq!(r.repository, "library/alpine", "{host}");
        assert_eq!(r.tag.as_deref(), Some("3"));
    }
    assert_eq!(parse("docker.io/a/b/c").repository, "a/b/c");
}

#[test]
fn first_component_is_a_registry_only_by_dockers_rule() {
    assert_eq!(parse("localhost/x").registry, "localhost");
    assert_eq!(parse("localhost:5000/x").registry, "localhost:5000");
    assert_eq!(parse("ghcr.io/o/app").registry, "ghcr.io");
    assert_eq!(parse("ghcr.io/o/app").repository, "o/app");
    assert_eq!(parse("myhost:80/x").registry, "myhost:80");
    let r = parse("myhost/x");
    assert_eq!(
        (r.registry.as_str(), r.repository.as_str()),
        ("docker.io", "myhost/x")
    );
    let r = parse("localhost");
    assert_eq!(r.repository, "library/localhost");
}

#[test]
fn ports_and_ipv6_are_not_tags() {
    let r = parse("localhost:5000/x");
    assert_eq!((r.repository.as_str(), r.tag.as_deref()), ("x", None));
    let r = parse("localhost:5000/x:1.0");
    assert_eq!(r.tag.as_deref(), Some("1.0"));
    let r = parse("[::1]:5000/x:v1");
    assert_eq!(r.registry, "[::1]:5000");
    assert_eq!(r.repository, "x");
    assert_eq!(r.tag.as_deref(), Some("v1"));
    assert_eq!(parse("[fe80::1]/team/x").registry, "[fe80::1]");
    assert_eq!(api(&parse("[::1]:5000/x")), "[::1]:5000");
}

fn api(r: &Reference) -> &str {
    r.api_host()
}

#[test]
fn tag_and_digest_together() {
    let d = sha();
    let r = parse(&format!("ghcr.io/o/app:1.2@{d}"));
    assert_eq!(r.tag.as_deref(), Some("1.2"));
    assert_eq!(r.digest.as_ref(), Some(&d));
    let r = parse(&format!("alpine@{d}"));
    assert_eq!(r.tag, None);
    assert_eq!(r.digest, Some(d));
}

#[test]
fn display_round_trips() {
    let d = sha();
    for s in [
        "docker.io/library/alpine".to_owned(),
        "docker.io/library/alpine:3.20".to_owned(),
        format!("localhost:5000/a/b:t@{d}"),
        format!("[::1]:5000/x@{d}"),
        "quay.io/a__b/c-d---e.f_g:_x".to_owned(),
    ] {
        assert_eq!(parse(&s).to_string(), s);
        assert_eq!(s.parse::<Reference>().unwrap(), parse(&s));
    }
    assert_eq!(parse("alpine:3").to_string(), "docker.io/library/alpine:3");
}

#[test]
fn rejects_bad_repositories() {
    assert_eq!(problem(""), ReferenceProblem::Empty);
    assert!(matches!(
        problem("Alpine"),
        ReferenceProblem::InvalidRepositoryComponent { component } if component == "Alpine"
    ));
    for bad in [
        "a..b", "a-", "-a", "a___b", "a/", "a//b", "_a", "a.-b", "a b",
    ] {
        assert!(
            matches!(
                problem(&format!("ghcr.io/{bad}")),
                ReferenceProblem::InvalidRepositoryComponent { .. }
            ),
            "{bad}"
        );
    }
    assert_eq!(problem("ghcr.io/"), ReferenceProblem::MissingRepository);
    assert_eq!(problem(":tag"), ReferenceProblem::MissingRepository);
    let long = format!("ghcr.io/{}", "a".repeat(256));
    assert_eq!(
        problem(&long),
        ReferenceProblem::RepositoryTooLong { length: 256 }
    );
    parse(&format!("ghcr.io/{}", "a".repeat(255)));
}

#[test]
fn rejects_bad_registries_tags_and_digests() {
    for bad in [
        "bad_host.io/x",
        "-a.io/x",
        "a.io:/x",
        "a.io:99999/x",
        "[::1/x",
        "[zz::1]/x",
        "a..io/x",
    ] {
        assert!(
            matches!(problem(bad), ReferenceProblem::InvalidRegistry { .. }),
            "{bad}"
        );
    }
    for bad in ["x:", "x:-a", "x:.a"] {
        let p = problem(bad);
        assert!(
            matches!(
                p,
                ReferenceProblem::InvalidTag { .. }
                    | ReferenceProblem::InvalidRepositoryComponent { .. }
            ),
            "{bad}: {p:?}"
        );
    }
    assert!(matches!(problem("x:-a"), ReferenceProblem::InvalidTag { tag } if tag == "-a"));
    assert!(matches!(
        problem(&format!("x:{}", "a".repeat(129))),
        ReferenceProblem::InvalidTag { .. }
    ));
    parse(&format!("x:{}", "a".repeat(128)));
    assert!(matches!(
        problem("x@sha256:abc"),
        ReferenceProblem::InvalidDigest(_)
    ));
    let message = Reference::parse("x:-a").unwrap_err().to_string();
    assert!(
        message.contains("\"x:-a\"") && message.contains("tag"),
        "{message}"
    );
}

#[test]
fn validate_tag_checks_the_tag_grammar() {
    for good in ["latest", "_", "A1.2-3_4", "v1"] {
        validate_tag(good).unwrap();
    }
    for bad in ["", ".a", "-a", "a:b", "a/b", "ä"] {
        assert!(validate_tag(bad).is_err(), "{bad}");
    }
    validate_tag(&"a".repeat(128)).unwrap();
    assert!(validate_tag(&"a".repeat(129)).is_err());
}

#[test]
fn names_from_outside_become_types_only_when_valid() {
    for hostile in [
        "..",
        ".",
        "x/../../../repo-0001/manifests/v0",
        "a%2fb",
        "..\\..\\x",
        "a b",
        "a\u{1b}[2Jb",
        "a\nb",
        "",
        "ä",
    ] {
        assert!(Tag::parse(hostile).is_err(), "tag {hostile:?}");
        assert!(
            RepositoryName::parse(hostile).is_err(),
            "repository {hostile:?}"
        );
        assert!(
            ManifestReference::parse(hostile).is_err(),
            "reference {hostile:?}"
        );
    }
    for hostile in ["a/../b", "a//b", "/a", "a/", "a/%2e%2e/b", "A/b"] {
        assert!(RepositoryName::parse(hostile).is_err(), "{hostile:?}");
    }
    assert!(RepositoryName::parse(&"a".repeat(256)).is_err());
    assert_eq!(Tag::parse("v1.2_3-x").unwrap().as_str(), "v1.2_3-x");
    assert_eq!(
        RepositoryName::parse("team/app")
            .unwrap()
            .components()
            .collect::<Vec<_>>(),
        ["team", "app"]
    );
    let d = sha();
    assert_eq!(
        ManifestReference::parse(&d.to_string()).unwrap(),
        ManifestReference::Digest(d)
    );
    assert!(ManifestReference::parse("sha256:zz").is_err());
    assert!(matches!(
        ManifestReference::parse("latest").unwrap(),
        ManifestReference::Tag(_)
    ));
}

#[test]
fn helpers_build_related_references() {
    let r = parse("alpine:3");
    assert_eq!(r.api_host(), "registry-1.docker.io");
    assert_eq!(parse("ghcr.io/a/b").api_host(), "ghcr.io");
    let d = sha();
    let pinned = r.with_digest(d.clone());
    assert_eq!(pinned.tag.as_deref(), Some("3"));
    assert_eq!(pinned.digest.as_ref(), Some(&d));
    let retagged = pinned.with_tag("4");
    assert_eq!(retagged.tag.as_deref(), Some("4"));
    assert_eq!(retagged.digest, Some(d));
    let bare = retagged.repository_ref();
    assert_eq!(bare.to_string(), "docker.io/library/alpine");
}

fn component() -> impl Strategy<Value = String> {
    "[a-z0-9]{1,4}((\\.|_|__|-{1,3})[a-z0-9]{1,4}){0,2}"
}

fn registry() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("docker.io".to_owned()),
        Just("localhost".to_owned()),
        "[a-z][a-z0-9-]{0,5}[a-z0-9]\\.(io|com)(:[1-9][0-9]{0,3})?",
        "localhost:[1-9][0-9]{0,3}",
        Just("[::1]:5000".to_owned()),
    ]
}

proptest! {
    #[test]
    fn generated_references_round_trip(
        registry in registry(),
        components in proptest::collection::vec(component(), 2..4),
        tag in proptest::option::of("[A-Za-z0-9_][A-Za-z0-9._-]{0,20}"),
        digest in proptest::option::of(any::<Vec<u8>>()),
    ) {
        let reference = Reference {
            registry,
            repository: components.join("/"),
            tag,
            digest: digest.map(|bytes| Digest::of_bytes(Algorithm::Sha256, &bytes)),
        };
        let text = reference.to_string();
        prop_assert_eq!(Reference::parse(&text).unwrap(), reference);
    }

    #[test]
    fn parse_never_panics(s in "\\PC{0,80}") {
        let _ = Reference::parse(&s);
    }

    #[test]
    fn parsed_references_reparse_to_themselves(s in "[a-z0-9./:_@-]{1,40}") {
        if let Ok(r) = Reference::parse(&s) {
            prop_assert_eq!(Reference::parse(&r.to_string()).unwrap(), r);
        }
    }
}

#[test]
fn a_huge_name_is_quoted_cut_in_its_error() {
    let huge = format!("{}\n", "B".repeat(1 << 20));
    for e in [
        Tag::parse(&huge).unwrap_err(),
        RepositoryName::parse(&huge).unwrap_err(),
        Reference::parse(&format!("ghcr.io/x:{huge}")).unwrap_err(),
    ] {
        let shown = e.to_string();
        assert!(shown.len() < 1024, "{} bytes", shown.len());
        assert!(!shown.contains('\n'), "{shown}");
    }
}
