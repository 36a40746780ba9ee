//! The command line as clap sees it: subcommands, their flags, global output options, and the
//! help text (an example per command, the exit codes) written for someone in a hurry.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ferry_config::shard::Shard;

const EXIT_CODES: &str = "\
Exit codes:
  0  everything synced or already up to date
  1  some images failed, or an exact tag or a listed name was not mirrored (the rest synced)
  2  every image failed, or a fatal error stopped the run
  3  the configuration is invalid
  4  authentication failed (every failure was an auth failure)
  5  another run of the same config holds its lock file; nothing was done
  64 the command line is wrong (unknown flag, missing or bad argument); nothing was done

Examples:
  ferry sync -c mirror.yaml              mirror everything the config lists
  ferry sync mirror.yaml                 the same: the config may also be given by position
  ferry sync -c mirror.yaml --dry-run    show what would be copied, write nothing
  ferry sync -c mirror.yaml --shard 0/4  run one quarter of the mappings
  ferry verify -c mirror.yaml --deep     prove every target holds what a sync would leave
  ferry watch -c mirror.yaml --interval 15m --listen 0.0.0.0:9090
  ferry tags docker.io/library/alpine --semver '>=3.18' --latest 3
  ferry copy docker.io/library/alpine:3.20 registry.local:5000/mirror/alpine:3.20
  ferry inspect docker.io/library/alpine:3.20    digest, platforms, config, layers, referrers";

