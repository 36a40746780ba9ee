//! mirror.yaml as written: the serde types (unknown fields refused) that the JSON Schema in
//! docs/config.schema.json is generated from; `super` resolves them into the checked model.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

use crate::filter::TagFilterSpec;

/// mirror.yaml: which repositories to mirror where, and how to talk to each registry.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "ferry mirror.yaml")]
pub struct RawConfig {
    /// Format version; must be 1.
    pub version: u32,
    /// Mappings resolved at once in the prepare phase (default 16, at least 1).
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// Copy engine limits.
    #[serde(default)]
    pub engine: Option<RawEngine>,
    /// Settings every mapping inherits; each can be overridden per mapping.
    #[serde(default)]
    pub defaults: Option<RawDefaults>,
    /// Per-host settings: endpoint, credentials, TLS, limits, retry.
    #[serde(default)]
    pub registries: Vec<RawRegistry>,
    /// Named lists of target prefixes, used by a mapping's `target_group`.
    #[serde(default)]
    pub target_groups: BTreeMap<String, Vec<String>>,
    /// What to mirror: each mapping copies one source repository to one or more targets.
    /// Absent in a site config that only says how to reach registries (`ferry import`, `copy`,
    /// `tags`, `inspect`, `doctor`); the commands that mirror refuse it empty.
    #[serde(default)]
    pub mappings: Vec<RawMapping>,
    /// Push notifications `ferry watch` takes on `POST /v1/events` (default: none accepted).
    #[serde(default)]
    pub events: Option<RawEvents>,
    /// The `ferry watch` listener (/healthz, /readyz, /metrics, /v1/events): TLS.
    #[serde(default)]
    pub listener: Option<RawListener>,
    /// Directory where uploads in flight are recorded so the next run resumes them (default:
    /// beside the run's lock file, `<config>.state/`); `--state-dir` overrides it.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// How `ferry import` authenticates bundles.
    #[serde(default)]
    pub bundles: Option<RawBundles>,
}

/// `bundles:`: what `ferry import` (and `ferry verify --bundle`) trusts a bundle under.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBundles {
    /// Public keys (PEM `PUBLIC KEY` files: ECDSA P-256 or Ed25519, as `cosign
    /// generate-key-pair` writes `cosign.pub`). With any key here, `ferry import` refuses a bundle
    /// that is not signed by one of them, before any request to a target.
    #[serde(default)]
    pub keys: Vec<PathBuf>,
}

/// `listener:`: how `ferry watch` serves its listener.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    /// Serve HTTPS with this certificate and key (default: plain HTTP).
    #[serde(default)]
    pub tls: Option<RawListenerTls>,
}

/// `listener.tls:`: the listener's certificate and key, PEM files read at start.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawListenerTls {
    /// PEM certificate chain, leaf first.
    pub certificate: PathBuf,
    /// PEM private key of the certificate (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// `events:`: how `ferry watch` authenticates push notifications (at least one way in; each
/// secret at least 16 characters, written as "${VAR}" so it comes from the environment).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawEvents {
    /// The bearer token (`Authorization: Bearer …`): distribution, Harbor, ACR, zot,
    /// EventBridge API destinations, JFrog custom headers.
    #[serde(default)]
    pub token: Option<String>,
    /// For senders that cannot set a header (Docker Hub, Quay): `POST /v1/events/<path_secret>`.
    #[serde(default)]
    pub path_secret: Option<String>,
    /// Per-sender HMAC keys: `github`, `jfrog`, `nexus`.
    #[serde(default)]
    pub hmac: Option<RawEventsHmac>,
    /// Senders presenting a signed JWT (GAR Pub/Sub push, Chainguard).
    #[serde(default)]
    pub oidc: Vec<RawOidc>,
    /// Events waiting to be synced at most (default 1024); a full queue answers 503.
    #[serde(default)]
    pub queue: Option<usize>,
}

