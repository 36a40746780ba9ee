//! Platforms (`os/arch[/variant]`, parsed once) and the index filter: an index keeps only the
//! children a mapping asks for, so its digest changes; with every child kept the bytes stay.

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

    /// Does a descriptor's `platform` object name this platform? Os and architecture must be
    /// equal; a platform without a variant matches every variant.
    pub fn matches(&self, platform: &serde_json::Value) -> bool {
        let field = |name| platform.get(name).and_then(|v| v.as_str());
        field("os") == Some(self.os())
            && field("architecture") == Some(self.architecture())
            && (self.variant.is_none() || field("variant") == self.variant())
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

/// The index with only the wanted platforms, or `None` when nothing needs to change (not an
/// index, no filter, or every child kept). An index where nothing matches is an error.
pub fn filter_index(manifest: &Manifest, wanted: &[Platform]) -> Result<Option<Manifest>, String> {
    if wanted.is_empty() || !media::is_index(&manifest.media_type) {
        return Ok(None);
    }
    let mut index: serde_json::Value = serde_json::from_slice(&manifest.bytes)
        .map_err(|e| format!("index {} does not parse: {e}", manifest.digest))?;
    let Some(children) = index.get_mut("manifests").and_then(|m| m.as_array_mut()) else {
        return Err(format!("index {} has no manifests", manifest.digest));
    };
    let before = children.len();
    children.retain(|c| {
        c.get("platform")
            .is_some_and(|p| wanted.iter().any(|w| w.matches(p)))
    });
    if children.is_empty() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn platforms(texts: &[&str]) -> Vec<Platform> {
        texts.iter().map(|t| Platform::parse(t).unwrap()).collect()
    }

    fn index(platforms: &[(&str, &str, Option<&str>)]) -> Manifest {
        let children: Vec<_> = platforms
            .iter()
            .enumerate()
            .map(|(i, (os, arch, var))| {
                let mut p = serde_json::json!({"os": os, "architecture": arch});
                if let Some(v) = var {
                    p["variant"] = serde_json::json!(v);
                }
                serde_json::json!({
                    "mediaType": media::OCI_MANIFEST,
                    "digest": format!("sha256:{:064x}", i),
                    "size": 1,
                    "platform": p
                })
            })
            .collect();
        let bytes = Bytes::from(
            serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2, "mediaType": media::OCI_INDEX, "manifests": children
            }))
            .unwrap(),
        );
        Manifest {
            digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
            bytes,
            media_type: media::OCI_INDEX.into(),
        }
    }

    #[test]
    fn keeps_only_the_wanted_platforms_and_changes_the_digest() {
        let m = index(&[
            ("linux", "amd64", None),
            ("linux", "arm64", Some("v8")),
            ("linux", "arm", Some("v7")),
            ("windows", "amd64", None),
        ]);
        let wanted = platforms(&["linux/amd64", "linux/arm64"]);
        let f = filter_index(&m, &wanted).unwrap().expect("rewritten");
        assert_ne!(f.digest, m.digest);
        let v: serde_json::Value = serde_json::from_slice(&f.bytes).unwrap();
        let archs: Vec<_> = v["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["platform"]["architecture"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(archs, ["amd64", "arm64"]);
        // Deterministic.
        assert_eq!(filter_index(&m, &wanted).unwrap().unwrap().digest, f.digest);
    }

    #[test]
    fn leaves_the_bytes_alone_when_everything_is_kept_or_nothing_is_asked() {
        let m = index(&[("linux", "amd64", None), ("linux", "arm64", Some("v8"))]);
        assert_eq!(filter_index(&m, &[]).unwrap(), None);
        let all = platforms(&["linux/amd64", "linux/arm64/v8"]);
        assert_eq!(filter_index(&m, &all).unwrap(), None);
        assert!(filter_index(&m, &platforms(&["linux/s390x"])).is_err());
    }

    fn problem(text: &str) -> PlatformProblem {
        match Platform::parse(text) {
            Ok(p) => panic!("{text:?} parsed as {p:?}"),
            Err(e) => {
                assert_eq!(e.input, text);
                e.problem
            }
        }
    }

    #[test]
    fn parse_takes_os_arch_and_an_optional_variant_and_display_gives_the_text_back() {
        let p = Platform::parse("linux/amd64").unwrap();
        assert_eq!(
            (p.os(), p.architecture(), p.variant()),
            ("linux", "amd64", None)
        );
        assert_eq!(p.to_string(), "linux/amd64");
        let p = Platform::parse("linux/arm64/v8").unwrap();
        assert_eq!(
            (p.os(), p.architecture(), p.variant()),
            ("linux", "arm64", Some("v8"))
        );
        assert_eq!(p.to_string(), "linux/arm64/v8");
        // Equal to the text it came from, and to nothing else.
        assert_eq!(p, "linux/arm64/v8");
        assert_eq!(p, "linux/arm64/v8".to_owned());
        for other in [
            "linux/arm64",
            "linux/arm64/v8/",
            "linux/arm64/v8/x",
            "linux/arm64/v7",
            "",
        ] {
            assert_ne!(p, other);
        }
        assert_ne!(Platform::parse("linux/arm64").unwrap(), "linux/arm64/v8");
    }

    #[test]
    fn parse_refuses_empty_parts() {
        for text in [
            "",
            "/",
            "//",
            "/amd64",
            "linux/",
            "linux//amd64",
            "linux/amd64/",
            "//v8",
        ] {
            let expected = if text.is_empty() {
                PlatformProblem::NoArchitecture
            } else {
                PlatformProblem::EmptyPart
            };
            assert_eq!(problem(text), expected, "{text:?}");
        }
        assert_eq!(problem("linux"), PlatformProblem::NoArchitecture);
    }

    #[test]
    fn parse_refuses_more_than_three_parts() {
        for text in [
            "a/b/c/d",
            "linux/arm64/v8/",
            "linux/arm64/v8/extra",
            "a/b/c/d/e/f",
        ] {
            assert_eq!(problem(text), PlatformProblem::TooManyParts, "{text:?}");
        }
    }

    #[test]
    fn parse_refuses_control_characters_and_whitespace_anywhere() {
        for text in [
            "linux/amd64\n",
            "linux\n/amd64",
            "linux/amd64\0",
            "linux/\tamd64",
            "linux/amd64/v8\r",
            "linux/amd64\u{7f}",
            "linux/amd64\u{85}",
            "\u{1b}[31mlinux/amd64",
            " linux/amd64",
            "linux/amd64 ",
            "linux/amd 64",
            "linux/amd64\u{a0}",
            "linux/amd64\u{2003}",
            "linux/amd64\u{3000}",
            // Checked before the parts are counted.
            "\n",
            "a/b/c/d\n",
        ] {
            assert_eq!(problem(text), PlatformProblem::Character, "{text:?}");
        }
        // The error shows the input escaped.
        let e = Platform::parse("linux/amd64\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid platform \"linux/amd64\\n\": it holds a control character or whitespace"
        );
    }

    #[test]
    fn parse_handles_very_long_input() {
        let long = "a".repeat(1 << 20);
        let text = format!("linux/{long}/v8");
        let p = Platform::parse(&text).unwrap();
        assert_eq!(p.architecture(), long);
        assert_eq!(p.to_string(), text);
        assert_eq!(problem(&"/".repeat(1 << 20)), PlatformProblem::TooManyParts);
        assert_eq!(
            problem(&"a/".repeat(1 << 20)),
            PlatformProblem::TooManyParts
        );
        assert_eq!(problem(&format!("{text}\u{0}")), PlatformProblem::Character);
        assert_eq!(problem(&long), PlatformProblem::NoArchitecture);
    }

    #[test]
    fn a_platform_without_a_variant_matches_every_variant() {
        let wanted = Platform::parse("linux/arm").unwrap();
        for p in [
            serde_json::json!({"os": "linux", "architecture": "arm"}),
            serde_json::json!({"os": "linux", "architecture": "arm", "variant": "v6"}),
            serde_json::json!({"os": "linux", "architecture": "arm", "variant": "v7"}),
        ] {
            assert!(wanted.matches(&p), "{p}");
        }
    }

    #[test]
    fn a_platform_with_a_variant_matches_only_that_variant() {
        let wanted = Platform::parse("linux/arm/v7").unwrap();
        assert!(wanted.matches(&serde_json::json!(
            {"os": "linux", "architecture": "arm", "variant": "v7"}
        )));
        for p in [
            serde_json::json!({"os": "linux", "architecture": "arm"}),
            serde_json::json!({"os": "linux", "architecture": "arm", "variant": "v6"}),
            serde_json::json!({"os": "linux", "architecture": "arm", "variant": 7}),
        ] {
            assert!(!wanted.matches(&p), "{p}");
        }
    }

    #[test]
    fn os_and_architecture_must_both_match() {
        let wanted = Platform::parse("linux/amd64").unwrap();
        for p in [
            serde_json::json!({"os": "windows", "architecture": "amd64"}),
            serde_json::json!({"os": "linux", "architecture": "arm64"}),
            serde_json::json!({"os": "Linux", "architecture": "amd64"}),
            serde_json::json!({"architecture": "amd64"}),
            serde_json::json!({"os": "linux"}),
            serde_json::json!({"os": "linux", "architecture": null}),
            serde_json::json!({}),
            serde_json::json!("linux/amd64"),
            serde_json::json!(null),
        ] {
            assert!(!wanted.matches(&p), "{p}");
        }
        assert!(wanted.matches(&serde_json::json!(
            {"os": "linux", "architecture": "amd64", "os.version": "10"}
        )));
    }
}
