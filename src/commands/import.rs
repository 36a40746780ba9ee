//! `ferry import BUNDLE.tar` (or `-`, standard input; gzip or zstd too): every image of an OCI
//! archive pushed to the registry its `ref.name` names (or under `--target-prefix`), as one-image mappings run like a sync.

use std::path::PathBuf;

use clap::Args;

use crate::cli::RegistryAccess;
use crate::exit::Exit;
use crate::progress::Progress;

pub const AFTER_HELP: &str = "Examples:
  ferry import bundle.tar -c site.yaml
  ferry import bundle.tar --target-prefix registry.site:5000/mirror --dry-run
  ferry import weekly-48.tar -c site.yaml --json > import-report.json
  ferry import bundle.tar -c site.yaml --verify-key bundle.pub
  ferry import bundle.tar.zst -c site.yaml
  ferry import bundle.tar --dest-creds \"$USER:$TOKEN\" --state-dir /var/lib/ferry/state
  zstd -dc bundle.tar.zst | ferry import - -c site.yaml --spool-limit 200GiB

Each image goes to the reference its org.opencontainers.image.ref.name names (a ferry
bundle names the full target, registry.internal/mirror/alpine:3.20). With --target-prefix
HOST/PATH it goes to HOST, under PATH/ followed by the reference's repository
(registry.internal/mirror/alpine:3.20 -> HOST/PATH/mirror/alpine:3.20); a ref.name that is
only a tag (skopeo's oci-archive:x.tar:v1) goes to HOST/PATH:v1.
Blobs the target holds are skipped; every blob's digest and size are checked while it is
read from the tar; manifests go after everything they reference. An incremental bundle's
left-out blobs must be on the target (mounted from another repository this import writes
to, or one the site config names, when there): an image missing any fails before anything
of it is pushed, naming the base bundle. With --verify-key (or bundles.keys in the config) a bundle whose
ferry-bundle.json is not signed by one of the keys, or whose entries disagree with it, is
refused before any request to a target; without a key the record is still held against
index.json and every entry, and an archive without one is imported as not authenticated.
Exit codes as for sync: 0 all imported, 1 some images failed, 2 all
failed or the bundle was refused, 3 config invalid, 4 authentication.

A bundle compressed with gzip or zstd is recognised by its first bytes and read as its
tar; anything else that is not a tar is refused naming the bytes it starts with. A
bundle ferry export wrote, read from standard input (BUNDLE `-`), is imported in one pass
with no spool file: its head checked before any request, each blob streamed to the
repositories that need it and checked against the record's size and its digest (a blob
that fails fails only the images that need it). A compressed file, or any other bundle
from standard input, is first written as a plain tar to a spool file (under --spool-dir; the site config's state_dir/spool, or the
system's temporary directory), in one pass and never past --spool-limit (default 64GiB),
and removed when the import ends (one a killed import left is removed by the next import
spooling there): a tar file on disk is read in place.";

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The bundle: an OCI image layout packed as a tar (`ferry export`'s, or `skopeo copy …
    /// oci-archive:FILE:REF`'s), plain or compressed with gzip or zstd; `-` reads it from
    /// standard input.
    #[arg(value_name = "BUNDLE")]
    pub bundle: PathBuf,
    /// Where a compressed bundle, or one from standard input, is spooled as a plain tar
    /// (default: the site config's `state_dir`/spool, else the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    pub spool_dir: Option<PathBuf>,
    /// The most bytes of tar a spooled bundle may hold (`500MiB`, `200GiB`; default 64GiB):
    /// past it the import is refused and the spool removed.
    #[arg(long, value_name = "SIZE", value_parser = ferry_config::parse_size)]
    pub spool_limit: Option<u64>,
    /// Push under this registry and path instead of the registry each image's name gives
    /// (`registry.site:5000/mirror`).
    #[arg(long, value_name = "HOST/PATH")]
    pub target_prefix: Option<String>,
    /// A public key (PEM, as cosign.pub) the bundle must be signed under (repeatable; adds to
    /// the config's bundles.keys). An unsigned or altered bundle is refused before any request.
    #[arg(long, value_name = "FILE")]
    pub verify_key: Vec<PathBuf>,
    /// Check the bundle and the target and print what an import would push; push nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where uploads in flight are recorded, so a later import resumes them [default: the
    /// site config's `state_dir:`, else none].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(flatten)]
    pub report: crate::cli::ReportArg,
    #[command(flatten)]
    pub dest: crate::cli::DestArgs,
    #[command(flatten)]
    pub tls: crate::cli::AccessArgs,
    #[command(flatten)]
    pub access: RegistryAccess,
}

pub async fn run(args: &ImportArgs, progress: &Progress) -> Exit {
    let config = match &args.access.config {
        Some(path) => match super::load_registries(path, progress) {
            Ok(c) => c,
            Err(code) => return code,
        },
        None => super::empty_config(),
    };
    // Every registry an import reaches is one an image goes to: the `--dest-*` flags apply to
    // each, as the rest of the access flags do.
    let access =
        match super::access::Access::new(&args.tls).dest(&args.dest, super::access::Hosts::Every) {
            Ok(a) => a,
            Err(message) => {
                progress.eprint(&format!("error: {message}"));
                return Exit::Usage;
            }
        };
    let state_dir = args.state_dir.clone().or(config.state_dir.clone());
    let options = super::sync::RunOptions {
        dry_run: args.dry_run,
        json: args.json,
        report: args.report.report.clone(),
        metrics: None,
        stop: None,
        registries: None,
        copy: None,
        // `--state-dir` or the site config's `state_dir:` records big uploads for a resumed
        // import; no default (an import has no config file to sit beside).
        state_dir_named: state_dir.is_some(),
        state_dir,
        every_host: Some(access.every_host()),
        command: "import",
        digestfile: None,
        tag_cache: super::sync::TagCacheUse::Off,
    };
    let keys = match super::bundle_keys(&config, &args.verify_key, progress) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let spool = ferry_store::archive::input::SpoolPlace {
        dir: match (&args.spool_dir, &config.state_dir) {
            (Some(dir), _) => dir.clone(),
            (None, Some(state)) => state.join("spool"),
            (None, None) => std::env::temp_dir(),
        },
        limit: args
            .spool_limit
            .unwrap_or(ferry_store::archive::input::DEFAULT_SPOOL_LIMIT),
    };
    if args.bundle.as_os_str() == ferry_store::archive::input::STDIN {
        progress.eprint(&format!(
            "reading the bundle from standard input: a ferry bundle written head first is \
             streamed in one pass; anything else goes from standard input into a spool file \
             under {} (at most {} bytes of tar; removed when the import ends)",
            spool.dir.display(),
            spool.limit
        ));
    }
    let door = super::sync::Door::Import {
        bundle: args.bundle.clone(),
        prefix: args.target_prefix.clone(),
        keys,
        spool,
    };
    super::sync::run_door(config.into(), &options, progress, false, door).await
}