pub use crate::events::{RawEventsHmac, RawOidc};

/// Copy engine limits.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawEngine {
    /// Images copied at once (default 8).
    #[serde(default)]
    pub images_in_flight: Option<usize>,
    /// Blobs transferred at once across all images (default 16).
    #[serde(default)]
    pub blobs_in_flight: Option<usize>,
    /// Bytes per PATCH of a chunked upload, e.g. "64MiB" (default "64MiB"; at most 16 MiB on
    /// registries that fail large streamed requests).
    #[serde(default)]
    pub chunk_size: Option<String>,
    /// Blobs up to this size are uploaded in one request, e.g. "64MiB" (default "64MiB").
    #[serde(default)]
    pub monolithic_limit: Option<String>,
    /// How long a target tag ferry gave (or confirmed) a digest is believed without a HEAD on
    /// the target, e.g. "30m" (default "1h"; "0s": the target is always asked).
    #[serde(default)]
    pub tag_cache_ttl: Option<String>,
}

/// Settings inherited by every mapping.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDefaults {
    /// Tag filter for mappings without `tags` (default: every tag).
    #[serde(default)]
    pub tags: Option<TagFilterSpec>,
    /// Platforms (`os/arch[/variant]`) for mappings without `platforms`; empty = all.
    #[serde(default)]
    pub platforms: Option<Vec<String>>,
    /// For mappings without `platforms_keep_digest` (default false): see the mapping's field.
    #[serde(default)]
    pub platforms_keep_digest: Option<bool>,
    /// Copy referrers (signatures, SBOMs, attestations) too (default true), or only some
    /// kinds: `{include: [artifactType…], exclude: […]}`.
    #[serde(default)]
    pub referrers: Option<RawReferrers>,
    /// Immutable tags for mappings without `immutable` (default: none); see the mapping's field.
    #[serde(default)]
    pub immutable: Option<Vec<String>>,
    /// `require_referrers` for mappings without one (default: none); see the mapping's field.
    #[serde(default)]
    pub require_referrers: Option<Vec<String>>,
    /// The signature policy of mappings without `signatures` (default: none); see the
    /// mapping's field.
    #[serde(default)]
    pub signatures: Option<RawSignatures>,
}

/// Settings for one registry host.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRegistry {
    /// The host as references name it, e.g. "docker.io" or "registry.local:5000".
    pub host: String,
    /// Endpoint override such as "https://registry-1.docker.io"; the scheme decides TLS.
    #[serde(default)]
    pub url: Option<String>,
    /// Credentials (default: the user's podman/skopeo `auth.json`, then docker's
    /// `config.json`, then anonymous; ECR hosts use ECR auth).
    #[serde(default)]
    pub auth: Option<RawAuth>,
    /// Allow plain HTTP and skip TLS verification for this host (default false).
    #[serde(default)]
    pub insecure: Option<bool>,
    /// Extra PEM CA certificates to trust for this host.
    #[serde(default)]
    pub ca_bundle: Option<PathBuf>,
    /// PEM client certificate for a registry that requires mutual TLS (needs `client_key`).
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of `client_cert`.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// Requests in flight to this host at most (default 16).
    #[serde(default)]
    pub max_concurrent: Option<usize>,
    /// Request rate cap for this host (default: none).
    #[serde(default)]
    pub requests_per_second: Option<f64>,
    /// Whom `max_concurrent` and `requests_per_second` budget under `--shard I/N`: `fleet` (the
    /// default: the total of all N shards, each process taking 1/N) or `per_shard` (each
    /// process, as written).
    #[serde(default)]
    pub budget: Option<RawBudget>,
    /// Retry overrides for this host.
    #[serde(default)]
    pub retry: Option<RawRetry>,
    /// ECR only: create a missing target repository before the first push to it (ECR refuses
    /// pushes to repositories that do not exist). `true`, or `{tag_immutability: true,
    /// scan_on_push: true}` to pass those settings through (default: ECR's).
    #[serde(default)]
    pub create_repositories: Option<RawCreateRepositories>,
}

