//! Credentials by default: a config with no `auth` lines authenticates with what `docker login`
//! or `podman login` stored, in podman's then docker's order; `auth: {type: anonymous}` opts
//! out; `ferry auth check` names the file, never the secret. Every test has its own HOME,
//! XDG_RUNTIME_DIR, DOCKER_CONFIG and REGISTRY_AUTH_FILE, never the real user's.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use base64::Engine as _;
use common::{code, command, text, write_config};
use ferry_testkit::distribution::{RealRegistry, RealRegistryOptions};
use ferry_testkit::registry::TestRegistry;

const USER: &str = "alice";
const PASSWORD: &str = "podman-login-secret-31";

/// A temporary home: `home/` (HOME), `run/` (XDG_RUNTIME_DIR), nothing else set.
struct Login {
    dir: tempfile::TempDir,
}

impl Login {
    fn new() -> Login {
        Login {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    fn runtime_auth(&self) -> PathBuf {
        self.dir.path().join("run/containers/auth.json")
    }
    fn docker_config(&self) -> PathBuf {
        self.home().join(".docker/config.json")
    }
    fn write(&self, path: &Path, host: &str, user: &str, password: &str) {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            path,
            format!(r#"{{"auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#),
        )
        .unwrap();
    }
    /// `ferry args…` seeing only this login's files.
    async fn ferry(&self, args: &[&str]) -> Output {
        let mut c = command(args);
        c.env("HOME", self.home())
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("DOCKER_CONFIG")
            .env_remove("REGISTRY_AUTH_FILE");
        tokio::time::timeout(Duration::from_secs(120), c.output())
            .await
            .expect("ferry finished within two minutes")
            .expect("ferry ran")
    }
}

async fn locked_registry() -> Option<RealRegistry> {
    RealRegistry::start_for_test_with(RealRegistryOptions {
        htpasswd: Some((USER.into(), PASSWORD.into())),
        ..RealRegistryOptions::default()
    })
    .await
    .expect("registry")
}

/// A config copying `src/app:v1` from `source` to the locked registry, with no `auth` lines
/// (or with `auth`, when given).
fn config(dir: &Path, source: &TestRegistry, target: &RealRegistry, auth: &str) -> PathBuf {
    let registries = format!(
        "  - host: \"{sh}\"\n    url: \"{su}\"\n    insecure: true\n\
         \x20 - host: \"{th}\"\n    url: \"{tu}\"\n    insecure: true\n    retry: {{ attempts: 1 }}\n{auth}",
        sh = source.host(),
        su = source.url(),
        th = target.host(),
        tu = target.url(),
    );
    let mappings = format!(
        "  - source: \"{}/src/app\"\n    targets: [\"{}/mirror/app\"]\n    tags: {{ include: [v1] }}\n",
        source.host(),
        target.host()
    );
    write_config(dir, &registries, &mappings)
}

async fn manifest_puts(target: &RealRegistry) -> usize {
    let log = target.access_log().await.unwrap();
    log.entries
        .iter()
        .filter(|e| e.method == "PUT" && e.path.contains("/manifests/") && e.status == 201)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_login_is_used_when_the_config_has_no_auth_lines() {
    let Some(target) = locked_registry().await else {
        return;
    };
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"layer"]);
    let login = Login::new();
    login.write(&login.docker_config(), &target.host(), USER, PASSWORD);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &source, &target, "");
    let config = config.to_str().unwrap();

