//! mirror.yaml: reading, interpolating, checking and resolving the config into `Config`
//! (defaults applied, target groups expanded); every error names file, line, column and field.
//!
//! Target groups: a mapping with `target_group: NAME` gets one target per prefix in
//! `target_groups.NAME`, each prefix followed by `/` and the source repository path
//! (`docker.io/library/alpine` → `library/alpine`), or by `rename` when the mapping sets it.
//! `oci:./mirror` thus becomes `oci:./mirror/library/alpine`. `rename` is refused with `targets`,
//! which are always written in full.

mod interpolate;
mod locate;
pub mod raw;
mod units;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_distribution::Secret;
use ferry_distribution::digest::Digest;
use ferry_distribution::reference::DOCKER_HUB;
use ferry_distribution::reference::Reference;

use crate::filter::{TagFilter, TagFilterSpec};
use locate::Locator;
pub use locate::{FieldPath, Position, Segment};
use raw::{RawAuth, RawConfig, RawRegistry};
pub use units::{parse_duration, parse_size};

/// Mappings resolved at once when `concurrency` is not set.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Requests in flight per registry when `max_concurrent` is not set.
pub const DEFAULT_MAX_CONCURRENT: usize = 16;

/// The resolved config: defaults applied, target groups expanded, every value checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Mappings resolved at once in the prepare phase.
    pub concurrency: usize,
    pub engine: EngineSettings,
    /// Settings for the hosts the config lists; see [`Config::registry_for`] for the others.
    pub registries: Vec<RegistrySettings>,
    pub mappings: Vec<Mapping>,
}

/// Copy engine limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineSettings {
    pub images_in_flight: usize,
    pub blobs_in_flight: usize,
    /// Bytes per PATCH in a chunked upload.
    pub chunk_size: u64,
    /// Blobs up to this many bytes are uploaded in one request.
    pub monolithic_limit: u64,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            images_in_flight: 8,
            blobs_in_flight: 16,
            chunk_size: 64 << 20,
            monolithic_limit: 64 << 20,
        }
    }
}

/// Settings for one registry host.
#[derive(Clone, Debug, PartialEq)]
pub struct RegistrySettings {
    /// Normalised host as references name it (`docker.io`, `registry.local:5000`).
    pub host: String,
    /// Endpoint override (`https://registry-1.docker.io`); the scheme decides TLS.
    pub url: Option<String>,
    pub auth: AuthSettings,
    /// Plain HTTP / no TLS verification allowed for this host.
    pub insecure: bool,
    pub ca_bundle: Option<PathBuf>,
    pub max_concurrent: usize,
    pub requests_per_second: Option<f64>,
    /// Whom `max_concurrent` and `requests_per_second` budget under `--shard I/N`.
    pub budget: Budget,
    pub retry: RetryOverrides,
}

/// Whom a registry's `max_concurrent` and `requests_per_second` budget when the config runs in
/// shards (`--shard I/N`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Budget {
    /// The fleet's total: each of the N shards takes 1/N (at least one request in flight).
    #[default]
    Fleet,
    /// Each process's own, whatever the shard count.
    PerShard,
}

impl RegistrySettings {
    /// The settings of a host the config does not list: anonymous, verified TLS, defaults.
    pub fn unlisted(host: &str) -> RegistrySettings {
        RegistrySettings {
            host: host.to_string(),
            url: None,
            auth: AuthSettings::Anonymous,
            insecure: false,
            ca_bundle: None,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            requests_per_second: None,
            budget: Budget::Fleet,
            retry: RetryOverrides::default(),
        }
    }
}

/// Retry settings that replace the built-in policy's where set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetryOverrides {
    pub attempts: Option<u32>,
    pub base: Option<Duration>,
    pub cap: Option<Duration>,
    pub retry_after_cap: Option<Duration>,
    pub deadline: Option<Duration>,
}