/// `create_repositories:` as written: a switch, or the settings a created repository gets.
#[derive(Debug, Clone, JsonSchema)]
#[serde(untagged)]
pub enum RawCreateRepositories {
    /// Create (`true`) with ECR's defaults, or never (`false`).
    Create(bool),
    /// Create, with these settings.
    With(RawRepositoryCreation),
}

/// The settings a repository ferry creates gets.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRepositoryCreation {
    /// Make tags immutable (`IMMUTABLE`) or not (`MUTABLE`); default: ECR's (mutable).
    #[serde(default)]
    pub tag_immutability: Option<bool>,
    /// Scan images on push; default: ECR's (off).
    #[serde(default)]
    pub scan_on_push: Option<bool>,
}

impl<'de> Deserialize<'de> for RawCreateRepositories {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CreateVisitor;
        impl<'de> serde::de::Visitor<'de> for CreateVisitor {
            type Value = RawCreateRepositories;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false, or {tag_immutability: bool, scan_on_push: bool}")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(RawCreateRepositories::Create(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                RawRepositoryCreation::deserialize(serde::de::value::MapAccessDeserializer::new(
                    map,
                ))
                .map(RawCreateRepositories::With)
            }
        }
        deserializer.deserialize_any(CreateVisitor)
    }
}

/// Whom a registry's limits budget when the config runs in shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawBudget {
    /// The limits are the whole fleet's: with `--shard I/N` each process takes 1/N of them.
    Fleet,
    /// The limits are each process's, whatever the shard count.
    PerShard,
}

/// How to authenticate to a registry. `type` may be left out when `username` and `password`
/// are given: they mean `basic`.
// Read through `AuthFields` (so `type` may be missing); the serde attributes here shape the
// schema only, and `basic_type_optional` marks its `type` as not required.
#[derive(Debug, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[schemars(transform = basic_type_optional)]
pub enum RawAuth {
    /// No credentials, and no lookup in the user's login files (token flows still run
    /// anonymously).
    Anonymous,
    /// Username and password (or an access token used as password); the type may be left
    /// out.
    Basic {
        /// The user name.
        username: String,
        /// The password (`${VAR}` to read it from the environment).
        #[schemars(with = "String")]
        password: RawSecret,
    },
    /// A bearer token sent as is.
    Token {
        /// The token (`${VAR}` to read it from the environment).
        #[schemars(with = "String")]
        token: RawSecret,
    },
    /// Credentials from a Docker config.json (default: $DOCKER_CONFIG or ~/.docker/config.json).
    DockerConfig {
        /// The config.json to read.
        #[serde(default)]
        path: Option<PathBuf>,
    },
    /// Amazon ECR credentials from the AWS credential chain.
    Ecr {
        /// The AWS region (default: from the ECR host name).
        #[serde(default)]
        region: Option<String>,
        /// The AWS profile (default: the credential chain's).
        #[serde(default)]
        profile: Option<String>,
    },
}

/// The schema of `auth:`: the `basic` form's `type` is not required.
fn basic_type_optional(schema: &mut schemars::Schema) {
    let Some(variants) = schema.get_mut("oneOf").and_then(|v| v.as_array_mut()) else {
        return;
    };
    for v in variants {
        let basic = v.pointer("/properties/type/const").and_then(|c| c.as_str()) == Some("basic");
        if let (true, Some(required)) =
            (basic, v.get_mut("required").and_then(|r| r.as_array_mut()))
        {
            required.retain(|r| r != "type");
        }
    }
}

/// `auth:` as written: every field any type takes; [`RawAuth`] checks they fit the type.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFields {
    #[serde(rename = "type", default)]
    kind: Option<AuthKind>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<RawSecret>,
    #[serde(default)]
    token: Option<RawSecret>,
    #[serde(default)]
    path: Option<PathBuf>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    profile: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AuthKind {
    Anonymous,
    Basic,
    Token,
    DockerConfig,
    Ecr,
}

