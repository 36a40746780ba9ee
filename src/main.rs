//! The `ferry` binary: parses the command line, sets up logs and progress, runs the command on
//! a tokio runtime and turns its outcome into the documented exit code.

mod cli;
mod commands;
mod exit;
mod hints;
mod logging;
mod malloc;
mod metrics;
mod progress;

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser as _};

use cli::{AuthCommand, Cli, Command};
use exit::Exit;
use progress::Progress;

fn main() -> ExitCode {
    malloc::tune();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version are answers, not errors: printed on stdout, exit 0.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return Exit::Clean.into();
        }
        Err(e) => {
            let _ = e.print();
            return Exit::Usage.into();
        }
    };
    if let Command::Completions { shell } = &cli.command {
        let mut script = Vec::new();
        clap_complete::generate(*shell, &mut Cli::command(), "ferry", &mut script);
        progress::write_stdout(&script);
        return Exit::Clean.into();
    }
    let progress = Progress::new(cli.global.progress, cli.global.quiet)
        .json_lines(cli.global.log_format == cli::LogFormat::Json);
    logging::init(&cli.global, &progress);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Failed.into();
        }
    };
    let code = runtime.block_on(async {
        match &cli.command {
            Command::Sync(args) => commands::sync::run(args, &progress).await,
            Command::Watch(args) => commands::watch::run(args, &progress).await,
            Command::Validate(args) => commands::validate::run(args, &progress),
            Command::Verify(args) => commands::verify::run(args, &progress).await,
            Command::Tags(args) => commands::tags::run(args, &progress).await,
            Command::Copy(args) => commands::copy::run(args, &progress).await,
            Command::Export(args) => commands::export::run(args, &progress).await,
            Command::Import(args) => commands::import::run(args, &progress).await,
            Command::Inspect(args) => commands::inspect::run(args, &progress).await,
            Command::Doctor(args) => commands::doctor::run(args, &progress).await,
            Command::PullConfig(args) => commands::pull_config::run(args, &progress),
            Command::Auth(AuthCommand::Check(args)) => commands::auth::run(args, &progress).await,
            Command::Convert(args) => commands::convert::run(args, &progress),
            Command::Completions { .. } => Exit::Clean,
        }
    });
    code.into()
}
