//! mirror.yaml: reading, interpolating, checking and resolving the config into `Config`
//! (defaults applied, target groups expanded); every error names file, line, column and field.
//!
//! Target groups: a mapping with `target_group: NAME` gets one target per prefix in
//! `target_groups.NAME`, each prefix followed by `/` and the source repository path
//! (`docker.io/library/alpine` → `library/alpine`), or by `rename` when the mapping sets it.
//! `oci:./mirror` thus becomes `oci:./mirror/library/alpine`. `rename` is refused with `targets`,
//! which are always written in full.

mod check;
pub mod convert;
mod covers;
mod ecr_host;
mod events;
pub mod filter;
pub mod glob;
mod interpolate;
mod locate;
mod mapping_checks;
mod narrow;
pub mod overlap;
mod places;
pub mod platform;
pub mod pull;
pub mod raw;
mod resolve;
mod schedule;
pub mod shard;
mod signatures;
mod units;
mod unknown;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_distribution::Secret;
use ferry_distribution::digest::Digest;
pub use ferry_distribution::identity::ClientIdentity;
use ferry_distribution::reference::{Reference, Tag};

use crate::filter::{TagFilter, TagGlobs};
use crate::platform::Platform;
use check::Checker;
pub use covers::Coverage;
pub use ecr_host::EcrHost;
pub use events::{EventsSettings, OidcKeys, OidcSender};
pub use glob::{RepositoryGlob, TargetPrefix};
use locate::Locator;
pub use locate::{FieldPath, Position, Segment};
pub use narrow::{Narrow, Pick};
pub use schedule::Schedule;
pub use signatures::SignaturePolicy;
pub use units::{parse_duration, parse_size};

/// Mappings resolved at once when `concurrency` is not set.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Requests in flight per registry when `max_concurrent` is not set.
pub const DEFAULT_MAX_CONCURRENT: usize = 16;

/// cosign's legacy referrer tags: the suffix after `<alg>-<hex>` and the name filters use.
pub const COSIGN_TAGS: [(&str, &str); 3] = [
    (".sig", "cosign:sig"),
    (".att", "cosign:att"),
    (".sbom", "cosign:sbom"),
];

/// The resolved config: defaults applied, target groups expanded, every value checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Mappings resolved at once in the prepare phase.
    pub concurrency: usize,
    /// Copy engine limits.
    pub engine: EngineSettings,
    /// Settings for the hosts the config lists; see [`Config::registry_for`] for the others.
    pub registries: Vec<RegistrySettings>,
    /// The mappings, in file order; `Mapping::index` is the position here.
    pub mappings: Vec<Mapping>,
    /// How `ferry watch` authenticates push notifications; `None`: it accepts none.
    pub events: Option<EventsSettings>,
    /// The certificate and key `ferry watch` serves its listener with; `None`: plain HTTP.
    pub listener_tls: Option<ListenerTls>,
    /// `state_dir:`: where uploads in flight are recorded for the next run (`None`: the
    /// command's default, beside its lock file).
    pub state_dir: Option<std::path::PathBuf>,
    /// `bundles.keys:`, read (relative to the config file) when the config was loaded: the keys
    /// a bundle must be signed under (empty: a bundle is held against its record only).
    pub bundle_keys: Vec<ferry_trust::PublicKey>,
}

/// `listener.tls:`: PEM files, checked to be readable and of the right kind when the config is
/// read; the listener builds its TLS setup from them at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerTls {
    /// The certificate chain, leaf first.
    pub certificate: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// Events waiting at most when `events.queue` is not set.
pub const DEFAULT_EVENTS_QUEUE: usize = 1024;