impl AuthKind {
    fn name(self) -> &'static str {
        match self {
            AuthKind::Anonymous => "anonymous",
            AuthKind::Basic => "basic",
            AuthKind::Token => "token",
            AuthKind::DockerConfig => "docker_config",
            AuthKind::Ecr => "ecr",
        }
    }

    /// The fields the type takes, besides `type`.
    fn fields(self) -> &'static [&'static str] {
        match self {
            AuthKind::Anonymous => &[],
            AuthKind::Basic => &["username", "password"],
            AuthKind::Token => &["token"],
            AuthKind::DockerConfig => &["path"],
            AuthKind::Ecr => &["region", "profile"],
        }
    }
}

impl AuthFields {
    /// The fields given, by name.
    fn given(&self) -> Vec<&'static str> {
        [
            ("username", self.username.is_some()),
            ("password", self.password.is_some()),
            ("token", self.token.is_some()),
            ("path", self.path.is_some()),
            ("region", self.region.is_some()),
            ("profile", self.profile.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }

    fn resolve(self) -> Result<RawAuth, String> {
        let kind = match self.kind {
            Some(k) => k,
            // `username`/`password` without a type: basic (docs/airgap.md's site config).
            None if self.username.is_some() || self.password.is_some() => AuthKind::Basic,
            None => {
                return Err(
                    "missing field `type` (anonymous, basic, token, docker_config or \
                            ecr; username and password alone mean basic)"
                        .to_owned(),
                );
            }
        };
        let allowed = kind.fields();
        if let Some(other) = self.given().into_iter().find(|f| !allowed.contains(f)) {
            let expected = match allowed {
                [] => "no other field".to_owned(),
                fields => fields
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            return Err(format!(
                "unknown field `{other}` for type {}, expected {expected}",
                kind.name()
            ));
        }
        let missing = |field: &str| format!("missing field `{field}` (type {})", kind.name());
        Ok(match kind {
            AuthKind::Anonymous => RawAuth::Anonymous,
            AuthKind::Basic => RawAuth::Basic {
                username: self.username.ok_or_else(|| missing("username"))?,
                password: self.password.ok_or_else(|| missing("password"))?,
            },
            AuthKind::Token => RawAuth::Token {
                token: self.token.ok_or_else(|| missing("token"))?,
            },
            AuthKind::DockerConfig => RawAuth::DockerConfig { path: self.path },
            AuthKind::Ecr => RawAuth::Ecr {
                region: self.region,
                profile: self.profile,
            },
        })
    }
}

impl<'de> Deserialize<'de> for RawAuth {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        AuthFields::deserialize(d)?
            .resolve()
            .map_err(serde::de::Error::custom)
    }
}

/// Retry overrides for one registry; unset fields keep the built-in policy.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    /// Tries per request, the first included (at least 1; default 8).
    #[serde(default)]
    pub attempts: Option<u32>,
    /// First backoff, e.g. "200ms" (default 50ms).
    #[serde(default)]
    pub base: Option<String>,
    /// Longest backoff, e.g. "30s".
    #[serde(default)]
    pub cap: Option<String>,
    /// Longest `Retry-After` honoured, e.g. "2m".
    #[serde(default)]
    pub retry_after_cap: Option<String>,
    /// Give up on one request after this long in total, e.g. "10m".
    #[serde(default)]
    pub deadline: Option<String>,
}

