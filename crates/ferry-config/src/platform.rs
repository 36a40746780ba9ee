//! Platforms (`os/arch[/variant]`, parsed once, matched as containerd normalizes them) and the
//! index filter: an index keeps only the children asked for (and the buildx attestations of
//! those), so its digest changes; with every child kept the bytes stay.

use std::fmt;

use bytes::Bytes;
use ferry_distribution::ops::Manifest;
use ferry_distribution::{Algorithm, Digest, media};

/// A platform a mapping asks for, `os/arch[/variant]` (`linux/arm64/v8`). Constructed only by
/// [`Platform::parse`], so no part is empty and none holds a `/`, a control character or
/// whitespace; `Display` gives the text back.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Platform {
    os: String,
    architecture: String,
    variant: Option<String>,
}

/// A platform that could not be parsed, with the input and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid platform {input:?}: {problem}")]
pub struct PlatformError {
    /// The text that failed to parse.
    pub input: String,
    /// What was wrong with it.
    pub problem: PlatformProblem,
}

/// What was wrong with a platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PlatformProblem {
    /// A control character or whitespace somewhere in the text.
    #[error("it holds a control character or whitespace")]
    Character,
    /// Only one part: no architecture.
    #[error("it has no architecture (os/arch or os/arch/variant)")]
    NoArchitecture,
    /// More than `os/arch/variant`.
    #[error("it has more than three parts (os/arch or os/arch/variant)")]
    TooManyParts,
    /// An os, architecture or variant that is empty (`linux//amd64`, `linux/amd64/`).
    #[error("it has an empty part")]
    EmptyPart,
}

impl Platform {
    /// Parses `os/arch` or `os/arch/variant`.
    pub fn parse(text: &str) -> Result<Platform, PlatformError> {
        let fail = |problem| PlatformError {
            input: text.to_owned(),
            problem,
        };
        if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(fail(PlatformProblem::Character));
        }
        let mut parts = text.split('/');
        let os = parts.next().unwrap_or_default();
        let Some(architecture) = parts.next() else {
            return Err(fail(PlatformProblem::NoArchitecture));
        };
        let variant = parts.next();
        if parts.next().is_some() {
            return Err(fail(PlatformProblem::TooManyParts));
        }
        if os.is_empty() || architecture.is_empty() || variant == Some("") {
            return Err(fail(PlatformProblem::EmptyPart));
        }
        Ok(Platform {
            os: os.to_owned(),
            architecture: architecture.to_owned(),
            variant: variant.map(str::to_owned),
        })
    }

    /// The operating system (`linux`).
    pub fn os(&self) -> &str {
        &self.os
    }

    /// The architecture (`arm64`).
    pub fn architecture(&self) -> &str {
        &self.architecture
    }

    /// The variant (`v8`), if one was given.
    pub fn variant(&self) -> Option<&str> {
        self.variant.as_deref()
    }

    /// Does a descriptor's `platform` object name this platform? Both sides are normalized as
    /// containerd's `platforms.Normalize` does ([`Normalized`]) and must then be equal:
    /// `linux/arm64` and `linux/arm64/v8` are one platform, `linux/arm` is `linux/arm/v7`,
    /// `aarch64` is `arm64`; a variant containerd does not know is compared as written
    /// (lowercased). An `os` or `architecture` that is missing or not a string, or a `variant`
    /// that is not a string, matches nothing.
    pub fn matches(&self, platform: &serde_json::Value) -> bool {
        let field = |name| platform.get(name).and_then(|v| v.as_str());
        let (Some(os), Some(architecture)) = (field("os"), field("architecture")) else {
            return false;
        };
        let variant = match platform.get("variant") {
            None | Some(serde_json::Value::Null) => "",
            Some(serde_json::Value::String(v)) => v.as_str(),
            Some(_) => return false,
        };
        self.normalized() == Normalized::of(os, architecture, variant)
    }

    /// This platform as containerd compares it.
    pub fn normalized(&self) -> Normalized {
        Normalized::of(&self.os, &self.architecture, self.variant().unwrap_or(""))
    }

    /// Is `text` the `os/arch[/variant]` this platform prints as?
    fn is_text(&self, text: &str) -> bool {
        let mut parts = text.split('/');
        parts.next() == Some(self.os())
            && parts.next() == Some(self.architecture())
            && parts.next() == self.variant()
            && parts.next().is_none()
    }
}

/// A platform as containerd's `platforms.Normalize` reads it, for comparison only (a
/// [`Platform`] prints as written): lowercase; `macos` is `darwin`; `i386` is `386` with no
/// variant; `x86_64`/`x86-64` are `amd64`, whose `v1` is no variant; `aarch64` is `arm64`, whose
/// `8`/`v8`/`v8.0` are no variant and `9`/`9.0`/`v9.0` are `v9`; `armhf` is `arm/v7`, `armel`
/// `arm/v6`; `arm` with no variant or `7` is `arm/v7`, with `5`/`6`/`8` it is `v5`/`v6`/`v8`.
/// Any other variant is kept.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Normalized {
    /// The operating system.
    pub os: String,
    /// The architecture.
    pub architecture: String,
    /// The variant; empty for none.
    pub variant: String,
}