/// How to authenticate to a registry. Secrets print as `***`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthSettings {
    Anonymous,
    Basic {
        username: String,
        password: Secret,
    },
    Token {
        token: Secret,
    },
    DockerConfig {
        path: Option<PathBuf>,
    },
    Ecr {
        region: Option<String>,
        profile: Option<String>,
    },
}

/// One source repository and where it goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Mapping {
    /// Position in `mappings` (0-based).
    pub index: usize,
    /// The source as reports name it: a normalised repository without tag
    /// (`docker.io/library/alpine`), or `oci:<directory>`.
    pub source: String,
    /// Where the source is read from.
    pub origin: Origin,
    pub targets: Vec<Target>,
    pub tags: TagFilter,
    /// Digests to copy besides the selected tags, normalised (`sha256:…`).
    pub digests: Vec<String>,
    /// Platforms to copy (`linux/amd64`); empty = all.
    pub platforms: Vec<String>,
    pub referrers: bool,
    /// Delete target tags the source no longer has and `tags` selects (see `crate::prune`).
    pub prune: bool,
    /// Line of the mapping in the config file.
    pub line: usize,
}

/// Where a mapping reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A registry repository (`docker.io` + `library/alpine`).
    Registry {
        registry: String,
        repository: String,
    },
    /// An OCI image layout directory (`oci:./images/alpine`).
    OciLayout { path: PathBuf },
}

impl Origin {
    /// `oci:<directory>`, or a repository reference without tag or digest.
    pub fn parse(text: &str) -> Result<Origin, String> {
        parse_origin(text)
    }

    /// The repository path a `target_group` appends: a registry source's path, or a layout
    /// directory's last component when that is a valid repository name.
    fn repository_name(&self) -> Option<String> {
        match self {
            Origin::Registry { repository, .. } => Some(repository.clone()),
            Origin::OciLayout { path } => {
                let last = path.file_name()?.to_str()?;
                let r = Reference::parse(&format!("rename.invalid/{last}")).ok()?;
                (r.repository == last).then(|| last.to_owned())
            }
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Registry {
                registry,
                repository,
            } => write!(f, "{registry}/{repository}"),
            Origin::OciLayout { path } => write!(f, "oci:{}", path.display()),
        }
    }
}

/// Where a mapping writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// A registry repository, normalised, without tag (`registry.local:5000/library/alpine`).
    Registry { reference: String },
    /// An OCI image layout directory (`oci:./mirror/alpine`).
    OciLayout { path: PathBuf },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Registry { reference } => f.write_str(reference),
            Target::OciLayout { path } => write!(f, "oci:{}", path.display()),
        }
    }
}

impl Config {
    /// The settings for `host` (normalised as references are): the listed entry, or anonymous
    /// defaults for a host the config does not list.
    pub fn registry_for(&self, host: &str) -> RegistrySettings {
        let host = normalise_host(host);
        self.registries
            .iter()
            .find(|r| r.host == host)
            .cloned()
            .unwrap_or_else(|| RegistrySettings::unlisted(&host))
    }
}

/// One thing wrong with the config, at a place in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    /// 1-based line and column (of the original text; a `${…}` earlier on the same line may
    /// shift the column).
    pub line: usize,
    pub column: usize,
    /// The field, e.g. `mappings[2] (source docker.io/library/alpine): tags.semver`; empty when
    /// the problem is with the file as a whole.
    pub field: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// One or more problems, in file order (a syntax or type error stops at the first).
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid { problems: Vec<Problem> },
}

impl ConfigError {
    /// The problems found (none for a read error).
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Read { .. } => &[],
            ConfigError::Invalid { problems } => problems,
        }
    }
}

/// Reads and resolves the config at `path`, interpolating from the process environment.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path, &|name| std::env::var(name).ok())
}