/// One source repository and where to copy it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMapping {
    /// Source repository, e.g. "docker.io/library/alpine" (no tag or digest), or
    /// "oci:<directory>" (an OCI image layout), or a whole registry or prefix:
    /// "registry.example.com/team/*" (one path level) or "registry.example.com/team/**" (any
    /// depth), expanded through the registry's catalog; each repository found goes to each
    /// target prefix plus the part after the source's prefix.
    pub source: String,
    /// Target repositories: "host[:port]/path" or "oci:<directory>".
    #[serde(default)]
    pub targets: Option<Vec<String>>,
    /// A `target_groups` name: each prefix gets the source repository path appended.
    #[serde(default)]
    pub target_group: Option<String>,
    /// Tag filter (replaces `defaults.tags` as a whole).
    #[serde(default)]
    pub tags: Option<TagFilterSpec>,
    /// Digests to copy as well, e.g. "sha256:…".
    #[serde(default)]
    pub digests: Vec<String>,
    /// Platforms to copy (`os/arch[/variant]`); empty = all. Replaces `defaults.platforms`.
    #[serde(default)]
    pub platforms: Option<Vec<String>>,
    /// With `platforms`: copy only those children but push the source's index unchanged, so
    /// the digest stays; a target that refuses an index with missing children gets the
    /// filtered index instead, and the report says so (default false).
    #[serde(default)]
    pub platforms_keep_digest: Option<bool>,
    /// Copy referrers too (`true`/`false`), or only some kinds:
    /// `{include: [artifactType…], exclude: […]}`. Replaces `defaults.referrers`.
    #[serde(default)]
    pub referrers: Option<RawReferrers>,
    /// Globs (as in `tags.include`, e.g. "v*.*.*") naming tags that never change once pushed: a
    /// tag matching one that a target's tag listing already names is taken as up to date
    /// there, with no manifest request to the target (nor to the source, when every target
    /// names it). A re-pushed immutable tag is not noticed. Replaces `defaults.immutable`.
    #[serde(default)]
    pub immutable: Option<Vec<String>>,
    /// With `target_group`: the repository path appended instead of the source's.
    #[serde(default)]
    pub rename: Option<String>,
    /// Delete target tags the source no longer has and this mapping's filter selects
    /// (default false; `ferry sync --prune` turns it on for every mapping).
    #[serde(default)]
    pub prune: Option<bool>,
    /// `ferry watch` syncs this mapping every so long (e.g. "15m", "6h") instead of every
    /// `--interval`; `ferry sync` ignores it. Not with `schedule`.
    #[serde(default)]
    pub interval: Option<String>,
    /// `ferry watch` syncs this mapping at the times a cron expression names, in UTC (e.g.
    /// "0 3 * * *": 03:00 daily) instead of every `--interval`; `ferry sync` ignores it. Not
    /// with `interval`.
    #[serde(default)]
    pub schedule: Option<String>,
    /// With a source ending in `/*` or `/**`: the most repositories it may expand to (default
    /// 1000); a catalog matching more fails the mapping, naming both counts.
    #[serde(default)]
    pub max_repositories: Option<usize>,
    /// Artifact types (e.g. "application/vnd.dev.sigstore.bundle.v0.3+json", or "cosign:sig"
    /// for cosign's legacy signature tag) each image must have a referrer of on the source: an
    /// image without one fails, with the kinds it has, before anything is copied for it.
    /// Replaces `defaults.require_referrers`.
    #[serde(default)]
    pub require_referrers: Option<Vec<String>>,
    /// Mirror an image only when a cosign signature or Sigstore bundle for its exact digest
    /// verifies under this policy (docs/signatures.md); an image without one fails and never
    /// reaches a target. Replaces `defaults.signatures` as a whole.
    #[serde(default)]
    pub signatures: Option<RawSignatures>,
    /// Images of this mapping copied at once at most (at least 1; default: no cap of its own),
    /// within `engine.images_in_flight`, which bounds every mapping together: a slow or
    /// rate-limited source can be held to fewer parallel copies than the rest (regsync's
    /// `parallel`).
    #[serde(default)]
    pub concurrency: Option<usize>,
}

