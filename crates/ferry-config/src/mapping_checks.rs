//! Checks of a mapping's whole-registry source (`host/team/*`, `/**`: its pattern and target
//! prefixes) and of its referrer options (filters by artifact type, required kinds).

use std::collections::BTreeMap;

use super::ReferrerFilter;
use super::check::Checker;
use super::glob::parse_prefix;
use super::glob::{DEFAULT_MAX_REPOSITORIES, RepositoryGlob, TargetPrefix};
use super::locate::FieldPath;
use super::raw;

impl Checker<'_> {
    /// A whole-registry mapping's pattern and target prefixes. Refused with it: `rename` (one
    /// name cannot name many repositories) and `digests` (a digest belongs to one repository).
    pub fn resolve_glob(
        &mut self,
        path: &FieldPath,
        mapping: &raw::RawMapping,
        parsed: Result<(String, String, bool), String>,
        groups: &BTreeMap<String, Vec<TargetPrefix>>,
    ) -> Option<RepositoryGlob> {
        let parsed = match parsed {
            Ok(p) => Some(p),
            Err(message) => {
                self.fail(&path.key("source"), message);
                None
            }
        };
        if mapping.rename.is_some() {
            self.fail_key(
                &path.key("rename"),
                "rename cannot apply to a source ending in /* or /** (it names many repositories)",
            );
        }
        if !mapping.digests.is_empty() {
            self.fail_key(
                &path.key("digests"),
                "digests cannot apply to a source ending in /* or /** (a digest belongs to one repository)",
            );
        }
        let max_repositories = self.at_least_one(
            &path.key("max_repositories"),
            mapping.max_repositories,
            DEFAULT_MAX_REPOSITORIES,
        );
        let (targets, whole_path) = match (&mapping.targets, &mapping.target_group) {
            (Some(_), Some(_)) => {
                self.fail_key(
                    &path.key("target_group"),
                    "set either targets or target_group, not both",
                );
                return None;
            }
            (None, None) => {
                self.fail(path, "needs targets or target_group");
                return None;
            }
            (Some(list), None) => {
                if list.is_empty() {
                    self.fail(&path.key("targets"), "targets is empty");
                }
                let mut out = Vec::new();
                for (i, text) in list.iter().enumerate() {
                    match parse_prefix(text) {
                        Ok(p) if out.contains(&p) => self.fail(
                            &path.key("targets").index(i),
                            format!("target prefix {p} is listed twice"),
                        ),
                        Ok(p) => out.push(p),
                        Err(message) => self.fail(&path.key("targets").index(i), message),
                    }
                }
                (out, false)
            }
            (None, Some(group)) => match groups.get(group) {
                Some(prefixes) => (prefixes.clone(), true),
                None => {
                    self.fail(
                        &path.key("target_group"),
                        format!("unknown target group \"{group}\""),
                    );
                    return None;
                }
            },
        };
        let (registry, prefix, any_depth) = parsed?;
        Some(RepositoryGlob {
            registry,
            prefix,
            any_depth,
            targets,
            whole_path,
            max_repositories,
        })
    }

    /// `referrers:` resolved: whether referrers are copied, and which. A filter turns copying on.
    pub fn referrer_choice(
        &mut self,
        path: &FieldPath,
        raw: &raw::RawReferrers,
    ) -> (bool, ReferrerFilter) {
        match raw {
            raw::RawReferrers::Copy(on) => (*on, ReferrerFilter::default()),
            raw::RawReferrers::Filter(f) => {
                self.check_kinds(&path.key("include"), &f.include);
                self.check_kinds(&path.key("exclude"), &f.exclude);
                if let Some(both) = f.include.iter().find(|k| f.exclude.contains(k)) {
                    self.fail(
                        &path.key("exclude"),
                        format!("{both} is both included and excluded"),
                    );
                }
                (
                    true,
                    ReferrerFilter {
                        include: f.include.clone(),
                        exclude: f.exclude.clone(),
                    },
                )
            }
        }
    }

    /// Artifact types as a media type (`type/subtype[+suffix]`) or cosign's `cosign:sig`,
    /// `cosign:att`, `cosign:sbom`.
    pub fn check_kinds(&mut self, path: &FieldPath, kinds: &[String]) {
        for (i, kind) in kinds.iter().enumerate() {
            let cosign = crate::COSIGN_TAGS.iter().any(|(_, name)| name == kind);
            let media = kind.split_once('/').is_some_and(|(t, s)| {
                let ok = |p: &str| {
                    p.len() <= 127
                        && p.starts_with(|c: char| c.is_ascii_alphanumeric())
                        && p.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
                };
                ok(t) && ok(s)
            });
            if !(cosign || media) {
                self.fail(
                    &path.index(i),
                    format!(
                        "\"{kind}\" is not an artifact type (a media type such as application/spdx+json, or cosign:sig, cosign:att, cosign:sbom)"
                    ),
                );
            }
        }
    }
}
