//! Whole-registry mappings: a source ending in `/*` (one path level) or `/**` (any depth), the
//! repositories it matches, and where each goes (a target prefix plus the matched remainder).

use ferry_distribution::reference::{Reference, RepositoryName};

use super::Target;

/// How many repositories one whole-registry mapping may expand to unless `max_repositories`
/// says otherwise.
pub const DEFAULT_MAX_REPOSITORIES: usize = 1000;

/// The source of a whole-registry mapping: a registry, a path prefix and how deep it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryGlob {
    /// The host as references name it (`registry.example.com`).
    pub registry: String,
    /// The path the matched repositories lie under (`team`); empty for the whole registry.
    pub prefix: String,
    /// `/**`: any depth below the prefix; `/*`: exactly one path component.
    pub any_depth: bool,
    /// Where matched repositories go: each prefix plus the remainder (`targets`), or plus the
    /// whole repository path (`target_group`, as for any mapping).
    pub targets: Vec<TargetPrefix>,
    /// Append the whole repository path (a `target_group`) instead of the matched remainder.
    pub whole_path: bool,
    /// The most repositories it may expand to; more fails the mapping.
    pub max_repositories: usize,
}

/// Where one repository of a whole-registry mapping (or a `target_groups` entry) goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetPrefix {
    /// `oci:<directory>`: one layout per repository under it.
    Oci(String),
    /// `host[:port][/path]`.
    Registry(String),
}

impl TargetPrefix {
    /// The target `name` (a repository path) goes to under this prefix.
    pub fn join(&self, name: &str) -> Result<Target, String> {
        match self {
            TargetPrefix::Oci(dir) => super::places::parse_target(&format!("oci:{dir}/{name}")),
            TargetPrefix::Registry(prefix) => {
                super::places::parse_target(&format!("{prefix}/{name}"))
            }
        }
    }
}

impl std::fmt::Display for TargetPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetPrefix::Oci(dir) => write!(f, "oci:{dir}"),
            TargetPrefix::Registry(prefix) => f.write_str(prefix),
        }
    }
}

/// What a catalog name is to a glob.
#[derive(Debug, PartialEq, Eq)]
pub enum Match {
    /// Under the prefix at a depth the glob takes: the repository and the remainder after the
    /// prefix.
    Matched {
        /// The validated repository.
        repository: RepositoryName,
        /// The part after the prefix (`app` of `team/app`).
        remainder: String,
    },
    /// Not a repository the glob names (elsewhere in the registry, or deeper than `/*`).
    Outside,
    /// Written under the prefix but not a valid repository name: left out, with why.
    Invalid(String),
}

impl RepositoryGlob {
    /// The glob `text` names, `None` when it does not end in `/*` or `/**` (an ordinary source),
    /// or why it cannot be one.
    pub fn parse(text: &str) -> Option<Result<(String, String, bool), String>> {
        if text.starts_with("oci:") {
            return None;
        }
        let (base, any_depth) = if let Some(base) = text.strip_suffix("/**") {
            (base, true)
        } else if let Some(base) = text.strip_suffix("/*") {
            (base, false)
        } else {
            return None;
        };
        if base.contains('*') {
            return Some(Err(format!(
                "\"{text}\": only a final /* or /** may be a wildcard"
            )));
        }
        // `host` alone, or `host/path`: valid when a repository under it is.
        Some(match Reference::parse(&format!("{base}/probe")) {
            Ok(r) if r.tag.is_none() && r.digest.is_none() => {
                let prefix = r
                    .repository
                    .strip_suffix("probe")
                    .unwrap_or_default()
                    .trim_end_matches('/')
                    .to_owned();
                // Docker Hub's implied `library/` does not apply to a prefix.
                let written_host = base.split('/').next().unwrap_or_default();
                let looks_like_host = written_host.contains('.')
                    || written_host.contains(':')
                    || written_host == "localhost";
                if !looks_like_host {
                    Err(format!(
                        "\"{text}\" must name the registry host before the path \
                         (e.g. registry.example.com/team/*)"
                    ))
                } else {
                    Ok((r.registry, prefix, any_depth))
                }
            }
            _ => Err(format!(
                "\"{text}\" is not host[:port][/path]/* or host[:port][/path]/**"
            )),
        })
    }

    /// What `name`, as a registry's catalog lists it, is to this glob.
    pub fn classify(&self, name: &str) -> Match {
        let remainder = if self.prefix.is_empty() {
            name
        } else {
            match name
                .strip_prefix(self.prefix.as_str())
                .and_then(|r| r.strip_prefix('/'))
            {
                Some(r) => r,
                None => return Match::Outside,
            }
        };
        let repository = match RepositoryName::parse(name) {
            Ok(r) => r,
            Err(e) => return Match::Invalid(format!("not a valid repository name: {}", e.problem)),
        };
        if remainder.is_empty() || (!self.any_depth && remainder.contains('/')) {
            return Match::Outside;
        }
        Match::Matched {
            repository,
            remainder: remainder.to_owned(),
        }
    }