/// `signatures:`: who may sign the images a mapping mirrors, and what proves it.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSignatures {
    /// PEM public keys (as `cosign generate-key-pair` writes them: ECDSA P-256, Ed25519 or
    /// RSA), any of which may sign; paths relative to the config file.
    #[serde(default)]
    pub keys: Vec<PathBuf>,
    /// Keyless signers (Fulcio certificates), any of which may sign.
    #[serde(default)]
    pub identities: Vec<RawIdentity>,
    /// An offline Sigstore `trusted_root.json` (Fulcio CAs, Rekor keys) replacing the built-in
    /// public-good root; relative to the config file.
    #[serde(default)]
    pub trusted_root: Option<PathBuf>,
    /// `require` (the default): a Rekor entry (its SET) must prove each signature; `skip`:
    /// key signatures need none (keyless ones always do).
    #[serde(default)]
    pub tlog: Option<RawTlog>,
    /// Cooldown, e.g. "72h": mirror a digest only once its signature is this old (its Rekor
    /// integrated time; with `tlog: skip`, the time ferry first saw the digest). A younger
    /// image is held, not failed.
    #[serde(default)]
    pub min_age: Option<String>,
}

/// A keyless signer: the OIDC issuer and the certificate subject (`subject` or
/// `subject_regexp`, one of the two).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawIdentity {
    /// The OIDC issuer, matched exactly (e.g. "https://token.actions.githubusercontent.com").
    pub issuer: String,
    /// The certificate's SAN (URI or email), matched exactly.
    #[serde(default)]
    pub subject: Option<String>,
    /// A regular expression the SAN must match; anchor it ("^https://github.com/acme/.+$").
    #[serde(default)]
    pub subject_regexp: Option<String>,
}

/// `tlog:`: must a transparency-log entry prove each signature?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawTlog {
    /// A Rekor SET from a log of the trusted root must cover the signature.
    Require,
    /// Key signatures need no log entry (keyless signatures always do).
    Skip,
}

/// `referrers:` as written: a switch, or a filter by artifact type (which turns copying on).
#[derive(Debug, Clone, JsonSchema)]
#[serde(untagged)]
pub enum RawReferrers {
    /// Copy every referrer (`true`) or none (`false`).
    Copy(bool),
    /// Copy only the referrers these lists choose.
    Filter(RawReferrerFilter),
}

/// Referrers chosen by artifact type (`application/spdx+json`, `cosign:sig`, …).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawReferrerFilter {
    /// Only these artifact types travel (default: every type).
    #[serde(default)]
    pub include: Vec<String>,
    /// These artifact types never travel.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// By hand rather than `untagged`, so a wrong value is reported at its position with what was
/// expected.
impl<'de> Deserialize<'de> for RawReferrers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ReferrersVisitor;
        impl<'de> serde::de::Visitor<'de> for ReferrersVisitor {
            type Value = RawReferrers;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false, or {include: [artifactType…], exclude: […]}")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<RawReferrers, E> {
                Ok(RawReferrers::Copy(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawReferrers, A::Error> {
                RawReferrerFilter::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawReferrers::Filter)
            }
        }
        deserializer.deserialize_any(ReferrersVisitor)
    }
}

/// A credential as read from YAML: any scalar, never echoed in an error.
#[derive(Clone, Default)]
pub struct RawSecret(pub String);

impl fmt::Debug for RawSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl<'de> Deserialize<'de> for RawSecret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SecretVisitor;
        impl serde::de::Visitor<'_> for SecretVisitor {
            type Value = RawSecret;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawSecret, E> {
                Ok(RawSecret(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawSecret, E> {
                Ok(RawSecret(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawSecret, E> {
                Ok(RawSecret(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<RawSecret, E> {
                Err(E::custom(
                    "a number with a fraction cannot be a credential; quote the value",
                ))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<RawSecret, E> {
                Err(E::custom(
                    "a boolean cannot be a credential; quote the value",
                ))
            }
        }
        deserializer.deserialize_any(SecretVisitor)
    }
}
