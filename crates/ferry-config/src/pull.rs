//! What a cluster needs to pull the sources through the mirror (`ferry pull-config`): each
//! mapping's registry source and targets as mirror rules, and which runtime format can say each.
//!
//! A rule maps a source (`host/path`) to a mirror (`host/path`). Its scope decides who may widen
//! it: a mapping whose target holds the source's own repository path (`docker.io/library/alpine`
//! → `registry.local:5000/library/alpine`) and a whole-registry mapping that keeps the path below
//! its prefix are [`Scope::Prefix`] rules (anything below the source sits at the same path below
//! the mirror); a mapping that renames (`a/b` → `m/c`, or a target group's `mirror/a/b`) is a
//! [`Scope::Exact`] rule, meant for that one repository. Which formats can express which rules
//! is decided here too ([`Format::reason_refused`]), so the command only renders.

use crate::{Config, Mapping, Target, TargetPrefix};

/// One source location and where the mirror holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRule {
    /// The mapping it comes from (`Mapping::index`) and its line in the config.
    pub mapping: usize,
    /// The mapping's line in the config file.
    pub line: usize,
    /// The source registry host (`docker.io`, `127.0.0.1:5000`).
    pub source_host: String,
    /// The source path on that host (`library/alpine`); empty for a whole registry.
    pub source_path: String,
    /// The mirror registry host.
    pub mirror_host: String,
    /// The path on the mirror that stands for `source_path` (empty: the mirror's root).
    pub mirror_path: String,
    /// Prefix (paths below are kept) or exact (this repository only).
    pub scope: Scope,
    /// The mirror serves the source's digests: no platform filter, or `platforms_keep_digest`.
    pub digests_kept: bool,
    /// The config allows plain HTTP or unverified TLS to the source host.
    pub source_insecure: bool,
    /// The config allows plain HTTP or unverified TLS to the mirror host.
    pub mirror_insecure: bool,
    /// The mirror host's endpoint as the config names it (`url:`), when it does.
    pub mirror_url: Option<String>,
}

impl PullRule {
    /// `host/path` of the source (`host` alone for a whole registry).
    pub fn source(&self) -> String {
        join(&self.source_host, &self.source_path)
    }

    /// `host/path` of the mirror (`host` alone for its root).
    pub fn mirror(&self) -> String {
        join(&self.mirror_host, &self.mirror_path)
    }

    /// The mirror holds everything at the source's own path (what a host-level mirror means).
    pub fn same_path(&self) -> bool {
        self.source_path == self.mirror_path
    }
}

fn join(host: &str, path: &str) -> String {
    if path.is_empty() {
        host.to_owned()
    } else {
        format!("{host}/{path}")
    }
}

/// Whether a rule may cover what lies below its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Paths below the source map to the same paths below the mirror.
    Prefix,
    /// This one repository only (the mapping renames it).
    Exact,
}

/// A mapping (or one of its targets) no rule could be made of, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unexpressed {
    /// The mapping (`Mapping::index`).
    pub mapping: usize,
    /// Its line in the config file.
    pub line: usize,
    /// The source as written in reports.
    pub source: String,
    /// The target, when one target of several is the one left out.
    pub target: Option<String>,
    /// Why.
    pub reason: String,
}

/// Every mapping's rules, and what could not become a rule in any format.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullRules {
    /// In config order, one per (mapping, registry target).
    pub rules: Vec<PullRule>,
    /// Mappings or targets that are not registry-to-registry.
    pub unexpressed: Vec<Unexpressed>,
}

/// A runtime's pull configuration format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// containerd's `hosts.toml`, one per source registry host.
    Containerd,
    /// containers-registries.conf(5): podman, CRI-O, buildah, skopeo.
    RegistriesConf,
    /// OpenShift `ImageDigestMirrorSet`.
    Idms,
    /// OpenShift `ImageTagMirrorSet`.
    Itms,
}