/// Copy engine limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineSettings {
    /// Images copied at once.
    pub images_in_flight: usize,
    /// Blobs moving at once, over every image.
    pub blobs_in_flight: usize,
    /// Bytes per PATCH in a chunked upload.
    pub chunk_size: u64,
    /// Blobs up to this many bytes are uploaded in one request.
    pub monolithic_limit: u64,
    /// How long a target tag ferry confirmed (in the state directory's tag cache) is believed
    /// without asking the target again; zero: always asked (`engine.tag_cache_ttl`).
    pub tag_cache_ttl: std::time::Duration,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            images_in_flight: 8,
            blobs_in_flight: 16,
            chunk_size: 64 << 20,
            monolithic_limit: 64 << 20,
            tag_cache_ttl: std::time::Duration::from_secs(3600),
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
    /// How to authenticate to it.
    pub auth: AuthSettings,
    /// Plain HTTP / no TLS verification allowed for this host.
    pub insecure: bool,
    /// Extra trusted roots (a PEM bundle) for this host's TLS.
    pub ca_bundle: Option<PathBuf>,
    /// The client certificate shown to this host (mutual TLS), checked readable on load.
    pub client_identity: Option<ClientIdentity>,
    /// Requests in flight at once at most; the AIMD window moves below it.
    pub max_concurrent: usize,
    /// A fixed request rate, for registries that publish one.
    pub requests_per_second: Option<f64>,
    /// Whom `max_concurrent` and `requests_per_second` budget under `--shard I/N`.
    pub budget: Budget,
    /// Retry settings that replace the built-in policy's.
    pub retry: RetryOverrides,
    /// An ECR registry: create a missing target repository (through the ECR API) before the
    /// first push to it, with these settings. `None`: never create.
    pub create_repositories: Option<RepositoryCreation>,
}

/// How ferry creates a missing ECR repository; unset fields keep ECR's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepositoryCreation {
    /// `IMMUTABLE` tags (true) or `MUTABLE` (false).
    pub tag_immutability: Option<bool>,
    /// Scan each image on push.
    pub scan_on_push: Option<bool>,
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
    /// The settings of a host the config does not list: credentials found in the user's login
    /// files (else anonymous), verified TLS, defaults.
    pub fn unlisted(host: &str) -> RegistrySettings {
        RegistrySettings {
            host: host.to_string(),
            url: None,
            auth: AuthSettings::Discover,
            insecure: false,
            ca_bundle: None,
            client_identity: None,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            requests_per_second: None,
            budget: Budget::Fleet,
            retry: RetryOverrides::default(),
            create_repositories: None,
        }
    }
}

/// Retry settings that replace the built-in policy's where set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetryOverrides {
    /// Requests per operation at most, the first included.
    pub attempts: Option<u32>,
    /// The first backoff's lower bound.
    pub base: Option<Duration>,
    /// The longest backoff.
    pub cap: Option<Duration>,
    /// The longest `Retry-After` honoured.
    pub retry_after_cap: Option<Duration>,
    /// How long one operation may take, every retry included.
    pub deadline: Option<Duration>,
}

/// How to authenticate to a registry. Secrets print as `***`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthSettings {
    /// No `auth` in the config: the containers `auth.json` files, then the docker
    /// `config.json`, then anonymous (see `ferry_distribution::auth::discover`); ECR hosts use
    /// ECR auth instead.
    Discover,
    /// No credentials (`auth: {type: anonymous}`): nothing is looked up.
    Anonymous,
    /// A user name and password (or an access token as the password).
    Basic {
        /// The user name.
        username: String,
        /// The password; prints as `***`.
        password: Secret,
    },
    /// A bearer token sent as is.
    Token {
        /// The token; prints as `***`.
        token: Secret,
    },
    /// Credentials from a Docker config.json and its helpers.
    DockerConfig {
        /// The file; `None` means `$DOCKER_CONFIG` or `~/.docker/config.json`.
        path: Option<PathBuf>,
    },
    /// An ECR token from the AWS credential chain.
    Ecr {
        /// The AWS region; `None` takes it from the ECR host name.
        region: Option<String>,
        /// The AWS profile; `None` uses the chain's default.
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
    /// Where it goes: the listed targets, or the group's expanded; no duplicates, never empty
    /// but for a whole-registry mapping (see `repositories`).
    pub targets: Vec<Target>,
    /// Which of the source's tags are copied.
    pub tags: TagFilter,
    /// Digests to copy besides the selected tags (`sha256:…`), checked when the config is read.
    pub digests: Vec<Digest>,
    /// Platforms to copy (`linux/amd64`), checked when the config is read; empty = all.
    pub platforms: Vec<Platform>,
    /// Copy the images' referrers (signatures, SBOMs, attestations) too.
    pub referrers: bool,
    /// Which referrers travel, by artifact type, when `referrers` is on (default: all).
    pub referrer_filter: ReferrerFilter,
    /// Artifact types each image's source must have a referrer of; an image lacking one fails
    /// before anything is copied for it. Empty = no requirement.
    pub require_referrers: Vec<String>,
    /// Tags that never change once pushed: one a target's listing names is up to date there
    /// without a manifest request (see `crate::prepare::targets`). Empty = none.
    pub immutable: TagGlobs,
    /// Delete target tags the source no longer has and `tags` selects (see `crate::prune`).
    pub prune: bool,
    /// The tag every copied image is pushed under on the targets, in place of its own (`ferry
    /// copy src:a dst:b`, one image). `None` keeps each tag's name. Not a config field.
    pub retag: Option<Tag>,
    /// With `platforms`: copy only the selected children, but push the source's own index (its
    /// digest kept); a target that refuses it gets the filtered index, reported per target.
    pub platforms_keep_digest: bool,
    /// When `ferry watch` syncs this mapping (`interval:` or `schedule:`); `None` = every
    /// `--interval`. `ferry sync` ignores it.
    pub schedule: Option<Schedule>,
    /// Line of the mapping in the config file.
    pub line: usize,
    /// A whole-registry mapping (a source ending in `/*` or `/**`): the pattern the prepare
    /// phase expands through the registry's catalog into one mapping per matched repository.
    /// Such a mapping has no `targets` and no `digests` of its own; its `origin` names the
    /// registry and the prefix. `None` for every other mapping.
    pub repositories: Option<RepositoryGlob>,
    /// `signatures:`: an image is copied only when a signature for its digest verifies under
    /// this policy (see ferry-sync's `prepare::signatures`). `None` = no check.
    pub signatures: Option<SignaturePolicy>,
    /// `concurrency:`: images of this mapping copied at once at most, within the engine's
    /// `images_in_flight` (`None`: only that bound).
    pub concurrency: Option<usize>,
}

