//! `ferry verify`: audits every target of a config against its source, read-only and without a
//! lock; prints the findings grouped by mapping and target (or JSON) and maps them to an exit code.

use std::sync::Arc;

use clap::Args;
use ferry_config::shard::Shard;
use ferry_sync::run::{Run, RunContext};
use ferry_sync::verify::{VerifyReport, VerifyVerdict};

use super::sync::Display;

use crate::cli::ConfigArg;
use crate::exit::Exit;
use crate::progress::{Progress, print_stdout};

/// The help's examples and exit codes.
pub const AFTER_HELP: &str = "\
Examples:
  ferry verify -c mirror.yaml                  every selected tag on every target, by digest
  ferry verify -c mirror.yaml --deep           and every blob those manifests reference
  ferry verify -c mirror.yaml --signatures     and that every image of a mapping with
                                               signatures: carries one verifying on the target
  ferry verify -c mirror.yaml --json > audit.json
  ferry verify -c mirror.yaml --report audit.json --dest-tls-verify=false
  ferry verify -c mirror.yaml --shard 0/4      one quarter of the mappings
  ferry verify --bundle weekly-49.tar -c site.yaml --since bundle-full.tar
                                               does the site hold what the bundles describe

With --bundle, the images checked are those the bundle describes (its ferry-bundle.json's,
or its index.json's) and those of each --since bundle, where their names (or
--target-prefix) put them; the config may hold only registries.
Read-only: sends only GET and HEAD requests and takes no lock, so it may run beside a sync.
Shallow cost: one tag listing per repository per side, one manifest HEAD per tag per side,
a HEAD per child of an index (read from the target); --deep adds a manifest GET per image
from the target and one HEAD per unique repository and blob.

Exit codes:
  0  complete: every selected tag is on every target with the digest a sync would leave
     (extra tags alone are reported, not counted against the mirror)
  1  something is missing or drifted, unsigned (--signatures), or some answers could not be
     checked
  2  nothing could be checked
  3  the configuration is invalid
  4  authentication failed (every answer that could not be checked was an auth failure)
  64 the command line is wrong; nothing was done";

/// `ferry verify`'s arguments.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Also check every blob the manifests reference (one HEAD per unique repository and blob;
    /// a layout's blobs are re-hashed).
    #[arg(long)]
    pub deep: bool,
    /// Also check that every image on the targets of a mapping with `signatures:` carries a
    /// signature that verifies under the mapping's policy (read from the target: the `.sig`
    /// tag and bundle referrers).
    #[arg(long)]
    pub signatures: bool,
    /// Print every finding as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Verify only shard I of N (I from 0), split as `ferry sync --shard` splits.
    #[arg(long, value_name = "I/N", conflicts_with = "bundle")]
    pub shard: Option<Shard>,
    /// Check that the site holds every image this bundle describes, instead of the config's
    /// mappings (the config supplies registries only).
    #[arg(long, value_name = "BUNDLE")]
    pub bundle: Option<std::path::PathBuf>,
    /// An earlier bundle (its tar or kept BUNDLE.json) whose images the site must hold too
    /// (repeatable; with --bundle).
    #[arg(long, value_name = "BUNDLE", requires = "bundle")]
    pub since: Vec<std::path::PathBuf>,
    /// Where the bundle's images were imported, as `ferry import --target-prefix` (with --bundle).
    #[arg(long, value_name = "HOST/PATH", requires = "bundle")]
    pub target_prefix: Option<String>,
    /// A public key the bundle must be signed under, as for `ferry import --verify-key`
    /// (repeatable, with --bundle; adds to the config's bundles.keys).
    #[arg(long, value_name = "FILE", requires = "bundle")]
    pub verify_key: Vec<std::path::PathBuf>,
    #[command(flatten)]
    pub report: crate::cli::ReportArg,
    #[command(flatten)]
    pub src: crate::cli::SrcArgs,
    #[command(flatten)]
    pub dest: crate::cli::DestArgs,
    #[command(flatten)]
    pub tls: crate::cli::AccessArgs,
}

pub async fn run(args: &VerifyArgs, progress: &Progress) -> Exit {
    if let Some(bundle) = &args.bundle {
        return run_bundle(args, bundle, progress).await;
    }
    let mut config = match super::load_config(args.config.path(), progress) {
        Ok(c) => super::scope::apply(c, args.shard, false, progress),
        Err(code) => return code,
    };
    match super::access::for_config(&config, &args.tls, &args.src, &args.dest) {
        Ok(access) => access.apply_to_config(&mut config),
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
    }
    progress.eprint(&format!(
        "verify: {} mappings{}",
        config.mappings.len(),
        if args.deep { ", deep (every blob)" } else { "" }
    ));
    let display = Arc::new(Display::new(progress, None, None, false));
    let mut ctx = RunContext::new(&config);
    ctx.progress.observer = Some(display.clone());
    let report = Run::new(config, ctx)
        .verify_with(ferry_sync::verify::VerifyOptions {
            deep: args.deep,
            signatures: args.signatures,
        })
        .await;
    display.finish().await;
    let code = render(&report, args, progress);
    if lacks_content(&report) {
        progress.eprint(&format!(
            "hint: `ferry sync -c {} --repair` puts back the blobs and child manifests found missing (a plain sync compares manifest digests only, and finds these tags up to date)",
            args.config.path().display()
        ));
    }
    code
}

