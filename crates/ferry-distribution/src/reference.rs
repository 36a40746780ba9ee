//! Image references (`registry/repository[:tag][@digest]`) parsed and normalised the way Docker
//! does it: `alpine` is `docker.io/library/alpine`, and Docker Hub's host aliases become `docker.io`.

use std::fmt;
use std::str::FromStr;

use crate::digest::{Digest, DigestError};

/// The registry name Docker Hub references normalise to.
pub const DOCKER_HUB: &str = "docker.io";
/// The host Docker Hub's registry API is served from.
pub const DOCKER_HUB_API_HOST: &str = "registry-1.docker.io";

const DOCKER_HUB_ALIASES: [&str; 3] = [DOCKER_HUB, "index.docker.io", DOCKER_HUB_API_HOST];
const REPOSITORY_MAX_LEN: usize = 255;
const TAG_MAX_LEN: usize = 128;

/// A parsed, normalised image reference. A reference may carry a tag, a digest, both or neither.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reference {
    /// Normalised registry host with optional port, lowercase (`docker.io`, `localhost:5000`).
    pub registry: String,
    /// Repository path inside the registry (`library/alpine`).
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

/// An image reference or tag that could not be parsed, with the input and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference {input:?}: {problem}")]
pub struct ReferenceError {
    pub input: String,
    pub problem: ReferenceProblem,
}

/// What was wrong with a reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceProblem {
    #[error("it is empty")]
    Empty,
    #[error("the repository name is missing")]
    MissingRepository,
    #[error("registry {registry:?} is not a valid host[:port]")]
    InvalidRegistry { registry: String },
    #[error(
        "repository component {component:?} must be lowercase letters and digits separated by \
         '.', '_', '__' or dashes"
    )]
    InvalidRepositoryComponent { component: String },
    #[error("repository name is {length} characters long; at most 255 are allowed")]
    RepositoryTooLong { length: usize },
    #[error(
        "tag {tag:?} must be 1 to 128 characters: a letter, digit or '_', then letters, digits, \
         '.', '_' or '-'"
    )]
    InvalidTag { tag: String },
    #[error("{0}")]
    InvalidDigest(DigestError),
}

impl Reference {
    /// Parses and normalises a reference such as `alpine`, `ghcr.io/o/app:1.2` or
    /// `[::1]:5000/x@sha256:…`.
    pub fn parse(input: &str) -> Result<Reference, ReferenceError> {
        let fail = |problem| ReferenceError {
            input: input.to_owned(),
            problem,
        };
        if input.is_empty() {
            return Err(fail(ReferenceProblem::Empty));
        }

        let (rest, digest) = match input.split_once('@') {
            Some((rest, digest)) => {
                let digest =
                    Digest::parse(digest).map_err(|e| fail(ReferenceProblem::InvalidDigest(e)))?;
                (rest, Some(digest))
            }
            None => (input, None),
        };

        // A tag follows the last ':' that comes after the last '/', so a registry port is never
        // mistaken for a tag.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let colon = last_slash + i;
                let tag = &rest[colon + 1..];
                if !is_valid_tag(tag) {
                    return Err(fail(ReferenceProblem::InvalidTag {
                        tag: tag.to_owned(),
                    }));
                }
                (&rest[..colon], Some(tag.to_owned()))
            }
            None => (rest, None),
        };
        if name.is_empty() {
            return Err(fail(ReferenceProblem::MissingRepository));
        }

        let (registry, repository) = match name.split_once('/') {
            Some((first, remainder)) if is_registry_component(first) => {
                if !is_valid_registry(first) {
                    return Err(fail(ReferenceProblem::InvalidRegistry {
                        registry: first.to_owned(),
                    }));
                }
                (first.to_ascii_lowercase(), remainder)
            }
            _ => (DOCKER_HUB.to_owned(), name),
        };
        if repository.is_empty() {
            return Err(fail(ReferenceProblem::MissingRepository));
        }

        let registry = if DOCKER_HUB_ALIASES.contains(&registry.as_str()) {
            DOCKER_HUB.to_owned()
        } else {
            registry
        };
        let repository = if registry == DOCKER_HUB && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository.to_owned()
        };

        for component in repository.split('/') {
            if !is_valid_path_component(component) {
                return Err(fail(ReferenceProblem::InvalidRepositoryComponent {
                    component: component.to_owned(),
                }));
            }
        }
        if repository.len() > REPOSITORY_MAX_LEN {
            return Err(fail(ReferenceProblem::RepositoryTooLong {
                length: repository.len(),
            }));
        }

        Ok(Reference {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The host to send registry API requests to: `registry-1.docker.io` for Docker Hub.
    pub fn api_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_API_HOST
        } else {
            &self.registry
        }
    }

    /// The same reference with `tag` as its tag; a digest, if any, is kept. The tag is not
    /// validated here: check untrusted tags with [`validate_tag`] first.
    pub fn with_tag(&self, tag: &str) -> Reference {
        Reference {
            tag: Some(tag.to_owned()),
            ..self.clone()
        }
    }

    /// The same reference pinned to `digest`; a tag, if any, is kept.
    pub fn with_digest(&self, digest: Digest) -> Reference {
        Reference {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// The repository alone, without tag or digest.
    pub fn repository_ref(&self) -> Reference {
        Reference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: None,
        }
    }
}

