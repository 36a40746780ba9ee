//! ECR repositories through the ECR API, where the registry API cannot do it: listing them
//! (`DescribeRepositories`, for whole-registry mappings) and creating a missing target one.
//!
//! As with tokens, the SDK does not retry and ferry does not either: a failed call fails what
//! needed it (the glob mapping, or the images bound for the repository) for this run.

use aws_sdk_ecr::types::{ImageScanningConfiguration, ImageTagMutability};
use ferry_distribution::error::{Error, ErrorKind};
use ferry_distribution::operation::Operation;

use super::{EcrHost, EcrTokens, sdk_error_message};
use ferry_config::{AuthSettings, RegistrySettings, RepositoryCreation};

/// What creating a repository came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// `CreateRepository` made it.
    New,
    /// It was there already (`RepositoryAlreadyExistsException`): someone made it meanwhile.
    Existed,
}

/// Where a registry's ECR API calls go: its account, region and AWS profile.
struct Account<'a> {
    host: &'a str,
    account: &'a str,
    region: String,
    profile: Option<&'a str>,
}

fn account(settings: &RegistrySettings) -> Option<Account<'_>> {
    let parsed = EcrHost::parse(&settings.host)?;
    let (region, profile) = match &settings.auth {
        AuthSettings::Ecr { region, profile } => (region.clone(), profile.as_deref()),
        _ => (None, None),
    };
    Some(Account {
        host: &settings.host,
        account: parsed.account,
        region: region.unwrap_or_else(|| parsed.region.to_owned()),
        profile,
    })
}

fn not_ecr(settings: &RegistrySettings, operation: Operation) -> Error {
    Error::new(
        &settings.host,
        None,
        operation,
        ErrorKind::Local(format!(
            "{} is not an ECR registry (<account>.dkr.ecr.<region>.amazonaws.com)",
            settings.host
        )),
    )
}

impl EcrTokens {
    /// Every repository of the ECR registry `settings` names, at most `max` of them (more is an
    /// error, never a silent cut).
    pub(crate) async fn describe_repositories(
        &self,
        settings: &RegistrySettings,
        max: usize,
    ) -> Result<Vec<String>, Error> {
        let a = account(settings).ok_or_else(|| not_ecr(settings, Operation::Catalog))?;
        let fail = |kind| Error::new(a.host, None, Operation::Catalog, kind);
        let config = self.sdk_config(&a.region, a.profile).await;
        let mut pages = aws_sdk_ecr::Client::new(&config)
            .describe_repositories()
            .registry_id(a.account)
            .into_paginator()
            .send();
        let mut names = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| {
                fail(ErrorKind::Refused(format!(
                    "ECR DescribeRepositories in {} failed: {}",
                    a.region,
                    sdk_error_message(&e)
                )))
            })?;
            names.extend(
                page.repositories()
                    .iter()
                    .filter_map(|r| r.repository_name().map(str::to_owned)),
            );
            if names.len() > max {
                return Err(fail(ErrorKind::TooLarge {
                    what: "catalog",
                    limit: max as u64,
                }));
            }
        }
        Ok(names)
    }

    /// Creates `repository` in the ECR registry `settings` names, with the immutability and
    /// scan-on-push settings `creation` passes through.
    pub async fn create_repository(
        &self,
        settings: &RegistrySettings,
        repository: &str,
        creation: &RepositoryCreation,
    ) -> Result<Created, Error> {
        let a = account(settings).ok_or_else(|| not_ecr(settings, Operation::RepositoryCreate))?;
        let config = self.sdk_config(&a.region, a.profile).await;
        let mut call = aws_sdk_ecr::Client::new(&config)
            .create_repository()
            .registry_id(a.account)
            .repository_name(repository);
        if let Some(immutable) = creation.tag_immutability {
            call = call.image_tag_mutability(if immutable {
                ImageTagMutability::Immutable
            } else {
                ImageTagMutability::Mutable
            });
        }
        if let Some(scan) = creation.scan_on_push {
            call = call.image_scanning_configuration(
                ImageScanningConfiguration::builder()
                    .scan_on_push(scan)
                    .build(),
            );
        }
        tracing::info!(registry = %a.host, %repository, "ECR CreateRepository");
        match call.send().await {
            Ok(_) => Ok(Created::New),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_repository_already_exists_exception()) =>
            {
                Ok(Created::Existed)
            }
            Err(e) => Err(Error::new(
                a.host,
                Some(repository),
                Operation::RepositoryCreate,
                ErrorKind::Refused(format!(
                    "ECR CreateRepository in {} failed: {}",
                    a.region,
                    sdk_error_message(&e)
                )),
            )),
        }
    }
}