/// Mirror container images between registries.
#[derive(Debug, Parser)]
#[command(name = "ferry", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub global: GlobalArgs,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// More log detail: -v debug for ferry, -vv trace for everything.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Errors only.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Log line format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// Progress display: bars on a terminal, a plain line every 5 s otherwise.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto, global = true)]
    pub progress: ProgressMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProgressMode {
    /// Bars when stderr is a terminal, plain lines otherwise.
    Auto,
    /// Bars even when stderr is not a terminal.
    Bars,
    /// One `key=value` line every 5 s, no escape codes.
    Plain,
    /// No progress output.
    None,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Mirror every mapping of a config.
    #[command(
        after_help = "Examples:\n  ferry sync -c mirror.yaml --dry-run --json > plan.json\n  ferry sync -c mirror.yaml --dest-tls-verify=false --dest-creds \"$USER:$TOKEN\" --retry-times 5\n  ferry sync -c mirror.yaml --repair    put back the blobs a deep `ferry verify` finds missing\n  ferry sync -c mirror.yaml --src-authfile ~/.docker/config.json --dest-cert-dir ./certs"
    )]
    Sync(SyncArgs),
    /// Sync again and again on an interval, each run bounded, with /healthz, /readyz and /metrics.
    #[command(
        after_help = "Examples:\n  ferry watch -c mirror.yaml --interval 15m --listen 0.0.0.0:9090\n  ferry watch -c mirror.yaml --interval 1h --dest-tls-verify=false --retry-times 3\n\n/healthz answers 200 while the process runs; /readyz answers 200 when the last run\nended 0 or 1 within twice the interval (or a run is in progress within its bound after\none), else 503 (docs/operations.md lists every case); /metrics serves OpenMetrics text. The\nlistener is plain HTTP unless the config's `listener.tls` names a certificate and key;\nonly POST /v1/events needs a sender of `events:`: listen on 0.0.0.0 only where the network\nlimits who can connect. A run past --run-timeout starts no new work and is cancelled if\nstill going 30s later (or --run-timeout, if shorter).\nA mapping's own `interval: 6h` or `schedule: \"0 3 * * *\"` (cron, UTC) replaces\n--interval for it; each run syncs the mappings that are due.\nSIGINT/SIGTERM: stop after the run in flight, then exit 0."
    )]
    Watch(WatchArgs),
    /// Prove the targets hold what a sync would leave there: missing, drifted and extra tags.
    #[command(after_help = crate::commands::verify::AFTER_HELP)]
    Verify(crate::commands::verify::VerifyArgs),
    /// Check a config and print every problem with file:line:col.
    #[command(
        after_help = "Examples:\n  ferry validate -c mirror.yaml\n  ferry validate --registries-only -c site.yaml\n\nWithout --registries-only the config must hold mappings (what sync, export, watch and\nverify run); with it, a site config holding only registries: (what import, copy, tags,\ninspect, doctor and auth check read) is checked, any mappings checked too but not needed."
    )]
    Validate(ValidateArgs),
    /// List a repository's tags and show which a filter selects, and why the others are out.
    #[command(
        after_help = "Examples:\n  ferry tags docker.io/library/alpine --semver '>=3.18, <4' --latest 3 --exact edge\n  ferry tags registry.local:5000/app --cert-dir ./certs | head -1"
    )]
    Tags(TagsArgs),
    /// Copy one image (a tag or a digest), or every tag of a repository, through the sync engine.
    #[command(
        after_help = "Example:\n  ferry copy docker.io/library/alpine:3.20 registry.local:5000/mirror/alpine\n  ferry copy --all-tags --include '3.*' docker.io/library/alpine registry.local:5000/mirror/alpine\n  ferry copy ghcr.io/org/app:v1 oci:./layout/app\n  ferry copy ghcr.io/org/app:v1 oci:./layout/app:stable\n  ferry copy ghcr.io/org/app:v1 registry.local:5000/org/app:stable\n  ferry copy --digestfile app.digest --dest-tls-verify=false --retry-times 5 \\\n      ghcr.io/org/app:v1 registry.local:5000/org/app:v1\n  ferry copy --src-authfile src-auth.json --src-cert-dir ./src-certs --dest-authfile dst.json \\\n      ghcr.io/org/app:v1 registry.local:5000/org/app:v1\n\nA registry SOURCE without a tag or digest copies `latest` (as skopeo does). --preserve-digests\nis accepted and changes nothing: ferry always keeps the source's digests."
    )]
    Copy(CopyArgs),
    /// Write every image a config selects into one bundle (an OCI archive), or only what is new.
    #[command(after_help = crate::commands::export::AFTER_HELP)]
    Export(crate::commands::export::ExportArgs),
    /// Push every image of a bundle (an OCI archive) to the registry its name names, as a sync.
    #[command(after_help = crate::commands::import::AFTER_HELP)]
    Import(crate::commands::import::ImportArgs),
    /// Show one image: digest, media type, size, platforms, config, layers, referrers.
    #[command(after_help = crate::commands::inspect::AFTER_HELP)]
    Inspect(crate::commands::inspect::InspectArgs),
    /// Probe a registry: what it answers and the capabilities a sync will use there.
    Doctor(crate::commands::doctor::DoctorArgs),
    /// Print what containerd, podman/CRI-O or OpenShift need to pull the sources through the mirror.
    #[command(after_help = crate::commands::pull_config::AFTER_HELP)]
    PullConfig(crate::commands::pull_config::PullConfigArgs),
    /// Print a mirror.yaml equivalent to a regsync.yml or a skopeo sync YAML file.
    #[command(after_help = crate::commands::convert::AFTER_HELP)]
    Convert(crate::commands::convert::ConvertArgs),
    /// Credentials and reachability checks.
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Print a shell completion script.
    #[command(after_help = "Example:\n  ferry completions bash > /etc/bash_completion.d/ferry")]
    Completions { shell: clap_complete::Shell },
}

/// The mirror config: `-c FILE`, `FILE` by position (as `skopeo sync` and regsync users type
/// it), or `$FERRY_CONFIG`; exactly one.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct ConfigArg {
    /// The mirror config (YAML).
    #[arg(short, long, value_name = "FILE", env = "FERRY_CONFIG")]
    config: Option<PathBuf>,
    /// The mirror config (YAML), given by position instead of -c.
    #[arg(value_name = "CONFIG")]
    file: Option<PathBuf>,
}

