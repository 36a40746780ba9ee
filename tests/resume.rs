//! Uploads resumed across processes, through the real `ferry` binary into the real distribution
//! registry: killed between PATCHes, stopped by SIGTERM mid-PATCH, killed mid-PATCH (issue 28).

// One real registry holds the source repository; ferry reaches it as two registries through two
// fault proxies: the source one counts the blob bytes ferry reads, the target one holds or
// delays a PATCH so the test knows (from the proxy, never from a timer) that the upload is
// between two PATCHes or in the middle of one when it signals ferry. A 24 MiB layer goes up in
// 4 MiB PATCHes (six), so "about half" is three acknowledged.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{FERRY, code, push_one_layer, text};
use ferry_distribution::{Algorithm, Digest, RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use ferry_testkit::registry::{FaultAction, FaultProxy, FaultRule, OpKind, RequestRecord};

const MIB: usize = 1 << 20;
const LAYER: usize = 24 * MIB;
const CHUNK: usize = 4 * MIB;
/// The image's config blob.
const CONFIG: &str = "{\"resume\":1}";

struct Scene {
    _real: RealRegistry,
    src: FaultProxy,
    dst: FaultProxy,
    _dir: tempfile::TempDir,
    config: PathBuf,
    digest: Digest,
}

impl Scene {
    fn state_dir(&self) -> PathBuf {
        PathBuf::from(format!("{}.state", self.config.display()))
    }

    /// The upload records in the state directory (its tag cache, a directory of its own, is not
    /// one of them).
    fn records(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.state_dir())
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| !p.ends_with("tag-cache"))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn sync(&self) -> tokio::process::Command {
        self.sync_with(&["--progress", "none"])
    }

    /// `ferry sync -c CONFIG` with `extra` arguments.
    fn sync_with(&self, extra: &[&str]) -> tokio::process::Command {
        let mut args = vec!["sync", "-c", self.config.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut c = common::command(&args);
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    }

    fn layer_bytes_read(&self) -> u64 {
        self.src.stats().blob_bytes(&self.digest.to_string())
    }

    fn report_path(&self) -> PathBuf {
        PathBuf::from(format!("{}.report.json", self.config.display()))
    }
}

/// What run 2 showed of the resume (issue 40): its text, its JSON report, its log and its
/// plain progress line all say the upload went on from `resumed` bytes.
fn assert_resume_shown(scene: &Scene, stderr: &str, resumed: usize) {
    let at = format!("{:.1} MiB", resumed as f64 / MIB as f64);
    assert!(
        stderr.contains(&format!("synced  {}", scene.src.host()))
            && stderr.contains(&format!("(resumed at {at})")),
        "the image's line says where it resumed:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "2 copied (1 resumed: {at} an interrupted run had uploaded)"
        )),
        "the summary counts the resume:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("resumed at {at} of 24.0 MiB")) && stderr.contains("INFO"),
        "logged at info when it goes on:\n{stderr}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(scene.report_path()).unwrap()).unwrap();
    assert_eq!(json["totals"]["blobs_resumed"], 1, "{json:#}");
    assert_eq!(json["totals"]["bytes_resumed"], resumed as u64, "{json:#}");
    assert_eq!(
        json["images"][0]["bytes_resumed"], resumed as u64,
        "{json:#}"
    );
    // The plain progress line's last word on the source bytes: what run 2 read (the config and
    // the rest of the layer), not the tee's count (it read the config alone).
    let last = stderr
        .lines()
        .rfind(|l| l.contains("sync images_done="))
        .expect("a plain progress line");
    let read: u64 = last
        .split_whitespace()
        .find_map(|w| w.strip_prefix("blob_bytes_read="))
        .and_then(|n| n.parse().ok())
        .expect("blob_bytes_read");
    assert_eq!(read, (LAYER - resumed + CONFIG.len()) as u64, "{last}");
}

/// A layer whose bytes differ along its length (so an offset mistake changes its digest).
fn layer() -> Vec<u8> {
    (0..LAYER)
        .map(|i| ((i / 4096) as u8).wrapping_mul(31) ^ (i as u8))
        .collect()
}

