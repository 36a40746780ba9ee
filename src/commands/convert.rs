//! `ferry convert regsync FILE` and `ferry convert skopeo-sync FILE --dest PREFIX`: a foreign
//! mirroring config printed as a mirror.yaml (ferry-config's `convert`), notes counted on stderr.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use ferry_config::convert::{self, Converted, SkopeoOptions};

use crate::exit::Exit;
use crate::progress::Progress;

pub const AFTER_HELP: &str = "\
Examples:
  ferry convert regsync regsync.yml > mirror.yaml
  ferry convert skopeo-sync sync.yml --dest my-registry.local.lan/repo > mirror.yaml
  ferry convert skopeo-sync sync.yml --dest localhost:5000/mirror --dest-tls-verify=false --scoped

The mirror.yaml goes to stdout, with a `# ferry convert:` comment on every construct that has
no exact equivalent; stderr says how many there are and which environment variables the
config reads (a password written in the file is never copied into the output: it becomes a
${VAR} to set). Check the result with `ferry validate` and `ferry sync --dry-run`.
No --json: the output is a config, and its notes are comments in it.

Exit codes:
  0  converted (read the notes)
  3  the file is unreadable, not YAML, or not the format named, or nothing in it converts
  64 the command line could not be read";

#[derive(Debug, Args)]
pub struct ConvertArgs {
    #[command(subcommand)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum Format {
    /// A regsync.yml (regclient's regsync): creds, defaults, sync entries.
    #[command(after_help = "Example:\n  ferry convert regsync regsync.yml > mirror.yaml")]
    Regsync {
        /// The regsync.yml to convert.
        file: PathBuf,
    },
    /// A `skopeo sync --src yaml` file: registry hosts with images, images-by-tag-regex,
    /// images-by-semver, credentials, tls-verify.
    #[command(
        name = "skopeo-sync",
        after_help = "Example:\n  ferry convert skopeo-sync sync.yml --dest my-registry.local.lan/repo > mirror.yaml"
    )]
    SkopeoSync {
        /// The skopeo sync YAML file to convert.
        file: PathBuf,
        /// The destination `skopeo sync --dest docker FILE DEST` would be given: each image
        /// goes to DEST/<last part of its name> (DEST/<registry>/<name> with --scoped).
        #[arg(long, value_name = "PREFIX")]
        dest: String,
        /// As skopeo sync's --scoped: the source's registry and whole name under DEST.
        #[arg(long)]
        scoped: bool,
        /// As skopeo sync's --all: say nothing of platforms (ferry copies every one anyway).
        #[arg(long, short = 'a')]
        all: bool,
        /// As skopeo sync's --dest-tls-verify=false: the destination gets `insecure: true`.
        #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
        dest_tls_verify: bool,
    },
}

pub fn run(args: &ConvertArgs, progress: &Progress) -> Exit {
    let (file, what) = match &args.format {
        Format::Regsync { file } => (file, "regsync"),
        Format::SkopeoSync { file, .. } => (file, "skopeo sync"),
    };
    let input = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            progress.eprint(&format!(
                "error: cannot read {what} file {}: {e}",
                file.display()
            ));
            return Exit::Config;
        }
    };
    let name = file.display().to_string();
    let converted = match &args.format {
        Format::Regsync { .. } => convert::regsync(&name, &input),
        Format::SkopeoSync {
            dest,
            scoped,
            all,
            dest_tls_verify,
            ..
        } => convert::skopeo_sync(
            &name,
            &input,
            &SkopeoOptions {
                dest: dest.clone(),
                scoped: *scoped,
                dest_insecure: !dest_tls_verify,
                all: *all,
            },
        ),
    };
    match converted {
        Ok(Converted { yaml, notes, env }) => {
            crate::progress::write_stdout(yaml.as_bytes());
            let mut said = format!(
                "converted {name}: {notes} {} to read (# ferry convert:)",
                if notes == 1 { "note" } else { "notes" }
            );
            if !env.is_empty() {
                said.push_str(&format!("; set {} before running it", env.join(", ")));
            }
            progress.eprint(&said);
            Exit::Clean
        }
        Err(e) => {
            progress.eprint(&format!("error: {e}"));
            Exit::Config
        }
    }
}
