//! `ferry doctor REGISTRY[/REPOSITORY]`: asks a registry what the sync will meet (ping, auth,
//! tag paging, catalog, referrers; with `--write` a scratch push) and prints what ferry will use.

// The capabilities printed are the registry client's own (`CapabilitiesSnapshot`), learned by
// the very operations a sync runs (`list_tags`, `push_blob`, `mount_blob`, `delete_manifest`),
// so the answer is what the sync does. The probes add what those cannot show.

mod render;
mod write;

use clap::Args;
use ferry_distribution::auth::discover::CredentialFiles;
use ferry_distribution::auth::{AuthScheme, Scopes};
use ferry_distribution::ops::doctor::{Granted, PAGE_PROBE_N};
use ferry_distribution::{Error, ErrorKind, Reference, RegistryClient};
use ferry_sync::registries::{CredentialSource, Registries, resolve_credentials};
use serde::Serialize;

use crate::cli::RegistryAccess;
use crate::exit::Exit;
use crate::progress::Progress;

const HELP: &str = "\
Read-only by default: GET /v2/, the auth flow, one tag-list page and the whole list of
REPOSITORY, /v2/_catalog, the referrers API. --write REPOSITORY also pushes a scratch image
under a unique tag (ferry-doctor-<random>), tries each upload flow, a large PATCH, a
cross-repository mount into REPOSITORY-doctor, a manifest right after its blobs, a tag
overwrite and deletes, then deletes what it pushed and says what it could not.
Credentials are described (config, authfile, docker_config, env, anonymous), never shown.

Exit codes:
  0  every probe answered and ferry uses every feature as is
  1  something was refused or ignored that ferry works around, a probe failed, or the
     scratch push left something behind
  2  the registry could not be reached (or its /v2/ answered an error)
  3  the config (-c) is invalid
  4  authentication failed
  64 the command line is wrong (REGISTRY with `..`, `%2f`, a control character, a bad port)

Examples:
  ferry doctor ghcr.io/org/app
  ferry doctor registry.local:5000/team/app --tls-verify=false --write team/scratch
  ferry doctor quay.io/org/app -c mirror.yaml --json > doctor.json
  ferry doctor registry.local:5000/team/app --cert-dir ./certs --creds \"$USER:$TOKEN\"";

/// `ferry doctor`'s arguments.
#[derive(Debug, Args)]
#[command(after_help = HELP)]
pub struct DoctorArgs {
    /// The registry (`ghcr.io`, `registry.local:5000`), with a repository to probe its tag
    /// listing and referrers (`ghcr.io/org/app`).
    #[arg(value_name = "REGISTRY[/REPOSITORY]")]
    pub target: String,
    /// Push a scratch image to this repository of the registry (and delete it again).
    #[arg(long, value_name = "REPOSITORY")]
    pub write: Option<String>,
    /// Print the findings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub one: crate::cli::OneRegistryArgs,
    #[command(flatten)]
    pub tls: crate::cli::AccessArgs,
    #[command(flatten)]
    pub access: RegistryAccess,
}

/// How one probe ended; the worst decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Answered, and ferry uses it as is.
    Ok,
    /// Not asked (nothing to ask it about).
    Skipped,
    /// Refused or ignored: ferry works around it (or goes without).
    Refused,
    /// The probe could not finish.
    Failed,
}

/// One probe's finding.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// What was asked.
    pub probe: &'static str,
    /// How it ended.
    pub outcome: Outcome,
    /// What the registry answered, in a few words (outside text escaped).
    pub detail: String,
}

/// The auth flow the registry asked for.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuthFlow {
    /// `anonymous` (no auth asked), `basic` or `bearer`.
    pub scheme: String,
    /// The token realm (bearer), credentials stripped.
    pub realm: Option<String>,
    /// The token service (bearer).
    pub service: Option<String>,
    /// What each token ferry minted grants, by the scopes asked: `access` claims of a JWT,
    /// `["(opaque token)"]` for any other token.
    pub granted: Vec<(String, Vec<String>)>,
}

/// Where the credentials came from, never the secret.
#[derive(Debug, Clone, Serialize)]
pub struct CredentialsSeen {
    /// `config`, `creds` (`--creds`), `authfile`, `docker_config`, `env` or `anonymous`.
    pub source: &'static str,
    /// `basic as USER from FILE`, `anonymous (no login found)`.
    pub description: String,
}

