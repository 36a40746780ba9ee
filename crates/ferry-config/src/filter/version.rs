//! Lenient tag versions: `v1.2`, `1.2`, `1.2.3-alpine` (variant), `2.0.0-rc1` (prerelease),
//! read into a semver version plus an optional variant so tags can be ranged and ordered.

use std::cmp::Ordering;
use std::fmt;

/// Words that start a prerelease suffix (`-rc1`, `-beta.2`); any other suffix is a variant.
const PRERELEASE_WORDS: [&str; 6] = ["alpha", "beta", "rc", "pre", "preview", "dev"];

/// A tag read as a version. `1.2` is `1.2.0`; `1.2.3-alpine` is `1.2.3` with variant `alpine`;
/// `2.0.0-rc1` is the prerelease `2.0.0-rc.1`; `2.0.0-rc1-alpine` is that prerelease with
/// variant `alpine`. Build metadata after `+` is kept but, as in semver, does not order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagVersion {
    /// The version proper, with the prerelease normalised (`rc1` → `rc.1`).
    pub version: semver::Version,
    /// A suffix that is not a prerelease (`alpine`, `slim-bookworm`), kept as written.
    pub variant: Option<String>,
}

impl TagVersion {
    /// Reads a tag as a version; `None` when the tag is not one (`latest`, `1.2.3.4`, `main`).
    pub fn parse(tag: &str) -> Option<TagVersion> {
        let text = tag
            .strip_prefix('v')
            .or_else(|| tag.strip_prefix('V'))
            .unwrap_or(tag);
        let (text, build) = match text.split_once('+') {
            Some((head, build)) => (head, Some(build)),
            None => (text, None),
        };
        let (numbers, suffix) = match text.split_once('-') {
            Some((numbers, suffix)) => (numbers, Some(suffix)),
            None => (text, None),
        };
        let mut parts = [0u64; 3];
        for (index, piece) in numbers.split('.').enumerate() {
            if index == 3 || piece.is_empty() || !piece.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            parts[index] = piece.parse().ok()?;
        }
        let mut version = semver::Version::new(parts[0], parts[1], parts[2]);
        let mut variant = None;
        if let Some(suffix) = suffix {
            if suffix.is_empty() {
                return None;
            }
            let (pre, rest) = split_prerelease(suffix);
            if let Some(pre) = pre {
                version.pre = semver::Prerelease::new(&pre).ok()?;
            }
            if let Some(rest) = rest {
                if rest.is_empty() {
                    return None;
                }
                variant = Some(rest.to_string());
            }
        }
        if let Some(build) = build {
            version.build = semver::BuildMetadata::new(build).ok()?;
        }
        Some(TagVersion { version, variant })
    }

    /// Orders two versions: by semver precedence, then variant (none first), then build.
    pub fn precedence(&self, other: &TagVersion) -> Ordering {
        self.version
            .cmp_precedence(&other.version)
            .then_with(|| self.variant.cmp(&other.variant))
            .then_with(|| self.version.build.cmp(&other.version.build))
    }
}

impl Ord for TagVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.precedence(other)
    }
}

impl PartialOrd for TagVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for TagVersion {
    /// The canonical spelling; parsing it yields an equal `TagVersion`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.version;
        write!(f, "{}.{}.{}", v.major, v.minor, v.patch)?;
        match (&v.pre.is_empty(), &self.variant) {
            (false, Some(variant)) => write!(f, "-{}-{variant}", v.pre)?,
            (false, None) => write!(f, "-{}", v.pre)?,
            (true, Some(variant)) => write!(f, "-{variant}")?,
            (true, None) => {}
        }
        if !v.build.is_empty() {
            write!(f, "+{}", v.build)?;
        }
        Ok(())
    }
}

/// Splits a suffix into a normalised prerelease (`rc1` → `rc.1`, `beta.2` stays) and the rest
/// after the next hyphen, which is a variant. A suffix not starting with a prerelease word is
/// all variant.
fn split_prerelease(suffix: &str) -> (Option<String>, Option<&str>) {
    let (head, rest) = match suffix.split_once('-') {
        Some((head, rest)) => (head, Some(rest)),
        None => (suffix, None),
    };
    let lower = head.to_ascii_lowercase();
    for word in PRERELEASE_WORDS {
        let Some(tail) = lower.strip_prefix(word) else {
            continue;
        };
        let tail = tail.strip_prefix('.').unwrap_or(tail);
        if tail.is_empty() {
            return (Some(word.to_string()), rest);
        }
        let numeric_parts = tail
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if numeric_parts {
            // Numbers are semver identifiers without leading zeros: "rc01" reads as rc.1.
            let numbers: Option<Vec<String>> = tail
                .split('.')
                .map(|p| p.parse::<u64>().ok().map(|n| n.to_string()))
                .collect();
            if let Some(numbers) = numbers {
                return (Some(format!("{word}.{}", numbers.join("."))), rest);
            }
        }
    }
    (None, Some(suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(tag: &str) -> TagVersion {
        TagVersion::parse(tag).unwrap()
    }

    #[test]
    fn reads_lenient_forms() {
        assert_eq!(v("v1.2").version, semver::Version::new(1, 2, 0));
        assert_eq!(v("1").version, semver::Version::new(1, 0, 0));
        let alpine = v("1.2.3-alpine");
        assert_eq!(alpine.version, semver::Version::new(1, 2, 3));
        assert_eq!(alpine.variant.as_deref(), Some("alpine"));
        let rc = v("2.0.0-rc1");
        assert_eq!(rc.version.pre.as_str(), "rc.1");
        assert_eq!(rc.variant, None);
        let both = v("2.0.0-rc1-alpine");
        assert_eq!(both.version.pre.as_str(), "rc.1");
        assert_eq!(both.variant.as_deref(), Some("alpine"));
        assert_eq!(v("3.19-alpine3.19").variant.as_deref(), Some("alpine3.19"));
    }

    #[test]
    fn rejects_non_versions() {
        for tag in [
            "latest", "1.2.3.4", "main", "", "v", "1..2", "1.2-", "1.x", "-1",
        ] {
            assert_eq!(TagVersion::parse(tag), None, "{tag}");
        }
    }

    #[test]
    fn orders_prereleases_numerically_and_before_release() {
        assert!(v("2.0.0-rc2") < v("2.0.0-rc10"));
        assert!(v("2.0.0-rc10") < v("2.0.0"));
        assert!(v("1.9") < v("1.10"));
        assert!(v("1.2.3") < v("1.2.3-alpine"));
    }
}