impl Format {
    /// Why `rule` cannot be said in this format; `None` when it can.
    pub fn reason_refused(self, rule: &PullRule) -> Option<String> {
        match self {
            Format::Containerd if !rule.same_path() => Some(format!(
                "containerd asks a mirror host for the same repository path, but {} is \
                 mirrored at {}",
                rule.source(),
                rule.mirror()
            )),
            Format::Idms if !rule.digests_kept => Some(format!(
                "the platform filter rewrites the index, so {} does not hold {}'s digests \
                 (set platforms_keep_digest: true to keep them)",
                rule.mirror(),
                rule.source()
            )),
            _ => None,
        }
    }
}

/// The rules of every mapping of `config` (registry source to registry target).
pub fn pull_rules(config: &Config) -> PullRules {
    let mut out = PullRules::default();
    for mapping in &config.mappings {
        mapping_rules(config, mapping, &mut out);
    }
    out
}

fn mapping_rules(config: &Config, mapping: &Mapping, out: &mut PullRules) {
    let unexpressed = |target: Option<String>, reason: &str| Unexpressed {
        mapping: mapping.index,
        line: mapping.line,
        source: mapping.source.clone(),
        target,
        reason: reason.to_owned(),
    };
    let digests_kept = mapping.platforms.is_empty() || mapping.platforms_keep_digest;
    let rule = |source_host: &str, source_path: &str, mirror_host: &str, mirror_path: &str| {
        let mirror = config.registry_for(mirror_host);
        PullRule {
            mapping: mapping.index,
            line: mapping.line,
            source_host: source_host.to_owned(),
            source_path: source_path.to_owned(),
            mirror_host: mirror_host.to_owned(),
            mirror_path: mirror_path.to_owned(),
            scope: if source_path == mirror_path {
                Scope::Prefix
            } else {
                Scope::Exact
            },
            digests_kept,
            source_insecure: config.registry_for(source_host).insecure,
            mirror_insecure: mirror.insecure,
            mirror_url: mirror.url,
        }
    };
    if let Some(glob) = &mapping.repositories {
        for prefix in &glob.targets {
            let TargetPrefix::Registry(text) = prefix else {
                out.unexpressed.push(unexpressed(
                    Some(format!("oci:{}", prefix_text(prefix))),
                    "the target is an image layout on disk, not a registry a runtime pulls from",
                ));
                continue;
            };
            let (host, base) = text.split_once('/').unwrap_or((text.as_str(), ""));
            let kept = if glob.whole_path {
                join_path(base, &glob.prefix)
            } else {
                base.to_owned()
            };
            let mut r = rule(&glob.registry, &glob.prefix, host, &kept);
            // Below the prefix the path is kept; but `/*` selects one level only, and a rule
            // for a prefix covers every depth below it.
            r.scope = if glob.any_depth {
                Scope::Prefix
            } else {
                Scope::Exact
            };
            out.rules.push(r);
        }
        return;
    }
    let Target::Registry {
        registry: source_host,
        repository: source_path,
    } = &mapping.origin
    else {
        out.unexpressed.push(unexpressed(
            None,
            "the source is not a registry: a runtime never pulls it by this name",
        ));
        return;
    };
    for target in &mapping.targets {
        match target {
            Target::Registry {
                registry,
                repository,
            } => out
                .rules
                .push(rule(source_host, source_path, registry, repository)),
            other => out.unexpressed.push(unexpressed(
                Some(other.to_string()),
                "the target is a file on disk, not a registry a runtime pulls from",
            )),
        }
    }
}

fn prefix_text(prefix: &TargetPrefix) -> &str {
    match prefix {
        TargetPrefix::Oci(text) | TargetPrefix::Registry(text) => text,
    }
}

fn join_path(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_owned(),
        (_, true) => a.to_owned(),
        _ => format!("{a}/{b}"),
    }
}

#[cfg(test)]
mod tests;