/// Checks a tag against `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn validate_tag(tag: &str) -> Result<(), ReferenceError> {
    if is_valid_tag(tag) {
        Ok(())
    } else {
        Err(ReferenceError {
            input: tag.to_owned(),
            problem: ReferenceProblem::InvalidTag {
                tag: tag.to_owned(),
            },
        })
    }
}

/// A tag, valid by the OCI grammar `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`. Constructed only by
/// [`Tag::parse`], so a tag can never carry `/`, `..`, `%`, a control character or a space into a
/// URL path or a file name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(String);

impl Tag {
    /// Validates `text` as a tag.
    pub fn parse(text: &str) -> Result<Tag, ReferenceError> {
        validate_tag(text).map(|()| Tag(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A repository name by the distribution grammar: `/`-separated components of
/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`, at most 255 characters. Constructed only by
/// [`RepositoryName::parse`]: no component is empty, `.`, `..` or percent-encoded.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepositoryName(String);

impl RepositoryName {
    /// Validates `text` as a repository name (no registry host, tag or digest).
    pub fn parse(text: &str) -> Result<RepositoryName, ReferenceError> {
        let fail = |problem| ReferenceError {
            input: text.to_owned(),
            problem,
        };
        if text.is_empty() {
            return Err(fail(ReferenceProblem::MissingRepository));
        }
        if let Some(component) = text.split('/').find(|c| !is_valid_path_component(c)) {
            return Err(fail(ReferenceProblem::InvalidRepositoryComponent {
                component: component.to_owned(),
            }));
        }
        if text.len() > REPOSITORY_MAX_LEN {
            return Err(fail(ReferenceProblem::RepositoryTooLong {
                length: text.len(),
            }));
        }
        Ok(RepositoryName(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The components between the slashes, each safe as one URL path segment.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

/// What names a manifest in a request path: a validated tag or a digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ManifestReference {
    Tag(Tag),
    Digest(Digest),
}

impl ManifestReference {
    /// A digest when `text` has a `:` (`sha256:…`), otherwise a tag; either is validated.
    pub fn parse(text: &str) -> Result<ManifestReference, ReferenceError> {
        if text.contains(':') {
            Digest::parse(text)
                .map(ManifestReference::Digest)
                .map_err(|e| ReferenceError {
                    input: text.to_owned(),
                    problem: ReferenceProblem::InvalidDigest(e),
                })
        } else {
            Tag::parse(text).map(ManifestReference::Tag)
        }
    }

    pub fn digest(&self) -> Option<&Digest> {
        match self {
            ManifestReference::Digest(d) => Some(d),
            ManifestReference::Tag(_) => None,
        }
    }
}

macro_rules! name_text {
    ($name:ty) => {
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl FromStr for $name {
            type Err = ReferenceError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$name>::parse(s)
            }
        }
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
    };
}
name_text!(Tag);
name_text!(RepositoryName);

impl fmt::Display for ManifestReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestReference::Tag(t) => t.fmt(f),
            ManifestReference::Digest(d) => d.fmt(f),
        }
    }
}

impl FromStr for Reference {
    type Err = ReferenceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reference::parse(s)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

fn is_valid_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    match bytes.split_first() {
        Some((first, rest)) => {
            bytes.len() <= TAG_MAX_LEN
                && (first.is_ascii_alphanumeric() || *first == b'_')
                && rest
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        }
        None => false,
    }
}

/// Docker's rule: the first component names a registry when it has a '.' or ':' or is `localhost`.
fn is_registry_component(first: &str) -> bool {
    first.contains('.') || first.contains(':') || first == "localhost"
}

/// `host[:port]` where host is DNS labels separated by '.' or a bracketed IPv6 literal.
fn is_valid_registry(registry: &str) -> bool {
    let (host, port) = if let Some(inner) = registry.strip_prefix('[') {
        let Some((address, after)) = inner.split_once(']') else {
            return false;
        };
        if address.is_empty()
            || !address.contains(':')
            || !address
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return false;
        }
        match after {
            "" => return true,
            _ => match after.strip_prefix(':') {
                Some(port) => (None, Some(port)),
                None => return false,
            },
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(registry), None),
        }
    };
    if let Some(host) = host
        && (host.is_empty() || !host.split('.').all(is_valid_dns_label))
    {
        return false;
    }
    match port {
        Some(port) => {
            !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u16>().is_ok()
        }
        None => true,
    }
}

fn is_valid_dns_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        }
        _ => false,
    }
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn is_valid_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        // One run of [a-z0-9]+.
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        // One separator: '.', '_', '__' or '-'+.
        match bytes[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if bytes.get(i) == Some(&b'_') {
                    i += 1;
                }
            }
            b'-' => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
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
}
