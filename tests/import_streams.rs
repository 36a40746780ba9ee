//! `ferry import` of compressed bundles and of a bundle on standard input, through the real
//! binary and the real registry: zstd from a pipe, gzip from a file, garbage and a spool past
//! its bound refused before any request, and no spool file left behind either way.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use common::{code, command, text};
use ferry_distribution::{Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::fixtures::images::Images;
use tokio::io::AsyncWriteExt;

/// A bundle of one image (a config and a 300 kB layer) named `HOST/streams/app:v1`: the tar's
/// bytes and the image's manifest digest.
fn bundle(host: &str, dir: &Path) -> (Vec<u8>, Digest) {
    let mut images = Images::new();
    let layer = ferry_testkit::noise(37, 300_000);
    let m = images.image(br#"{"os":"linux","architecture":"amd64"}"#, &[&layer]);
    images.tag(&m, Some(&format!("{host}/streams/app:v1")));
    let path = dir.join("plain.tar");
    images.write_oci_archive(&path);
    let digest = Digest::parse(m["digest"].as_str().unwrap()).unwrap();
    (std::fs::read(&path).unwrap(), digest)
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// `ferry --progress none import --insecure ARGS…` with `stdin` written to its standard input.
async fn import(args: &[&str], stdin: &[u8]) -> Output {
    let mut all = vec!["--progress", "none", "import", "--insecure"];
    all.extend_from_slice(args);
    let mut child = command(&all)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry runs");
    let mut pipe = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    // ferry may stop reading early (a refused stream): a broken pipe here is not the test's.
    let feed = tokio::spawn(async move {
        let _ = pipe.write_all(&bytes).await;
    });
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("ferry finished within two minutes")
        .expect("ferry ran");
    feed.await.unwrap();
    out
}

fn files_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_bundles_from_a_pipe_or_a_file_import_and_leave_no_spool() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (tar, digest) = bundle(&registry.host(), dir.path());
    let spool = dir.path().join("spool");
    let spool_arg = spool.to_str().unwrap();

    // `zstd -dc full.tar.zst | ferry import -` without the zstd tool: ferry reads the
    // compressed stream itself, from a pipe.
    let out = import(&["-", "--spool-dir", spool_arg, "--json"], &zstd(&tar)).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("from standard input into a spool file"),
        "{stderr}"
    );
    let m = client.get_manifest("streams/app", "v1").await.unwrap();
    assert_eq!(m.digest, digest);
    assert_eq!(files_in(&spool), 0, "the spool file is removed");

    // A plain tar from a pipe: the same, spooled as it is.
    let prefix = format!("{}/plain", registry.host());
    let out = import(
        &["-", "--spool-dir", spool_arg, "--target-prefix", &prefix],
        &tar,
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let m = client
        .get_manifest("plain/streams/app", "v1")
        .await
        .unwrap();
    assert_eq!(m.digest, digest);

    // A gzip file: recognised by its first bytes, whatever its name.
    let gz = dir.path().join("bundle.tar");
    std::fs::write(&gz, gzip(&tar)).unwrap();
    let prefix = format!("{}/gz", registry.host());
    let out = import(
        &[
            gz.to_str().unwrap(),
            "--spool-dir",
            spool_arg,
            "--target-prefix",
            &prefix,
        ],
        &[],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("gzip-compressed"),
        "{}",
        text(&out.stderr)
    );
    let m = client.get_manifest("gz/streams/app", "v1").await.unwrap();
    assert_eq!(m.digest, digest);
    assert_eq!(files_in(&spool), 0, "the spool file is removed");
    registry.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_a_spool_past_its_bound_are_refused_before_any_request_leaving_nothing() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (tar, _) = bundle(&registry.host(), dir.path());
    let spool = dir.path().join("spool");
    let spool_arg = spool.to_str().unwrap();

    // Not a tar: refused naming the bytes it starts with, and the format when ferry knows it.
    let html = dir.path().join("bundle.tar");
    std::fs::write(&html, format!("<html>{}</html>", " ".repeat(600))).unwrap();
    let out = import(&[html.to_str().unwrap()], &[]).await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("not a tar archive") && stderr.contains("starts with bytes 3c 68 74 6d"),
        "{stderr}"
    );
    let xz = [0xfd, b'7', b'z', b'X', b'Z', 0, 0, 4, 0xe6, 0xd6];
    let out = import(&["-", "--spool-dir", spool_arg], &xz).await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("standard input: not a tar archive"),
        "{stderr}"
    );
    assert!(
        stderr.contains("fd 37 7a 58 5a 00") && stderr.contains("(xz"),
        "{stderr}"
    );

    // More tar than the bound: refused, the partial spool removed.
    let out = import(
        &["-", "--spool-dir", spool_arg, "--spool-limit", "100KiB"],
        &zstd(&tar),
    )
    .await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("more than the spool's bound of 102400 bytes"),
        "{stderr}"
    );
    assert_eq!(
        files_in(&spool),
        0,
        "nothing is left in the spool directory"
    );

    // A zstd stream cut short: refused as broken zstd, nothing left.
    let packed = zstd(&tar);
    let out = import(
        &["-", "--spool-dir", spool_arg],
        &packed[..packed.len() / 2],
    )
    .await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not valid zstd"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        files_in(&spool),
        0,
        "nothing is left in the spool directory"
    );

    let log = registry.access_log().await.unwrap();
    assert_eq!(log.count("GET", "/v2/streams"), 0, "{log:?}");
    assert_eq!(log.count("HEAD", "/v2/streams"), 0, "{log:?}");
    assert_eq!(log.count("POST", "/v2/streams"), 0, "{log:?}");
    registry.stop().await.unwrap();
}