/// What the scratch push deleted and left behind.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cleanup {
    /// Deleted: `manifest sha256:…`, `blob sha256:…`.
    pub deleted: Vec<String>,
    /// Left behind, each with the reason.
    pub left: Vec<String>,
    /// Repositories the mount probe made, empty again: no registry API deletes a repository.
    pub repositories: Vec<String>,
}

/// Everything `ferry doctor` found.
#[derive(Debug, Clone, Serialize)]
pub struct Findings {
    /// The registry host.
    pub registry: String,
    /// The repository probed read-only.
    pub repository: Option<String>,
    /// The repository written to (`--write`).
    pub write_repository: Option<String>,
    /// The credentials' source.
    pub credentials: CredentialsSeen,
    /// The auth flow.
    pub auth: AuthFlow,
    /// Each probe, in order.
    pub probes: Vec<Finding>,
    /// What ferry will use: the same names as the sync report's `registries[].capabilities`.
    pub capabilities: ferry_distribution::capabilities::CapabilitiesSnapshot,
    /// The scratch push's cleanup (`--write` only).
    pub cleanup: Option<Cleanup>,
    /// The exit code.
    pub exit_code: u8,
    /// A probe was refused for its credentials.
    #[serde(skip)]
    pub auth_failed: bool,
}

impl Findings {
    /// A probe that ended in `e`: an auth refusal is a failure whatever `outcome` says.
    pub(crate) fn add_error(&mut self, probe: &'static str, outcome: Outcome, e: &Error) {
        let outcome = if e.is_auth() {
            self.auth_failed = true;
            Outcome::Failed
        } else {
            outcome
        };
        self.add(probe, outcome, e.to_string());
    }

    pub(crate) fn add(&mut self, probe: &'static str, outcome: Outcome, detail: impl Into<String>) {
        self.probes.push(Finding {
            probe,
            outcome,
            detail: detail.into(),
        });
    }
}

/// `REGISTRY[/REPOSITORY]` checked before anything is sent: no control character, no percent
/// encoding, a port that is a port, a repository by the distribution grammar.
pub fn parse_target(text: &str) -> Result<(String, Option<String>), String> {
    let shown = ferry_distribution::text::for_error(text);
    if text.chars().any(char::is_control) {
        return Err(format!("{shown:?} holds a control character"));
    }
    if text.contains('%') {
        return Err(format!(
            "{shown:?} holds a percent-encoded character (`%2f` is not a `/`): write the name as it is"
        ));
    }
    let text = super::without_docker_transport(text).trim_end_matches('/');
    let (host, repository) = match text.split_once('/') {
        Some((h, r)) => (h, Some(r)),
        None => (text, None),
    };
    if let Some(port) = host.rsplit_once(':').map(|(_, p)| p)
        && !host.ends_with(']')
        && port.parse::<u16>().map_or(true, |p| p == 0)
    {
        return Err(format!(
            "registry {:?}: port {:?} is not a port (1 to 65535)",
            ferry_distribution::text::for_error(host),
            ferry_distribution::text::for_error(port)
        ));
    }
    let parsed = Reference::parse(&format!("{host}/{}", repository.unwrap_or("probe")))
        .map_err(|e| e.to_string())?;
    let looks_like_host = host.contains('.') || host.contains(':') || host == "localhost";
    if !looks_like_host {
        return Err(format!(
            "{:?} is not a registry host (`ghcr.io`, `registry.local:5000`, `localhost:5000`)",
            ferry_distribution::text::for_error(host)
        ));
    }
    if parsed.tag.is_some() || parsed.digest.is_some() {
        return Err(format!("{shown:?}: give a repository, not a tag or digest"));
    }
    Ok((parsed.registry, repository.map(|_| parsed.repository)))
}

