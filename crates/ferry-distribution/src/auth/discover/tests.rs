use super::*;
use crate::secret::Secret;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

const TIMEOUT: Duration = Duration::from_secs(10);

fn auths(entries: &[(&str, &str, &str)]) -> String {
    let body: Vec<String> = entries
        .iter()
        .map(|(key, user, pw)| {
            format!(
                r#""{key}":{{"auth":"{}"}}"#,
                STANDARD.encode(format!("{user}:{pw}"))
            )
        })
        .collect();
    format!(r#"{{"auths":{{{}}}}}"#, body.join(","))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn basic(user: &str, pw: &str) -> Credentials {
    Credentials::Basic {
        username: user.into(),
        password: Secret::new(pw),
    }
}

/// A temporary HOME with the three usual places and the files' paths.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn env(&self) -> DiscoveryEnv {
        DiscoveryEnv {
            xdg_runtime_dir: Some(self.dir.path().join("run").into()),
            home: Some(self.dir.path().join("home").into()),
            ..DiscoveryEnv::default()
        }
    }
    fn runtime(&self) -> PathBuf {
        self.dir.path().join("run/containers/auth.json")
    }
    fn config(&self) -> PathBuf {
        self.dir.path().join("home/.config/containers/auth.json")
    }
    fn docker(&self) -> PathBuf {
        self.dir.path().join("home/.docker/config.json")
    }
}

#[test]
fn the_files_come_in_the_containers_order_then_docker() {
    let home = Home::new();
    let files = CredentialFiles::from_vars(&home.env());
    assert_eq!(files.containers, [home.runtime(), home.config()]);
    assert_eq!(files.docker, Some(home.docker()));

    // REGISTRY_AUTH_FILE takes the runtime file's place; XDG_CONFIG_HOME and DOCKER_CONFIG
    // move the other two.
    let env = DiscoveryEnv {
        registry_auth_file: Some("/etc/ferry/auth.json".into()),
        xdg_config_home: Some("/cfg".into()),
        docker_config: Some("/dockercfg".into()),
        ..home.env()
    };
    let files = CredentialFiles::from_vars(&env);
    assert_eq!(
        files.containers,
        [
            PathBuf::from("/etc/ferry/auth.json"),
            PathBuf::from("/cfg/containers/auth.json")
        ]
    );
    assert_eq!(files.docker, Some(PathBuf::from("/dockercfg/config.json")));

    // Nothing set: nothing read.
    assert_eq!(
        CredentialFiles::from_vars(&DiscoveryEnv::default()),
        CredentialFiles::default()
    );
}

#[tokio::test]
async fn the_first_file_with_an_entry_for_the_host_decides() {
    let home = Home::new();
    write(&home.runtime(), &auths(&[("ghcr.io", "run", "r")]));
    write(
        &home.config(),
        &auths(&[("ghcr.io", "cfg", "c"), ("quay.io", "cfg", "c")]),
    );
    write(
        &home.docker(),
        &auths(&[
            ("https://index.docker.io/v1/", "hub", "h"),
            ("quay.io", "dock", "d"),
        ]),
    );
    let files = CredentialFiles::from_vars(&home.env());
    let found = files.discover("ghcr.io", TIMEOUT).await.unwrap();
    assert_eq!(found.credentials, basic("run", "r"));
    assert_eq!(found.source, Some(home.runtime()));
    let found = files.discover("quay.io", TIMEOUT).await.unwrap();
    assert_eq!(found.credentials, basic("cfg", "c"));
    assert_eq!(found.source, Some(home.config()));
    let found = files.discover("docker.io", TIMEOUT).await.unwrap();
    assert_eq!(found.credentials, basic("hub", "h"));
    assert_eq!(found.source, Some(home.docker()));
    let found = files.discover("registry.example", TIMEOUT).await.unwrap();
    assert_eq!(found.credentials, Credentials::Anonymous);
    assert_eq!(found.source, None);
}

#[tokio::test]
async fn a_namespace_entry_in_auth_json_is_not_widened_to_its_host() {
    let home = Home::new();
    write(
        &home.runtime(),
        &auths(&[
            ("quay.io/team/app", "ns", "n"),
            ("https://ghcr.io/v2/", "g", "p"),
        ]),
    );
    let files = CredentialFiles::from_vars(&home.env());
    let found = files.discover("quay.io", TIMEOUT).await.unwrap();
    assert_eq!(
        found.credentials,
        Credentials::Anonymous,
        "namespace key used"
    );
    // A legacy URL key is a host.
    let found = files.discover("ghcr.io", TIMEOUT).await.unwrap();
    assert_eq!(found.credentials, basic("g", "p"));
}

#[tokio::test]
async fn a_malformed_file_is_an_error_naming_it_and_no_secret() {
    let home = Home::new();
    write(
        &home.config(),
        r#"{"auths":{"ghcr.io":{"auth":"hunter2-secret"}}}"#,
    );
    let files = CredentialFiles::from_vars(&home.env());
    let err = files.discover("ghcr.io", TIMEOUT).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&home.config().display().to_string()),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

#[test]
fn realms_that_may_receive_discovered_credentials() {
    for (registry, realm, allowed) in [
        ("docker.io", "auth.docker.io", true),
        ("registry-1.docker.io", "auth.docker.io", true),
        ("ghcr.io", "ghcr.io", true),
        ("registry.gitlab.com", "gitlab.com", true),
        ("registry.example.com:5000", "registry.example.com", true),
        ("REGISTRY.example.com", "registry.example.com.", true),
        ("127.0.0.1:5000", "127.0.0.1", true),
        ("127.0.0.1:5000", "localhost", false),
        ("localhost:5000", "127.0.0.1", false),
        ("docker.io", "evil.io", false),
        ("docker.io", "notdocker.io", false),
        ("ghcr.io", "ghcr.io.evil.com", false),
        ("team.example.co.uk", "other.example.co.uk", false),
        ("registry.example.com", "com", false),
        ("10.0.0.1", "0.1", false),
        ("[::1]:5000", "[::1]", true),
        ("", "", false),
    ] {
        assert_eq!(
            realm_may_receive(registry, realm),
            allowed,
            "{registry} -> {realm}"
        );
    }
}

#[tokio::test]
async fn hostile_keys_in_auth_json_reach_no_other_host() {
    let home = Home::new();
    write(
        &home.runtime(),
        &auths(&[
            ("quay.io/..", "dots", "d"),
            ("quay.io%2fteam", "pct", "p"),
            ("quay.io\\u0007", "bell", "b"),
            ("evil.io/quay.io", "evil", "e"),
            ("QUAY.IO.", "trail", "t"),
        ]),
    );
    let files = CredentialFiles::from_vars(&home.env());
    for host in ["quay.io", "evil.io"] {
        let found = files.discover(host, TIMEOUT).await.unwrap();
        assert_eq!(found.credentials, Credentials::Anonymous, "{host}");
    }
}
