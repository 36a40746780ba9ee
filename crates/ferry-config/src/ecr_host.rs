//! What an ECR private registry host names (account and region): the one host rule a config
//! needs to decide that a registry takes ECR's credentials and repository creation.

/// What an ECR private registry host (`<account>.dkr.ecr.<region>.amazonaws.com`) names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EcrHost<'a> {
    /// The registry id: the AWS account number.
    pub account: &'a str,
    /// The AWS region the registry is in.
    pub region: &'a str,
}

impl<'a> EcrHost<'a> {
    /// The account and region of an ECR private registry host (a port is ignored); `None` for
    /// any other host.
    pub fn parse(host: &'a str) -> Option<EcrHost<'a>> {
        if !ferry_distribution::quirks::is_ecr(host) {
            return None;
        }
        let name = host.split(':').next().unwrap_or(host);
        let (account, rest) = name.split_once(".dkr.ecr.")?;
        let region = rest.split('.').next()?;
        if account.is_empty() || region.is_empty() {
            return None;
        }
        Some(EcrHost { account, region })
    }
}
