//! Problem recording for the config checker (position, field name, secrets redacted) and the
//! small value checks the resolver shares: counts, sizes, durations, tag filters, platforms.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use super::locate::{FieldPath, Locator, Position, Segment};
use super::{ConfigError, Problem, Schedule, parse_duration, parse_size};
use crate::filter::{TagFilter, TagFilterSpec, TagGlobs};
use crate::platform::Platform;

/// Collects every problem in one pass over the config, so one run reports them all.
pub struct Checker<'a> {
    pub file: &'a Path,
    pub locator: &'a Locator,
    pub redactions: Vec<String>,
    pub problems: Vec<Problem>,
    /// Tag filters compiled so far, by spec: mappings with the same `tags:` share one compiled
    /// filter (its glob set and regexes shared by clone) instead of each compiling its own.
    pub compiled_tags: HashMap<TagFilterSpec, TagFilter>,
}

impl Checker<'_> {
    fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in &self.redactions {
            text = text.replace(secret.as_str(), "***");
        }
        text
    }

    /// The field as shown in messages: mappings named by position and source, registries by
    /// position and host.
    pub fn describe(&self, path: &FieldPath) -> String {
        let named = |list: &str, name: &str| -> Option<String> {
            let [Segment::Key(key), Segment::Index(i), rest @ ..] = path.0.as_slice() else {
                return None;
            };
            if key != list {
                return None;
            }
            let item = FieldPath::root().key(list).index(*i);
            let label = match self.locator.scalar(&item.key(name)) {
                Some(value) => format!("{list}[{i}] ({name} {value})"),
                None => format!("{list}[{i}]"),
            };
            let rest = FieldPath(rest.to_vec());
            Some(if rest.0.is_empty() {
                label
            } else {
                format!("{label}: {rest}")
            })
        };
        named("mappings", "source")
            .or_else(|| named("registries", "host"))
            .unwrap_or_else(|| path.to_string())
    }

    pub fn push(&mut self, path: &FieldPath, at: Position, message: impl Into<String>) {
        let field = self.redact(&self.describe(path));
        let message = self.redact(&message.into());
        self.problems.push(Problem {
            file: self.file.to_path_buf(),
            line: at.line,
            column: at.column,
            field,
            message,
        });
    }

    /// A problem with the value at `path`.
    pub fn fail(&mut self, path: &FieldPath, message: impl Into<String>) {
        let at = self.locator.value(path);
        self.push(path, at, message);
    }

    /// A problem with the key at `path` (a field that should not be there).
    pub fn fail_key(&mut self, path: &FieldPath, message: impl Into<String>) {
        let at = self.locator.key(path);
        self.push(path, at, message);
    }

    pub fn finish(mut self) -> ConfigError {
        self.problems.sort_by_key(|p| (p.line, p.column));
        ConfigError::Invalid {
            problems: self.problems,
        }
    }

    pub fn at_least_one(
        &mut self,
        path: &FieldPath,
        value: Option<usize>,
        default: usize,
    ) -> usize {
        match value {
            Some(0) => {
                self.fail(path, "must be at least 1");
                default
            }
            Some(n) => n,
            None => default,
        }
    }

    pub fn size(&mut self, path: &FieldPath, text: Option<&str>, default: u64) -> u64 {
        let Some(text) = text else { return default };
        match parse_size(text) {
            Ok(0) => {
                self.fail(path, "must be more than 0 bytes");
                default
            }
            Ok(n) => n,
            Err(message) => {
                self.fail(path, message);
                default
            }
        }
    }

    pub fn duration(&mut self, path: &FieldPath, text: Option<&str>) -> Option<Duration> {
        match parse_duration(text?) {
            Ok(d) => Some(d),
            Err(message) => {
                self.fail(path, message);
                None
            }
        }
    }

    pub fn compile_tags(&mut self, path: &FieldPath, spec: &TagFilterSpec) -> Option<TagFilter> {
        if let Some(filter) = self.compiled_tags.get(spec) {
            return Some(filter.clone());
        }
        match TagFilter::compile(spec) {
            Ok(filter) => {
                self.compiled_tags.insert(spec.clone(), filter.clone());
                Some(filter)
            }
            Err(e) => {
                self.fail(&path.join_dotted(&e.field), e.message);
                None
            }
        }
    }

    /// `listener.tls`: each file readable and holding a PEM section of its kind (a certificate;
    /// a private key), reported at the field whose file is at fault, never with its contents.
    pub fn listener_tls(
        &mut self,
        path: &FieldPath,
        raw: super::raw::RawListenerTls,
    ) -> Option<super::ListenerTls> {
        let mut ok = true;
        for (field, file, label) in [
            ("certificate", &raw.certificate, "CERTIFICATE"),
            ("key", &raw.key, "PRIVATE KEY"),
        ] {
            let problem = match std::fs::read(file) {
                Err(e) => Some(format!("cannot read {}: {e}", file.display())),
                Ok(pem) => {
                    let text = String::from_utf8_lossy(&pem);
                    let found = text.lines().any(|l| {
                        l.strip_prefix("-----BEGIN ")
                            .and_then(|l| l.strip_suffix("-----"))
                            .is_some_and(|l| l.ends_with(label))
                    });
                    (!found).then(|| {
                        format!("{} holds no PEM {}", file.display(), label.to_lowercase())
                    })
                }
            };
            if let Some(message) = problem {
                self.fail(&path.key(field), message);
                ok = false;
            }
        }
        ok.then_some(super::ListenerTls {
            certificate: raw.certificate,
            key: raw.key,
        })
    }

    /// A mapping's `interval:` or `schedule:` (not both), reported at the field at fault.
    pub fn schedule(
        &mut self,
        path: &FieldPath,
        interval: &Option<String>,
        schedule: &Option<String>,
    ) -> Option<Schedule> {
        let parsed = match (interval, schedule) {
            (None, None) => return None,
            (Some(_), Some(_)) => {
                self.fail(
                    &path.key("schedule"),
                    "a mapping takes interval or schedule, not both",
                );
                return None;
            }
            (Some(text), None) => (Schedule::interval(text), "interval"),
            (None, Some(text)) => (Schedule::cron(text), "schedule"),
        };
        match parsed {
            (Ok(s), _) => Some(s),
            (Err(message), field) => {
                self.fail(&path.key(field), message);
                None
            }
        }
    }

    /// Compiles a list of tag globs (`immutable`); a bad glob is reported at its index.
    pub fn compile_globs(&mut self, path: &FieldPath, list: &[String]) -> TagGlobs {
        match TagGlobs::compile(list) {
            Ok(globs) => globs,
            Err(e) => {
                self.fail(&path.join_dotted(&e.field), e.message);
                TagGlobs::default()
            }
        }
    }

    /// Each entry as a [`Platform`]. The config is stricter than [`Platform::parse`]: every part
    /// is lowercase ASCII letters, digits and `_`.
    pub fn check_platforms(&mut self, path: &FieldPath, list: &[String]) -> Vec<Platform> {
        let mut out = Vec::new();
        for (i, platform) in list.iter().enumerate() {
            let plain = platform
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'/');
            match Platform::parse(platform) {
                Ok(parsed) if plain => out.push(parsed),
                _ => self.fail(
                    &path.index(i),
                    format!("platform \"{platform}\" is not os/arch or os/arch/variant (e.g. linux/arm64/v8)"),
                ),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_tag_specs_compile_once_and_a_bad_one_is_reported_at_every_mapping() {
        let locator = Locator::new("mappings: []\n");
        let mut checker = Checker {
            file: Path::new("mirror.yaml"),
            locator: &locator,
            redactions: Vec::new(),
            problems: Vec::new(),
            compiled_tags: HashMap::new(),
        };
        let at = |i: usize| FieldPath::root().key("mappings").index(i).key("tags");
        let spec = TagFilterSpec {
            include: Some(vec!["v*".into()]),
            ..TagFilterSpec::default()
        };
        let tags = ["v1", "latest", "v2"];
        let first = checker.compile_tags(&at(0), &spec).unwrap();
        let second = checker.compile_tags(&at(1), &spec).unwrap();
        assert_eq!(checker.compiled_tags.len(), 1, "one compile for one spec");
        assert_eq!(first.select(&tags).selected, ["v1", "v2"]);
        assert_eq!(second.select(&tags).selected, first.select(&tags).selected);

        let bad = TagFilterSpec {
            regex: Some("(".into()),
            ..TagFilterSpec::default()
        };
        assert!(checker.compile_tags(&at(2), &bad).is_none());
        assert!(checker.compile_tags(&at(3), &bad).is_none());
        assert_eq!(checker.problems.len(), 2, "each mapping's own problem");
        assert_eq!(
            checker.compiled_tags.len(),
            1,
            "a failed compile is not kept"
        );

        // The kept compile is what a later mapping with that spec gets, not a new one: a
        // filter planted under the spec answers instead of what the spec would compile to.
        checker
            .compiled_tags
            .insert(spec.clone(), TagFilter::none());
        let planted = checker.compile_tags(&at(4), &spec).unwrap();
        assert!(
            planted.select(&tags).selected.is_empty(),
            "the kept filter is used"
        );
    }
}
