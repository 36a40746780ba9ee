//! `zstd -dc B.tar.zst | ferry import -` in one pass, through the real binary and the real
//! registry: a head-first signed bundle imports without a spool file, a flipped byte in one
//! blob fails only the images using it, skopeo's archive from a pipe still goes through the
//! spool, and an unsigned bundle under a key is refused before any request (issue 37).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use common::{code, push_one_layer, text};
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::fixtures::{ALL_TAGS, mirror_yaml};
use ferry_trust::keys::PrivateKey;
use tokio::io::AsyncWriteExt;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `ferry --progress none ARGS…` with `stdin` on its standard input and `TMPDIR` at `tmp`.
async fn piped(args: &[&str], stdin: Vec<u8>, tmp: &Path) -> Output {
    let mut all = vec!["--progress", "none"];
    all.extend_from_slice(args);
    let mut child = common::command(&all)
        .env("TMPDIR", tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry runs");
    let mut pipe = child.stdin.take().unwrap();
    let feed = tokio::spawn(async move {
        let _ = pipe.write_all(&stdin).await;
    });
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        child.wait_with_output(),
    )
    .await
    .expect("ferry finished within two minutes")
    .expect("ferry ran");
    feed.await.unwrap();
    out
}

async fn tags(c: &RegistryClient, repo: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for tag in c.list_tags(repo).await.unwrap_or_default() {
        let m = c.head_manifest(repo, &tag).await.unwrap().unwrap();
        out.insert(tag, m.digest.to_string());
    }
    out
}

/// Every file under `dir` with its size (none when `dir` is missing).
fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let meta = e.metadata().unwrap();
        if meta.is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.push((e.path(), meta.len()));
        }
    }
    out
}

/// Where the data of entry `name` starts in the tar `bytes`.
fn entry_offset(bytes: &[u8], name: &str) -> u64 {
    let mut archive = tar::Archive::new(bytes);
    for entry in archive.entries().unwrap() {
        let entry = entry.unwrap();
        if entry.path().unwrap().to_str() == Some(name) {
            return entry.raw_file_position();
        }
    }
    panic!("no entry {name} in the tar");
}

