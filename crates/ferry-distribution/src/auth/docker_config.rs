//! Credentials from Docker's `config.json`: `credHelpers`, `auths` entries and `credsStore`,
//! including running `docker-credential-*` helpers under a timeout. Secrets never reach errors.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use tokio::io::AsyncWriteExt as _;

use crate::reference::{DOCKER_HUB, DOCKER_HUB_API_HOST};
use crate::secret::Secret;

/// The server address Docker uses for Docker Hub in `auths` and in credential helpers.
const DOCKER_HUB_INDEX_SERVER: &str = "https://index.docker.io/v1/";
const DOCKER_HUB_HOSTS: [&str; 3] = [DOCKER_HUB, "index.docker.io", DOCKER_HUB_API_HOST];
/// The user name a helper returns when its secret is an identity (refresh) token.
const IDENTITY_TOKEN_USER: &str = "<token>";
const HELPER_MESSAGE_MAX_CHARS: usize = 200;

/// A credential found for a registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DockerCredential {
    /// A user name and password (an `auth` entry, or a helper's answer).
    Basic {
        /// The user name, shown in `ferry auth check`.
        username: String,
        /// The password; never printed.
        password: Secret,
    },
    /// An OAuth2 refresh token, exchanged at the token endpoint with `grant_type=refresh_token`.
    IdentityToken {
        /// The refresh token; never printed.
        token: Secret,
    },
}

/// Why credentials could not be read. Messages name files, keys and helpers, never secrets.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The config file could not be read.
    #[error("could not read Docker config {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: io::Error,
    },
    /// The config file is not the JSON docker writes.
    #[error(
        "Docker config {} is malformed: {problem} at line {line} column {column}",
        path.display()
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What the JSON parser found wrong (never the text around it, which may hold a secret).
        problem: &'static str,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
    },
    /// An `auths` entry's `auth` value does not decode to `user:password`.
    #[error(
        "Docker config {}: the \"auth\" value for {key:?} is not base64 of user:password",
        path.display()
    )]
    BadAuthField {
        /// The file.
        path: PathBuf,
        /// The registry the entry is for.
        key: String,
    },
    /// A `credHelpers`/`credsStore` name that could smuggle a path into the program name.
    #[error(
        "Docker config {}: credential helper name {name:?} may only hold letters, digits, '.', '_' and '-'",
        path.display()
    )]
    BadHelperName {
        /// The file.
        path: PathBuf,
        /// The helper name as written.
        name: String,
    },
    /// No `docker-credential-<name>` program on the PATH.
    #[error("credential helper {} was not found", program.display())]
    HelperNotFound {
        /// The program looked for.
        program: PathBuf,
    },
    /// The helper exists but could not be started.
    #[error("could not run credential helper {}: {source}", program.display())]
    HelperSpawn {
        /// The helper program.
        program: PathBuf,
        /// Why it could not be started.
        source: io::Error,
    },
    /// The helper did not answer in time and was killed, so a hung helper cannot hang the run.
    #[error(
        "credential helper {} did not answer within {timeout:?} and was stopped",
        program.display()
    )]
    HelperTimeout {
        /// The helper program.
        program: PathBuf,
        /// How long it was given.
        timeout: Duration,
    },
    /// The helper exited unsuccessfully.
    #[error("credential helper {} failed ({status}): {message}", program.display())]
    HelperFailed {
        /// The helper program.
        program: PathBuf,
        /// `exit N`, or `killed by a signal`.
        status: String,
        /// The first line of what it printed, cut at 200 characters.
        message: String,
    },
    /// The helper's answer is not the `{"Username", "Secret"}` JSON the protocol defines.
    #[error(
        "credential helper {} answered with output that is not the expected JSON ({problem} at line {line} column {column})",
        program.display()
    )]
    HelperOutput {
        /// The helper program.
        program: PathBuf,
        /// What the JSON parser found wrong.
        problem: &'static str,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
    },
}

#[derive(Clone, Debug, Default, serde::Deserialize)]
struct RawConfig {
    #[serde(default)]
    auths: Option<BTreeMap<String, AuthEntry>>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

#[derive(Clone, Debug, Default, serde::Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<Secret>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<Secret>,
    #[serde(default)]
    identitytoken: Option<Secret>,
}

#[derive(serde::Deserialize)]
struct HelperAnswer {
    #[serde(default, rename = "Username")]
    username: String,
    #[serde(default, rename = "Secret")]
    secret: Secret,
}

/// A loaded Docker `config.json`. An absent file loads as an empty config.
#[derive(Clone, Debug, Default)]
pub struct DockerConfig {
    origin: PathBuf,
    auths: BTreeMap<String, AuthEntry>,
    cred_helpers: BTreeMap<String, String>,
    creds_store: Option<String>,
    helper_dir: Option<PathBuf>,
    /// A containers `auth.json`: an `auths` key naming a namespace (`quay.io/team`) is for that
    /// namespace only, so a per-host lookup leaves it out instead of widening it to the host.
    host_keys_only: bool,
}