async fn scene() -> Option<Scene> {
    let real = RealRegistry::start_for_test().await.expect("registry")?;
    let client = RegistryClient::new(RegistryOptions::insecure_at(&real.url())).unwrap();
    let layer = layer();
    let digest = Digest::of_bytes(Algorithm::Sha256, &layer);
    push_one_layer(&client, "src/app", "v1", CONFIG, &layer).await;
    let src = FaultProxy::start(&real.url()).await.unwrap();
    let dst = FaultProxy::start(&real.url()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let registries = [&src, &dst]
        .iter()
        .map(|p| {
            format!(
                "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    retry: {{ attempts: 3, base: 10ms, cap: 50ms }}\n",
                p.host(),
                p.url()
            )
        })
        .collect::<String>();
    let text = format!(
        "version: 1\nengine: {{ images_in_flight: 1, blobs_in_flight: 1, chunk_size: 4MiB, monolithic_limit: 1MiB }}\nregistries:\n{registries}mappings:\n  - source: \"{}/src/app\"\n    targets: [\"{}/mirror/app\"]\n    tags: {{ exact: [\"v1\"] }}\n",
        src.host(),
        dst.host()
    );
    let config = dir.path().join("mirror.yaml");
    std::fs::write(&config, text).unwrap();
    Some(Scene {
        _real: real,
        src,
        dst,
        _dir: dir,
        config,
        digest,
    })
}

fn patches(requests: &[RequestRecord]) -> Vec<&RequestRecord> {
    requests
        .iter()
        .filter(|r| r.op == OpKind::UploadPatch)
        .collect()
}

/// The first three PATCHes go through; the fourth gets `action`.
fn fourth_patch(scene: &Scene, action: FaultAction) {
    scene
        .dst
        .faults()
        .push(FaultRule::on(OpKind::UploadPatch, FaultAction::Delay(Duration::ZERO)).times(3));
    scene
        .dst
        .faults()
        .push(FaultRule::on(OpKind::UploadPatch, action));
}

/// Waits (on the proxy's own notifications) until the fourth PATCH has arrived and is held.
async fn fourth_patch_in_flight(scene: &Scene) {
    scene
        .dst
        .wait_until(|r| {
            let p = patches(r);
            p.len() >= 4 && p[3].status == 0 && p[..3].iter().all(|r| r.status == 202)
        })
        .await;
}

fn signal(child: &tokio::process::Child, name: &str) {
    let pid = child.id().expect("ferry is running").to_string();
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid])
        .status()
        .unwrap();
    assert!(status.success());
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Run 2: a plain sync to the end, then a deep verify; returns the sync's stderr.
async fn second_run(scene: &Scene) -> String {
    // Run 1's source read may still be draining through the proxy: counted before the reset.
    scene.src.wait_idle().await;
    scene.src.reset_stats();
    scene.dst.reset_stats();
    let report = scene.report_path();
    let mut run2 = scene.sync_with(&["--progress", "plain", "--report", report.to_str().unwrap()]);
    let out = tokio::time::timeout(Duration::from_secs(120), run2.output())
        .await
        .expect("run 2 finished within two minutes")
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "run 2:\n{stderr}");
    // Session Locations carry distribution's signed `_state`: never printed.
    assert!(
        !stderr.contains("_state"),
        "a session Location leaked:\n{stderr}"
    );
    let verify = common::ferry(&[
        "verify",
        "-c",
        scene.config.to_str().unwrap(),
        "--deep",
        "--progress",
        "none",
    ])
    .await;
    assert_eq!(code(&verify), 0, "verify --deep:\n{}", text(&verify.stderr));
    assert!(
        scene.records().is_empty(),
        "the record went with the commit"
    );
    stderr
}

/// SIGKILL between two PATCHes once half the layer is on the target: run 2 asks the recorded
/// session, reads only the rest from the source (a Range GET) and sends only the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_between_patches_is_resumed_by_the_next() {
    let Some(scene) = scene().await else { return };
    fourth_patch(&scene, FaultAction::Hang);
    let mut run1 = scene.sync().spawn().unwrap();
    fourth_patch_in_flight(&scene).await;
    run1.start_kill().unwrap();
    run1.wait().await.unwrap();
    let records = scene.records();
    assert_eq!(records.len(), 1, "one record for the upload in flight");
    assert_eq!(mode(&records[0]), 0o600);
    assert_eq!(mode(&scene.state_dir()), 0o700);
    let stderr = second_run(&scene).await;
    assert_resume_shown(&scene, &stderr, 3 * CHUNK);
    let read = scene.layer_bytes_read();
    eprintln!("killed between PATCHes: run 2 read {read} of {LAYER} bytes from the source");
    assert!(
        read <= (LAYER as u64) * 6 / 10,
        "run 2 read {read} of {LAYER} bytes from the source\n{stderr}"
    );
    // Exactly the missing half: a Range GET from the offset, and no read from byte 0 begun
    // for the tee and dropped.
    assert_eq!(
        read,
        (LAYER - 3 * CHUNK) as u64,
        "run 2 read only the missing half"
    );
    let sent = patches(&scene.dst.requests()).len();
    assert_eq!(sent, 3, "only the three missing PATCHes were sent");
    assert_eq!(
        scene
            .dst
            .requests()
            .iter()
            .filter(|r| r.op == OpKind::UploadStart && r.repo.as_deref() == Some("mirror/app"))
            .count(),
        1,
        "no session for the layer (the one POST is the config's)"
    );
}

