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