/// Whether `report` found a blob or child manifest missing (or wrong) under a tag a target
/// holds: what `ferry sync --repair` puts back.
fn lacks_content(report: &VerifyReport) -> bool {
    use ferry_sync::verify::{Finding, Missing};
    report
        .mappings
        .iter()
        .flat_map(|m| &m.targets)
        .flat_map(|t| &t.findings)
        .any(|f| {
            matches!(
                f,
                Finding::Missing {
                    kind: Missing::Blob | Missing::Child,
                    ..
                }
            )
        })
}

/// `ferry verify --bundle`: the bundle's images (and its bases') on the site.
async fn run_bundle(args: &VerifyArgs, bundle: &std::path::Path, progress: &Progress) -> Exit {
    let config = match super::load_registries(args.config.path(), progress) {
        Ok(c) => c,
        Err(code) => return code,
    };
    progress.eprint(&format!(
        "verify: bundle {}{}{}",
        bundle.display(),
        match args.since.len() {
            0 => String::new(),
            n => format!(" and {n} base{}", if n == 1 { "" } else { "s" }),
        },
        if args.deep { ", deep (every blob)" } else { "" }
    ));
    let keys = match super::bundle_keys(&config, &args.verify_key, progress) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let spec = ferry_sync::verify::bundle::BundleVerify {
        keys,
        bundle: bundle.to_path_buf(),
        since: args.since.clone(),
        prefix: args.target_prefix.clone(),
        deep: args.deep,
    };
    // The bundle's images are wherever their names put them: the `--dest-*` flags apply to
    // every registry checked.
    let access =
        match super::access::Access::new(&args.tls).dest(&args.dest, super::access::Hosts::Every) {
            Ok(a) => a,
            Err(message) => {
                progress.eprint(&format!("error: {message}"));
                return Exit::Usage;
            }
        };
    let mut ctx = RunContext::new(&config);
    ctx.registries = ctx.registries.with_every_host(access.every_host());
    let report = match Run::new(config, ctx).verify_bundle(&spec).await {
        Ok(r) => r,
        Err(ferry_sync::import::ImportError::Prefix(message)) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
        Err(e) => {
            progress.eprint(&format!("error: verify {}: {e}", bundle.display()));
            return Exit::Failed;
        }
    };
    if let Some(authenticity) = &report.authenticity {
        progress.eprint(&format!("verify {}: {authenticity}", bundle.display()));
    }
    render(&report, args, progress)
}

/// Prints `report` (JSON on stdout with `--json`, else text; to the `--report` file too), the
/// hints its unreadable answers call for, and returns its exit code.
fn render(report: &VerifyReport, args: &VerifyArgs, progress: &Progress) -> Exit {
    let json = report.to_json();
    match (&json, args.json) {
        (Ok(json), true) => crate::progress::println_stdout(json),
        (Err(e), true) => {
            progress.eprint(&format!("error: cannot encode the report as JSON: {e}"));
            print_stdout(&report.render_text());
        }
        (_, false) => print_stdout(&report.render_text()),
    }
    if let (Some(path), Ok(json)) = (&args.report.report, &json)
        && let Err(e) = std::fs::write(path, format!("{json}\n"))
    {
        progress.eprint(&format!(
            "error: cannot write report {}: {e}",
            path.display()
        ));
    }
    let (mut plain_http, mut auth) = (false, false);
    for f in report.unreadable() {
        if let ferry_sync::verify::Finding::Unreadable { auth: a, error, .. } = f {
            auth |= *a;
            // The one registry error verify keeps only as text: ferry-distribution's NotTls.
            plain_http |= error.contains("answered the TLS handshake in plain HTTP");
        }
    }
    if plain_http {
        progress.eprint(&crate::hints::plain_http(&["verify"]));
    }
    if auth {
        progress.eprint(&crate::hints::credentials(&["verify"]));
    }
    exit_for(report)
}

/// The exit code of a verify: 0 complete, 1 incomplete, 2 nothing checked, 4 when what could
/// not be checked was all refused for authentication (and nothing was found missing).
pub fn exit_for(report: &VerifyReport) -> Exit {
    let found = report.totals.missing + report.totals.drifted > 0;
    match report.verdict() {
        VerifyVerdict::Complete => Exit::Clean,
        _ if !found && report.all_unreadable_are_auth() => Exit::Auth,
        VerifyVerdict::Incomplete => Exit::Partial,
        VerifyVerdict::Unchecked => Exit::Failed,
    }
}
