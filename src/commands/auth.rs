//! `ferry auth check`: for every registry a config names or its mappings use, the credential
//! source (described, never shown) and proof that it may read and write as the config needs.

use std::collections::BTreeSet;

use ferry_config::{Config, Origin, Target};
use ferry_distribution::auth::discover::CredentialFiles;
use ferry_sync::registries::{Registries, resolve_credentials};

use crate::cli::ConfigArg;
use crate::exit::{self, Exit};
use crate::progress::{Progress, print_stdout};

pub async fn run(args: &ConfigArg, progress: &Progress) -> Exit {
    // A site config of registries alone is checked host by host (docs/auth.md).
    let config = match super::load_registries(args.path(), progress) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let files = CredentialFiles::from_env();
    let registries = Registries::new(&config).with_credential_files(files.clone());
    let mut worst = Exit::Clean;
    let mut hints: Vec<String> = Vec::new();
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
        let client = match registries.client(&host).await {
            Ok(client) => client.ensure_ready().await.map(|()| client),
            Err(e) => Err(e),
        };
        let checks = match client {
            Ok(client) => {
                sides(
                    &config,
                    &host,
                    &client,
                    settings.create_repositories.is_some(),
                )
                .await
            }
            Err(e) => Err(e),
        };
        match checks {
            Ok(text) => print_stdout(&format!(
                "{host:<30}  credentials: {credentials:<24}  {text}\n"
            )),
            Err(e) => {
                print_stdout(&format!(
                    "{host:<30}  credentials: {credentials:<24}  FAILED: {e}\n"
                ));
                worst = worst.max(exit::for_error(&e));
                for hint in crate::hints::for_error(&["auth", "check"], &e) {
                    if !hints.contains(&hint) {
                        hints.push(hint);
                    }
                }
            }
        }
    }
    for hint in &hints {
        progress.eprint(hint);
    }
    worst
}

/// Checks each side the config uses `host` for: read (the tags of a source repository are
/// listed) and write (an upload session is opened and abandoned in a target repository, the
/// cheapest request a registry must authorise as a push). Says which sides were checked.
async fn sides(
    config: &Config,
    host: &str,
    client: &ferry_distribution::RegistryClient,
    creates_repositories: bool,
) -> Result<String, ferry_distribution::Error> {
    let mut said = Vec::new();
    if let Some(repo) = pull_probe(config, host) {
        client.list_tags_or_empty(&repo).await?;
        said.push(format!("read ok (listed {repo})"));
    }
    if let Some(repo) = push_probe(config, host) {
        match client.check_push(&repo).await {
            Ok(()) => said.push(format!("write ok (opened and cancelled an upload to {repo})")),
            // ECR answers a push to a repository that does not exist yet with NAME_UNKNOWN;
            // ferry creates it before the first push, so that is not a credential failure.
            Err(e) if creates_repositories && e.status() == Some(404) => said.push(format!(
                "write not proven ({repo} does not exist yet; ferry creates it before the first push)"
            )),
            Err(e) => return Err(e),
        }
    }
    if said.is_empty() {
        said.push("answers (no repository of the config to read or write here)".to_owned());
    }
    Ok(said.join(", "))
}

/// A target repository on `host`, to check the credentials can push there.
fn push_probe(config: &Config, host: &str) -> Option<String> {
    config.mappings.iter().find_map(|m| {
        m.targets.iter().find_map(|t| match t {
            Target::Registry {
                registry,
                repository,
            } if registry == host => Some(repository.clone()),
            _ => None,
        })
    })
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