pub async fn run(args: &DoctorArgs, progress: &Progress) -> Exit {
    let (host, repository) = match parse_target(&args.target) {
        Ok(t) => t,
        Err(e) => {
            progress.eprint(&format!(
                "error: REGISTRY[/REPOSITORY]: {e}; nothing was sent"
            ));
            return Exit::Usage;
        }
    };
    let write = match args.write.as_deref().map(check_write_repository) {
        Some(Err(e)) => {
            progress.eprint(&format!("error: --write: {e}; nothing was sent"));
            return Exit::Usage;
        }
        Some(Ok(r)) => Some(r),
        None => None,
    };
    let mut config = match &args.access.config {
        Some(path) => match super::load_registries(path, progress) {
            Ok(c) => c,
            Err(code) => return code,
        },
        None => super::empty_config(),
    };
    match super::access::Access::new(&args.tls).one(&args.one) {
        Ok(access) => access.apply_to_host(&mut config, &host),
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
    }
    let files = CredentialFiles::from_env();
    let settings = config.registry_for(&host);
    let resolved = match resolve_credentials(&settings, &files).await {
        Ok(r) => r,
        Err(e) => {
            progress.eprint(&format!("error: {e}"));
            return Exit::Auth;
        }
    };
    let credentials = CredentialsSeen {
        source: match args.one.creds {
            Some(_) => "creds",
            None => source_name(&resolved, args.tls.authfile.is_some()),
        },
        description: resolved.describe(),
    };
    let registries = Registries::new(&config).with_credential_files(files);
    let client = match registries.client(&host).await {
        Ok(c) => c,
        Err(e) => {
            progress.eprint(&format!("error: {e}"));
            for hint in crate::hints::for_error(&["doctor"], &e) {
                progress.eprint(&hint);
            }
            return crate::exit::for_error(&e);
        }
    };
    let mut found = Findings {
        registry: host.clone(),
        repository: repository.clone(),
        write_repository: write.clone(),
        credentials,
        auth: AuthFlow::default(),
        probes: Vec::new(),
        capabilities: client.capabilities().snapshot(),
        cleanup: None,
        exit_code: 0,
        auth_failed: false,
    };
    let mut exit = Exit::Clean;
    match client.ensure_ready().await {
        Ok(()) => found.add("ping", Outcome::Ok, "GET /v2/ answered"),
        Err(e) => {
            exit = if e.is_auth() {
                Exit::Auth
            } else {
                Exit::Failed
            };
            found.add("ping", Outcome::Failed, e.to_string());
            let code = finish(found, exit, args.json, progress);
            for hint in crate::hints::for_error(&["doctor"], &e) {
                progress.eprint(&hint);
            }
            return code;
        }
    }
    found.auth = auth_flow(&client);
    if let Some(repo) = &repository {
        exit = exit.max(read_probes(&client, repo, &mut found).await);
    } else {
        found.add("tag list", Outcome::Skipped, "no repository given");
    }
    catalog_probe(&client, &mut found).await;
    if let Some(repo) = &write {
        let shape = ferry_distribution::ops::UploadShape {
            chunk_size: config.engine.chunk_size,
            monolithic_limit: config.engine.monolithic_limit,
        };
        let cleanup = write::probe(&client, repo, shape, progress, &mut found).await;
        found.cleanup = Some(cleanup);
    }
    let mut scopes = vec![Scopes::catalog()];
    for repo in repository.iter().chain(write.iter()) {
        scopes.push(Scopes::pull(repo));
        scopes.push(Scopes::push(repo));
    }
    found.auth.granted = granted(&client, &scopes);
    found.capabilities = client.capabilities().snapshot();
    let auth_failed = found.auth_failed;
    let worked_around = found.probes.iter().any(|p| p.outcome >= Outcome::Refused)
        || found.cleanup.as_ref().is_some_and(|c| !c.left.is_empty());
    if auth_failed {
        exit = exit.max(Exit::Auth);
    } else if worked_around {
        exit = exit.max(Exit::Partial);
    }
    finish(found, exit, args.json, progress)
}

fn finish(mut found: Findings, exit: Exit, json: bool, progress: &Progress) -> Exit {
    found.exit_code = exit.code();
    if json {
        match serde_json::to_string_pretty(&found) {
            Ok(text) => crate::progress::print_stdout(&format!("{text}\n")),
            Err(e) => progress.eprint(&format!("error: cannot write JSON: {e}")),
        }
    } else {
        crate::progress::print_stdout(&render::text(&found));
    }
    exit
}

fn check_write_repository(text: &str) -> Result<String, String> {
    if text.chars().any(char::is_control) || text.contains('%') {
        return Err(format!(
            "{:?} holds a control or percent-encoded character",
            ferry_distribution::text::for_error(text)
        ));
    }
    ferry_distribution::reference::RepositoryName::parse(text)
        .map(|r| r.as_str().to_owned())
        .map_err(|e| e.to_string())
}

