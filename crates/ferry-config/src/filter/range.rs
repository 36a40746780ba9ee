//! Version ranges as people write them: Cargo's comma form (`>=1.0, <2`), Helm's and npm's
//! spaces (`>=1.0 <2.0`), alternatives (`^1.2 || ~2.3`) and hyphen ranges (`1.2 - 2.3`).

use std::fmt;

/// A `semver:` range: one or more alternatives, each a set of comparators that must all hold.
///
/// Grammar (docs/config.md, "Version ranges"):
/// - `range := alternative ("||" alternative)*`; a version matches when any alternative does;
/// - `alternative := comparator ([","] comparator)*`, or `version " - " version` (inclusive);
/// - `comparator := [op] version`, `op` one of `=`, `>`, `>=`, `<`, `<=`, `~`, `^` (a space
///   between the operator and the version is allowed), `version` of one to three numbers with
///   `*`/`x` wildcards and an optional prerelease, as in Cargo's semver.
#[derive(Clone, Debug)]
pub struct VersionRange {
    alternatives: Vec<semver::VersionReq>,
}

/// Why a range could not be read: the alternative at fault and what the parser said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeError(String);

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl VersionRange {
    /// Reads a range in any of the forms above.
    pub fn parse(text: &str) -> Result<VersionRange, RangeError> {
        let several = text.contains("||");
        let mut alternatives = Vec::new();
        for alternative in text.split("||") {
            let comparators = comparators(alternative)?;
            let joined = comparators.join(", ");
            let req = semver::VersionReq::parse(&joined).map_err(|e| match several {
                // The whole range is quoted by the caller; name the alternative only among several.
                true => RangeError(format!("in \"{}\": {e}", alternative.trim())),
                false => RangeError(e.to_string()),
            })?;
            alternatives.push(req);
        }
        Ok(VersionRange { alternatives })
    }

    /// Whether `version` lies in the range.
    pub fn matches(&self, version: &semver::Version) -> bool {
        self.alternatives.iter().any(|req| req.matches(version))
    }
}

/// Splits one alternative into comparators, in Cargo's spelling.
fn comparators(alternative: &str) -> Result<Vec<String>, RangeError> {
    let words: Vec<&str> = alternative
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return Err(RangeError(
            "an empty alternative (nothing between `||` or around it)".into(),
        ));
    }
    if let [low, "-", high] = words.as_slice() {
        return Ok(vec![format!(">={low}"), format!("<={high}")]);
    }
    if words.contains(&"-") {
        return Err(RangeError(format!(
            "\"{}\": a hyphen range is `LOW - HIGH` and stands alone in its alternative",
            alternative.trim()
        )));
    }
    let mut out = Vec::with_capacity(words.len());
    let mut pending_op: Option<&str> = None;
    for word in words {
        if is_operator(word) {
            if let Some(op) = pending_op {
                return Err(RangeError(format!(
                    "operator `{op}` has no version after it"
                )));
            }
            pending_op = Some(word);
            continue;
        }
        out.push(match pending_op.take() {
            Some(op) => format!("{op}{word}"),
            None => word.to_string(),
        });
    }
    if let Some(op) = pending_op {
        return Err(RangeError(format!(
            "operator `{op}` has no version after it"
        )));
    }
    Ok(out)
}

fn is_operator(word: &str) -> bool {
    matches!(word, "=" | ">" | ">=" | "<" | "<=" | "~" | "^")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(range: &str, version: &str) -> bool {
        VersionRange::parse(range)
            .unwrap()
            .matches(&semver::Version::parse(version).unwrap())
    }

    #[test]
    fn reads_cargo_helm_and_npm_forms_alike() {
        for range in [
            ">=1.0, <2.0",
            ">=1.0 <2.0",
            ">= 1.0 < 2.0",
            ">=1.0,<2.0",
            "1.0 - 1.99",
        ] {
            assert!(matches(range, "1.5.0"), "{range}");
            assert!(!matches(range, "2.0.0"), "{range}");
            assert!(!matches(range, "0.9.0"), "{range}");
        }
    }

    #[test]
    fn alternatives_match_when_any_does() {
        let range = "^1.2 || ~2.3";
        assert!(matches(range, "1.9.0"));
        assert!(matches(range, "2.3.7"));
        assert!(!matches(range, "2.4.0"));
        assert!(!matches(range, "1.1.0"));
    }

    #[test]
    fn a_hyphen_range_includes_both_ends() {
        assert!(matches("1.2 - 2.3", "1.2.0"));
        // As in npm, a partial upper end takes every version it starts: 2.3.x is in.
        assert!(matches("1.2 - 2.3", "2.3.9"));
        assert!(!matches("1.2 - 2.3", "2.4.0"));
        assert!(!matches("1.2 - 2.3", "1.1.9"));
    }

    #[test]
    fn malformed_ranges_say_what_is_wrong() {
        for range in ["", ">=1 ||", ">=", "1 - 2 - 3", ">=3.x.y", "^1.2 | ~2"] {
            assert!(VersionRange::parse(range).is_err(), "{range}");
        }
        // Among several alternatives, the one at fault is named.
        let e = VersionRange::parse("^1.2 || >=3.x.y")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("in \">=3.x.y\": "), "{e}");
    }
}