impl DockerConfig {
    /// Loads `path`, else `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`. A missing
    /// file is an empty config; an unreadable or malformed one is an error naming the file.
    pub fn load(path: Option<&Path>) -> Result<DockerConfig, CredentialError> {
        let path = match path {
            Some(path) => path.to_path_buf(),
            None => {
                let home = std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE"));
                match default_config_path(std::env::var_os("DOCKER_CONFIG"), home) {
                    Some(path) => path,
                    None => return Ok(DockerConfig::default()),
                }
            }
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => DockerConfig::from_json(&text, &path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(DockerConfig {
                origin: path,
                ..DockerConfig::default()
            }),
            Err(source) => Err(CredentialError::Read { path, source }),
        }
    }

    /// Parses config text; `origin` names the file in errors.
    pub(crate) fn from_json(text: &str, origin: &Path) -> Result<DockerConfig, CredentialError> {
        let raw: RawConfig =
            serde_json::from_str(text).map_err(|e| CredentialError::Malformed {
                path: origin.to_path_buf(),
                // serde's own message can quote the offending value, which may be a secret.
                problem: json_problem(&e),
                line: e.line(),
                column: e.column(),
            })?;
        let config = DockerConfig {
            origin: origin.to_path_buf(),
            auths: raw.auths.unwrap_or_default(),
            cred_helpers: raw.cred_helpers.unwrap_or_default(),
            creds_store: raw.creds_store.filter(|s| !s.is_empty()),
            helper_dir: None,
            host_keys_only: false,
        };
        for name in config.cred_helpers.values().chain(&config.creds_store) {
            if !is_valid_helper_name(name) {
                return Err(CredentialError::BadHelperName {
                    path: config.origin.clone(),
                    name: name.clone(),
                });
            }
        }
        Ok(config)
    }

    /// Runs helpers from `dir` instead of searching `PATH` (for tests and pinned installs).
    pub fn with_helper_dir(mut self, dir: PathBuf) -> DockerConfig {
        self.helper_dir = Some(dir);
        self
    }

    /// Reads `auths` keys as containers `auth.json` does: a key without a scheme that names a
    /// path (`quay.io/team/app`) is a namespace's credential and never serves the whole host.
    pub fn as_containers_auth_file(mut self) -> DockerConfig {
        self.host_keys_only = true;
        self
    }

    /// The file this config was (or would have been) read from; empty when there was none.
    pub fn origin(&self) -> &Path {
        &self.origin
    }

    /// Finds credentials for a normalised registry host (`docker.io`, `ghcr.io`,
    /// `localhost:5000`). A `credHelpers` entry for the registry decides alone; otherwise an
    /// `auths` entry holding credentials wins; otherwise `credsStore` is asked. Helpers get
    /// `helper_timeout` and are not retried.
    pub async fn lookup(
        &self,
        registry: &str,
        helper_timeout: Duration,
    ) -> Result<Option<DockerCredential>, CredentialError> {
        let registry = normalise_host(registry);
        if let Some((_, helper)) = find_entry(&self.cred_helpers, &registry, self.host_keys_only) {
            return self.ask_helper(helper, &registry, helper_timeout).await;
        }
        if let Some((key, entry)) = find_entry(&self.auths, &registry, self.host_keys_only)
            && let Some(credential) = self.credential_from_entry(key, entry)?
        {
            return Ok(Some(credential));
        }
        match &self.creds_store {
            Some(store) => self.ask_helper(store, &registry, helper_timeout).await,
            None => Ok(None),
        }
    }

    fn credential_from_entry(
        &self,
        key: &str,
        entry: &AuthEntry,
    ) -> Result<Option<DockerCredential>, CredentialError> {
        // An identity token outranks `auth`: registries that issue one (ACR, for instance) store
        // a placeholder user name with an empty password beside it.
        if let Some(token) = entry.identitytoken.as_ref().filter(|t| !t.is_empty()) {
            return Ok(Some(DockerCredential::IdentityToken {
                token: token.clone(),
            }));
        }
        if let Some(auth) = entry.auth.as_ref().filter(|a| !a.is_empty()) {
            let bad = || CredentialError::BadAuthField {
                path: self.origin.clone(),
                key: key.to_owned(),
            };
            let decoded = decode_base64(auth.expose().trim()).ok_or_else(bad)?;
            let text = String::from_utf8(decoded).map_err(|_| bad())?;
            let (username, password) = text.split_once(':').ok_or_else(bad)?;
            return Ok(Some(DockerCredential::Basic {
                username: username.to_owned(),
                password: Secret::new(password),
            }));
        }
        match (&entry.username, &entry.password) {
            (Some(username), Some(password)) if !username.is_empty() => {
                Ok(Some(DockerCredential::Basic {
                    username: username.clone(),
                    password: password.clone(),
                }))
            }
            _ => Ok(None),
        }
    }

    async fn ask_helper(
        &self,
        helper: &str,
        registry: &str,
        timeout: Duration,
    ) -> Result<Option<DockerCredential>, CredentialError> {
        let program_name = format!("docker-credential-{helper}");
        let program = match &self.helper_dir {
            Some(dir) => dir.join(&program_name),
            None => PathBuf::from(&program_name),
        };
        // Docker keys Docker Hub by its index server URL in every helper.
        let server = if registry == DOCKER_HUB {
            DOCKER_HUB_INDEX_SERVER
        } else {
            registry
        };
        let mut command = tokio::process::Command::new(&program);
        command
            .arg("get")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);

        let run = async {
            let mut child = command.spawn().map_err(|source| {
                if source.kind() == io::ErrorKind::NotFound {
                    CredentialError::HelperNotFound {
                        program: program.clone(),
                    }
                } else {
                    CredentialError::HelperSpawn {
                        program: program.clone(),
                        source,
                    }
                }
            })?;
            if let Some(mut stdin) = child.stdin.take() {
                // A helper that exits without reading breaks the pipe; its exit status says why.
                let _ = stdin.write_all(server.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
            child
                .wait_with_output()
                .await
                .map_err(|source| CredentialError::HelperSpawn {
                    program: program.clone(),
                    source,
                })
        };
        // On timeout the future, and with it the child, is dropped: kill_on_drop stops it.
        let output = tokio::time::timeout(timeout, run).await.map_err(|_| {
            CredentialError::HelperTimeout {
                program: program.clone(),
                timeout,
            }
        })??;

        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            if [&stdout, &stderr]
                .iter()
                .any(|text| text.to_ascii_lowercase().contains("credentials not found"))
            {
                return Ok(None);
            }
            let message = if stderr.trim().is_empty() {
                &stdout
            } else {
                &stderr
            };
            return Err(CredentialError::HelperFailed {
                program,
                status: output
                    .status
                    .code()
                    .map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit {c}")),
                message: first_line(message),
            });
        }
        let answer: HelperAnswer =
            serde_json::from_str(&stdout).map_err(|e| CredentialError::HelperOutput {
                program: program.clone(),
                problem: json_problem(&e),
                line: e.line(),
                column: e.column(),
            })?;
        if answer.username == IDENTITY_TOKEN_USER {
            return Ok(
                (!answer.secret.is_empty()).then_some(DockerCredential::IdentityToken {
                    token: answer.secret,
                }),
            );
        }
        if answer.username.is_empty() && answer.secret.is_empty() {
            return Ok(None);
        }
        Ok(Some(DockerCredential::Basic {
            username: answer.username,
            password: answer.secret,
        }))
    }
}

/// `$DOCKER_CONFIG/config.json` when set and non-empty, else `<home>/.docker/config.json`.
fn default_config_path(docker_config: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    match docker_config.filter(|d| !d.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join("config.json")),
        None => home
            .filter(|h| !h.is_empty())
            .map(|home| PathBuf::from(home).join(".docker").join("config.json")),
    }
}

