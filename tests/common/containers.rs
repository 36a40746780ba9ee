//! podman and buildah for the image and pull-config tests: a private image store per test (its
//! own storage.conf, vfs driver), the runtime flags these machines need, and small images.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// A private containers store: buildah and podman given its `CONTAINERS_STORAGE_CONF` see only
/// the images of this test.
pub struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    pub fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        let conf = format!(
            "[storage]\ndriver = \"vfs\"\nrunroot = \"{0}/run\"\ngraphroot = \"{0}/root\"\n",
            dir.path().display()
        );
        std::fs::write(dir.path().join("storage.conf"), conf).unwrap();
        // No registry rules of the machine's: an empty registries.conf unless a test sets one.
        std::fs::write(dir.path().join("registries.conf"), "").unwrap();
        Store { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn scrub(&self, c: &mut tokio::process::Command) {
        c.env(
            "CONTAINERS_STORAGE_CONF",
            self.dir.path().join("storage.conf"),
        )
        .env(
            "CONTAINERS_REGISTRIES_CONF",
            self.dir.path().join("registries.conf"),
        )
        .env_remove("REGISTRY_AUTH_FILE")
        .kill_on_drop(true);
    }

    /// `podman` with the flags a container needs here: runc (crun refuses the hybrid cgroups)
    /// and cgroupfs; `run` also needs [`RUN_LIMITS`].
    pub fn podman(&self) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("podman");
        c.args(["--runtime", "runc", "--cgroup-manager=cgroupfs"]);
        self.scrub(&mut c);
        c
    }

    pub fn buildah(&self) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("buildah");
        self.scrub(&mut c);
        c
    }

    /// A command of this store run to completion (at most five minutes); panics on a
    /// non-zero exit, showing its output.
    pub async fn ok(mut c: tokio::process::Command) -> String {
        let out = run(&mut c).await;
        assert!(
            out.status.success(),
            "{c:?} failed:\n{}{}",
            super::text(&out.stdout),
            super::text(&out.stderr)
        );
        super::text(&out.stdout)
    }

    /// Builds a one-file image from scratch (`/hello.txt` holding `body`) and pushes it to
    /// `reference` (a plain-HTTP registry); returns the pushed manifest's digest.
    pub async fn push_small_image(&self, reference: &str, body: &str) -> String {
        let ctr = Self::ok({
            let mut c = self.buildah();
            c.args(["from", "scratch"]);
            c
        })
        .await
        .trim()
        .to_owned();
        let file = self.dir.path().join("hello.txt");
        std::fs::write(&file, body).unwrap();
        Self::ok({
            let mut c = self.buildah();
            c.args(["copy", &ctr]).arg(&file).arg("/hello.txt");
            c
        })
        .await;
        let image = format!("localhost/small-{}", std::process::id());
        Self::ok({
            let mut c = self.buildah();
            c.args(["commit", "--quiet", "--format", "oci", &ctr, &image]);
            c
        })
        .await;
        let digest_file = self.dir.path().join("digest");
        Self::ok({
            let mut c = self.buildah();
            c.args(["push", "--tls-verify=false", "--digestfile"])
                .arg(&digest_file)
                .arg(&image)
                .arg(format!("docker://{reference}"));
            c
        })
        .await;
        std::fs::read_to_string(&digest_file)
            .unwrap()
            .trim()
            .to_owned()
    }
}

/// What `podman run` needs here: the default ulimits exceed the hard limits.
pub const RUN_LIMITS: &[&str] = &[
    "--ulimit",
    "nofile=4096:4096",
    "--ulimit",
    "nproc=1024:1024",
];

pub async fn run(c: &mut tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(300), c.output())
        .await
        .expect("finished within five minutes")
        .expect("the command ran (apt-get install podman buildah runc)")
}

/// The manifest digest `skopeo inspect` sees at `reference` (a plain-HTTP registry).
pub async fn remote_digest(reference: &str) -> String {
    let mut c = tokio::process::Command::new("skopeo");
    c.args([
        "inspect",
        "--tls-verify=false",
        "--format",
        "{{.Digest}}",
        &format!("docker://{reference}"),
    ]);
    let out = run(&mut c).await;
    assert!(out.status.success(), "{}", super::text(&out.stderr));
    super::text(&out.stdout).trim().to_owned()
}

/// The repository's root (scripts/, deploy/).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
