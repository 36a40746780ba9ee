//! `ferry validate`: loads a config and reports every problem (file:line:col: field: message),
//! or a one-line summary of what it mirrors.

use crate::cli::ConfigArg;
use crate::exit::Exit;
use crate::progress::Progress;

pub fn run(args: &ConfigArg, progress: &Progress) -> Exit {
    match super::load_config(args.path(), progress) {
        Err(code) => code,
        Ok(config) => {
            let targets: usize = config.mappings.iter().map(|m| m.targets.len()).sum();
            println!(
                "{}: valid ({} mappings, {} targets, {} registries configured)",
                args.path().display(),
                config.mappings.len(),
                targets,
                config.registries.len()
            );
            Exit::Clean
        }
    }
}