/// Which referrers travel, by artifact type (`application/spdx+json`, or `cosign:sig`,
/// `cosign:att`, `cosign:sbom` for cosign's legacy tags); see `crate::prepare::referrers`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReferrerFilter {
    /// Only these kinds travel; empty = every kind.
    pub include: Vec<String>,
    /// These kinds never travel.
    pub exclude: Vec<String>,
}

impl ReferrerFilter {
    /// Whether a referrer of `kind` travels: listed in `include` (or `include` empty) and not
    /// in `exclude`. A referrer without a kind travels only when `include` is empty.
    pub fn admits(&self, kind: Option<&str>) -> bool {
        let included =
            self.include.is_empty() || kind.is_some_and(|k| self.include.iter().any(|i| i == k));
        let excluded = kind.is_some_and(|k| self.exclude.iter().any(|e| e == k));
        included && !excluded
    }

    /// Whether every referrer travels (no include, no exclude).
    pub fn is_all(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }
}

/// Where a mapping reads: the same kind of place as a [`Target`], one type with one parser
/// and one `Display`.
pub type Origin = Target;

impl Target {
    /// A mapping's source as written: `oci:<directory>`, or a repository reference without
    /// tag or digest.
    pub fn parse(text: &str) -> Result<Target, String> {
        places::parse_place(text, "source")
    }

    /// The repository path a `target_group` appends: a registry source's path, or a layout
    /// directory's last component when that is a valid repository name.
    fn repository_name(&self) -> Option<String> {
        match self {
            Target::Registry { repository, .. } => Some(repository.clone()),
            Target::OciLayout { path } => {
                let last = path.file_name()?.to_str()?;
                let r = Reference::parse(&format!("rename.invalid/{last}")).ok()?;
                (r.repository == last).then(|| last.to_owned())
            }
            // An archive holds images of many repositories, named by their own references.
            Target::OciArchive { .. } | Target::DockerArchive { .. } => None,
        }
    }
}

/// A place a mapping reads or writes (its source, as [`Origin`], or a target): a registry
/// repository, an image-layout directory, or a tar of one. Parsed once, when the config is resolved, so its
/// users read the host and the repository instead of parsing the name again.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A registry repository, normalised, without tag (`registry.local:5000` +
    /// `library/alpine`).
    Registry {
        /// The host as references name it (`docker.io`, `registry.local:5000`).
        registry: String,
        /// The repository path on that host (`library/alpine`).
        repository: String,
    },
    /// An OCI image layout directory (`oci:./mirror/alpine`).
    OciLayout {
        /// The layout's directory.
        path: PathBuf,
    },
    /// An OCI image layout packed as one tar file (`oci-archive:bundle.tar[:REF]`, skopeo's
    /// name for it): read as a source, written as a target (`ferry export`'s bundle).
    OciArchive {
        /// The tar file.
        path: PathBuf,
        /// The image in it (`:REF`, its `org.opencontainers.image.ref.name`), if one is named.
        reference: Option<String>,
    },
    /// `docker save` output (`docker-archive:image.tar[:REF]`): a source only.
    DockerArchive {
        /// The tar file.
        path: PathBuf,
        /// The image in it (`:REF`, a `RepoTags` entry), if one is named.
        reference: Option<String>,
    },
}

