//! Sources, targets and target prefixes as a config writes them (`oci:DIR`, `oci-archive:FILE[:REF]`,
//! `docker-archive:FILE[:REF]`, `host/repository`), parsed into places; registry hosts normalised.

use std::path::PathBuf;

use ferry_distribution::reference::{DOCKER_HUB, Reference};

use crate::Target;

/// The directory of an `oci:<directory>` source or target (`what`); `None` for anything else.
fn layout_dir(text: &str, what: &str) -> Option<Result<PathBuf, String>> {
    let dir = text.strip_prefix("oci:")?;
    Some(if dir.is_empty() {
        Err(format!("{what} \"{text}\" names no directory after oci:"))
    } else {
        Ok(PathBuf::from(dir))
    })
}

/// The file and the image named in an `oci-archive:PATH[:REF]` or `docker-archive:PATH[:REF]`
/// source or target (`what`), split at the first `:` after the scheme as skopeo does; `None`
/// for anything else.
fn archive(text: &str, what: &str) -> Option<Result<Target, String>> {
    let (rest, oci) = match (
        text.strip_prefix("oci-archive:"),
        text.strip_prefix("docker-archive:"),
    ) {
        (Some(rest), _) => (rest, true),
        (None, Some(rest)) => (rest, false),
        (None, None) => return None,
    };
    let (file, reference) = match rest.split_once(':') {
        Some((file, r)) => (file, Some(r)),
        None => (rest, None),
    };
    if file.is_empty() {
        return Some(Err(format!("{what} \"{text}\" names no file")));
    }
    if reference.is_some_and(|r| r.is_empty() || r.chars().any(char::is_control)) {
        return Some(Err(format!(
            "{what} \"{text}\" names an empty or unprintable image after the file"
        )));
    }
    let path = PathBuf::from(file);
    let reference = reference.map(str::to_owned);
    Some(Ok(if oci {
        Target::OciArchive { path, reference }
    } else {
        Target::DockerArchive { path, reference }
    }))
}

/// A source or target (`what`) as written: `oci:<directory>`, `oci-archive:<file>[:ref]`,
/// `docker-archive:<file>[:ref]`, or a repository reference without tag or digest.
pub fn parse_place(text: &str, what: &str) -> Result<Target, String> {
    if let Some(dir) = layout_dir(text, what) {
        return dir.map(|path| Target::OciLayout { path });
    }
    if let Some(archive) = archive(text, what) {
        return archive;
    }
    let r = parse_repository(text)?;
    Ok(Target::Registry {
        registry: r.registry,
        repository: r.repository,
    })
}

/// A mapping's target as written: a `docker-archive:` is read only.
pub fn parse_target(text: &str) -> Result<Target, String> {
    match parse_place(text, "target")? {
        Target::DockerArchive { .. } => Err(format!(
            "target \"{text}\": docker-archive: is read only; write an oci-archive: or oci: layout"
        )),
        target => Ok(target),
    }
}

/// A repository reference without tag or digest.
pub fn parse_repository(text: &str) -> Result<Reference, String> {
    let reference = Reference::parse(text).map_err(|e| e.to_string())?;
    if reference.tag.is_some() || reference.digest.is_some() {
        return Err(format!(
            "\"{text}\" names a tag or digest; name the repository only and select tags with tags.exact or digests"
        ));
    }
    Ok(reference)
}

pub fn normalise_host(host: &str) -> String {
    match Reference::parse(&format!("{host}/probe")) {
        Ok(r) => r.registry,
        Err(_) => host.to_ascii_lowercase(),
    }
}

/// A registry host as references name it; Docker Hub's aliases become `docker.io`.
pub fn parse_host(text: &str) -> Result<String, String> {
    let looks_like_host = text.contains('.') || text.contains(':') || text == "localhost";
    if !looks_like_host || text.contains('/') {
        return Err(format!(
            "\"{text}\" is not a registry host (e.g. docker.io, ghcr.io, localhost:5000)"
        ));
    }
    match Reference::parse(&format!("{text}/probe")) {
        Ok(r) if r.repository == "probe" || r.registry == DOCKER_HUB => Ok(r.registry),
        Ok(_) => Err(format!("\"{text}\" is not a registry host")),
        Err(e) => Err(e.problem.to_string()),
    }
}
