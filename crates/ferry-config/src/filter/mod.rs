//! Tag filters: the `tags:` block of a mapping as written (`TagFilterSpec`), compiled into a
//! `TagFilter` whose `select` runs the documented pipeline and says why each tag was left out.
//!
//! Pipeline, applied to the listed tags (duplicates ignored):
//! 1. `include` globs — a tag must match one (default `["*"]`; see [`TagFilterSpec::include`]);
//! 2. `exclude` globs — a tag matching any is dropped;
//! 3. `regex` — a tag must match it (unanchored search; anchor with `^…$`), then `deny` — a tag
//!    matching any of these regexes is dropped (Rust's regex has no look-ahead, so "all but"
//!    needs a second list);
//! 4. `semver` range — tags that are not lenient versions are dropped, and versions outside
//!    the range are dropped (prereleases follow semver: only matched by a range naming one);
//! 5. `sort` — `semver` (default: non-versions first by name, then versions by precedence) or
//!    `alpha` (by name), ascending;
//! 6. `latest` N — keep the last N of that order;
//! 7. `exact` tags that exist in the listing are added back, whatever the steps above said.
//!
//! The result is in the sort order of step 5, so it does not depend on the listing's order.

pub mod range;
pub mod version;

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;

use ferry_distribution::reference::Tag;
use globset::{Glob, GlobSet, GlobSetBuilder};
use regex::Regex;

use range::VersionRange;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use version::TagVersion;

/// How selected tags are ordered before `latest` keeps the last N.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TagSort {
    /// Versions by semver precedence (`v1.2` = `1.2.0`), after all tags that are not versions.
    #[default]
    Semver,
    /// Plain byte order of the tag names.
    Alpha,
}

/// Which tags of a source repository to mirror. All fields are optional; see the module docs
/// for the order in which they apply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagFilterSpec {
    /// Glob patterns (`*`, `?`, `[abc]`); a tag must match at least one. When absent it is
    /// `["*"]` — unless `exact` is the only field set, then only the exact tags are selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Glob patterns; a tag matching any of them is dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// A regular expression (Rust `regex` syntax) a tag must match; unanchored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Regular expressions (Rust `regex` syntax, unanchored); a tag matching any is dropped,
    /// after `include`, `exclude` and `regex` (regsync's `deny`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// A semver range such as `">=3.18, <4"`; tags that are not versions are dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// Order used by `latest`: `semver` (default) or `alpha`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<TagSort>,
    /// Keep only the last N tags of the sort order (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<usize>,
    /// Tags always selected when they exist, whatever the other fields say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exact: Vec<String>,
}

/// A tag filter that could not be compiled; `field` is the `tags.` field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FilterError {
    /// `include`, `exclude`, `regex`, `semver`, `latest` or `exact`, with an index for lists.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// Why a listed tag was not selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// It matched none of the `include` globs.
    NotIncluded,
    /// It matched this `exclude` glob.
    Excluded {
        /// The glob as written.
        glob: String,
    },
    /// It did not match the `regex`.
    RegexMismatch {
        /// The regex as written.
        regex: String,
    },
    /// It matched this `deny` regex.
    Denied {
        /// The regex as written.
        regex: String,
    },
    /// A `semver` range is set and the tag is not a version.
    NotAVersion,
    /// The tag is a version outside the `semver` range.
    OutsideRange {
        /// The range as written.
        range: String,
    },
    /// The tag is a prerelease of a version the range holds, and the range names no prerelease
    /// of that version (semver's prerelease rule).
    PrereleaseNotNamed {
        /// The range as written.
        range: String,
    },
    /// Only `exact` tags are selected and this one is not among them.
    NotExact,
    /// It was selected so far but not among the last `latest` of the sort order.
    BeyondLatest {
        /// The configured `latest`.
        latest: usize,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NotIncluded => f.write_str("matches no include glob"),
            Reason::Excluded { glob } => write!(f, "excluded by glob \"{glob}\""),
            Reason::RegexMismatch { regex } => write!(f, "does not match regex \"{regex}\""),
            Reason::Denied { regex } => write!(f, "denied by regex \"{regex}\""),
            Reason::NotAVersion => f.write_str("not a version (a semver range is set)"),
            Reason::OutsideRange { range } => write!(f, "outside range \"{range}\""),
            Reason::PrereleaseNotNamed { range } => write!(
                f,
                "a prerelease: range \"{range}\" names no prerelease of this version"
            ),
            Reason::NotExact => f.write_str("not an exact tag (only exact tags are selected)"),
            Reason::BeyondLatest { latest } => write!(f, "beyond the latest {latest}"),
        }
    }
}

