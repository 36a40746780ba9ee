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
    pub fn from_json(text: &str, origin: &Path) -> Result<DockerConfig, CredentialError> {
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
        if let Some((_, helper)) = find_entry(&self.cred_helpers, &registry) {
            return self.ask_helper(helper, &registry, helper_timeout).await;
        }
        if let Some((key, entry)) = find_entry(&self.auths, &registry)
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

/// The entry whose key is exactly `registry`, else the first whose key normalises to it.
fn find_entry<'m, V>(map: &'m BTreeMap<String, V>, registry: &str) -> Option<(&'m str, &'m V)> {
    map.get_key_value(registry)
        .or_else(|| map.iter().find(|(key, _)| normalise_host(key) == registry))
        .map(|(key, value)| (key.as_str(), value))
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
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    const TIMEOUT: Duration = Duration::from_secs(10);

    fn config(json: &str) -> DockerConfig {
        DockerConfig::from_json(json, Path::new("/cfg/config.json")).unwrap()
    }

    fn basic(username: &str, password: &str) -> Option<DockerCredential> {
        Some(DockerCredential::Basic {
            username: username.to_owned(),
            password: Secret::new(password),
        })
    }

    #[tokio::test]
    async fn docker_hub_matches_all_its_key_spellings() {
        for key in [
            "https://index.docker.io/v1/",
            "index.docker.io",
            "docker.io",
            "registry-1.docker.io",
            "HTTPS://Registry-1.Docker.io/v2/",
        ] {
            let auth = STANDARD.encode("hub:pw");
            let c = config(&format!(r#"{{"auths":{{"{key}":{{"auth":"{auth}"}}}}}}"#));
            assert_eq!(
                c.lookup("docker.io", TIMEOUT).await.unwrap(),
                basic("hub", "pw"),
                "{key}"
            );
            assert_eq!(
                c.lookup("registry-1.docker.io", TIMEOUT).await.unwrap(),
                basic("hub", "pw"),
                "{key}"
            );
            assert_eq!(c.lookup("ghcr.io", TIMEOUT).await.unwrap(), None, "{key}");
        }
    }

    #[tokio::test]
    async fn reads_every_form_of_auths_entry() {
        let auth = STANDARD.encode("a:b:c");
        let unpadded = STANDARD.encode("n:p").trim_end_matches('=').to_owned();
        let c = config(&format!(
            r#"{{"auths":{{
                "https://ghcr.io/v2/": {{"auth":"{auth}"}},
                "quay.io": {{"username":"q","password":"qp"}},
                "acr.example.io": {{"auth":"{zero}","identitytoken":"refresh"}},
                "localhost:5000": {{"auth":"{unpadded}"}},
                "empty.io": {{}}
            }}}}"#,
            zero = STANDARD.encode("00000000-0000-0000-0000-000000000000:")
        ));
        assert_eq!(
            c.lookup("ghcr.io", TIMEOUT).await.unwrap(),
            basic("a", "b:c")
        );
        assert_eq!(
            c.lookup("quay.io", TIMEOUT).await.unwrap(),
            basic("q", "qp")
        );
        assert_eq!(
            c.lookup("acr.example.io", TIMEOUT).await.unwrap(),
            Some(DockerCredential::IdentityToken {
                token: Secret::new("refresh")
            })
        );
        assert_eq!(
            c.lookup("localhost:5000", TIMEOUT).await.unwrap(),
            basic("n", "p")
        );
        assert_eq!(c.lookup("empty.io", TIMEOUT).await.unwrap(), None);
        assert_eq!(c.lookup("localhost", TIMEOUT).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_bad_auth_field_names_the_key_but_not_the_value() {
        let c = config(r#"{"auths":{"ghcr.io":{"auth":"hunter2!!"}}}"#);
        let err = c.lookup("ghcr.io", TIMEOUT).await.unwrap_err();
        assert!(matches!(&err, CredentialError::BadAuthField { key, .. } if key == "ghcr.io"));
        let message = err.to_string();
        assert!(
            message.contains("/cfg/config.json") && message.contains("ghcr.io"),
            "{message}"
        );
        assert!(!message.contains("hunter2"), "{message}");

        let no_colon = STANDARD.encode("hunter2");
        let c = config(&format!(
            r#"{{"auths":{{"ghcr.io":{{"auth":"{no_colon}"}}}}}}"#
        ));
        assert!(matches!(
            c.lookup("ghcr.io", TIMEOUT).await,
            Err(CredentialError::BadAuthField { .. })
        ));
    }

    #[test]
    fn malformed_config_names_the_file_without_echoing_values() {
        let err = DockerConfig::from_json(
            r#"{"auths":{"x":{"password":["hunter2"]}}}"#,
            Path::new("/home/me/.docker/config.json"),
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, CredentialError::Malformed { .. }));
        assert!(
            message.contains("/home/me/.docker/config.json"),
            "{message}"
        );
        assert!(!message.contains("hunter2"), "{message}");
        assert!(matches!(
            DockerConfig::from_json("{", Path::new("c")),
            Err(CredentialError::Malformed {
                problem: "unexpected end of input",
                ..
            })
        ));
        assert!(matches!(
            DockerConfig::from_json(r#"{"credsStore":"../evil"}"#, Path::new("c")),
            Err(CredentialError::BadHelperName { .. })
        ));
    }

    #[test]
    fn load_reads_files_and_treats_a_missing_one_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let missing = DockerConfig::load(Some(&dir.path().join("nope.json"))).unwrap();
        assert!(missing.auths.is_empty() && missing.creds_store.is_none());

        let path = dir.path().join("config.json");
        std::fs::write(&path, r#"{"credsStore":"desktop","auths":{"a.io":{}}}"#).unwrap();
        let loaded = DockerConfig::load(Some(&path)).unwrap();
        assert_eq!(loaded.creds_store.as_deref(), Some("desktop"));
        assert_eq!(loaded.origin(), path);

        std::fs::write(&path, "not json").unwrap();
        let message = DockerConfig::load(Some(&path)).unwrap_err().to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");

        let err = DockerConfig::load(Some(dir.path())).unwrap_err();
        assert!(matches!(err, CredentialError::Read { .. }), "{err:?}");
    }

    #[test]
    fn default_path_prefers_docker_config_then_home() {
        assert_eq!(
            default_config_path(Some("/dc".into()), Some("/home/u".into())),
            Some(PathBuf::from("/dc/config.json"))
        );
        assert_eq!(
            default_config_path(Some("".into()), Some("/home/u".into())),
            Some(PathBuf::from("/home/u/.docker/config.json"))
        );
        assert_eq!(default_config_path(None, None), None);
    }

    #[cfg(unix)]
    mod helpers {
        use super::*;

        /// A helper directory holding small shell scripts named `docker-credential-<name>`.
        ///
        /// The executable is created by `install`, a child process, never opened for writing by
        /// this one: a process another test forks while this one holds a writable descriptor on
        /// the script inherits it until its exec, and running the script then fails with
        /// "Text file busy" (seen once in CI). The staging file is never executed.
        fn helper_dir(scripts: &[(&str, &str)]) -> tempfile::TempDir {
            let dir = tempfile::tempdir().unwrap();
            for (name, body) in scripts {
                let staging = dir.path().join(format!("{name}.staging"));
                std::fs::write(&staging, format!("#!/bin/sh\n{body}\n")).unwrap();
                let path = dir.path().join(format!("docker-credential-{name}"));
                let status = std::process::Command::new("install")
                    .arg("-m")
                    .arg("755")
                    .arg(&staging)
                    .arg(&path)
                    .status()
                    .unwrap();
                assert!(status.success(), "install {}", path.display());
            }
            dir
        }

        const ANSWERS: &str = r#"[ "$1" = get ] || exit 9
read -r server
printf '{"ServerURL":"%s","Username":"user@%s","Secret":"s3cret"}' "$server" "$server""#;
        const TOKEN: &str = r#"cat >/dev/null; printf '{"Username":"<token>","Secret":"refresh"}'"#;
        const NOT_FOUND: &str = "echo 'credentials not found in native keychain'; exit 1";
        const FAILS: &str = "echo 'keychain locked' >&2; exit 3";
        const GARBAGE: &str = "echo 'Secret: s3cret, not json'";

        fn with_helpers(json: &str, dir: &tempfile::TempDir) -> DockerConfig {
            config(json).with_helper_dir(dir.path().to_path_buf())
        }

        #[tokio::test]
        async fn helpers_get_the_host_and_their_answers_are_used() {
            let dir = helper_dir(&[("answers", ANSWERS), ("token", TOKEN)]);
            let c = with_helpers(
                r#"{"credHelpers":{"ghcr.io":"answers","docker.io":"answers","q.io":"token"}}"#,
                &dir,
            );
            assert_eq!(
                c.lookup("ghcr.io", TIMEOUT).await.unwrap(),
                basic("user@ghcr.io", "s3cret")
            );
            assert_eq!(
                c.lookup("docker.io", TIMEOUT).await.unwrap(),
                basic("user@https://index.docker.io/v1/", "s3cret")
            );
            assert_eq!(
                c.lookup("q.io", TIMEOUT).await.unwrap(),
                Some(DockerCredential::IdentityToken {
                    token: Secret::new("refresh")
                })
            );
        }

        #[tokio::test]
        async fn cred_helpers_then_auths_then_creds_store() {
            let dir = helper_dir(&[
                ("answers", ANSWERS),
                ("token", TOKEN),
                ("missing", NOT_FOUND),
            ]);
            let auth = STANDARD.encode("file:pw");
            let c = with_helpers(
                &format!(
                    r#"{{"credHelpers":{{"ghcr.io":"answers","gone.io":"missing"}},
                        "auths":{{"ghcr.io":{{"auth":"{auth}"}},"quay.io":{{"auth":"{auth}"}},
                                 "gone.io":{{"auth":"{auth}"}},"marker.io":{{}}}},
                        "credsStore":"token"}}"#
                ),
                &dir,
            );
            assert_eq!(
                c.lookup("ghcr.io", TIMEOUT).await.unwrap(),
                basic("user@ghcr.io", "s3cret")
            );
            assert_eq!(
                c.lookup("quay.io", TIMEOUT).await.unwrap(),
                basic("file", "pw")
            );
            let token = Some(DockerCredential::IdentityToken {
                token: Secret::new("refresh"),
            });
            assert_eq!(c.lookup("marker.io", TIMEOUT).await.unwrap(), token);
            assert_eq!(c.lookup("other.io", TIMEOUT).await.unwrap(), token);
            // A registry's own helper is authoritative: "not found" does not fall through.
            assert_eq!(c.lookup("gone.io", TIMEOUT).await.unwrap(), None);
        }

        #[tokio::test]
        async fn not_found_is_none_and_failures_are_errors_without_secrets() {
            let dir = helper_dir(&[
                ("missing", NOT_FOUND),
                ("fails", FAILS),
                ("garbage", GARBAGE),
            ]);
            let c = |helper: &str| with_helpers(&format!(r#"{{"credsStore":"{helper}"}}"#), &dir);
            assert_eq!(c("missing").lookup("a.io", TIMEOUT).await.unwrap(), None);

            let err = c("fails").lookup("a.io", TIMEOUT).await.unwrap_err();
            assert!(
                matches!(&err, CredentialError::HelperFailed { status, message, .. }
                    if status == "exit 3" && message == "keychain locked"),
                "{err:?}"
            );

            let err = c("garbage").lookup("a.io", TIMEOUT).await.unwrap_err();
            assert!(
                matches!(err, CredentialError::HelperOutput { .. }),
                "{err:?}"
            );
            assert!(!err.to_string().contains("s3cret"), "{err}");

            let err = c("absent").lookup("a.io", TIMEOUT).await.unwrap_err();
            assert!(
                matches!(err, CredentialError::HelperNotFound { .. }),
                "{err:?}"
            );
        }

        #[tokio::test]
        async fn a_hanging_helper_is_stopped_at_the_timeout() {
            let dir = helper_dir(&[(
                "hangs",
                "echo $$ > \"$(dirname \"$0\")/pid\"; exec sleep 60",
            )]);
            let c = with_helpers(r#"{"credsStore":"hangs"}"#, &dir);
            // The outer bound only keeps a broken build from hanging the suite.
            let result = tokio::time::timeout(
                Duration::from_secs(30),
                c.lookup("a.io", Duration::from_millis(300)),
            )
            .await
            .expect("lookup must return once the helper timeout passes");
            let err = result.unwrap_err();
            assert!(
                matches!(err, CredentialError::HelperTimeout { timeout, .. } if timeout == Duration::from_millis(300)),
                "{err:?}"
            );

            #[cfg(target_os = "linux")]
            {
                // The helper got SIGKILL on drop: it is gone or a zombie awaiting reaping.
                // No pid file means it was stopped before it could write one.
                let Ok(pid) = std::fs::read_to_string(dir.path().join("pid")) else {
                    return;
                };
                let stat = format!("/proc/{}/stat", pid.trim());
                let mut stopped = false;
                for _ in 0..500 {
                    match std::fs::read_to_string(&stat) {
                        Err(_) => stopped = true,
                        Ok(s) => {
                            stopped = s
                                .rsplit(')')
                                .next()
                                .is_some_and(|r| r.trim_start().starts_with('Z'))
                        }
                    }
                    if stopped {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert!(stopped, "helper process {} still running", pid.trim());
            }
        }
    }
}
