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
    /// The tag, when the reference names one.
    pub tag: Option<String>,
    /// The digest, when the reference pins one (with or without a tag).
    pub digest: Option<Digest>,
}

/// Outside text as an error quotes it: at most [`crate::text::SHOWN_BYTES`] of it, so a listed
/// name of a megabyte does not become a megabyte in every error and report line naming it.
fn shown(text: &str) -> String {
    crate::text::shorten(text, crate::text::SHOWN_BYTES).into_owned()
}

/// An image reference or tag that could not be parsed, with the input and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference {input:?}: {problem}")]
pub struct ReferenceError {
    /// The text that failed to parse.
    pub input: String,
    /// What was wrong with it.
    pub problem: ReferenceProblem,
}

/// What was wrong with a reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceProblem {
    /// The reference is empty.
    #[error("it is empty")]
    Empty,
    /// A registry with no repository after it.
    #[error("the repository name is missing")]
    MissingRepository,
    /// The registry part is not a host with an optional port.
    #[error("registry {registry:?} is not a valid host[:port]")]
    InvalidRegistry {
        /// The registry part as given.
        registry: String,
    },
    /// A repository component breaks the distribution grammar.
    #[error(
        "repository component {component:?} must be lowercase letters and digits separated by \
         '.', '_', '__' or dashes"
    )]
    InvalidRepositoryComponent {
        /// The offending component.
        component: String,
    },
    /// The repository name is longer than 255 characters.
    #[error("repository name is {length} characters long; at most 255 are allowed")]
    RepositoryTooLong {
        /// Its length in characters.
        length: usize,
    },
    /// The tag breaks the OCI tag grammar.
    #[error(
        "tag {tag:?} must be 1 to 128 characters: a letter, digit or '_', then letters, digits, \
         '.', '_' or '-'"
    )]
    InvalidTag {
        /// The tag as given.
        tag: String,
    },
    /// The part after `@` is not a digest.
    #[error("{0}")]
    InvalidDigest(DigestError),
}

impl Reference {
    /// Parses and normalises a reference such as `alpine`, `ghcr.io/o/app:1.2` or
    /// `[::1]:5000/x@sha256:…`.
    pub fn parse(input: &str) -> Result<Reference, ReferenceError> {
        let fail = |problem| ReferenceError {
            input: shown(input),
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
                    return Err(fail(ReferenceProblem::InvalidTag { tag: shown(tag) }));
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
                        registry: shown(first),
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
                    component: shown(component),
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
            input: shown(tag),
            problem: ReferenceProblem::InvalidTag { tag: shown(tag) },
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

    /// The tag as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Read-only: a `&str` cannot change the tag, so the grammar still holds.
impl std::ops::Deref for Tag {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// A tag equals the text it was parsed from.
impl PartialEq<str> for Tag {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Tag {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Tag {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
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
            input: shown(text),
            problem,
        };
        if text.is_empty() {
            return Err(fail(ReferenceProblem::MissingRepository));
        }
        if let Some(component) = text.split('/').find(|c| !is_valid_path_component(c)) {
            return Err(fail(ReferenceProblem::InvalidRepositoryComponent {
                component: shown(component),
            }));
        }
        if text.len() > REPOSITORY_MAX_LEN {
            return Err(fail(ReferenceProblem::RepositoryTooLong {
                length: text.len(),
            }));
        }
        Ok(RepositoryName(text.to_owned()))
    }

    /// The repository name as text.
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
    /// A validated tag.
    Tag(Tag),
    /// A digest.
    Digest(Digest),
}

impl ManifestReference {
    /// A digest when `text` has a `:` (`sha256:…`), otherwise a tag; either is validated.
    pub fn parse(text: &str) -> Result<ManifestReference, ReferenceError> {
        if text.contains(':') {
            Digest::parse(text)
                .map(ManifestReference::Digest)
                .map_err(|e| ReferenceError {
                    input: shown(text),
                    problem: ReferenceProblem::InvalidDigest(e),
                })
        } else {
            Tag::parse(text).map(ManifestReference::Tag)
        }
    }

    /// The digest, when the reference is one.
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
mod tests;
