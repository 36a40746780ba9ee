//! `ferry validate`: loads a config (a mirror config, or with `--registries-only` a site config
//! of registries alone) and reports every problem (file:line:col: field: message) or a summary.

use crate::cli::ValidateArgs;
use crate::exit::Exit;
use crate::progress::Progress;

pub fn run(args: &ValidateArgs, progress: &Progress) -> Exit {
    let path = args.config.path();
    let loaded = match args.registries_only {
        true => super::load_registries(path, progress),
        false => super::load_config(path, progress),
    };
    match loaded {
        Err(code) => {
            // A site config checked as a mirror config: say how to check it as what it is.
            if !args.registries_only && ferry_config::load_registries(path).is_ok() {
                progress.eprint(
                    "hint: a config of registries: alone is a site config (import, copy, tags, \
                     inspect, doctor, auth check): check it with `ferry validate --registries-only`",
                );
            }
            code
        }
        Ok(config) if args.registries_only => {
            crate::progress::print_stdout(&format!(
                "{}: valid site config ({} registries configured, {} mappings not needed)\n",
                path.display(),
                config.registries.len(),
                config.mappings.len(),
            ));
            Exit::Clean
        }
        Ok(config) => {
            let targets: usize = config.mappings.iter().map(|m| m.targets.len()).sum();
            crate::progress::print_stdout(&format!(
                "{}: valid ({} mappings, {} targets, {} registries configured)\n",
                path.display(),
                config.mappings.len(),
                targets,
                config.registries.len()
            ));
            Exit::Clean
        }
    }
}