impl ConfigArg {
    /// The config's path, whichever way it was given.
    pub fn path(&self) -> &std::path::Path {
        // clap's required group guarantees one of the two; an empty path fails to load with
        // a clear "cannot read" should that ever not hold.
        self.config
            .as_deref()
            .or(self.file.as_deref())
            .unwrap_or(std::path::Path::new(""))
    }
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Check a site config: `registries:` alone is enough (import, copy, tags, inspect,
    /// doctor and auth check read such a file).
    #[arg(long)]
    pub registries_only: bool,
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Resolve the plan and show what would be copied (and how many bytes); write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report (or dry-run plan) as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub report: ReportArg,
    /// End with a shallow `ferry verify` of what the run touched; findings fail the run (exit 1).
    #[arg(long, conflicts_with = "dry_run")]
    pub verify: bool,
    /// Accepted as skopeo takes it: ferry always keeps the source's digests (a no-op, always on).
    #[arg(long)]
    pub preserve_digests: bool,
    /// First check every blob and child manifest of every selected image on every target (as
    /// `ferry verify --deep`), then write again each image something under its tag is missing
    /// from (streamed from the source, checked against its digest); the report lists what was
    /// put back. A plain sync compares manifest digests only.
    #[arg(long, conflicts_with_all = ["dry_run", "verify"])]
    pub repair: bool,
    #[command(flatten)]
    pub scope: RunScope,
    #[command(flatten)]
    pub src: SrcArgs,
    #[command(flatten)]
    pub dest: DestArgs,
    #[command(flatten)]
    pub tls: AccessArgs,
}

/// Which mappings a process runs, whether it prunes, and its lock.
#[derive(Debug, Args)]
pub struct RunScope {
    /// Run only shard I of N (I from 0): mappings split by a stable hash of source and targets.
    #[arg(long, value_name = "I/N", conflicts_with = "shards")]
    pub shard: Option<Shard>,
    /// Split into N shards, this one's index from $JOB_COMPLETION_INDEX (Kubernetes Indexed Job).
    #[arg(long, value_name = "N")]
    pub shards: Option<u32>,
    /// Lock file held for the whole run (a dry run takes none) [default: <config>.lock,
    /// <config>.I-of-N.lock for a shard].
    #[arg(long, value_name = "FILE", conflicts_with = "no_lock")]
    pub lock: Option<PathBuf>,
    /// Take no lock (e.g. a read-only config directory in a container that runs alone).
    #[arg(long)]
    pub no_lock: bool,
    /// Directory for the default lock file and the state directory beside it, in place of the
    /// config's own directory (a read-only config mount; the container image sets
    /// FERRY_LOCK_DIR=/var/lib/ferry) [default: the config's directory].
    #[arg(long, value_name = "DIR", env = "FERRY_LOCK_DIR")]
    pub lock_dir: Option<PathBuf>,
    /// Delete target tags the source no longer has and the mapping's filter selects.
    #[arg(long)]
    pub prune: bool,
    /// Directory where uploads in flight are recorded, so the next run resumes them
    /// [default: the config's `state_dir:`, else <config>.state beside the lock file].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Ask every target about every listed tag (a manifest HEAD each) instead of believing the
    /// state directory's tag cache for `engine.tag_cache_ttl`, and rewrite the cache from the
    /// answers (e.g. `ferry sync -c mirror.yaml --no-cache` after a target was changed by hand).
    #[arg(long)]
    pub no_cache: bool,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Time from one run's start to the next (`30s`, `15m`, `1h`); a run never overlaps another.
    /// A mapping's own `interval:` or `schedule:` replaces it for that mapping.
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    pub interval: std::time::Duration,
    /// Address for /healthz, /readyz and /metrics (HTTP, no TLS; loopback unless you say so).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9090")]
    pub listen: std::net::SocketAddr,
    /// Longest one run may take (`30m`, `2h`): past it no new work starts, work in flight gets
    /// 30s (at most this), then the run is cancelled and the next starts on schedule.
    /// [default: 4 x --interval, at least 10m]
    #[arg(long, value_name = "DURATION", value_parser = parse_run_timeout)]
    pub run_timeout: Option<std::time::Duration>,
    #[command(flatten)]
    pub report: ReportArg,
    /// After a run, a deep `ferry verify` when the last one is this old (`6h`); its findings
    /// go to /metrics (`ferry_verify_findings`, `ferry_last_verify_timestamp_seconds`).
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    pub verify_every: Option<std::time::Duration>,
    #[command(flatten)]
    pub scope: RunScope,
    #[command(flatten)]
    pub src: SrcArgs,
    #[command(flatten)]
    pub dest: DestArgs,
    #[command(flatten)]
    pub tls: AccessArgs,
}

fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    match ferry_config::parse_duration(text)? {
        d if d.is_zero() => Err("the interval must be longer than 0".into()),
        d => Ok(d),
    }
}

fn parse_run_timeout(text: &str) -> Result<std::time::Duration, String> {
    match ferry_config::parse_duration(text)? {
        d if d.is_zero() => Err("the run timeout must be longer than 0".into()),
        d => Ok(d),
    }
}

/// `USERNAME:PASSWORD` from the command line, held as a [`ferry_distribution::Secret`] from
/// the moment it is parsed, so no `Debug` of the arguments can show it.
#[derive(Clone, Debug)]
pub struct Creds {
    pub username: String,
    pub password: ferry_distribution::Secret,
}

