//! `ferry import BUNDLE.tar`: every image of an OCI archive pushed to the registry its
//! `ref.name` names (or under `--target-prefix`), as one-image mappings run like a sync.

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

Each image goes to the reference its org.opencontainers.image.ref.name names (a ferry
bundle names the full target, registry.internal/mirror/alpine:3.20). With --target-prefix
HOST/PATH it goes to HOST, under PATH/ followed by the reference's repository
(registry.internal/mirror/alpine:3.20 -> HOST/PATH/mirror/alpine:3.20); a ref.name that is
only a tag (skopeo's oci-archive:x.tar:v1) goes to HOST/PATH:v1.
Blobs the target holds are skipped; every blob's digest and size are checked while it is
read from the tar; manifests go after everything they reference. An incremental bundle's
left-out blobs must be on the target (mounted from another repository this import writes
to, or one the site config names, when there): an image missing any fails before anything of it is pushed, naming
the base bundle. With --verify-key (or bundles.keys in the config) a bundle whose
ferry-bundle.json is not signed by one of the keys, or whose entries disagree with it, is
refused before any request to a target; without a key the record is still held against
index.json and every entry, and an archive without one is imported as not authenticated.
Exit codes as for sync: 0 all imported, 1 some images failed, 2 all
failed or the bundle was refused, 3 config invalid, 4 authentication.";

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The bundle: an OCI image layout packed as a tar (`ferry export`'s, or `skopeo copy …
    /// oci-archive:FILE:REF`'s).
    #[arg(value_name = "BUNDLE")]
    pub bundle: PathBuf,
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
    /// Write the JSON report to this file as well.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
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
    // Every registry an import reaches is one an image goes to: the access flags apply to each
    // (as `apply_access` applies them to one host).
    let (insecure, authfile) = (args.access.insecure, args.access.authfile.clone());
    let every_host: ferry_sync::registries::EveryHost = std::sync::Arc::new(move |settings| {
        if insecure {
            settings.insecure = true;
        }
        if let Some(file) = &authfile {
            settings.auth = ferry_config::AuthSettings::DockerConfig {
                path: Some(file.clone()),
            };
        }
    });
    let options = super::sync::RunOptions {
        dry_run: args.dry_run,
        json: args.json,
        report: args.report.clone(),
        metrics: None,
        stop: None,
        registries: None,
        copy: None,
        // A site config's `state_dir:` records big uploads for a resumed import; no default
        // (an import has no config file to sit beside).
        state_dir: config.state_dir.clone(),
        state_dir_named: config.state_dir.is_some(),
        every_host: Some(every_host),
    };
    let mut key_files = config.bundle_keys.clone();
    key_files.extend(args.verify_key.iter().cloned());
    let keys = match ferry_sync::bundle_trust::load_public_keys(&key_files) {
        Ok(k) => k,
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
    };
    let door = super::sync::Door::Import {
        bundle: args.bundle.clone(),
        prefix: args.target_prefix.clone(),
        keys,
    };
    super::sync::run_door(&config, &options, progress, false, door).await
}