/// Resolves config text; `origin` names the file in errors and `env` supplies variables.
pub fn parse(
    text: &str,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let interpolated = interpolate::interpolate(text, env).map_err(|e| {
        // The field is found in the text as written (it parses with its `${…}` unreplaced,
        // except inside a flow collection, where the field is then left unnamed).
        let written = Locator::new(text);
        let checker = Checker {
            file: origin,
            locator: &written,
            redactions: Vec::new(),
            problems: Vec::new(),
        };
        let field = written
            .field_at(e.line, e.column)
            .map(|path| checker.describe(&path))
            .unwrap_or_default();
        ConfigError::Invalid {
            problems: vec![Problem {
                file: origin.to_path_buf(),
                line: e.line,
                column: e.column,
                field,
                message: e.message,
            }],
        }
    })?;
    let locator = Locator::new(&interpolated.text);
    let mut redactions: Vec<String> = interpolated
        .substituted
        .into_iter()
        .chain(
            locator
                .scalars_named(&["password", "token"])
                .into_iter()
                .map(str::to_string),
        )
        .filter(|s| s.chars().count() >= 3)
        .collect();
    // Longest first, so a secret containing another is hidden whole.
    redactions.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut checker = Checker {
        file: origin,
        locator: &locator,
        redactions,
        problems: Vec::new(),
    };
    let deserializer = serde_yaml::Deserializer::from_str(&interpolated.text);
    let raw: RawConfig = match serde_path_to_error::deserialize(deserializer) {
        Ok(raw) => raw,
        Err(error) => {
            let path = FieldPath(
                error
                    .path()
                    .iter()
                    .filter_map(|segment| match segment {
                        serde_path_to_error::Segment::Seq { index } => Some(Segment::Index(*index)),
                        serde_path_to_error::Segment::Map { key } => {
                            Some(Segment::Key(key.clone()))
                        }
                        _ => None,
                    })
                    .collect(),
            );
            let inner = error.into_inner();
            let position = inner
                .location()
                .filter(|l| l.line() > 0)
                .map(|l| Position {
                    line: l.line(),
                    column: l.column(),
                })
                .unwrap_or_else(|| locator.value(&path));
            let message = serde_message(&inner.to_string());
            checker.push(&path, position, message);
            return Err(checker.finish());
        }
    };
    let config = checker.resolve(raw);
    match config {
        Some(config) if checker.problems.is_empty() => Ok(config),
        _ => Err(checker.finish()),
    }
}

/// serde_yaml's message without its own path prefix and trailing position (ours replace them).
fn serde_message(text: &str) -> String {
    let mut message = text;
    if let Some(at) = message.rfind(" at line ") {
        let tail = &message[at + " at line ".len()..];
        if tail
            .split(" column ")
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            message = &message[..at];
        }
    }
    if let Some((head, rest)) = message.split_once(": ")
        && !head.is_empty()
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.[]-".contains(c))
    {
        message = rest;
    }
    message.to_string()
}