impl Normalized {
    /// Normalizes `os`, `architecture` and `variant` (empty for none).
    pub fn of(os: &str, architecture: &str, variant: &str) -> Normalized {
        let mut os = os.to_lowercase();
        if os == "macos" {
            os = "darwin".to_owned();
        }
        let mut architecture = architecture.to_lowercase();
        let mut variant = variant.to_lowercase();
        match architecture.as_str() {
            "i386" => {
                architecture = "386".to_owned();
                variant.clear();
            }
            "x86_64" | "x86-64" | "amd64" => {
                architecture = "amd64".to_owned();
                if variant == "v1" {
                    variant.clear();
                }
            }
            "aarch64" | "arm64" => {
                architecture = "arm64".to_owned();
                match variant.as_str() {
                    "8" | "v8" | "v8.0" => variant.clear(),
                    "9" | "9.0" | "v9.0" => variant = "v9".to_owned(),
                    _ => {}
                }
            }
            "armhf" => {
                architecture = "arm".to_owned();
                variant = "v7".to_owned();
            }
            "armel" => {
                architecture = "arm".to_owned();
                variant = "v6".to_owned();
            }
            "arm" => match variant.as_str() {
                "" | "7" => variant = "v7".to_owned(),
                "5" | "6" | "8" => variant = format!("v{variant}"),
                _ => {}
            },
            _ => {}
        }
        Normalized {
            os,
            architecture,
            variant,
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        Ok(())
    }
}

/// A platform equals the text it was parsed from.
impl PartialEq<str> for Platform {
    fn eq(&self, other: &str) -> bool {
        self.is_text(other)
    }
}

impl PartialEq<&str> for Platform {
    fn eq(&self, other: &&str) -> bool {
        self.is_text(other)
    }
}

impl PartialEq<String> for Platform {
    fn eq(&self, other: &String) -> bool {
        self.is_text(other)
    }
}

/// What a sync leaves on a target for a source root manifest: the one function the prepare
/// phase (the digest a target must hold), the engine (what it pushes) and `ferry verify` (what
/// it expects, and whose children it checks) all call.
#[derive(Debug, Clone)]
pub struct TargetRoot {
    /// The root with only the wanted platforms' children (the source's own root when nothing is
    /// filtered out): whose children a sync pushes.
    pub filtered: Manifest,
    /// With `platforms_keep_digest`, where the filter dropped children: the source's own index,
    /// pushed in the filtered one's place where the target takes it.
    pub kept: Option<Manifest>,
}

impl TargetRoot {
    /// The digest the target's tag names after a sync.
    pub fn digest(&self) -> &Digest {
        &self.kept.as_ref().unwrap_or(&self.filtered).digest
    }

    /// With a kept digest, the filtered index's: a target that refused the kept one holds it.
    pub fn fallback_digest(&self) -> Option<&Digest> {
        self.kept.as_ref().map(|_| &self.filtered.digest)
    }
}

/// The root a sync leaves on a target for `root` under `wanted` platforms (see [`TargetRoot`]);
/// an index where nothing matches is an error.
pub fn target_root(
    root: Manifest,
    wanted: &[Platform],
    keep_digest: bool,
) -> Result<TargetRoot, String> {
    Ok(match filter_index(&root, wanted)? {
        Some(filtered) => TargetRoot {
            filtered,
            kept: keep_digest.then_some(root),
        },
        None => TargetRoot {
            filtered: root,
            kept: None,
        },
    })
}

/// The index with only the wanted platforms, or `None` when nothing needs to change (not an
/// index, no filter, or every child kept). An index where nothing matches is an error.
fn filter_index(manifest: &Manifest, wanted: &[Platform]) -> Result<Option<Manifest>, String> {
    if wanted.is_empty() || !media::is_index(&manifest.media_type) {
        return Ok(None);
    }
    let mut index: serde_json::Value = serde_json::from_slice(&manifest.bytes)
        .map_err(|e| format!("index {} does not parse: {e}", manifest.digest))?;
    let Some(children) = index.get_mut("manifests").and_then(|m| m.as_array_mut()) else {
        return Err(format!("index {} has no manifests", manifest.digest));
    };
    let before = children.len();
    // A buildx attestation (platform `unknown/unknown`) follows the child it attests.
    let chosen: Vec<&str> = children
        .iter()
        .filter(|c| attested(c).is_none())
        .filter(|c| {
            c.get("platform")
                .is_some_and(|p| wanted.iter().any(|w| w.matches(p)))
        })
        .filter_map(|c| c.get("digest").and_then(|d| d.as_str()))
        .collect();
    let chosen: std::collections::HashSet<String> = chosen.into_iter().map(str::to_owned).collect();
    children.retain(|c| match attested(c) {
        Some(subject) => chosen.contains(subject),
        None => c
            .get("digest")
            .and_then(|d| d.as_str())
            .is_some_and(|d| chosen.contains(d)),
    });
    if !children.iter().any(|c| attested(c).is_none()) {
        return Err(format!(
            "index {} has no child for the platforms {}",
            manifest.digest,
            wanted
                .iter()
                .map(Platform::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if children.len() == before {
        return Ok(None);
    }
    let bytes = Bytes::from(
        serde_json::to_vec(&index).map_err(|e| format!("cannot write the filtered index: {e}"))?,
    );
    Ok(Some(Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes,
        media_type: manifest.media_type.clone(),
    }))
}

/// The annotation buildx puts on an attestation manifest in an index, and the one naming the
/// image manifest it attests.
const REFERENCE_TYPE: &str = "vnd.docker.reference.type";
const REFERENCE_DIGEST: &str = "vnd.docker.reference.digest";
const ATTESTATION_MANIFEST: &str = "attestation-manifest";

/// The digest an index child attests, when it is a buildx attestation manifest.
fn attested(child: &serde_json::Value) -> Option<&str> {
    let annotations = child.get("annotations")?;
    (annotations.get(REFERENCE_TYPE)?.as_str()? == ATTESTATION_MANIFEST)
        .then(|| annotations.get(REFERENCE_DIGEST)?.as_str())
        .flatten()
}

#[cfg(test)]
mod tests;
