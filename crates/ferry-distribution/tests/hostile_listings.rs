//! A hostile source's listings against the test registry's hostile knobs: a walk ends at one
//! deadline and one byte budget, and registry text enters an error cut and escaped.

mod common;

use std::time::Duration;

use bytes::Bytes;
use ferry_distribution::Digest;
use ferry_distribution::client::RegistryClient;
use ferry_distribution::error::ErrorKind;
use ferry_distribution::ops::{MAX_LISTING_BYTES, MAX_REFERRERS_BYTES};
use ferry_testkit::registry::{HostileRule, Hostility, OpKind, TestRegistry};

use common::{fast_policy, options_at};

/// A registry holding `tags` tags of `repo`, listed one per page.
async fn paged(repo: &str, tags: usize) -> TestRegistry {
    let reg = TestRegistry::builder().page_size(1).start().await.unwrap();
    for i in 0..tags {
        reg.seed_image(repo, &format!("v{i}"), &[b"layer"]);
    }
    reg
}

fn client(reg: &TestRegistry, deadline: Duration) -> RegistryClient {
    let mut policy = fast_policy(3);
    policy.deadline = deadline;
    RegistryClient::new(options_at(&reg.url(), policy)).unwrap()
}

/// A page `{"tags":["BBB…"]}` of about `bytes` bytes: one name, so no count bound is reached.
fn page_of(field: &str, bytes: usize) -> Bytes {
    Bytes::from(format!("{{\"{field}\":[\"{}\"]}}", "B".repeat(bytes)))
}

#[tokio::test(start_paused = true)]
async fn a_trickled_listing_ends_at_one_deadline_for_the_whole_walk() {
    // Six pages, each trickled over 2 s: every page fits a 3 s deadline, the walk does not.
    let reg = paged("slow/app", 6).await;
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("slow/app"),
        vec![Hostility::Trickle {
            pieces: 4,
            every: Duration::from_millis(500),
        }],
    ));
    let client = client(&reg, Duration::from_secs(3));
    let start = tokio::time::Instant::now();
    let err = client.list_tags("slow/app").await.unwrap_err();
    let took = start.elapsed();
    assert_eq!(err.kind, ErrorKind::DeadlineExceeded, "{err}");
    assert_eq!(err.repository.as_deref(), Some("slow/app"));
    assert!(
        took <= Duration::from_secs(3) + Duration::from_millis(100),
        "the walk outlived its deadline: {took:?}"
    );
    assert!(took >= Duration::from_secs(3), "ended early: {took:?}");
    assert_eq!(
        reg.stats().op(OpKind::TagList),
        2,
        "page 1 read, page 2 cut"
    );
}

#[tokio::test(start_paused = true)]
async fn a_listing_within_its_deadline_still_reads_every_page() {
    let reg = paged("slow/app", 6).await;
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("slow/app"),
        vec![Hostility::Trickle {
            pieces: 4,
            every: Duration::from_millis(500),
        }],
    ));
    let tags = client(&reg, Duration::from_secs(13))
        .list_tags("slow/app")
        .await
        .unwrap();
    assert_eq!(tags.len(), 6);
}

#[tokio::test(start_paused = true)]
async fn a_tag_list_over_its_byte_budget_is_refused_naming_the_repository() {
    // Four pages of 12 MiB each: every page fits the page bound, the third breaks the listing's.
    let reg = paged("big/app", 4).await;
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("big/app"),
        vec![Hostility::Body(page_of("tags", 12 << 20))],
    ));
    let err = client(&reg, Duration::from_secs(600))
        .list_tags("big/app")
        .await
        .unwrap_err();
    assert_eq!(
        err.kind,
        ErrorKind::TooLarge {
            what: "tag list (all pages)",
            limit: MAX_LISTING_BYTES
        },
        "{err}"
    );
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!("{}/big/app: tag list", reg.host())),
        "{shown}"
    );
    assert_eq!(
        reg.stats().op(OpKind::TagList),
        3,
        "no page after the budget"
    );
}

#[tokio::test(start_paused = true)]
async fn a_catalog_over_its_byte_budget_is_refused() {
    let reg = TestRegistry::builder().page_size(1).start().await.unwrap();
    for i in 0..4 {
        reg.seed_image(&format!("repo-{i}"), "v1", &[b"layer"]);
    }
    reg.hostile().add(HostileRule {
        op: Some(OpKind::Catalog),
        repo: None,
        answer: vec![Hostility::Body(page_of("repositories", 12 << 20))],
        times: None,
        skip: 0,
    });
    let err = client(&reg, Duration::from_secs(600))
        .list_repositories(1000)
        .await
        .unwrap_err();
    assert_eq!(
        err.kind,
        ErrorKind::TooLarge {
            what: "catalog (all pages)",
            limit: MAX_LISTING_BYTES
        },
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_referrers_listing_over_its_byte_budget_is_refused() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let digest = reg.seed_image("sig/app", "v1", &[b"layer"]);
    let padded = Bytes::from(format!(
        "{{\"manifests\":[],\"pad\":\"{}\"}}",
        "P".repeat(3 << 20)
    ));
    // Every answer is 3 MiB, and each names a further page than the one before.
    for page in 0..4 {
        reg.hostile().add(
            HostileRule::new(
                OpKind::Referrers,
                Some("sig/app"),
                vec![
                    Hostility::Body(padded.clone()),
                    Hostility::Header(
                        "link",
                        format!("</v2/sig/app/referrers/{digest}?page={page}>; rel=\"next\"")
                            .into_bytes(),
                    ),
                ],
            )
            .after(page)
            .times(1),
        );
    }
    let digest = Digest::parse(&digest).unwrap();
    let err = client(&reg, Duration::from_secs(600))
        .list_referrers("sig/app", &digest)
        .await
        .unwrap_err();
    assert_eq!(
        err.kind,
        ErrorKind::TooLarge {
            what: "referrers list (all pages)",
            limit: MAX_REFERRERS_BYTES
        },
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_page_that_is_not_a_list_puts_no_megabyte_into_the_error() {
    let reg = paged("odd/app", 1).await;
    let body = format!("{{\"tags\":\"{}\\nFORGED line\"}}", "B".repeat(1 << 20));
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("odd/app"),
        vec![Hostility::Body(Bytes::from(body))],
    ));
    let err = client(&reg, Duration::from_secs(600))
        .list_tags("odd/app")
        .await
        .unwrap_err();
    assert!(matches!(err.kind, ErrorKind::InvalidResponse(_)), "{err:?}");
    let shown = err.to_string();
    assert!(shown.len() < 1024, "{} bytes: {shown:.200}", shown.len());
    assert!(!shown.contains('\n'), "{shown}");
}

#[tokio::test(start_paused = true)]
async fn a_long_error_code_with_a_newline_is_cut_and_escaped() {
    let reg = paged("code/app", 1).await;
    let code = format!("{}\nFORGED  synced everything", "C".repeat(15 * 1024));
    reg.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("code/app"),
        vec![Hostility::OciError {
            status: 400,
            code,
            message: "bad\r\nFORGED too".into(),
        }],
    ));
    let err = client(&reg, Duration::from_secs(600))
        .list_tags("code/app")
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(400), "{err}");
    let shown = err.to_string();
    assert!(shown.len() < 1024, "{} bytes: {shown:.200}", shown.len());
    assert!(
        !shown.contains('\n') && !shown.contains('\r'),
        "a line of its own: {shown}"
    );
    assert!(shown.contains("bad\\r\\nFORGED too"), "{shown}");
}