    /// The targets of a matched repository.
    pub fn targets_for(&self, repository: &str, remainder: &str) -> Result<Vec<Target>, String> {
        let name = if self.whole_path {
            repository
        } else {
            remainder
        };
        let mut out: Vec<Target> = Vec::new();
        for prefix in &self.targets {
            let target = prefix.join(name)?;
            if !out.contains(&target) {
                out.push(target);
            }
        }
        Ok(out)
    }

    /// The target prefix of this mapping that `repository` (on the source registry) lies
    /// under, if any: such a repository is this mapping's own mirror, not a source.
    pub fn own_target_holding(&self, repository: &str) -> Option<&TargetPrefix> {
        self.targets.iter().find(|prefix| {
            let Ok(Target::Registry {
                registry,
                repository: probe,
            }) = prefix.join("probe")
            else {
                return false;
            };
            let path = probe.strip_suffix("probe").unwrap_or_default();
            registry == self.registry
                && (repository.starts_with(path) || format!("{repository}/") == path)
        })
    }

    /// The source as written back: `host/prefix/*` or `/**`.
    pub fn display(&self) -> String {
        let stars = if self.any_depth { "**" } else { "*" };
        if self.prefix.is_empty() {
            format!("{}/{stars}", self.registry)
        } else {
            format!("{}/{}/{stars}", self.registry, self.prefix)
        }
    }
}

/// A target prefix as written: `oci:<directory>` or `host[:port][/path]`.
pub fn parse_prefix(text: &str) -> Result<TargetPrefix, String> {
    let trimmed = text.trim_end_matches('/');
    if let Some(dir) = trimmed.strip_prefix("oci:") {
        if dir.is_empty() {
            return Err(format!("\"{text}\" names no directory after oci:"));
        }
        return Ok(TargetPrefix::Oci(dir.to_string()));
    }
    // A prefix is valid when a repository under it is.
    super::places::parse_target(&format!("{trimmed}/probe"))
        .map(|_| TargetPrefix::Registry(trimmed.to_string()))
        .map_err(|_| {
            format!("target prefix \"{text}\" is not host[:port][/path] or oci:<directory>")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(text: &str) -> RepositoryGlob {
        let (registry, prefix, any_depth) = RepositoryGlob::parse(text).unwrap().unwrap();
        RepositoryGlob {
            registry,
            prefix,
            any_depth,
            targets: vec![TargetPrefix::Registry("mirror.local:5000/m".into())],
            whole_path: false,
            max_repositories: 10,
        }
    }

    #[test]
    fn parses_one_level_and_any_depth_and_refuses_the_rest() {
        assert_eq!(
            RepositoryGlob::parse("reg.io:5000/team/*"),
            Some(Ok(("reg.io:5000".into(), "team".into(), false)))
        );
        assert_eq!(
            RepositoryGlob::parse("reg.io/**"),
            Some(Ok(("reg.io".into(), String::new(), true)))
        );
        assert_eq!(RepositoryGlob::parse("reg.io/team/app"), None);
        assert_eq!(RepositoryGlob::parse("oci:./dir/*"), None);
        for bad in [
            "reg.io/te*m/*",
            "team/*",
            "reg.io/Team/*",
            "reg.io/a/../b/*",
            "reg.io/a:1/*",
        ] {
            assert!(
                matches!(RepositoryGlob::parse(bad), Some(Err(_))),
                "{bad} was accepted"
            );
        }
    }

    #[test]
    fn classifies_catalog_names_by_prefix_and_depth() {
        let one = glob("reg.io/team/*");
        let any = glob("reg.io/team/**");
        let matched = |m: Match| match m {
            Match::Matched { remainder, .. } => Some(remainder),
            _ => None,
        };
        assert_eq!(matched(one.classify("team/app")), Some("app".into()));
        assert_eq!(one.classify("team/app/x"), Match::Outside);
        assert_eq!(matched(any.classify("team/app/x")), Some("app/x".into()));
        for outside in ["team", "teamx/app", "other/app", "", "x/team/app"] {
            assert_eq!(any.classify(outside), Match::Outside, "{outside}");
        }
        for hostile in [
            "team/../admin",
            "team/%2fadmin",
            "team/a\u{0}b",
            "team//app",
            "team/App",
        ] {
            assert!(
                matches!(any.classify(hostile), Match::Invalid(_)),
                "{hostile:?} was not rejected"
            );
        }
        let whole = glob("reg.io/*");
        assert_eq!(matched(whole.classify("app")), Some("app".into()));
        assert_eq!(whole.classify("team/app"), Match::Outside);
        assert!(matches!(whole.classify("../x"), Match::Invalid(_)));
    }

    #[test]
    fn targets_are_the_prefix_plus_the_remainder_or_the_whole_path() {
        let mut g = glob("reg.io/team/**");
        assert_eq!(
            g.targets_for("team/app/x", "app/x").unwrap(),
            vec![Target::Registry {
                registry: "mirror.local:5000".into(),
                repository: "m/app/x".into()
            }]
        );
        g.whole_path = true;
        assert_eq!(
            g.targets_for("team/app/x", "app/x").unwrap()[0].to_string(),
            "mirror.local:5000/m/team/app/x"
        );
    }
}