/// SIGTERM while a PATCH is in flight: ferry finishes that PATCH, sends no other, records its
/// offset and exits; run 2 goes on from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_patch_ends_the_chunk_records_it_and_exits() {
    let Some(scene) = scene().await else { return };
    // The proxy sits on the fourth PATCH (its body waiting in the socket) for a while before
    // passing it on: the signal arrives while it is in flight.
    fourth_patch(&scene, FaultAction::Delay(Duration::from_secs(3)));
    let run1 = scene.sync().spawn().unwrap();
    fourth_patch_in_flight(&scene).await;
    signal(&run1, "TERM");
    let out = tokio::time::timeout(Duration::from_secs(60), run1.wait_with_output())
        .await
        .expect("ferry exited after the chunk in flight")
        .unwrap();
    let stderr1 = text(&out.stderr);
    assert!(
        out.status.code().is_some(),
        "exited, not killed:\n{stderr1}"
    );
    assert!(
        stderr1.contains("1 interrupted") && stderr1.contains("0 failed"),
        "the stopped upload is an interruption, not a failure:\n{stderr1}"
    );
    let p = scene.dst.requests();
    let p = patches(&p);
    assert_eq!(p.len(), 4, "no PATCH after the one in flight:\n{stderr1}");
    assert_eq!(p[3].status, 202, "the PATCH in flight was finished");
    assert!(
        !scene
            .dst
            .requests()
            .iter()
            .any(|r| r.op == OpKind::UploadPut
                && r.repo.as_deref() == Some("mirror/app")
                && r.query
                    .as_deref()
                    .is_some_and(|q| q.contains(&scene.digest.hex()[..16]))),
        "the layer was not closed"
    );
    assert_eq!(scene.records().len(), 1, "the offset is recorded");
    // The interrupted run says what it recorded, where, and that the next run resumes it.
    assert!(
        stderr1.contains(&format!(
            "interrupted: 1 upload in flight recorded in {} (16.0 MiB sent): the next run resumes it",
            scene.state_dir().display()
        )),
        "{stderr1}"
    );
    let stderr2 = second_run(&scene).await;
    assert_resume_shown(&scene, &stderr2, 4 * CHUNK);
    let read = scene.layer_bytes_read();
    eprintln!(
        "SIGTERM mid-PATCH: run 1 exit {:?}; run 2 read {read} of {LAYER} bytes from the source",
        out.status.code()
    );
    assert!(
        read <= (LAYER as u64) * 6 / 10,
        "run 2 read {read} of {LAYER} bytes from the source"
    );
    assert_eq!(
        read,
        (LAYER - 4 * CHUNK) as u64,
        "run 2 read only the last two chunks"
    );
    assert_eq!(
        patches(&scene.dst.requests()).len(),
        2,
        "the last two chunks"
    );
}

/// SIGKILL in the middle of a PATCH: distribution keeps the cut body and refuses the session
/// (404 BLOB_UPLOAD_INVALID); run 2 starts the blob over, silently, and ends verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_patch_is_started_over_silently() {
    let Some(scene) = scene().await else { return };
    fourth_patch(&scene, FaultAction::Delay(Duration::from_secs(2)));
    let mut run1 = scene.sync().spawn().unwrap();
    fourth_patch_in_flight(&scene).await;
    run1.start_kill().unwrap();
    run1.wait().await.unwrap();
    // The proxy passes on what it got of the cut PATCH; run 2 starts once that is settled.
    scene
        .dst
        .wait_until(|r| patches(r).get(3).is_some_and(|p| p.status != 0))
        .await;
    assert_eq!(scene.records().len(), 1);
    let stderr = second_run(&scene).await;
    // The recorded session was asked and refused; a new one took the layer.
    let asked: Vec<u16> = scene
        .dst
        .requests()
        .iter()
        .filter(|r| r.op == OpKind::UploadStatus)
        .map(|r| r.status)
        .collect();
    assert_eq!(
        asked,
        [404],
        "the recorded session was asked once and is gone"
    );
    for word in ["warn", "WARN", "error", "ERROR"] {
        assert!(
            !stderr.contains(word),
            "run 2 reported something:\n{stderr}"
        );
    }
    assert_eq!(
        patches(&scene.dst.requests()).len(),
        LAYER / CHUNK,
        "the layer went up again from byte 0"
    );
}

/// A second SIGTERM while the fourth PATCH is held: ferry exits at once, and says what the
/// state directory holds for the next run and what a cut PATCH costs on distribution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once_and_says_what_is_recorded() {
    use tokio::io::AsyncBufReadExt;
    let Some(scene) = scene().await else { return };
    fourth_patch(&scene, FaultAction::Hang);
    let mut run1 = scene.sync().spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(run1.stderr.take().unwrap()).lines();
    fourth_patch_in_flight(&scene).await;
    signal(&run1, "TERM");
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        let first = line.contains("signal received");
        seen.push(line);
        if first {
            break;
        }
    }
    signal(&run1, "TERM");
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    let status = tokio::time::timeout(Duration::from_secs(60), run1.wait())
        .await
        .expect("ferry exited after the second signal")
        .unwrap();
    assert_eq!(status.code(), Some(2), "{seen:#?}");
    let said = seen
        .iter()
        .find(|l| l.contains("interrupted twice"))
        .unwrap_or_else(|| panic!("{seen:#?}"));
    assert!(
        said.contains(&format!(
            "1 upload in flight recorded in {} (12.0 MiB sent): the next run resumes it",
            scene.state_dir().display()
        )) && said.contains("as distribution does, starts that blob over"),
        "{said}"
    );
    assert_eq!(scene.records().len(), 1, "the three PATCHes are recorded");
}

#[test]
fn the_binary_is_built() {
    assert!(Path::new(FERRY).exists());
}