/// The outcome of [`TagFilter::select`]. `selected` and `filtered_out` are disjoint and together
/// hold each listed tag once. An empty `selected` means the filter matched nothing.
/// `T` is the listing's item: `String`, or a validated [`Tag`] in the prepare phase.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection<T = String> {
    /// The tags to mirror, in the filter's sort order.
    pub selected: Vec<T>,
    /// Listed tags left out, each with the first reason that dropped it, in listing order.
    pub filtered_out: Vec<(T, Reason)>,
    /// `exact` tags that the listing does not contain.
    pub missing_exact: Vec<String>,
}

/// A compiled tag filter; build it with [`TagFilter::compile`].
#[derive(Clone, Debug)]
pub struct TagFilter {
    spec: TagFilterSpec,
    /// `spec.exact`, validated by [`TagFilter::compile`].
    exact: Vec<Tag>,
    include: Option<GlobSet>,
    exclude: Vec<(String, globset::GlobMatcher)>,
    regex: Option<Regex>,
    deny: Vec<Regex>,
    range: Option<VersionRange>,
    sort: TagSort,
}

impl PartialEq for TagFilter {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

impl Default for TagFilter {
    /// Selects every tag.
    fn default() -> Self {
        TagFilter {
            spec: TagFilterSpec::default(),
            exact: Vec::new(),
            include: None,
            exclude: Vec::new(),
            regex: None,
            deny: Vec::new(),
            range: None,
            sort: TagSort::Semver,
        }
    }
}

impl TagFilter {
    /// A filter selecting every tag.
    pub fn all() -> TagFilter {
        TagFilter::default()
    }

    /// A filter selecting no tag (for a mapping that lists only digests).
    pub fn none() -> TagFilter {
        TagFilter {
            spec: TagFilterSpec {
                include: Some(Vec::new()),
                ..TagFilterSpec::default()
            },
            include: Some(GlobSet::empty()),
            ..TagFilter::default()
        }
    }

    /// Compiles a spec, checking every glob, the regex, the range and `latest`.
    pub fn compile(spec: &TagFilterSpec) -> Result<TagFilter, FilterError> {
        let only_exact = spec.include.is_none()
            && spec.exclude.is_empty()
            && spec.regex.is_none()
            && spec.deny.is_empty()
            && spec.semver.is_none()
            && spec.latest.is_none()
            && !spec.exact.is_empty();
        let include = match (&spec.include, only_exact) {
            (None, false) => None,
            (None, true) => Some(GlobSet::empty()),
            (Some(globs), _) => {
                let mut builder = GlobSetBuilder::new();
                for (i, text) in globs.iter().enumerate() {
                    builder.add(glob(text, &format!("include[{i}]"))?);
                }
                Some(builder.build().map_err(|e| FilterError {
                    field: "include".into(),
                    message: e.to_string(),
                })?)
            }
        };
        let mut exclude = Vec::new();
        for (i, text) in spec.exclude.iter().enumerate() {
            exclude.push((
                text.clone(),
                glob(text, &format!("exclude[{i}]"))?.compile_matcher(),
            ));
        }
        let regex = match &spec.regex {
            None => None,
            Some(text) => Some(Regex::new(text).map_err(|e| FilterError {
                field: "regex".into(),
                message: format!("invalid regex \"{text}\": {e}"),
            })?),
        };
        let mut deny = Vec::with_capacity(spec.deny.len());
        for (i, text) in spec.deny.iter().enumerate() {
            deny.push(Regex::new(text).map_err(|e| FilterError {
                field: format!("deny[{i}]"),
                message: format!("invalid regex \"{text}\": {e}"),
            })?);
        }
        let range = match &spec.semver {
            None => None,
            Some(text) => Some(VersionRange::parse(text).map_err(|e| FilterError {
                field: "semver".into(),
                message: format!("invalid range \"{text}\": {e}"),
            })?),
        };
        if spec.latest == Some(0) {
            return Err(FilterError {
                field: "latest".into(),
                message: "latest must be at least 1 (leave it out to keep every tag)".into(),
            });
        }
        let mut exact = Vec::with_capacity(spec.exact.len());
        for (i, tag) in spec.exact.iter().enumerate() {
            match Tag::parse(tag) {
                Ok(tag) => exact.push(tag),
                Err(_) => {
                    return Err(FilterError {
                        field: format!("exact[{i}]"),
                        message: format!(
                            "\"{tag}\" is not a valid tag (1–128 of [A-Za-z0-9_.-], not starting with . or -)"
                        ),
                    });
                }
            }
        }
        Ok(TagFilter {
            spec: spec.clone(),
            exact,
            include,
            exclude,
            regex,
            deny,
            range,
            sort: spec.sort.unwrap_or_default(),
        })
    }

