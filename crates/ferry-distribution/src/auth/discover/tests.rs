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
        ("docker.io", "https://auth.docker.io/token", true),
        ("registry-1.docker.io", "https://auth.docker.io/token", true),
        ("ghcr.io", "https://ghcr.io/token", true),
        ("ghcr.io", "https://ghcr.io:443/token", true),
        ("registry.gitlab.com", "https://gitlab.com/jwt/auth", true),
        (
            "registry.example.com:5000",
            "https://registry.example.com:5000/t",
            true,
        ),
        (
            "REGISTRY.example.com",
            "https://registry.example.com./t",
            true,
        ),
        ("127.0.0.1:5000", "http://127.0.0.1:5000/token", true),
        ("[::1]:5000", "https://[::1]:5000/t", true),
        ("localhost", "http://localhost/token", true),
        // Another port of the same host is another login (docker keys them so).
        ("127.0.0.1:5977", "http://127.0.0.1:5978/token", false),
        (
            "registry.example.com:5000",
            "https://registry.example.com/t",
            false,
        ),
        (
            "registry.example.com",
            "https://registry.example.com:8443/t",
            false,
        ),
        ("127.0.0.1:5000", "https://127.0.0.1/t", false),
        ("[::1]:5000", "https://[::1]/t", false),
        ("127.0.0.1:5000", "http://localhost:5000/t", false),
        ("localhost:5000", "http://127.0.0.1:5000/t", false),
        ("docker.io", "https://evil.io/t", false),
        ("docker.io", "https://notdocker.io/t", false),
        ("ghcr.io", "https://ghcr.io.evil.com/t", false),
        ("team.example.co.uk", "https://other.example.co.uk/t", false),
        ("registry.example.com", "https://com/t", false),
        ("10.0.0.1", "https://0.1/t", false),
        // A parent domain that is a public suffix is everyone's.
        ("team.example.co.uk", "https://example.co.uk/t", true),
        ("registry.example.co.uk", "https://co.uk/t", false),
        ("mirror.github.io", "https://github.io/t", false),
        ("a.b.s3.amazonaws.com", "https://s3.amazonaws.com/t", false),
        ("co.uk", "https://evil.co.uk/t", false),
        ("github.io", "https://attacker.github.io/t", false),
        ("", "https://x.io/t", false),
    ] {
        let url = url::Url::parse(realm).unwrap();
        assert_eq!(
            realm_may_receive(registry, &url),
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