pub(crate) fn parse_creds(text: &str) -> Result<Creds, String> {
    match text.split_once(':') {
        Some((user, password)) if !user.is_empty() => Ok(Creds {
            username: user.to_owned(),
            password: ferry_distribution::Secret::new(password),
        }),
        _ => Err(
            "expected USERNAME:PASSWORD (ferry does not prompt for a password; to keep it \
             off the command line, put it in a config's registries entry as ${VAR} and pass -c)"
                .into(),
        ),
    }
}

/// `--tls-verify[=BOOL]` as skopeo takes it: `--x-tls-verify=false` allows plain HTTP and
/// unverified TLS for that side's registry.
pub(crate) fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("expected true or false, not {text:?}")),
    }
}

#[derive(Debug, Args)]
pub struct RegistryAccess {
    /// A config whose registries section supplies endpoints and credentials (it may hold only
    /// `registries:`; its mappings, if any, are not run).
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The access flags every command that talks to registries takes, spelled once (skopeo's names):
/// they apply to every registry the command reaches, over what a config says of it.
#[derive(Debug, Args, Default, Clone)]
pub struct AccessArgs {
    /// `--tls-verify=false`: plain HTTP or unverified TLS to every registry this command talks
    /// to (`=true` insists on verified TLS even where a config says `insecure: true`).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub tls_verify: Option<bool>,
    /// The same as --tls-verify=false (the older spelling, still accepted).
    #[arg(long, conflicts_with = "tls_verify")]
    pub insecure: bool,
    /// A login file (containers `auth.json` or docker `config.json`) for every registry this
    /// command talks to, in place of the logins found by default.
    #[arg(long, value_name = "FILE")]
    pub authfile: Option<PathBuf>,
    /// Retry a failed request N more times (skopeo's --retry-times; replaces each registry's
    /// `retry.attempts`: N+1 attempts in all).
    #[arg(long, value_name = "N")]
    pub retry_times: Option<u32>,
}

/// One registry named on the command line (`tags`, `inspect`, `doctor`): its credentials and
/// certificates, as skopeo's `--creds` and `--cert-dir`.
#[derive(Debug, Args, Default, Clone)]
pub struct OneRegistryArgs {
    /// Credentials for the registry (`USERNAME:PASSWORD`), as skopeo's `--creds`.
    #[arg(long, value_name = "USER:PASSWORD", value_parser = parse_creds)]
    pub creds: Option<Creds>,
    /// A directory of certificates for the registry, as skopeo's `--cert-dir`: every `*.crt`
    /// is a trusted CA, a `NAME.cert` with its `NAME.key` the client certificate.
    #[arg(long, value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,
}

/// The source side's registries (skopeo's `--src-*`): for `copy` the source image's, for a
/// config the registries its mappings read from.
#[derive(Debug, Args, Default, Clone)]
pub struct SrcArgs {
    /// `--src-tls-verify=false`: plain HTTP or unverified TLS to the source registries only.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub src_tls_verify: Option<bool>,
    /// Credentials for the source registries (`USERNAME:PASSWORD`), as skopeo's `--src-creds`.
    #[arg(long, value_name = "USER:PASSWORD", value_parser = parse_creds)]
    pub src_creds: Option<Creds>,
    /// A login file for the source registries (skopeo's --src-authfile), over --authfile.
    #[arg(long, value_name = "FILE")]
    pub src_authfile: Option<PathBuf>,
    /// Certificates for the source registries, as skopeo's --src-cert-dir (`*.crt` CAs, a
    /// `NAME.cert` + `NAME.key` client pair).
    #[arg(long, value_name = "DIR")]
    pub src_cert_dir: Option<PathBuf>,
}

/// The target side's registries (skopeo's `--dest-*`): for `copy` the target's, for a config
/// the registries its mappings write to, for `import` every registry an image goes to.
#[derive(Debug, Args, Default, Clone)]
pub struct DestArgs {
    /// `--dest-tls-verify=false`: plain HTTP or unverified TLS to the target registries only.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub dest_tls_verify: Option<bool>,
    /// Credentials for the target registries (`USERNAME:PASSWORD`), as skopeo's `--dest-creds`.
    #[arg(long, value_name = "USER:PASSWORD", value_parser = parse_creds)]
    pub dest_creds: Option<Creds>,
    /// A login file for the target registries (skopeo's --dest-authfile), over --authfile.
    #[arg(long, value_name = "FILE")]
    pub dest_authfile: Option<PathBuf>,
    /// Certificates for the target registries, as skopeo's --dest-cert-dir (`*.crt` CAs, a
    /// `NAME.cert` + `NAME.key` client pair).
    #[arg(long, value_name = "DIR")]
    pub dest_cert_dir: Option<PathBuf>,
}

/// `--report FILE`, the same on every command that ends with a report.
#[derive(Debug, Args, Default, Clone)]
pub struct ReportArg {
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TagsArgs {
    /// The repository (`docker.io/library/alpine`, `docker://` accepted; a tag or digest is
    /// ignored), or an image layout directory (`oci:./images/app`).
    pub reference: String,
    /// Glob a tag must match (repeatable; default `*`).
    #[arg(long, value_name = "GLOB")]
    pub include: Vec<String>,
    /// Glob that drops a tag (repeatable).
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Regular expression a tag must match (unanchored).
    #[arg(long)]
    pub regex: Option<String>,
    /// Semver range (`>=3.18, <4`); drops tags that are not versions.
    #[arg(long, value_name = "RANGE")]
    pub semver: Option<String>,
    /// Order used by --latest.
    #[arg(long, value_enum)]
    pub sort: Option<SortArg>,
    /// Keep the last N of the sort order.
    #[arg(long, value_name = "N")]
    pub latest: Option<usize>,
    /// Tag always selected when it exists (repeatable).
    #[arg(long, value_name = "TAG")]
    pub exact: Vec<String>,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub one: OneRegistryArgs,
    #[command(flatten)]
    pub tls: AccessArgs,
    #[command(flatten)]
    pub access: RegistryAccess,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortArg {
    Semver,
    Alpha,
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// Source image with a tag or digest (`docker.io/library/alpine:3.20`, or as skopeo writes
    /// it, `docker://docker.io/library/alpine:3.20`), or in an image layout directory
    /// (`oci:./images/app:3.20`, `oci:./images/app@sha256:…`).
    pub source: String,
    /// Target repository (`registry.local:5000/mirror/alpine`, `docker://` accepted), with a
    /// tag to push the image under another tag than the source's (`…/alpine:stable`), or
    /// `oci:<dir>` (which keeps the source's tag), or `oci:<dir>:<tag>` to write it under
    /// another tag, as skopeo writes it.
    pub target: String,
    /// Copy only this platform of a multi-platform image (`os/arch[/variant]`, repeatable); the
    /// index is rewritten to list only those, so its digest changes.
    #[arg(
        long = "platform",
        value_name = "OS/ARCH[/VARIANT]",
        conflicts_with = "all"
    )]
    pub platforms: Vec<String>,
    /// Copy every platform (what ferry does without `--platform`; accepted as skopeo takes it).
    #[arg(long)]
    pub all: bool,
    /// Copy every tag of the source repository (crane's `copy --all-tags`, `skopeo sync --src
    /// docker`): SRC and DST name repositories without a tag.
    #[arg(long)]
    pub all_tags: bool,
    /// With --all-tags: only tags this glob matches (repeatable; default `*`).
    #[arg(long, value_name = "GLOB", requires = "all_tags")]
    pub include: Vec<String>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write the digest of the copied image's manifest to FILE (skopeo's --digestfile; the
    /// source's digest, which ferry keeps: the target's when --platform rewrote the index).
    #[arg(long, value_name = "FILE", conflicts_with = "all_tags")]
    pub digestfile: Option<PathBuf>,
    /// Accepted as skopeo takes it: ferry always keeps the source's digests (a no-op, always on).
    #[arg(long)]
    pub preserve_digests: bool,
    /// Directory where uploads in flight are recorded, so a later copy resumes them
    /// [default: the -c config's `state_dir:`, else none].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(flatten)]
    pub report: ReportArg,
    #[command(flatten)]
    pub src: SrcArgs,
    #[command(flatten)]
    pub dest: DestArgs,
    #[command(flatten)]
    pub tls: AccessArgs,
    #[command(flatten)]
    pub access: RegistryAccess,
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// For every registry the config uses: the credential source and whether it answers.
    #[command(after_help = "Example:\n  ferry auth check -c mirror.yaml")]
    Check(ConfigArg),
}