fn source_name(
    resolved: &ferry_sync::registries::ResolvedCredentials,
    authfile: bool,
) -> &'static str {
    match &resolved.source {
        _ if authfile => "authfile",
        CredentialSource::Config => match resolved.credentials {
            ferry_distribution::auth::Credentials::Anonymous => "anonymous",
            _ => "config",
        },
        CredentialSource::Found { file, .. } => {
            if file.file_name().is_some_and(|n| n == "config.json") {
                "docker_config"
            } else {
                "authfile"
            }
        }
        CredentialSource::NoneFound => "anonymous",
        CredentialSource::EcrDefault => "env",
    }
}

fn auth_flow(client: &RegistryClient) -> AuthFlow {
    match client.auth_scheme() {
        Some(AuthScheme::Bearer { realm, service }) => AuthFlow {
            scheme: "bearer".into(),
            realm: Some(ferry_distribution::error::redact_url(realm.as_str())),
            service: service.map(|s| ferry_distribution::text::for_error(&s)),
            granted: Vec::new(),
        },
        Some(AuthScheme::Basic) => AuthFlow {
            scheme: "basic".into(),
            ..AuthFlow::default()
        },
        _ => AuthFlow {
            scheme: "anonymous".into(),
            ..AuthFlow::default()
        },
    }
}

fn granted(client: &RegistryClient, scopes: &[Scopes]) -> Vec<(String, Vec<String>)> {
    scopes
        .iter()
        .filter_map(|s| match client.granted(s) {
            Granted::NoToken => None,
            Granted::Opaque => Some((s.key(), vec!["(opaque token)".to_owned()])),
            Granted::Access(a) => Some((s.key(), a)),
        })
        .collect()
}

/// The tag list (the sync's own listing), its paging, and the referrers API.
async fn read_probes(client: &RegistryClient, repo: &str, found: &mut Findings) -> Exit {
    let tags = match client.list_tags(repo).await {
        Ok(t) => {
            found.add("tag list", Outcome::Ok, format!("{} tags", t.len()));
            t
        }
        // A token that may pull but not list (403) is a refused listing, learned as the sync
        // learns it: not an auth failure.
        Err(e) if client.capabilities().snapshot().tag_list.is_unavailable() => {
            found.add("tag list", Outcome::Refused, e.to_string());
            Vec::new()
        }
        Err(e) if e.is_auth() => {
            found.add_error("tag list", Outcome::Failed, &e);
            return Exit::Auth;
        }
        // A 404 with no OCI error code is a route the registry does not serve (the
        // container-registry crate's binary has no tags/list), not a missing repository.
        Err(e) if e.is_not_found() && error_code(&e).is_none() => {
            found.add(
                "tag list",
                Outcome::Refused,
                format!(
                    "not served (404 without an error code): a sync takes it as an empty or missing repository; {e}"
                ),
            );
            found.add("tag paging", Outcome::Skipped, "the tag list is not served");
            referrers_probe(client, repo, None, found).await;
            return Exit::Clean;
        }
        Err(e) if e.is_not_found() => {
            found.add(
                "tag list",
                Outcome::Skipped,
                format!("{repo} does not exist (yet): {e}"),
            );
            found.add(
                "tag paging",
                Outcome::Skipped,
                format!("{repo} does not exist (yet)"),
            );
            referrers_probe(client, repo, None, found).await;
            return Exit::Clean;
        }
        Err(e) => {
            found.add_error("tag list", Outcome::Failed, &e);
            Vec::new()
        }
    };
    if client.capabilities().snapshot().tag_list.is_unavailable() {
        found.add("tag paging", Outcome::Skipped, "the tag list is refused");
        referrers_probe(client, repo, None, found).await;
        return Exit::Clean;
    }
    match client.probe_tag_page(repo).await {
        Ok(page) => {
            let (outcome, style) = paging_style(page.entries, page.link, tags.len());
            found.add("tag paging", outcome, style);
        }
        Err(e) => found.add_error("tag paging", Outcome::Failed, &e),
    }
    referrers_probe(client, repo, tags.first(), found).await;
    Exit::Clean
}

fn error_code(e: &Error) -> Option<&str> {
    match &e.kind {
        ErrorKind::Status { code, .. } => code.as_deref(),
        _ => None,
    }
}