    let out = login.ferry(&["auth", "check", "-c", config]).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}{}", text(&out.stderr));
    let docker_file = login.docker_config().display().to_string();
    assert!(
        stdout.contains(&format!("basic as {USER} from {docker_file}")),
        "{stdout}"
    );
    assert!(stdout.contains("anonymous (no login found)"), "{stdout}");

    let out = login
        .ferry(&["sync", "-c", config, "--progress", "none"])
        .await;
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 0, "{all}");
    assert!(!all.contains(PASSWORD), "{all}");
    assert!(!stdout.contains(PASSWORD), "{stdout}");
    assert_eq!(manifest_puts(&target).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_podman_login_comes_before_docker_and_anonymous_opts_out() {
    let Some(target) = locked_registry().await else {
        return;
    };
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"layer"]);
    let login = Login::new();
    // podman's file is right; docker's (read only after it) is stale.
    login.write(&login.runtime_auth(), &target.host(), USER, PASSWORD);
    login.write(
        &login.docker_config(),
        &target.host(),
        USER,
        "stale-password",
    );
    let dir = tempfile::tempdir().unwrap();

    let optout = config(
        dir.path(),
        &source,
        &target,
        "    auth: { type: anonymous }\n",
    );
    let out = login
        .ferry(&["sync", "-c", optout.to_str().unwrap(), "--progress", "none"])
        .await;
    assert_eq!(code(&out), 4, "{}", text(&out.stderr));
    assert_eq!(manifest_puts(&target).await, 0);

    let config = config(dir.path(), &source, &target, "");
    let out = login
        .ferry(&["auth", "check", "-c", config.to_str().unwrap()])
        .await;
    let runtime_file = login.runtime_auth().display().to_string();
    assert!(
        text(&out.stdout).contains(&runtime_file),
        "{}",
        text(&out.stdout)
    );
    let out = login
        .ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"])
        .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(manifest_puts(&target).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_login_file_fails_the_registry_naming_the_file() {
    let Some(target) = locked_registry().await else {
        return;
    };
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"layer"]);
    let login = Login::new();
    std::fs::create_dir_all(login.docker_config().parent().unwrap()).unwrap();
    std::fs::write(login.docker_config(), format!("{{\"auths\": {PASSWORD}")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &source, &target, "");
    let out = login
        .ferry(&["auth", "check", "-c", config.to_str().unwrap()])
        .await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 4, "{stdout}");
    assert!(
        stdout.contains(&login.docker_config().display().to_string()),
        "{stdout}"
    );
    assert!(stdout.contains("type: anonymous"), "{stdout}");
    assert!(!stdout.contains(PASSWORD), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_credential_store_is_asked_when_the_config_has_no_auth_lines() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(target) = locked_registry().await else {
        return;
    };
    let source = TestRegistry::builder().start().await.unwrap();
    source.seed_image("src/app", "v1", &[b"layer"]);
    let login = Login::new();
    // `docker login` with a credential store: config.json names the store, the helper answers.
    std::fs::create_dir_all(login.docker_config().parent().unwrap()).unwrap();
    std::fs::write(login.docker_config(), r#"{"credsStore":"ferrytest"}"#).unwrap();
    let bin = login.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let helper = bin.join("docker-credential-ferrytest");
    let asked = login.dir.path().join("asked");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\nread server\necho \"$server\" >> {asked:?}\n\
             echo '{{\"Username\":\"{USER}\",\"Secret\":\"{PASSWORD}\"}}'\n",
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &source, &target, "");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = command(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"]);
    c.env("HOME", login.home())
        .env("PATH", path)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("DOCKER_CONFIG")
        .env_remove("REGISTRY_AUTH_FILE");
    let out = c.output().await.unwrap();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 0, "{all}");
    assert!(!all.contains(PASSWORD), "{all}");
    assert_eq!(manifest_puts(&target).await, 1);
    let asked = std::fs::read_to_string(&asked).unwrap();
    // Asked once per host (the source's too, which answers without auth).
    let mut hosts: Vec<&str> = asked.lines().collect();
    hosts.sort_unstable();
    let mut expected = [source.host(), target.host()];
    expected.sort_unstable();
    assert_eq!(hosts, expected, "{asked}");
}

/// A plain-http token service on `127.0.0.1` (the registry's own host, another port) that
/// records each request's `Authorization` header and hands out a token.
async fn realm_on_another_port() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let record = std::sync::Arc::clone(&record);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let authorization = String::from_utf8_lossy(&head).lines().find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("authorization")
                        .then(|| value.trim().to_owned())
                });
                record.lock().unwrap().push(authorization);
                let body = r#"{"token":"other-port-token","expires_in":300}"#;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tcp.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, seen)
}

/// Issue 30 item 6: a login stored for `127.0.0.1:<port>` went, as Basic over plain http, to
/// a token realm the registry named on another port of the same host. Found credentials are
/// keyed by host and port as the login file writes them: that realm is asked anonymously.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_credentials_never_go_to_a_realm_on_another_port_of_the_host() {
    use ferry_testkit::registry::{HostileRule, Hostility, TokenAuthConfig};
    let (realm_port, seen) = realm_on_another_port().await;
    let source = TestRegistry::builder()
        .token_auth(TokenAuthConfig {
            users: vec![(USER.into(), PASSWORD.into())],
            anonymous_pull: false,
            token_ttl_secs: 300,
        })
        .start()
        .await
        .unwrap();
    source.seed_image("src/app", "v1", &[b"layer"]);
    source.hostile().add(HostileRule {
        op: None,
        repo: None,
        answer: vec![Hostility::Header(
            "www-authenticate",
            format!("Bearer realm=\"http://127.0.0.1:{realm_port}/token\",service=\"testkit\"")
                .into_bytes(),
        )],
        times: None,
        skip: 0,
    });
    assert_ne!(source.host(), format!("127.0.0.1:{realm_port}"));
    let target = TestRegistry::builder().start().await.unwrap();
    let login = Login::new();
    login.write(&login.docker_config(), &source.host(), USER, PASSWORD);
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "  - host: \"{sh}\"\n    url: \"{su}\"\n    insecure: true\n    retry: {{ attempts: 1 }}\n\
         \x20 - host: \"{th}\"\n    url: \"{tu}\"\n    insecure: true\n",
        sh = source.host(),
        su = source.url(),
        th = target.host(),
        tu = target.url(),
    );
    let mappings = format!(
        "  - source: \"{}/src/app\"\n    targets: [\"{}/mirror/app\"]\n",
        source.host(),
        target.host()
    );
    let config = write_config(dir.path(), &registries, &mappings);
    let out = login
        .ferry(&["sync", "-c", config.to_str().unwrap(), "--progress", "none"])
        .await;
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let asked: Vec<_> = seen.lock().unwrap().drain(..).collect();
    assert!(
        !asked.is_empty(),
        "the realm on the other port was asked: {all}"
    );
    assert!(
        asked.iter().all(Option::is_none),
        "found credentials went to another port: {asked:?}\n{all}"
    );
    assert!(!all.contains(PASSWORD), "{all}");
}
