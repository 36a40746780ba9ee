//! `ferry copy` through the binary under every field registry of the test kit
//! (`Personality::field()`), as source and as target: one image (an index over two platforms)
//! by tag, then `--all-tags`; the same digests on the target, exit 0 (issue 31).

mod common;

use common::{code, ferry, text};

use ferry_testkit::registry::{Personality, TestRegistry};

async fn copy(args: &[&str]) -> std::process::Output {
    let mut all = vec!["--progress", "none", "copy"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--src-tls-verify=false", "--dest-tls-verify=false"]);
    ferry(&all).await
}

async fn under(name: &str, personality: Personality, as_source: bool) {
    let plain = TestRegistry::builder().start().await.unwrap();
    let odd = TestRegistry::builder()
        .personality(personality)
        .start()
        .await
        .unwrap();
    let (src, dst) = match as_source {
        true => (&odd, &plain),
        false => (&plain, &odd),
    };
    let side = if as_source { "source" } else { "target" };
    for repo in ["mirror/app", "mirror/all"] {
        dst.create_repository(repo);
    }
    let amd = src.seed_image("lib/app", "1.0-amd64", &[b"base", b"amd64"]);
    let arm = src.seed_image("lib/app", "1.0-arm64", &[b"base", b"arm64"]);
    src.seed_index("lib/app", "1.0", &[amd, arm]);
    src.seed_image("lib/app", "2.0", &[b"two"]);
    let (s, d) = (src.host(), dst.host());
    let out = copy(&[&format!("{s}/lib/app:1.0"), &format!("{d}/mirror/app:1.0")]).await;
    assert_eq!(code(&out), 0, "{name} as {side}: {}", text(&out.stderr));
    assert_eq!(
        dst.manifest("mirror/app", "1.0"),
        src.manifest("lib/app", "1.0"),
        "{name} as {side}"
    );
    let out = copy(&[
        "--all-tags",
        &format!("{s}/lib/app"),
        &format!("{d}/mirror/all"),
    ])
    .await;
    assert_eq!(code(&out), 0, "{name} as {side}: {}", text(&out.stderr));
    for tag in ["1.0", "1.0-amd64", "1.0-arm64", "2.0"] {
        assert_eq!(
            dst.manifest("mirror/all", tag),
            src.manifest("lib/app", tag),
            "{name} as {side}: {tag}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_copy_under_every_field_registry_both_sides() {
    assert!(Personality::field().len() >= 9);
    for (name, personality) in Personality::field() {
        under(name, personality, true).await;
        under(name, personality, false).await;
    }
}
