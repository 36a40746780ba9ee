//! The hints ferry prints after an error, rendered per command: each names only flags the
//! command's own `--help` lists (read from its clap definition) and config fields.

use clap::CommandFactory as _;
use ferry_distribution::{Error, ErrorKind};
use ferry_sync::error::SyncError;
use ferry_sync::report::{ImageStatus, SyncReport};

use crate::cli::Cli;

/// The long flags `ferry <path…>` accepts (`["copy"]`, `["auth", "check"]`), as `--name`.
pub fn accepted(path: &[&str]) -> Vec<String> {
    let mut command = Cli::command();
    for name in path {
        match command.find_subcommand(name) {
            Some(sub) => command = sub.clone(),
            None => return Vec::new(),
        }
    }
    command
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

/// Of `wanted` (each `--flag` or `--flag=value`), those `ferry <path…>` accepts.
fn offered(path: &[&str], wanted: &[&str]) -> Vec<String> {
    let accepted = accepted(path);
    wanted
        .iter()
        .filter(|w| {
            accepted
                .iter()
                .any(|a| a == w.split('=').next().unwrap_or(w))
        })
        .map(|w| (*w).to_owned())
        .collect()
}

/// After a registry answered TLS in plain HTTP: how to allow plain HTTP in this command.
pub fn plain_http(path: &[&str]) -> String {
    let flags = offered(
        path,
        &[
            "--tls-verify=false",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
        ],
    );
    let mut hint = "hint: the registry serves plain HTTP: set `insecure: true` on its \
                    `registries:` entry in the config"
        .to_owned();
    if !flags.is_empty() {
        hint.push_str(&format!(", or pass {}", flags.join(" or ")));
    }
    hint
}

/// After a registry refused (or asked for) credentials: how to give them in this command.
pub fn credentials(path: &[&str]) -> String {
    let flags = offered(
        path,
        &[
            "--creds",
            "--src-creds",
            "--dest-creds",
            "--authfile",
            "--src-authfile",
            "--dest-authfile",
        ],
    );
    let mut hint = "hint: log in with `docker login HOST` (ferry reads its logins), or set \
                    `auth:` on the registry's `registries:` entry in the config"
        .to_owned();
    if !flags.is_empty() {
        hint.push_str(&format!(", or pass {}", flags.join(" or ")));
    }
    hint
}

/// The hints `e` calls for in `ferry <path…>`.
pub fn for_error(path: &[&str], e: &Error) -> Vec<String> {
    let mut out = Vec::new();
    if matches!(e.kind, ErrorKind::NotTls(_)) {
        out.push(plain_http(path));
    }
    if e.is_auth() {
        out.push(credentials(path));
    }
    out
}

/// The hints a run's failures call for in `ferry <path…>`, each once.
pub fn for_report(path: &[&str], report: &SyncReport) -> Vec<String> {
    let mut out = Vec::new();
    let statuses = report
        .images
        .iter()
        .map(|i| &i.status)
        .chain(report.failed_mappings.iter().map(|m| &m.status));
    for status in statuses {
        if let ImageStatus::Failed {
            error: SyncError::Registry(e),
        } = status
        {
            for hint in for_error(path, e) {
                if !out.contains(&hint) {
                    out.push(hint);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `--flag` in `hint`.
    fn flags(hint: &str) -> Vec<String> {
        hint.split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| w.starts_with("--"))
            .map(|w| w.split('=').next().unwrap_or(w).to_owned())
            .collect()
    }

    #[test]
    fn every_commands_hints_name_only_flags_it_accepts() {
        let cli = Cli::command();
        let mut walked = 0;
        for sub in cli.get_subcommands() {
            let mut paths: Vec<Vec<&str>> = vec![vec![sub.get_name()]];
            for inner in sub.get_subcommands() {
                paths.push(vec![sub.get_name(), inner.get_name()]);
            }
            for path in paths {
                let accepted = accepted(&path);
                for hint in [plain_http(&path), credentials(&path)] {
                    for flag in flags(&hint) {
                        assert!(accepted.contains(&flag), "ferry {path:?}: {flag} in {hint}");
                    }
                }
                walked += 1;
            }
        }
        assert!(walked >= 12, "walked {walked} commands");
        // Where the command takes them, the hints name them.
        assert!(plain_http(&["sync"]).contains("--tls-verify=false"));
        assert!(plain_http(&["copy"]).contains("--dest-tls-verify=false"));
        assert!(credentials(&["inspect"]).contains("--creds"));
        assert!(!plain_http(&["auth", "check"]).contains("--"));
    }
}