    /// Whether the filter names every tag it can select (only `exact` tags, or none at all), so
    /// resolving them needs no listing of the repository.
    pub fn names_its_tags(&self) -> bool {
        let s = &self.spec;
        s.exclude.is_empty()
            && s.regex.is_none()
            && s.deny.is_empty()
            && s.semver.is_none()
            && s.latest.is_none()
            && match &s.include {
                None => !s.exact.is_empty(),
                Some(globs) => globs.is_empty(),
            }
    }

    /// The spec this filter was compiled from.
    pub fn spec(&self) -> &TagFilterSpec {
        &self.spec
    }

    /// The `exact` tags, validated when the filter was compiled.
    pub fn exact_tags(&self) -> &[Tag] {
        &self.exact
    }

    /// Runs the pipeline (module docs) over the listed tags; what it returns are items of
    /// `tags`, so validated tags in give validated tags out.
    pub fn select<T: AsRef<str> + Clone>(&self, tags: &[T]) -> Selection<T> {
        let mut seen = BTreeSet::new();
        let mut kept: Vec<&T> = Vec::new();
        let mut dropped: Vec<(&T, Reason)> = Vec::new();
        for tag in tags {
            if !seen.insert(tag.as_ref()) {
                continue;
            }
            match self.first_rejection(tag.as_ref()) {
                Some(reason) => dropped.push((tag, reason)),
                None => kept.push(tag),
            }
        }
        kept.sort_by(|a, b| self.order(a.as_ref(), b.as_ref()));
        if let Some(latest) = self.spec.latest
            && kept.len() > latest
        {
            let beyond = kept.len() - latest;
            for tag in kept.drain(..beyond) {
                dropped.push((tag, Reason::BeyondLatest { latest }));
            }
        }
        let mut missing_exact = Vec::new();
        for exact in &self.spec.exact {
            if kept.iter().any(|k| k.as_ref() == exact) {
                continue;
            }
            match dropped.iter().position(|(t, _)| t.as_ref() == exact) {
                Some(at) => kept.push(dropped.remove(at).0),
                None if !missing_exact.contains(exact) => missing_exact.push(exact.clone()),
                None => {}
            }
        }
        kept.sort_by(|a, b| self.order(a.as_ref(), b.as_ref()));
        // Report left-out tags in listing order, whatever stage dropped them.
        let position: std::collections::BTreeMap<&str, usize> = tags
            .iter()
            .enumerate()
            .rev()
            .map(|(i, t)| (t.as_ref(), i))
            .collect();
        dropped.sort_by_key(|(t, _)| position.get(t.as_ref()).copied().unwrap_or(usize::MAX));
        Selection {
            selected: kept.into_iter().cloned().collect(),
            filtered_out: dropped.into_iter().map(|(t, r)| (t.clone(), r)).collect(),
            missing_exact,
        }
    }