/// The names of the spool files in `dir` (`ferry-spool-…`).
fn spools_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ferry-spool-"))
        })
        .collect()
}

/// `ferry import -` spooling into `spool`, given the first `head` bytes of `tar` and its
/// standard input kept open, once its spool file is there (waited for on the directory,
/// bounded): the child, its open pipe, and the spool file it holds.
async fn stalled_import(
    spool: &Path,
    head: &[u8],
    prefix: &str,
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    std::path::PathBuf,
) {
    let before = spools_in(spool);
    let mut child = command(&[
        "--progress",
        "none",
        "import",
        "--insecure",
        "-",
        "--spool-dir",
        spool.to_str().unwrap(),
        "--target-prefix",
        prefix,
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("ferry runs");
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(head).await.unwrap();
    pipe.flush().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(new) = spools_in(spool).into_iter().find(|p| !before.contains(p)) {
            return (child, pipe, new);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no spool file appeared"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the import ended before its spool was there"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A spool file a SIGKILLed import left is removed by the next import spooling into the same
/// directory; a live import's spool there is left alone, and that import then completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_imports_spool_is_swept_by_the_next_and_a_live_ones_is_kept() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (tar, digest) = bundle(&registry.host(), dir.path());
    let spool = dir.path().join("spool");
    let host = registry.host();

    // Killed part way: its spool file stays (no destructor runs on SIGKILL).
    let (mut killed, _pipe, left) =
        stalled_import(&spool, &tar[..100_000], &format!("{host}/killed")).await;
    killed.start_kill().unwrap();
    let status = killed.wait().await.unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "killed by SIGKILL"
    );
    assert!(left.exists(), "the killed import left its spool file");

    // A live import, stalled on its input with its spool open.
    let (mut live, mut live_pipe, held) =
        stalled_import(&spool, &tar[..100_000], &format!("{host}/live")).await;

    // The next import sweeps the killed one's spool, not the live one's.
    let out = import(
        &[
            "-",
            "--spool-dir",
            spool.to_str().unwrap(),
            "--target-prefix",
            &format!("{host}/next"),
        ],
        &tar,
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(!left.exists(), "the killed import's spool is swept");
    assert!(held.exists(), "a live import's spool is kept");
    assert_eq!(spools_in(&spool), std::slice::from_ref(&held));

    // The live import gets the rest of its bundle and completes from its spool.
    live_pipe.write_all(&tar[100_000..]).await.unwrap();
    drop(live_pipe);
    let status = tokio::time::timeout(Duration::from_secs(120), live.wait())
        .await
        .expect("the live import finished")
        .unwrap();
    assert!(status.success(), "{status:?}");
    for repo in ["next/streams/app", "live/streams/app"] {
        let m = client.get_manifest(repo, "v1").await.unwrap();
        assert_eq!(m.digest, digest, "{repo}");
    }
    assert!(spools_in(&spool).is_empty());
    registry.stop().await.unwrap();
}