/// The tar `bytes` written again entry by entry, the entry `name` with one byte more.
fn rebuilt(bytes: &[u8], name: &str) -> Vec<u8> {
    use std::io::Read;
    let mut out = tar::Builder::new(Vec::new());
    let mut archive = tar::Archive::new(bytes);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        let mut header = entry.header().clone();
        if entry.path().unwrap().to_str() == Some(name) {
            data.push(0);
            header.set_size(data.len() as u64);
            header.set_cksum();
        }
        out.append(&header, &data[..]).unwrap();
    }
    out.into_inner().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_piped_head_first_bundle_streams_once_and_a_bad_blob_fails_only_its_images() {
    let Some(source) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let target = RealRegistry::start().await.expect("registry");
    let src = RegistryClient::new(RegistryOptions::insecure_at(&source.url())).unwrap();
    let dst = RegistryClient::new(RegistryOptions::insecure_at(&target.url())).unwrap();
    let one_layer = ferry_testkit::noise(61, 400_000);
    let two_layer = ferry_testkit::noise(62, 400_000);
    push_one_layer(&src, "apps/one", "1.0", r#"{"n":1}"#, &one_layer).await;
    push_one_layer(&src, "apps/two", "1.0", r#"{"n":2}"#, &two_layer).await;
    // apps/three shares apps/one's layer: streamed once, mounted into its second repository.
    push_one_layer(&src, "apps/three", "1.0", r#"{"n":3}"#, &one_layer).await;
    let dir = tempfile::tempdir().unwrap();
    let config = mirror_yaml()
        .registries(&[&source, &target], &[])
        .mapping(
            format!("{}/apps/one", source.host()),
            &[format!("{}/mirror/one", target.host())],
            &[ALL_TAGS],
        )
        .mapping(
            format!("{}/apps/two", source.host()),
            &[format!("{}/mirror/two", target.host())],
            &[ALL_TAGS],
        )
        .mapping(
            format!("{}/apps/three", source.host()),
            &[format!("{}/mirror/three", target.host())],
            &[ALL_TAGS],
        )
        .write(dir.path());
    let key = PrivateKey::generate_p256();
    let private = dir.path().join("bundle.key");
    let public = dir.path().join("bundle.pub");
    std::fs::write(&private, key.to_pkcs8_pem().unwrap().as_bytes()).unwrap();
    std::fs::write(&public, key.public_key().to_pem()).unwrap();
    let bundle = dir.path().join("bundle.tar");
    let out = common::ferry(&[
        "--progress",
        "none",
        "export",
        "-c",
        s(&config),
        "-o",
        s(&bundle),
        "--sign-key",
        s(&private),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let tar = std::fs::read(&bundle).unwrap();
    let want_one = tags(&src, "apps/one").await;
    let want_two = tags(&src, "apps/two").await;
    let want_three = tags(&src, "apps/three").await;

    // (a) zstd from a pipe, under the key: every tag lands with the source's digests, and
    // nothing but small state files is written (no spool in TMPDIR or the state directory).
    let tmp = dir.path().join("tmp");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let zst =
        ruzstd::encoding::compress_to_vec(&tar[..], ruzstd::encoding::CompressionLevel::Fastest);
    let prefix = format!("{}/a", target.host());
    // Where a spool would go: made (0700) by the first spool file, so its absence says none was.
    let spool_a = dir.path().join("spool-a");
    let args = [
        "import",
        "-",
        "-c",
        s(&config),
        "--verify-key",
        s(&public),
        "--state-dir",
        s(&state),
        "--spool-dir",
        s(&spool_a),
        "--target-prefix",
        &prefix,
    ];
    let out = piped(&args, zst, &tmp).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(!spool_a.exists(), "no spool directory was made: {stderr}");
    assert!(stderr.contains("nothing was spooled"), "{stderr}");
    // Three configs and two layers, each sent once, from the pipe (the shared layer mounted).
    assert!(stderr.contains("5 blobs ("), "{stderr}");
    assert_eq!(tags(&dst, "a/mirror/one").await, want_one);
    assert_eq!(tags(&dst, "a/mirror/three").await, want_three);
    assert_eq!(tags(&dst, "a/mirror/two").await, want_two);
    assert_eq!(files(&tmp), vec![], "nothing in TMPDIR");
    assert!(!state.join("spool").exists(), "no spool directory was made");
    for (path, size) in files(&state) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.starts_with("ferry-spool-"), "{path:?}");
        assert!(size < 64 * 1024, "{path:?} holds {size} bytes");
    }

    // (b) one byte of apps/one's layer flipped inside its tar entry: the signature still
    // verifies (the record names the blob, not its bytes), the blob fails as it streams, and
    // exactly the images using it (one and three) fail: nothing tagged for them, two tagged,
    // exit 1.
    let layer = Digest::of_bytes(Algorithm::Sha256, &one_layer);
    let at = entry_offset(&tar, &format!("blobs/sha256/{}", layer.hex()));
    let mut flipped = tar.clone();
    flipped[at as usize + 1000] ^= 0x01;
    let prefix = format!("{}/b", target.host());
    let args = [
        "import",
        "-",
        "-c",
        s(&config),
        "--verify-key",
        s(&public),
        "--target-prefix",
        &prefix,
    ];
    let out = piped(&args, flipped, &tmp).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(stderr.contains(&layer.to_string()), "{stderr}");
    assert!(stderr.contains("b/mirror/one:1.0"), "{stderr}");
    // ferry's own check as the blob streams, not only the registry's at its closing PUT.
    assert!(stderr.contains("its bytes hash to"), "{stderr}");
    assert!(stderr.contains("b/mirror/three:1.0"), "{stderr}");
    assert_eq!(tags(&dst, "b/mirror/one").await, BTreeMap::new());
    assert_eq!(tags(&dst, "b/mirror/three").await, BTreeMap::new());
    assert_eq!(tags(&dst, "b/mirror/two").await, want_two);

    // (e) apps/one's layer one byte longer in its tar entry (the tar rebuilt in its order):
    // refused by its size against the signed record before its bytes go anywhere.
    let longer = rebuilt(&tar, &format!("blobs/sha256/{}", layer.hex()));
    let prefix = format!("{}/e", target.host());
    let args = [
        "import",
        "-",
        "-c",
        s(&config),
        "--verify-key",
        s(&public),
        "--target-prefix",
        &prefix,
    ];
    let out = piped(&args, longer, &tmp).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 1, "{stderr}");
    let says = format!(
        "its tar entry is {} bytes, the bundle says {}",
        400_001, 400_000
    );
    assert!(stderr.contains(&says), "{stderr}");
    assert!(stderr.contains("e/mirror/one:1.0"), "{stderr}");
    assert_eq!(tags(&dst, "e/mirror/one").await, BTreeMap::new());
    assert_eq!(tags(&dst, "e/mirror/three").await, BTreeMap::new());
    assert_eq!(tags(&dst, "e/mirror/two").await, want_two);

    // (d) the same export unsigned, piped under the key: refused before any request.
    let unsigned = dir.path().join("unsigned.tar");
    let out = common::ferry(&[
        "--progress",
        "none",
        "export",
        "-c",
        s(&config),
        "-o",
        s(&unsigned),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let before = target.access_log().await.unwrap().len();
    let prefix = format!("{}/d", target.host());
    let args = [
        "import",
        "-",
        "-c",
        s(&config),
        "--verify-key",
        s(&public),
        "--target-prefix",
        &prefix,
    ];
    let out = piped(&args, std::fs::read(&unsigned).unwrap(), &tmp).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 2, "{stderr}");
    assert!(stderr.contains("not signed"), "{stderr}");
    assert_eq!(
        target.access_log().await.unwrap().len(),
        before,
        "the target saw no request: {stderr}"
    );

    // (c) skopeo's oci-archive (index.json last: not head first) from a pipe: spooled as
    // before, and imported.
    let skopeo_tar = dir.path().join("skopeo.tar");
    let from = format!("docker://{}/apps/two:1.0", source.host());
    let to = format!(
        "oci-archive:{}:{}/c/two:1.0",
        skopeo_tar.display(),
        target.host()
    );
    let run = tokio::process::Command::new("skopeo")
        .args(["copy", "-q", "--src-tls-verify=false", &from, &to])
        .output()
        .await
        .expect("skopeo runs (scripts/test installs it)");
    assert!(run.status.success(), "{}", text(&run.stderr));
    let spool = dir.path().join("spool-c");
    let args = ["import", "-", "--insecure", "--spool-dir", s(&spool)];
    let out = piped(&args, std::fs::read(&skopeo_tar).unwrap(), &tmp).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(!stderr.contains("nothing was spooled"), "{stderr}");
    assert!(spool.is_dir(), "the spool directory was made: {stderr}");
    assert_eq!(files(&spool), vec![], "the spool file is removed");
    assert!(dst.head_manifest("c/two", "1.0").await.unwrap().is_some());
    source.stop().await.unwrap();
    target.stop().await.unwrap();
}