    fn first_rejection(&self, tag: &str) -> Option<Reason> {
        if let Some(include) = &self.include
            && !include.is_match(tag)
        {
            if self.spec.include.is_none() {
                return Some(Reason::NotExact);
            }
            return Some(Reason::NotIncluded);
        }
        if let Some((glob, _)) = self.exclude.iter().find(|(_, m)| m.is_match(tag)) {
            return Some(Reason::Excluded { glob: glob.clone() });
        }
        if let Some(regex) = &self.regex
            && !regex.is_match(tag)
        {
            return Some(Reason::RegexMismatch {
                regex: regex.as_str().to_string(),
            });
        }
        if let Some(deny) = self.deny.iter().find(|d| d.is_match(tag)) {
            return Some(Reason::Denied {
                regex: deny.as_str().to_string(),
            });
        }
        if let Some(range) = &self.range {
            match TagVersion::parse(tag) {
                None => return Some(Reason::NotAVersion),
                Some(v) if !range.matches(&v.version) => {
                    let range_text = self.spec.semver.clone().unwrap_or_default();
                    let mut release = v.version.clone();
                    release.pre = semver::Prerelease::EMPTY;
                    if !v.version.pre.is_empty() && range.matches(&release) {
                        return Some(Reason::PrereleaseNotNamed { range: range_text });
                    }
                    return Some(Reason::OutsideRange { range: range_text });
                }
                Some(_) => {}
            }
        }
        None
    }

    /// The sort order: total, and independent of the listing's order.
    fn order(&self, a: &str, b: &str) -> Ordering {
        match self.sort {
            TagSort::Alpha => a.cmp(b),
            TagSort::Semver => match (TagVersion::parse(a), TagVersion::parse(b)) {
                (Some(va), Some(vb)) => va.cmp(&vb).then_with(|| a.cmp(b)),
                (Some(_), None) => Ordering::Greater,
                (None, Some(_)) => Ordering::Less,
                (None, None) => a.cmp(b),
            },
        }
    }
}

/// A list of tag globs (the syntax of `include` and `exclude`), such as a mapping's `immutable`
/// tags; compiled once when the config is read.
#[derive(Clone, Debug, Default)]
pub struct TagGlobs {
    patterns: Vec<String>,
    set: GlobSet,
}

impl PartialEq for TagGlobs {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl TagGlobs {
    /// Compiles `patterns`; an invalid one is reported with its index as the field (`[1]`).
    pub fn compile(patterns: &[String]) -> Result<TagGlobs, FilterError> {
        let mut builder = GlobSetBuilder::new();
        for (i, text) in patterns.iter().enumerate() {
            builder.add(glob(text, &format!("[{i}]"))?);
        }
        let set = builder.build().map_err(|e| FilterError {
            field: String::new(),
            message: e.to_string(),
        })?;
        Ok(TagGlobs {
            patterns: patterns.to_vec(),
            set,
        })
    }