/// The registry a config key or registry name stands for: scheme and path dropped, lowercase,
/// Docker Hub's aliases folded to `docker.io`.
fn normalise_host(key: &str) -> String {
    let key = key.trim();
    let lower = key.to_ascii_lowercase();
    let without_scheme = ["https://", "http://"]
        .iter()
        .find_map(|scheme| lower.strip_prefix(scheme))
        .unwrap_or(&lower);
    let host = without_scheme.split('/').next().unwrap_or_default();
    if DOCKER_HUB_HOSTS.contains(&host) {
        DOCKER_HUB.to_owned()
    } else {
        host.to_owned()
    }
}

/// The entry whose key is exactly `registry`, else the first whose key normalises to it. With
/// `host_keys_only`, keys naming a namespace (no scheme, a path) are passed over.
fn find_entry<'m, V>(
    map: &'m BTreeMap<String, V>,
    registry: &str,
    host_keys_only: bool,
) -> Option<(&'m str, &'m V)> {
    let usable = |key: &str| !host_keys_only || !names_a_namespace(key);
    map.get_key_value(registry)
        .or_else(|| {
            map.iter()
                .find(|(key, _)| usable(key) && normalise_host(key) == registry)
        })
        .map(|(key, value)| (key.as_str(), value))
}

/// `quay.io/team` names a namespace; `https://index.docker.io/v1/` is a legacy URL key for a host.
fn names_a_namespace(key: &str) -> bool {
    let key = key.trim();
    !key.contains("://") && key.trim_end_matches('/').contains('/')
}

fn is_valid_helper_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && name != "."
        && name != ".."
}

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    STANDARD
        .decode(text)
        .or_else(|_| STANDARD_NO_PAD.decode(text))
        .ok()
}

fn json_problem(error: &serde_json::Error) -> &'static str {
    match error.classify() {
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Eof => "unexpected end of input",
        serde_json::error::Category::Data => "a value of the wrong type",
        serde_json::error::Category::Io => "a read error",
    }
}

fn first_line(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or_default();
    let mut short: String = line.chars().take(HELPER_MESSAGE_MAX_CHARS).collect();
    if short.len() < line.len() {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests;
