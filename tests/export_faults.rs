//! `ferry export` from a hostile or failing source (the testkit's in-process registry): wrong
//! bytes never reach the bundle under a digest, a read cut part way resumes inside the tar.

mod common;

use std::path::Path;

use common::{code, ferry, text, write_config};
use ferry_testkit::registry::{
    FaultAction, FaultRule, HostileRule, Hostility, OpKind, TestRegistry,
};

fn registry_entry(reg: &TestRegistry) -> String {
    format!(
        "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n    retry: {{ attempts: 3, base: 10ms, cap: 50ms }}\n",
        reg.host(),
        reg.url()
    )
}

fn config(dir: &Path, reg: &TestRegistry, repos: &[&str]) -> std::path::PathBuf {
    let mappings: String = repos
        .iter()
        .map(|r| {
            format!(
                "  - source: \"{}/{r}\"\n    targets: [registry.internal/mirror/{r}]\n    tags: {{ include: [\"*\"] }}\n",
                reg.host()
            )
        })
        .collect();
    write_config(dir, &registry_entry(reg), &mappings)
}

async fn export(config: &Path, out: &Path) -> std::process::Output {
    ferry(&[
        "export",
        "-c",
        config.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--progress",
        "none",
        "--json",
    ])
    .await
}

/// Every entry of the tar with its bytes.
fn entries(path: &Path) -> Vec<(String, Vec<u8>)> {
    use std::io::Read as _;
    let mut a = tar::Archive::new(std::fs::File::open(path).unwrap());
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            e.read_to_end(&mut bytes).unwrap();
            (name, bytes)
        })
        .collect()
}

fn layer(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// A source that serves other bytes for a blob, found before any of them reached the tar: that
/// image fails (exit 1), the rest is a complete bundle that never names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_served_wrong_fails_its_image_and_the_rest_is_a_bundle() {
    let reg = TestRegistry::builder().start().await.unwrap();
    reg.seed_image("src/good", "v1", &[&layer(1, 3000)]);
    reg.seed_image("src/bad", "v1", &[&layer(2, 3000)]);
    let evil = b"not the bytes the digest names".to_vec();
    reg.hostile().add(HostileRule::new(
        OpKind::BlobGet,
        Some("src/bad"),
        vec![Hostility::Body(evil.clone().into())],
    ));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &reg, &["src/good", "src/bad"]);
    let bundle = dir.path().join("bundle.tar");
    let out = export(&cfg, &bundle).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 1, "{}\n{stdout}", text(&out.stderr));
    assert!(
        stdout.contains("digest"),
        "the failure names the mismatch: {stdout}"
    );
    let list = entries(&bundle);
    assert!(
        !list.iter().any(|(_, b)| b == &evil),
        "the wrong bytes are nowhere in the bundle"
    );
    let index = &list.iter().find(|(n, _)| n == "index.json").unwrap().1;
    let index = text(index);
    assert!(
        index.contains("registry.internal/mirror/src/good:v1"),
        "{index}"
    );
    assert!(!index.contains("src/bad"), "{index}");
}

/// A big blob whose bytes turn out wrong only at its end, when the tar holds most of them: the
/// export fails (exit 2) and leaves neither the bundle nor its `.partial`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_found_wrong_inside_the_tar_fails_the_export_and_leaves_nothing() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let big = layer(3, 4 << 20);
    reg.seed_image("src/app", "v1", &[&big]);
    let mut wrong = big.clone();
    let last = wrong.len() - 1;
    wrong[last] ^= 0xff;
    reg.hostile().add(HostileRule::new(
        OpKind::BlobGet,
        Some("src/app"),
        vec![Hostility::Body(wrong.into())],
    ));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &reg, &["src/app"]);
    let bundle = dir.path().join("bundle.tar");
    let out = export(&cfg, &bundle).await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(!bundle.exists(), "no bundle");
    assert!(
        !dir.path().join("bundle.tar.partial").exists(),
        "no partial left behind"
    );
    assert!(!dir.path().join("bundle.tar.json").exists());
}

/// A blob read cut part way goes on from the byte the tar entry reached (a ranged read), and
/// the bundle holds the blob's bytes exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_read_cut_part_way_resumes_inside_the_tar() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let big = layer(4, 2 << 20);
    reg.seed_image("src/app", "v1", &[&big]);
    reg.faults().push(
        FaultRule::on(
            OpKind::BlobGet,
            FaultAction::ResetBody {
                after_bytes: 300_000,
            },
        )
        .repo("src/app")
        // Two: the first may go to the (small) config blob's read.
        .times(2),
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &reg, &["src/app"]);
    let bundle = dir.path().join("bundle.tar");
    let out = export(&cfg, &bundle).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let list = entries(&bundle);
    assert!(
        list.iter().any(|(_, b)| b == &big),
        "the layer is in the bundle, byte for byte"
    );
}