/// Registry targets first, ordered by their name as shown (`host/repository`, as when the name
/// was one string), then layouts by path.
impl Ord for Target {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let shown = |registry: &'_ str, repository: &'_ str| -> Vec<u8> {
            [registry.as_bytes(), b"/", repository.as_bytes()].concat()
        };
        match (self, other) {
            (
                Target::Registry {
                    registry: a,
                    repository: ar,
                },
                Target::Registry {
                    registry: b,
                    repository: br,
                },
            ) => shown(a, ar).cmp(&shown(b, br)),
            (Target::Registry { .. }, _) => Ordering::Less,
            (_, Target::Registry { .. }) => Ordering::Greater,
            (a, b) => a.file_key().cmp(&b.file_key()),
        }
    }
}

impl Target {
    /// The error for an archive this build does not read or write yet (issue 25 fills each
    /// place that returns it).
    pub fn archive_not_yet(
        &self,
        operation: ferry_distribution::Operation,
    ) -> ferry_distribution::error::Error {
        ferry_distribution::error::Error::new(
            self.to_string(),
            None,
            operation,
            ferry_distribution::error::ErrorKind::Local(
                "tar archives are not read or written yet".to_owned(),
            ),
        )
    }

    /// Files and directories in one order: layouts, then OCI archives, then docker archives,
    /// each by path and then by the image named in it.
    fn file_key(&self) -> (u8, &std::path::Path, Option<&str>) {
        match self {
            Target::Registry { .. } => (0, std::path::Path::new(""), None),
            Target::OciLayout { path } => (1, path, None),
            Target::OciArchive { path, reference } => (2, path, reference.as_deref()),
            Target::DockerArchive { path, reference } => (3, path, reference.as_deref()),
        }
    }
}

