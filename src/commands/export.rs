//! `ferry export`: every image a config's mappings select, written through the sync engine into
//! one bundle (an OCI image layout packed as a tar, skopeo's `oci-archive:`), or only what
//! earlier bundles (`--since`) do not carry.

use std::path::PathBuf;

use clap::Args;

use ferry_store::archive::writer::Output;
use ferry_store::bundle::BundleRecord;

use crate::exit::Exit;
use crate::progress::Progress;

/// `ferry export`'s help: examples and what goes where.
pub const AFTER_HELP: &str = "\
Examples:
  ferry export -c mirror.yaml -o bundle-full.tar
  ferry export -c mirror.yaml -o weekly-48.tar --since bundle-full.tar --since weekly-47.tar
  ferry export -c mirror.yaml -o weekly-49.tar --since weekly-48.tar.json
  ferry export -c mirror.yaml -o - | zstd > bundle.tar.zst
  ferry export -c mirror.yaml -o bundle.tar --src-tls-verify=false --src-creds \"$USER:$TOKEN\"
  ferry export -c mirror.yaml -o weekly-49.tar --since weekly-48.tar --dry-run
  ferry export -c mirror.yaml -o bundle-full.tar --sign-key bundle.key

Each image is named in the bundle's index.json by the full reference its mapping's target
gives it (registry.internal/mirror/alpine:3.20; one entry per registry target of a mapping,
sharing blobs), so `skopeo copy oci-archive:bundle.tar:REF` finds it. The target registries
are never contacted. ferry-bundle.json (the last entry, and beside a file bundle as
BUNDLE.json) records the mappings, every image with its source, the bases and a digest.
The bundle is written to BUNDLE.partial and renamed when complete; a failed export removes it.
Exit codes as for `ferry sync` (docs/commands.md).";

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub config: crate::cli::ConfigArg,
    /// The bundle to write: a file, or `-` for standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// An earlier bundle (its tar, or its ferry-bundle.json / BUNDLE.json): everything it
    /// carries is left out of this one (repeatable: the union).
    #[arg(long, value_name = "BUNDLE")]
    pub since: Vec<PathBuf>,
    /// Sign the bundle's record with this private key (PKCS#8 PEM, ECDSA P-256 or Ed25519, or
    /// a cosign key opened with COSIGN_PASSWORD): the signature goes in the tar
    /// (ferry-bundle.json.sig) and beside it (BUNDLE.json.sig).
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
    /// Resolve the plan and show what the bundle would carry; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON on stdout (not with `-o -`: use --report).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub report: crate::cli::ReportArg,
    #[command(flatten)]
    pub src: crate::cli::SrcArgs,
    #[command(flatten)]
    pub tls: crate::cli::AccessArgs,
}

pub async fn run(args: &ExportArgs, progress: &Progress) -> Exit {
    let to_stdout = args.output.as_os_str() == "-";
    if to_stdout && args.json {
        progress.eprint(
            "error: -o - writes the bundle to standard output, where --json would write the report: use --report FILE",
        );
        return Exit::Usage;
    }
    let mut config = match super::load_config(args.config.path(), progress) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // A bundle is written whole: nothing is pruned anywhere.
    for m in &mut config.mappings {
        m.prune = false;
    }
    let records = match read_bases(&args.since).await {
        Ok(r) => r,
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Failed;
        }
    };
    let created = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut spec = ferry_store::bundle::export::spec(&config, &records, created);
    if let Some(path) = &args.sign_key {
        // COSIGN_PASSWORD opens a cosign key, as cosign reads it; it is never printed.
        let password = std::env::var_os("COSIGN_PASSWORD")
            .map(|p| zeroize::Zeroizing::new(p.into_encoded_bytes()));
        match ferry_sync::bundle_trust::signer_from(path, password.as_ref().map(|p| p.as_slice())) {
            Ok((signer, key)) => {
                progress.eprint(&format!("signing the bundle's record with {key}"));
                spec.signer = Some(signer);
            }
            Err(message) => {
                progress.eprint(&format!("error: {message}"));
                return Exit::Usage;
            }
        }
    }
    // An export reads its sources only: the `--src-*` flags apply to them.
    let (sources, _) = super::access::config_sides(&config);
    let access = match super::access::Access::new(&args.tls).src(&args.src, sources) {
        Ok(a) => a,
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
    };
    let output = match to_stdout {
        true => Output::Stdout,
        false => Output::File(args.output.clone()),
    };
    let options = super::sync::RunOptions {
        dry_run: args.dry_run,
        json: args.json,
        report: args.report.report.clone(),
        metrics: None,
        stop: None,
        registries: None,
        copy: None,
        // An export writes a tar, no upload session to resume.
        state_dir: None,
        state_dir_named: false,
        every_host: Some(access.every_host()),
        command: "export",
        digestfile: None,
        tag_cache: super::sync::TagCacheUse::Off,
    };
    let spec = ferry_sync::run::ExportSpec {
        output,
        bundle: spec,
    };
    super::sync::run_door(
        config.into(),
        &options,
        progress,
        false,
        super::sync::Door::Export(spec),
    )
    .await
}

/// Every `--since` record, read on a blocking thread (the tar's headers, seeking past bodies),
/// each named by its file name.
async fn read_bases(paths: &[PathBuf]) -> Result<Vec<(String, BundleRecord)>, String> {
    let paths = paths.to_vec();
    tokio::task::spawn_blocking(move || {
        paths
            .iter()
            .map(|p| {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| p.display().to_string());
                ferry_store::bundle::export::read_since(p).map(|r| (name, r))
            })
            .collect()
    })
    .await
    .map_err(|e| format!("reading --since: {e}"))?
}
