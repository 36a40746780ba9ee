//! `ferry auth check`: for every registry a config names or its mappings use, which credential
//! source it would use (described, never shown) and whether the registry answers.

use std::collections::BTreeSet;

use ferry_distribution::auth::discover::CredentialFiles;
use ferry_sync::config::{Config, Origin, Target};
use ferry_sync::registries::{Registries, resolve_credentials};

use crate::cli::ConfigArg;
use crate::exit::{self, Exit};
use crate::progress::{Progress, print_stdout};

pub async fn run(args: &ConfigArg, progress: &Progress) -> Exit {
    let config = match super::load_config(args.path(), progress) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let files = CredentialFiles::from_env();
    let registries = Registries::new(&config).with_credential_files(files.clone());
    let mut worst = Exit::Clean;
    for host in hosts(&config) {
        let settings = config.registry_for(&host);
        let credentials = match resolve_credentials(&settings, &files).await {
            Ok(c) => c.describe(),
            Err(e) => {
                print_stdout(&format!("{host:<30}  credentials: FAILED: {e}\n"));
                worst = worst.max(exit::for_error(&e));
                continue;
            }
        };
        let check = match registries.client(&host).await {
            Ok(client) => match client.ensure_ready().await {
                Ok(()) => match pull_probe(&config, &host) {
                    Some(repo) => client
                        .list_tags_or_empty(&repo)
                        .await
                        .map(|_| format!("ok, can list {repo}")),
                    None => Ok("ok".to_owned()),
                },
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match check {
            Ok(text) => print_stdout(&format!(
                "{host:<30}  credentials: {credentials:<24}  {text}\n"
            )),
            Err(e) => {
                print_stdout(&format!(
                    "{host:<30}  credentials: {credentials:<24}  FAILED: {e}\n"
                ));
                worst = worst.max(exit::for_error(&e));
            }
        }
    }
    worst
}

/// Every host: the registries listed, then each mapping's source and registry targets.
fn hosts(config: &Config) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = config.registries.iter().map(|r| r.host.clone()).collect();
    for m in &config.mappings {
        if let Origin::Registry { registry, .. } = &m.origin {
            out.insert(registry.clone());
        }
        for t in &m.targets {
            if let Target::Registry { registry, .. } = t {
                out.insert(registry.clone());
            }
        }
    }
    out
}

/// A source repository on `host`, to check the credentials can read something.
fn pull_probe(config: &Config, host: &str) -> Option<String> {
    config.mappings.iter().find_map(|m| match &m.origin {
        // A whole-registry mapping's origin names a prefix, not a repository.
        Origin::Registry {
            registry,
            repository,
        } if registry == host && m.repositories.is_none() => Some(repository.clone()),
        _ => None,
    })
}