/// What one page of `?n=PAGE_PROBE_N` says about a listing of `total` tags.
pub fn paging_style(entries: usize, link: bool, total: usize) -> (Outcome, String) {
    let n = PAGE_PROBE_N;
    match (entries > n, link) {
        (true, true) => (
            Outcome::Refused,
            format!("Link; ignores n={n}: imposes pages of {entries}"),
        ),
        (true, false) if entries >= total => (
            Outcome::Ok,
            format!("none needed: ignores n={n} and sends all {entries} tags in one page"),
        ),
        (true, false) => (
            Outcome::Refused,
            format!("no Link: a page of {entries} of {total} tags, ignoring n={n}"),
        ),
        (false, true) => (Outcome::Ok, format!("Link; honours n={n}")),
        (false, false) if total > entries => (
            Outcome::Refused,
            format!(
                "no Link: the first page of n={n} held {entries} of {total} tags and named no next page"
            ),
        ),
        (false, false) => (
            Outcome::Ok,
            format!("one page ({total} tags: too few to tell the style)"),
        ),
    }
}

async fn referrers_probe(
    client: &RegistryClient,
    repo: &str,
    tag: Option<&String>,
    found: &mut Findings,
) {
    let digest = match tag {
        Some(t) => match client.head_manifest(repo, t).await {
            Ok(Some(info)) => info.digest,
            _ => ferry_distribution::ops::doctor::scratch_blob(8).1,
        },
        None => ferry_distribution::ops::doctor::scratch_blob(8).1,
    };
    match client.list_referrers(repo, &digest).await {
        Ok(Some(r)) => found.add(
            "referrers API",
            Outcome::Ok,
            format!("served ({} referrers of {digest})", r.len()),
        ),
        Ok(None) => found.add(
            "referrers API",
            Outcome::Refused,
            "404: not served; ferry looks for referrers under the tag schema (sha256-<hex>)",
        ),
        Err(e) => match e.status() {
            Some(s @ 300..=399) => found.add(
                "referrers API",
                Outcome::Refused,
                format!("redirect ({s}): not followed; {e}"),
            ),
            _ => found.add_error("referrers API", Outcome::Failed, &e),
        },
    }
}

async fn catalog_probe(client: &RegistryClient, found: &mut Findings) {
    const MAX: usize = 10_000;
    let (outcome, detail) = match client.list_repositories(MAX).await {
        Ok(r) => (Outcome::Ok, format!("served ({} repositories)", r.len())),
        Err(Error {
            kind: ErrorKind::TooLarge { .. },
            ..
        }) => (
            Outcome::Ok,
            format!("served (more than {MAX} repositories)"),
        ),
        Err(e) if e.is_not_found() => (
            Outcome::Refused,
            "not served (404): whole-registry mappings cannot list it".to_owned(),
        ),
        Err(e) if e.is_auth() => (
            Outcome::Refused,
            format!("needs credentials allowed to list every repository: {e}"),
        ),
        Err(e) => (Outcome::Refused, format!("refused: {e}")),
    };
    found.add("catalog", outcome, detail);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_targets_are_refused_before_anything_is_sent() {
        for bad in [
            "localhost:5000/../etc",
            "localhost:5000/a/../b",
            "localhost:5000/a%2fb",
            "localhost%3a5000/a",
            "local\u{1b}[2Jhost:5000/a",
            "localhost:5000/a\nb",
            "localhost:70000/a",
            "localhost:65536",
            "localhost:0",
            "localhost:x/a",
            "localhost:5000/a:tag",
            "notahost",
        ] {
            let e = parse_target(bad).expect_err(bad);
            assert!(!e.contains('\u{1b}') && !e.contains('\n'), "{e}");
        }
        assert_eq!(
            parse_target("localhost:5000/team/app").unwrap(),
            ("localhost:5000".to_owned(), Some("team/app".to_owned()))
        );
        assert_eq!(
            parse_target("ghcr.io").unwrap(),
            ("ghcr.io".to_owned(), None)
        );
        assert_eq!(
            parse_target("docker.io/alpine").unwrap().1.as_deref(),
            Some("library/alpine")
        );
        assert_eq!(
            parse_target("127.0.0.1:65535").unwrap().0,
            "127.0.0.1:65535"
        );
    }

    #[test]
    fn paging_styles_are_told_apart() {
        assert_eq!(paging_style(2, true, 10).0, Outcome::Ok);
        assert_eq!(paging_style(50, true, 120).0, Outcome::Refused);
        assert!(paging_style(50, true, 120).1.contains("pages of 50"));
        assert_eq!(paging_style(2, false, 10).0, Outcome::Refused);
        assert_eq!(paging_style(10, false, 10).0, Outcome::Ok);
        assert_eq!(paging_style(2, false, 2).0, Outcome::Ok);
    }
}