    /// Whether `tag` matches one of the globs (never, for an empty list).
    pub fn matches(&self, tag: &str) -> bool {
        self.set.is_match(tag)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The globs as written.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

fn glob(text: &str, field: &str) -> Result<Glob, FilterError> {
    Glob::new(text).map_err(|e| FilterError {
        field: field.to_string(),
        message: format!("invalid glob \"{text}\": {}", e.kind()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn deny_drops_what_regex_let_through_and_says_which_regex() {
        // regsync's way of writing "every 1.x but the release candidates".
        let spec = TagFilterSpec {
            regex: Some("^1\\.".into()),
            deny: tags(&["-rc", "^1\\.0\\."]),
            ..TagFilterSpec::default()
        };
        let filter = TagFilter::compile(&spec).unwrap();
        let s = filter.select(&tags(&["1.0.1", "1.1.0", "1.2.0-rc1", "2.0.0", "1.3.0"]));
        assert_eq!(s.selected, tags(&["1.1.0", "1.3.0"]));
        let why: Vec<String> = s
            .filtered_out
            .iter()
            .map(|(t, r)| format!("{t}: {r}"))
            .collect();
        assert_eq!(
            why,
            [
                "1.0.1: denied by regex \"^1\\.0\\.\"",
                "1.2.0-rc1: denied by regex \"-rc\"",
                "2.0.0: does not match regex \"^1\\.\"",
            ]
        );
        assert!(!filter.names_its_tags());
        let bad = TagFilter::compile(&TagFilterSpec {
            deny: tags(&["ok", "(unclosed"]),
            ..TagFilterSpec::default()
        })
        .unwrap_err();
        assert_eq!(bad.field, "deny[1]");
    }

    #[test]
    fn only_exact_tags_or_none_name_their_tags() {
        let spec = |f: fn(&mut TagFilterSpec)| {
            let mut s = TagFilterSpec {
                exact: tags(&["1.36", "1.37"]),
                ..TagFilterSpec::default()
            };
            f(&mut s);
            TagFilter::compile(&s).unwrap()
        };
        assert!(spec(|_| {}).names_its_tags());
        assert!(spec(|s| s.include = Some(Vec::new())).names_its_tags());
        assert!(TagFilter::none().names_its_tags());
        assert!(!TagFilter::all().names_its_tags());
        assert!(!spec(|s| s.include = Some(tags(&["1.*"]))).names_its_tags());
        assert!(!spec(|s| s.exclude = tags(&["x"])).names_its_tags());
        assert!(!spec(|s| s.regex = Some("1".into())).names_its_tags());
        assert!(!spec(|s| s.semver = Some(">=1".into())).names_its_tags());
        assert!(!spec(|s| s.latest = Some(1)).names_its_tags());
    }

    fn filter(yaml: &str) -> TagFilter {
        let spec: TagFilterSpec = serde_yaml::from_str(yaml).unwrap();
        TagFilter::compile(&spec).unwrap()
    }

    /// config.example.yaml and docs/config.md say `latest` counts tags, not release lines.
    #[test]
    fn latest_counts_tags_not_release_lines() {
        let f = filter(r#"{ semver: ">=3.19, <4", latest: 2, exact: [latest] }"#);
        let s = f.select(&tags(&["3.19", "3.20", "3.20.3", "3.21", "latest"]));
        assert_eq!(s.selected, tags(&["latest", "3.20.3", "3.21"]));
    }

    #[test]
    fn runs_the_whole_pipeline() {
        let f = filter(
            r#"{ include: ["3.*", "edge"], exclude: ["*-rc*"], regex: '^3\.\d+', semver: ">=3.17, <4", latest: 2, exact: [edge, latest, gone] }"#,
        );
        let listed = tags(&[
            "3.16", "3.17", "3.18", "3.19", "3.20-rc1", "latest", "edge", "3.1x", "2.9",
        ]);
        let s = f.select(&listed);
        assert_eq!(s.selected, tags(&["edge", "latest", "3.18", "3.19"]));
        assert_eq!(s.missing_exact, tags(&["gone"]));
        let reason = |t: &str| {
            s.filtered_out
                .iter()
                .find(|(x, _)| x == t)
                .map(|(_, r)| r.clone())
        };
        assert_eq!(reason("2.9"), Some(Reason::NotIncluded));
        assert_eq!(
            reason("3.20-rc1"),
            Some(Reason::Excluded {
                glob: "*-rc*".into()
            })
        );
        assert_eq!(reason("3.1x"), Some(Reason::NotAVersion));
        assert_eq!(
            reason("3.16"),
            Some(Reason::OutsideRange {
                range: ">=3.17, <4".into()
            })
        );
        assert_eq!(reason("3.17"), Some(Reason::BeyondLatest { latest: 2 }));
        assert_eq!(reason("edge"), None);
        assert_eq!(s.selected.len() + s.filtered_out.len(), listed.len());
    }

    #[test]
    fn regex_mismatch_is_reported() {
        let s = filter(r#"{ regex: '^v\d' }"#).select(&tags(&["v1", "x1"]));
        assert_eq!(s.selected, tags(&["v1"]));
        assert_eq!(
            s.filtered_out,
            vec![(
                "x1".to_string(),
                Reason::RegexMismatch {
                    regex: r"^v\d".into()
                }
            )]
        );
    }

    #[test]
    fn only_exact_selects_only_those() {
        let s = filter("{ exact: [latest] }").select(&tags(&["latest", "1.0"]));
        assert_eq!(s.selected, tags(&["latest"]));
        let s = filter("{ exact: [latest], include: ['*'] }").select(&tags(&["latest", "1.0"]));
        assert_eq!(s.selected, tags(&["latest", "1.0"]));
    }

    #[test]
    fn semver_sort_orders_numerically_and_alpha_by_name() {
        let listed = tags(&["1.10", "1.9", "latest", "v1.2"]);
        assert_eq!(
            filter("{ latest: 2 }").select(&listed).selected,
            tags(&["1.9", "1.10"])
        );
        assert_eq!(
            filter("{ latest: 2, sort: alpha }")
                .select(&listed)
                .selected,
            tags(&["latest", "v1.2"])
        );
    }

    #[test]
    fn rejects_bad_parts() {
        let err = |yaml: &str| {
            let spec: TagFilterSpec = serde_yaml::from_str(yaml).unwrap();
            TagFilter::compile(&spec).unwrap_err()
        };
        assert_eq!(err("{ semver: '>=3.x.y' }").field, "semver");
        assert_eq!(err("{ regex: '(' }").field, "regex");
        assert_eq!(err("{ exclude: ['a', '[b'] }").field, "exclude[1]");
        assert_eq!(err("{ latest: 0 }").field, "latest");
        assert_eq!(err("{ exact: ['-x'] }").field, "exact[0]");
    }

    #[test]
    fn a_prerelease_the_range_does_not_name_says_so() {
        let f = filter(r#"{ semver: ">=1.0, <3" }"#);
        let s = f.select(&tags(&["v1.2.0-rc.1", "3.1", "1.5"]));
        assert_eq!(s.selected, tags(&["1.5"]));
        let range = ">=1.0, <3".to_string();
        assert_eq!(
            s.filtered_out,
            vec![
                (
                    "v1.2.0-rc.1".to_string(),
                    Reason::PrereleaseNotNamed {
                        range: range.clone()
                    }
                ),
                ("3.1".to_string(), Reason::OutsideRange { range }),
            ]
        );
    }

    #[test]
    fn an_exact_only_filter_says_the_tag_is_not_exact() {
        let f = filter("{ exact: [v9] }");
        let s = f.select(&tags(&["v8"]));
        assert_eq!(s.filtered_out, vec![("v8".to_string(), Reason::NotExact)]);
        let f = filter(r#"{ include: ["1.*"], exact: [v9] }"#);
        let s = f.select(&tags(&["v8"]));
        assert_eq!(
            s.filtered_out,
            vec![("v8".to_string(), Reason::NotIncluded)]
        );
    }

    #[test]
    fn ranges_as_helm_and_npm_write_them() {
        let f = filter(r#"{ semver: "^1.2 || ~2.3" }"#);
        assert_eq!(
            f.select(&tags(&["1.1", "1.9", "2.3.4", "2.4"])).selected,
            tags(&["1.9", "2.3.4"])
        );
        let f = filter(r#"{ semver: ">=1.0 <2.0" }"#);
        assert_eq!(
            f.select(&tags(&["0.9", "1.5", "2.0"])).selected,
            tags(&["1.5"])
        );
    }

    #[test]
    fn none_selects_nothing() {
        let s = TagFilter::none().select(&tags(&["a"]));
        assert!(s.selected.is_empty());
        assert_eq!(s.filtered_out, vec![("a".to_string(), Reason::NotIncluded)]);
    }
}