impl PartialOrd for Target {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Registry {
                registry,
                repository,
            } => write!(f, "{registry}/{repository}"),
            Target::OciLayout { path } => write!(f, "oci:{}", path.display()),
            Target::OciArchive { path, reference } | Target::DockerArchive { path, reference } => {
                let scheme = match self {
                    Target::OciArchive { .. } => "oci-archive",
                    _ => "docker-archive",
                };
                write!(f, "{scheme}:{}", path.display())?;
                match reference {
                    Some(r) => write!(f, ":{r}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl Config {
    /// The settings for `host` (normalised as references are): the listed entry, or anonymous
    /// defaults for a host the config does not list.
    pub fn registry_for(&self, host: &str) -> RegistrySettings {
        let host = places::normalise_host(host);
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
    /// The config file.
    pub file: PathBuf,
    /// 1-based line and column (of the original text; a `${…}` earlier on the same line may
    /// shift the column).
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The field, e.g. `mappings[2] (source docker.io/library/alpine): tags.semver`; empty when
    /// the problem is with the file as a whole.
    pub field: String,
    /// What is wrong, with secrets replaced by `***`.
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
    /// The file could not be read.
    #[error("cannot read config {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// One or more problems, in file order (every unknown field is reported; a syntax or type
    /// error stops at the first).
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// Every problem found, in file order.
        problems: Vec<Problem>,
    },
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

/// Reads and resolves a config that may hold only `registries:` (endpoints, credentials,
/// limits): what `ferry copy -c` and `ferry tags -c` take, which bring their own mapping.
pub fn load_registries(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_registries(&text, path, &|name| std::env::var(name).ok())
}

/// Resolves config text; `origin` names the file in errors and `env` supplies variables.
pub fn parse(
    text: &str,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    parse_as(text, origin, env, Needs::Mappings)
}

/// Resolves config text that may hold only `registries:` ([`load_registries`]'s reading).
pub fn parse_registries(
    text: &str,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    parse_as(text, origin, env, Needs::Registries)
}

/// What a config must hold for the command that reads it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// At least one mapping (sync, export, watch, verify, validate).
    Mappings,
    /// Registries only; mappings are allowed and ignored by the caller.
    Registries,
}

fn parse_as(
    text: &str,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    needs: Needs,
) -> Result<Config, ConfigError> {
    let interpolated = interpolate::interpolate(text, env).map_err(|errors| {
        // The field is found in the text as written (it parses with its `${…}` unreplaced,
        // except inside a flow collection, where the field is then left unnamed).
        let written = Locator::new(text);
        let checker = Checker {
            file: origin,
            locator: &written,
            redactions: Vec::new(),
            problems: Vec::new(),
            compiled_tags: Default::default(),
        };
        let problems = errors
            .into_iter()
            .map(|e| Problem {
                file: origin.to_path_buf(),
                line: e.line,
                column: e.column,
                field: written
                    .field_at(e.line, e.column)
                    .map(|path| checker.describe(&path))
                    .unwrap_or_default(),
                message: e.message,
            })
            .collect();
        ConfigError::Invalid { problems }
    })?;
    let locator = Locator::new(&interpolated.text);
    let mut redactions: Vec<String> = interpolated
        .substituted
        .into_iter()
        .chain(
            locator
                .scalars_named(&[
                    "password",
                    "token",
                    "path_secret",
                    "github",
                    "jfrog",
                    "nexus",
                ])
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
        compiled_tags: Default::default(),
    };
    let Some(raw) = unknown::read_raw(&interpolated.text, &mut checker) else {
        return Err(checker.finish());
    };
    if needs == Needs::Mappings && raw.mappings.is_empty() {
        checker.fail(
            &FieldPath::root().key("mappings"),
            "no mappings: nothing to mirror",
        );
    }
    let config = checker.resolve(raw);
    match config {
        Some(config) if checker.problems.is_empty() => Ok(config),
        _ => Err(checker.finish()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(registry: &str, repository: &str) -> Target {
        Target::Registry {
            registry: registry.into(),
            repository: repository.into(),
        }
    }

    #[test]
    fn include_and_exclude_decide_by_kind() {
        let all = ReferrerFilter::default();
        assert!(all.is_all() && all.admits(None) && all.admits(Some("x")));
        let only_sbom = ReferrerFilter {
            include: vec!["application/spdx+json".into()],
            exclude: vec![],
        };
        assert!(only_sbom.admits(Some("application/spdx+json")));
        assert!(!only_sbom.admits(Some("application/vnd.dev.sigstore.bundle.v0.3+json")));
        assert!(!only_sbom.admits(None), "no kind: not what include names");
        let no_sig = ReferrerFilter {
            include: vec![],
            exclude: vec!["cosign:sig".into()],
        };
        assert!(!no_sig.admits(Some("cosign:sig")));
        assert!(no_sig.admits(Some("cosign:att")) && no_sig.admits(None));
    }

    #[test]
    fn targets_sort_as_their_names_did_when_a_registry_target_was_one_string() {
        let targets = [
            registry("a.io", "x"),
            registry("a.io-b", "x"),
            registry("a.io:5000", "x"),
            registry("a.io", "x/y"),
            registry("a.io", "x-y"),
            registry("b.io", "a"),
        ];
        for a in &targets {
            for b in &targets {
                assert_eq!(a.cmp(b), a.to_string().cmp(&b.to_string()), "{a} vs {b}");
            }
        }
        let layout = Target::OciLayout { path: "./a".into() };
        assert!(
            targets.iter().all(|t| *t < layout),
            "registry targets sort first"
        );
    }

    #[test]
    fn archives_are_named_as_skopeo_names_them_and_a_docker_archive_is_read_only() {
        let oci =
            Target::parse("oci-archive:./b.tar:registry.internal/mirror/alpine:3.20").unwrap();
        assert_eq!(
            oci,
            Target::OciArchive {
                path: "./b.tar".into(),
                reference: Some("registry.internal/mirror/alpine:3.20".into()),
            }
        );
        assert_eq!(
            oci.to_string(),
            "oci-archive:./b.tar:registry.internal/mirror/alpine:3.20"
        );
        let docker = Target::parse("docker-archive:img.tar").unwrap();
        assert_eq!(
            docker,
            Target::DockerArchive {
                path: "img.tar".into(),
                reference: None,
            }
        );
        for bad in [
            "oci-archive:",
            "docker-archive::x",
            "oci-archive:a.tar:",
            "oci-archive:a.tar:x\u{1b}",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad:?}");
        }
        assert!(places::parse_target("docker-archive:img.tar").is_err());
        assert!(places::parse_target("oci-archive:out.tar").is_ok());
        let layout = Target::OciLayout { path: "./z".into() };
        assert!(
            layout < oci && oci < docker,
            "layouts, then OCI archives, then docker archives"
        );
    }
}