struct Checker<'a> {
    file: &'a Path,
    locator: &'a Locator,
    redactions: Vec<String>,
    problems: Vec<Problem>,
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
    fn describe(&self, path: &FieldPath) -> String {
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

    fn push(&mut self, path: &FieldPath, at: Position, message: impl Into<String>) {
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
    fn fail(&mut self, path: &FieldPath, message: impl Into<String>) {
        let at = self.locator.value(path);
        self.push(path, at, message);
    }

    /// A problem with the key at `path` (a field that should not be there).
    fn fail_key(&mut self, path: &FieldPath, message: impl Into<String>) {
        let at = self.locator.key(path);
        self.push(path, at, message);
    }

    fn finish(mut self) -> ConfigError {
        self.problems.sort_by_key(|p| (p.line, p.column));
        ConfigError::Invalid {
            problems: self.problems,
        }
    }

    fn at_least_one(&mut self, path: &FieldPath, value: Option<usize>, default: usize) -> usize {
        match value {
            Some(0) => {
                self.fail(path, "must be at least 1");
                default
            }
            Some(n) => n,
            None => default,
        }
    }

    fn size(&mut self, path: &FieldPath, text: Option<&str>, default: u64) -> u64 {
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

    fn duration(&mut self, path: &FieldPath, text: Option<&str>) -> Option<Duration> {
        match parse_duration(text?) {
            Ok(d) => Some(d),
            Err(message) => {
                self.fail(path, message);
                None
            }
        }
    }

    fn resolve(&mut self, raw: RawConfig) -> Option<Config> {
        let root = FieldPath::root();
        if raw.version != 1 {
            self.fail(
                &root.key("version"),
                format!(
                    "unsupported version {} (this ferry reads version 1)",
                    raw.version
                ),
            );
        }
        let concurrency = self.at_least_one(
            &root.key("concurrency"),
            raw.concurrency,
            DEFAULT_CONCURRENCY,
        );
        let engine = self.resolve_engine(raw.engine.unwrap_or_default());
        let registries = self.resolve_registries(raw.registries);
        let groups = self.resolve_groups(&raw.target_groups);

        let defaults = raw.defaults.unwrap_or_default();
        let defaults_path = root.key("defaults");
        let default_tags = match &defaults.tags {
            None => Some(TagFilter::all()),
            Some(spec) => self.compile_tags(&defaults_path.key("tags"), spec),
        };
        let default_platforms = match &defaults.platforms {
            None => Vec::new(),
            Some(list) => self.check_platforms(&defaults_path.key("platforms"), list),
        };
        let default_referrers = defaults.referrers.unwrap_or(true);

        if raw.mappings.is_empty() {
            self.fail(&root.key("mappings"), "no mappings: nothing to mirror");
        }
        let mut mappings = Vec::new();
        let mut writers: HashMap<Target, (usize, String)> = HashMap::new();
        for (index, mapping) in raw.mappings.into_iter().enumerate() {
            let path = root.key("mappings").index(index);
            let line = self.locator.value(&path).line;
            let source = match parse_origin(&mapping.source) {
                Ok(origin) => Some(origin),
                Err(message) => {
                    self.fail(&path.key("source"), message);
                    None
                }
            };
            let targets = self.resolve_targets(&path, &mapping, source.as_ref(), &groups);
            let tags = match (&mapping.tags, mapping.digests.is_empty()) {
                (Some(spec), _) => self.compile_tags(&path.key("tags"), spec),
                (None, false) => Some(TagFilter::none()),
                (None, true) => default_tags.clone(),
            };
            let mut digests = Vec::new();
            for (i, text) in mapping.digests.iter().enumerate() {
                match Digest::parse(text) {
                    Ok(d) => digests.push(d.to_string()),
                    Err(e) => self.fail(&path.key("digests").index(i), e.to_string()),
                }
            }
            let platforms = match &mapping.platforms {
                Some(list) => self.check_platforms(&path.key("platforms"), list),
                None => default_platforms.clone(),
            };
            let (Some(source), Some(tags)) = (source, tags) else {
                continue;
            };
            let origin = source;
            let source = origin.to_string();
            if let Origin::OciLayout { path: dir } = &origin
                && targets
                    .iter()
                    .any(|(t, _)| *t == Target::OciLayout { path: dir.clone() })
            {
                self.fail(
                    &path.key("source"),
                    format!("{source} is both the source and a target"),
                );
            }
            for (target, target_path) in &targets {
                match writers.get(target) {
                    Some((other, other_source)) if *other_source != source => {
                        let message = format!(
                            "target {target} is also written by mappings[{other}] (source {other_source})"
                        );
                        self.fail(target_path, message);
                    }
                    Some(_) => {}
                    None => {
                        writers.insert(target.clone(), (index, source.clone()));
                    }
                }
            }
            mappings.push(Mapping {
                index,
                source,
                origin,
                targets: targets.into_iter().map(|(t, _)| t).collect(),
                tags,
                digests,
                platforms,
                referrers: mapping.referrers.unwrap_or(default_referrers),
                prune: mapping.prune.unwrap_or(false),
                line,
            });
        }
        Some(Config {
            concurrency,
            engine,
            registries,
            mappings,
        })
    }

    fn resolve_engine(&mut self, raw: raw::RawEngine) -> EngineSettings {
        let path = FieldPath::root().key("engine");
        let d = EngineSettings::default();
        EngineSettings {
            images_in_flight: self.at_least_one(
                &path.key("images_in_flight"),
                raw.images_in_flight,
                d.images_in_flight,
            ),
            blobs_in_flight: self.at_least_one(
                &path.key("blobs_in_flight"),
                raw.blobs_in_flight,
                d.blobs_in_flight,
            ),
            chunk_size: self.size(
                &path.key("chunk_size"),
                raw.chunk_size.as_deref(),
                d.chunk_size,
            ),
            monolithic_limit: self.size(
                &path.key("monolithic_limit"),
                raw.monolithic_limit.as_deref(),
                d.monolithic_limit,
            ),
        }
    }

    fn resolve_registries(&mut self, raw: Vec<RawRegistry>) -> Vec<RegistrySettings> {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut out = Vec::new();
        for (i, registry) in raw.into_iter().enumerate() {
            let path = FieldPath::root().key("registries").index(i);
            let host = match parse_host(&registry.host) {
                Ok(host) => host,
                Err(message) => {
                    self.fail(&path.key("host"), message);
                    continue;
                }
            };
            if let Some(first) = seen.get(&host) {
                let line = self
                    .locator
                    .value(&FieldPath::root().key("registries").index(*first))
                    .line;
                self.fail(
                    &path.key("host"),
                    format!("duplicate registry host {host} (first listed as registries[{first}] on line {line})"),
                );
                continue;
            }
            seen.insert(host.clone(), i);
            if let Some(url) = &registry.url
                && !(url.starts_with("https://") || url.starts_with("http://"))
            {
                self.fail(
                    &path.key("url"),
                    format!("url \"{url}\" must start with https:// or http://"),
                );
            }
            let auth = match registry.auth {
                None | Some(RawAuth::Anonymous) => AuthSettings::Anonymous,
                Some(RawAuth::Basic { username, password }) => {
                    if username.is_empty() {
                        self.fail(&path.key("auth").key("username"), "username is empty");
                    }
                    AuthSettings::Basic {
                        username,
                        password: Secret::new(password.0),
                    }
                }
                Some(RawAuth::Token { token }) => {
                    if token.0.is_empty() {
                        self.fail(&path.key("auth").key("token"), "token is empty");
                    }
                    AuthSettings::Token {
                        token: Secret::new(token.0),
                    }
                }
                Some(RawAuth::DockerConfig { path }) => AuthSettings::DockerConfig { path },
                Some(RawAuth::Ecr { region, profile }) => AuthSettings::Ecr { region, profile },
            };
            let max_concurrent = self.at_least_one(
                &path.key("max_concurrent"),
                registry.max_concurrent,
                DEFAULT_MAX_CONCURRENT,
            );
            if let Some(rps) = registry.requests_per_second
                && !(rps.is_finite() && rps > 0.0)
            {
                self.fail(&path.key("requests_per_second"), "must be a number above 0");
            }
            let retry_path = path.key("retry");
            let raw_retry = registry.retry.unwrap_or_default();
            if raw_retry.attempts == Some(0) {
                self.fail(
                    &retry_path.key("attempts"),
                    "must be at least 1 (1 = no retries)",
                );
            }
            let retry = RetryOverrides {
                attempts: raw_retry.attempts,
                base: self.duration(&retry_path.key("base"), raw_retry.base.as_deref()),
                cap: self.duration(&retry_path.key("cap"), raw_retry.cap.as_deref()),
                retry_after_cap: self.duration(
                    &retry_path.key("retry_after_cap"),
                    raw_retry.retry_after_cap.as_deref(),
                ),
                deadline: self.duration(&retry_path.key("deadline"), raw_retry.deadline.as_deref()),
            };
            if let (Some(base), Some(cap)) = (retry.base, retry.cap)
                && base > cap
            {
                self.fail(&retry_path.key("cap"), "cap is shorter than base");
            }
            out.push(RegistrySettings {
                host,
                url: registry.url,
                auth,
                insecure: registry.insecure.unwrap_or(false),
                ca_bundle: registry.ca_bundle,
                max_concurrent,
                requests_per_second: registry.requests_per_second,
                budget: match registry.budget {
                    None | Some(raw::RawBudget::Fleet) => Budget::Fleet,
                    Some(raw::RawBudget::PerShard) => Budget::PerShard,
                },
                retry,
            });
        }
        out
    }

    /// Checks each group's prefixes; returns the usable ones per group name.
    fn resolve_groups(
        &mut self,
        raw: &BTreeMap<String, Vec<String>>,
    ) -> BTreeMap<String, Vec<TargetPrefix>> {
        let mut groups = BTreeMap::new();
        for (name, prefixes) in raw {
            let path = FieldPath::root().key("target_groups").key(name);
            if prefixes.is_empty() {
                self.fail(&path, format!("target group {name} is empty"));
            }
            let mut out = Vec::new();
            for (i, prefix) in prefixes.iter().enumerate() {
                match parse_prefix(prefix) {
                    Ok(p) => out.push(p),
                    Err(message) => self.fail(&path.index(i), message),
                }
            }
            groups.insert(name.clone(), out);
        }
        groups
    }

    fn resolve_targets(
        &mut self,
        path: &FieldPath,
        mapping: &raw::RawMapping,
        source: Option<&Origin>,
        groups: &BTreeMap<String, Vec<TargetPrefix>>,
    ) -> Vec<(Target, FieldPath)> {
        let mut out: Vec<(Target, FieldPath)> = Vec::new();
        match (&mapping.targets, &mapping.target_group) {
            (Some(_), Some(_)) => {
                self.fail_key(
                    &path.key("target_group"),
                    "set either targets or target_group, not both",
                );
            }
            (None, None) => self.fail(path, "needs targets or target_group"),
            (Some(targets), None) => {
                if mapping.rename.is_some() {
                    self.fail_key(
                        &path.key("rename"),
                        "rename applies to target_group only; write the full name in targets",
                    );
                }
                if targets.is_empty() {
                    self.fail(&path.key("targets"), "targets is empty");
                }
                for (i, text) in targets.iter().enumerate() {
                    let target_path = path.key("targets").index(i);
                    match parse_target(text) {
                        Ok(t) if out.iter().any(|(o, _)| *o == t) => {
                            self.fail(&target_path, format!("target {t} is listed twice"))
                        }
                        Ok(t) => out.push((t, target_path)),
                        Err(message) => self.fail(&target_path, message),
                    }
                }
            }
            (None, Some(group)) => {
                let group_path = path.key("target_group");
                let Some(prefixes) = groups.get(group) else {
                    let known: Vec<&str> = groups.keys().map(String::as_str).collect();
                    let known = if known.is_empty() {
                        "none are defined".to_string()
                    } else {
                        format!("known: {}", known.join(", "))
                    };
                    self.fail(
                        &group_path,
                        format!("unknown target group \"{group}\" ({known})"),
                    );
                    return out;
                };
                let name = match &mapping.rename {
                    Some(rename) => match parse_repository(&format!("rename.invalid/{rename}")) {
                        Ok(r) if r.repository == *rename => rename.clone(),
                        Ok(_) | Err(_) => {
                            self.fail(
                                &path.key("rename"),
                                format!("rename \"{rename}\" is not a repository path (lowercase components separated by /)"),
                            );
                            return out;
                        }
                    },
                    None => match source.map(Origin::repository_name) {
                        Some(Some(name)) => name,
                        Some(None) => {
                            self.fail(
                                &path.key("rename"),
                                "a layout source whose directory name is not a repository path needs rename with target_group",
                            );
                            return out;
                        }
                        None => return out,
                    },
                };
                for prefix in prefixes {
                    match prefix.join(&name) {
                        Ok(t) if out.iter().any(|(o, _)| *o == t) => {}
                        Ok(t) => out.push((t, group_path.clone())),
                        Err(message) => self.fail(&group_path, message),
                    }
                }
            }
        }
        out
    }

    fn compile_tags(&mut self, path: &FieldPath, spec: &TagFilterSpec) -> Option<TagFilter> {
        match TagFilter::compile(spec) {
            Ok(filter) => Some(filter),
            Err(e) => {
                self.fail(&path.join_dotted(&e.field), e.message);
                None
            }
        }
    }

    fn check_platforms(&mut self, path: &FieldPath, list: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for (i, platform) in list.iter().enumerate() {
            let parts: Vec<&str> = platform.split('/').collect();
            let valid = (2..=3).contains(&parts.len())
                && parts.iter().all(|p| {
                    !p.is_empty()
                        && p.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                });
            if valid {
                out.push(platform.clone());
            } else {
                self.fail(
                    &path.index(i),
                    format!("platform \"{platform}\" is not os/arch or os/arch/variant (e.g. linux/arm64/v8)"),
                );
            }
        }
        out
    }
}

/// A `target_groups` entry: where mapped repositories go.
#[derive(Clone, Debug)]
enum TargetPrefix {
    Oci(String),
    Registry(String),
}

impl TargetPrefix {
    fn join(&self, name: &str) -> Result<Target, String> {
        match self {
            TargetPrefix::Oci(dir) => parse_target(&format!("oci:{dir}/{name}")),
            TargetPrefix::Registry(prefix) => parse_target(&format!("{prefix}/{name}")),
        }
    }
}

fn parse_prefix(text: &str) -> Result<TargetPrefix, String> {
    let trimmed = text.trim_end_matches('/');
    if let Some(dir) = trimmed.strip_prefix("oci:") {
        if dir.is_empty() {
            return Err(format!("\"{text}\" names no directory after oci:"));
        }
        return Ok(TargetPrefix::Oci(dir.to_string()));
    }
    // A prefix is valid when a repository under it is.
    parse_target(&format!("{trimmed}/probe"))
        .map(|_| TargetPrefix::Registry(trimmed.to_string()))
        .map_err(|_| {
            format!("target prefix \"{text}\" is not host[:port][/path] or oci:<directory>")
        })
}

/// The directory of an `oci:<directory>` source or target (`what`); `None` for anything else.
fn layout_dir(text: &str, what: &str) -> Option<Result<PathBuf, String>> {
    let dir = text.strip_prefix("oci:")?;
    Some(if dir.is_empty() {
        Err(format!("{what} \"{text}\" names no directory after oci:"))
    } else {
        Ok(PathBuf::from(dir))
    })
}

fn parse_target(text: &str) -> Result<Target, String> {
    if let Some(dir) = layout_dir(text, "target") {
        return dir.map(|path| Target::OciLayout { path });
    }
    let reference = parse_repository(text)?;
    Ok(Target::Registry {
        reference: format!("{}/{}", reference.registry, reference.repository),
    })
}

/// A mapping's source: `oci:<directory>`, or a repository reference without tag or digest.
fn parse_origin(text: &str) -> Result<Origin, String> {
    if let Some(dir) = layout_dir(text, "source") {
        return dir.map(|path| Origin::OciLayout { path });
    }
    let r = parse_repository(text)?;
    Ok(Origin::Registry {
        registry: r.registry,
        repository: r.repository,
    })
}

/// A repository reference without tag or digest.
fn parse_repository(text: &str) -> Result<Reference, String> {
    let reference = Reference::parse(text).map_err(|e| e.to_string())?;
    if reference.tag.is_some() || reference.digest.is_some() {
        return Err(format!(
            "\"{text}\" names a tag or digest; name the repository only and select tags with tags.exact or digests"
        ));
    }
    Ok(reference)
}

fn normalise_host(host: &str) -> String {
    match Reference::parse(&format!("{host}/probe")) {
        Ok(r) => r.registry,
        Err(_) => host.to_ascii_lowercase(),
    }
}

/// A registry host as references name it; Docker Hub's aliases become `docker.io`.
fn parse_host(text: &str) -> Result<String, String> {
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
