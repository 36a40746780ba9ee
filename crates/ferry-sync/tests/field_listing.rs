//! The engine end to end under the field registries' listing personalities (issue 31): Quay's
//! opaque 50-tag pages, Artifactory's digest entries and Links without the repository key,
//! Nexus's Link-less cut pages and Links with a wrong prefix, GHCR's, ACR's and Harbor's
//! catalogs, Docker Hub's plain-text 429, and malformed listings. Each side where it applies:
//! the source's tag list, a pruning target's, and the catalog of a whole-registry mapping.

mod common;

use common::run_sync;
use ferry_config::Config;
use ferry_distribution::ops::{ListingSnapshot, Paging};
use ferry_sync::report::{SyncReport, Verdict};
use ferry_testkit::registry::{
    FaultAction, FaultRule, HostileRule, Hostility, MalformedListing, OpKind, Personality,
    RetryAfter, TestRegistry,
};

async fn start(personality: Personality, page_size: Option<usize>) -> TestRegistry {
    let mut b = TestRegistry::builder().personality(personality);
    if let Some(n) = page_size {
        b = b.page_size(n);
    }
    b.start().await.expect("test registry starts")
}

fn config(regs: &[&TestRegistry], mappings: &str) -> Config {
    common::engine_config(regs).mappings(mappings).build()
}

fn listing(report: &SyncReport, reg: &TestRegistry) -> ListingSnapshot {
    report
        .registries
        .iter()
        .find(|r| r.registry == reg.host())
        .map(|r| r.listing)
        .expect("the registry is in the report")
}

fn retries(report: &SyncReport) -> u64 {
    report.registries.iter().map(|r| r.stats.retries).sum()
}

/// `count` tags `t-000`… on `repo`, every one its own image.
fn seed_tags(reg: &TestRegistry, repo: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let tag = format!("t-{i:03}");
            reg.seed_image(repo, &tag, &[tag.as_bytes()]);
            tag
        })
        .collect()
}

/// Every tag of `tags` is on `dst`'s `to` with `src`'s `from` digest and bytes.
fn assert_mirrored(src: &TestRegistry, from: &str, dst: &TestRegistry, to: &str, tags: &[String]) {
    for tag in tags {
        let copied = dst.manifest(to, tag);
        assert!(copied.is_some(), "{to}:{tag} missing");
        assert_eq!(copied, src.manifest(from, tag), "{to}:{tag}");
    }
}

fn all_tags(src: &TestRegistry, from: &str, dst: &TestRegistry, to: &str, extra: &str) -> String {
    format!(
        "  - source: \"{}/{from}\"\n    targets: [\"{}/{to}\"]\n    tags: {{ include: [\"*\"] }}\n{extra}",
        src.host(),
        dst.host()
    )
}

#[tokio::test(start_paused = true)]
async fn quay_opaque_pages_of_50_are_followed_as_written_on_the_source_and_a_pruning_target() {
    let src = start(Personality::quay(), None).await;
    let dst = start(Personality::quay(), None).await;
    let tags = seed_tags(&src, "lib/app", 120);
    // The target holds 60 stale tags besides: its listing spans two pages too.
    for i in 0..60 {
        dst.seed_image("mirror/app", &format!("old-{i:02}"), &[b"old"]);
    }
    let cfg = config(
        &[&src, &dst],
        &all_tags(&src, "lib/app", &dst, "mirror/app", "    prune: true\n"),
    );
    let run = run_sync(&cfg).await;
    let text = run.report.render_text();
    assert_eq!(run.report.verdict(), Verdict::Clean, "{text}");
    assert_mirrored(&src, "lib/app", &dst, "mirror/app", &tags);
    // 120 tags at 50 a page: three pages, each asked once; no `last=` sent to Quay.
    let pages: Vec<_> = src
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::TagList)
        .collect();
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert!(
        pages
            .iter()
            .all(|r| !r.query.as_deref().unwrap_or("").contains("last="))
    );
    assert_eq!(retries(&run.report), 0, "{text}");
    let l = listing(&run.report, &src);
    assert_eq!((l.paging, l.page_size), (Paging::Opaque, Some(50)), "{l:?}");
    assert!(
        text.contains("listing pages of 50 linked by opaque tokens"),
        "{text}"
    );
    // The target's two pages were read whole: every stale tag pruned, none of the copied.
    let pruned = run.pruned.expect("the mapping prunes");
    assert_eq!(pruned.deleted, 60, "{pruned:?}");
    assert_eq!(dst.tags("mirror/app"), tags);
}

#[tokio::test(start_paused = true)]
async fn a_hostile_opaque_token_goes_back_exactly_as_the_registry_wrote_it() {
    let hostile = Personality {
        tag_token_hostile: true,
        ..Personality::quay()
    };
    let src = start(hostile, None).await;
    let dst = common::started().await;
    let tags = seed_tags(&src, "lib/app", 60);
    let cfg = config(
        &[&src, &dst],
        &all_tags(&src, "lib/app", &dst, "mirror/app", ""),
    );
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    assert_mirrored(&src, "lib/app", &dst, "mirror/app", &tags);
    let second = src
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::TagList)
        .nth(1)
        .expect("a second page");
    // The path stays the listing's; `/`, `..` and the encoded bytes stay in the query as sent.
    assert_eq!(second.path, "/v2/lib/app/tags/list");
    assert_eq!(
        second.query.as_deref(),
        Some("next_page=a/../..%2f%2F..%01%7f%0d%0a~50%3D&n=50")
    );
}

#[tokio::test(start_paused = true)]
async fn artifactory_digest_entries_are_left_out_quietly_and_its_keyless_link_is_repaired() {
    let src = start(Personality::artifactory(), Some(3)).await;
    let dst = start(Personality::artifactory(), Some(3)).await;
    let repo = "docker/lib/app";
    let amd = src.seed_image(repo, "amd", &[b"base", b"amd64"]);
    let arm = src.seed_image(repo, "arm", &[b"base", b"arm64"]);
    src.seed_index(repo, "1.0", &[amd, arm]);
    src.untag(repo, "amd");
    src.untag(repo, "arm");
    let mut tags = vec!["1.0".to_owned()];
    tags.extend(seed_tags(&src, repo, 6));
    // What the Link without the repository key names: another repository, never to be read.
    src.seed_image("lib/app", "intruder", &[b"not this repository"]);
    // A pruning target holding an index whose children it lists as digests too, and stale
    // tags: seven names, three pages, two Links without the repository key.
    let old_amd = dst.seed_image("mirror/app", "old-amd", &[b"old", b"amd64"]);
    let old_arm = dst.seed_image("mirror/app", "old-arm", &[b"old", b"arm64"]);
    dst.seed_index("mirror/app", "old-index", &[old_amd, old_arm]);
    dst.untag("mirror/app", "old-amd");
    dst.untag("mirror/app", "old-arm");
    for i in 0..4 {
        dst.seed_image("mirror/app", &format!("stale-{i}"), &[b"stale"]);
    }
    let cfg = config(
        &[&src, &dst],
        &all_tags(&src, repo, &dst, "mirror/app", "    prune: true\n"),
    );
    let run = run_sync(&cfg).await;
    let text = run.report.render_text();
    assert_eq!(run.report.verdict(), Verdict::Clean, "{text}");
    assert!(run.report.rejected_names.is_empty(), "{text}");
    assert_mirrored(&src, repo, &dst, "mirror/app", &tags);
    assert!(dst.manifest("mirror/app", "intruder").is_none());
    assert!(
        src.requests()
            .iter()
            .all(|r| r.repo.as_deref() != Some("lib/app"))
    );
    let l = listing(&run.report, &src);
    assert_eq!(l.digest_entries_skipped, 2, "{l:?}");
    assert!(l.links_repaired >= 2, "{l:?}");
    assert_eq!(retries(&run.report), 0, "{text}");
    assert!(
        text.contains("2 digest entries in tag lists left out"),
        "{text}"
    );
    // The target's listing was read whole through its repaired Links: the stale tag is gone,
    // and no digest entry was taken for a tag to delete.
    let pruned = run.pruned.expect("the mapping prunes");
    assert_eq!(pruned.deleted, 5, "{pruned:?}");
    assert_eq!(pruned.failed, 0, "{pruned:?}");
    let l = listing(&run.report, &dst);
    assert_eq!(
        (l.links_repaired, l.digest_entries_skipped),
        (2, 2),
        "{l:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn nexus_pages_cut_without_a_link_are_read_on_with_last_once_the_page_size_is_known() {
    // A group repository: tag pages cut at 4 with no Link. The catalog pages with a Link, so
    // the whole-registry mapping learns the page size before it lists tags.
    let src = start(Personality::nexus(), Some(4)).await;
    let dst = common::started().await;
    let tags = seed_tags(&src, "team/app", 10);
    for repo in ["team/b", "team/c", "team/d", "team/e"] {
        src.seed_image(repo, "v1", &[repo.as_bytes()]);
    }
    let mapping = format!(
        "  - source: \"{}/team/**\"\n    targets: [\"{}/mirror\"]\n",
        src.host(),
        dst.host()
    );
    let report = run_sync(&config(&[&src, &dst], &mapping)).await.report;
    let text = report.render_text();
    assert_eq!(report.verdict(), Verdict::Clean, "{text}");
    assert_mirrored(&src, "team/app", &dst, "mirror/app", &tags);
    // 4 + 4 + 2: the first page, then two asked with `last=`; the short one ends it.
    let app_pages = src
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::TagList && r.repo.as_deref() == Some("team/app"))
        .count();
    assert_eq!(app_pages, 3, "{text}");
    assert_eq!(retries(&report), 0, "{text}");
    let l = listing(&report, &src);
    assert_eq!(
        (l.paging, l.page_size),
        (Paging::CutWithoutLink, Some(4)),
        "{l:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_nexus_connector_link_with_the_internal_prefix_is_followed_on_the_listing_path() {
    let src = start(Personality::nexus_connector(), Some(3)).await;
    let dst = common::started().await;
    let tags = seed_tags(&src, "lib/app", 8);
    let cfg = config(
        &[&src, &dst],
        &all_tags(&src, "lib/app", &dst, "mirror/app", ""),
    );
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    assert_mirrored(&src, "lib/app", &dst, "mirror/app", &tags);
    assert!(
        src.requests()
            .iter()
            .all(|r| !r.path.starts_with("/repository/"))
    );
    assert_eq!(listing(&report, &src).links_repaired, 2);
    assert_eq!(retries(&report), 0);
}

/// A whole-registry mapping (`team/**`) and an explicit one from the same registry.
fn glob_and_explicit(src: &TestRegistry, dst: &TestRegistry) -> String {
    format!(
        "  - source: \"{s}/team/**\"\n    targets: [\"{d}/mirror\"]\n  - source: \"{s}/solo/app\"\n    targets: [\"{d}/solo/app\"]\n    tags: {{ include: [\"*\"] }}\n",
        s = src.host(),
        d = dst.host()
    )
}

#[tokio::test(start_paused = true)]
async fn ghcr_and_harbor_catalogs_fail_only_the_whole_registry_mapping_saying_why() {
    for (name, personality, says) in [
        ("ghcr", Personality::ghcr(), "serves no catalog"),
        ("harbor", Personality::harbor(), "system administrator"),
    ] {
        let src = start(personality, None).await;
        let dst = common::started().await;
        src.seed_image("team/app", "v1", &[b"team"]);
        src.seed_image("solo/app", "v1", &[b"solo"]);
        let report = run_sync(&config(&[&src, &dst], &glob_and_explicit(&src, &dst)))
            .await
            .report;
        let text = report.render_text();
        assert_eq!(report.totals.mappings_failed, 1, "{name}: {text}");
        assert!(text.contains(says), "{name}: {text}");
        assert_eq!(report.totals.images_synced, 1, "{name}: {text}");
        assert!(dst.manifest("solo/app", "v1").is_some(), "{name}");
        // The refusal is an answer, not a fault: asked once.
        assert_eq!(src.stats().op(OpKind::Catalog), 1, "{name}");
        assert_eq!(retries(&report), 0, "{name}: {text}");
    }
}

#[tokio::test(start_paused = true)]
async fn acr_catalog_pages_of_100_are_all_read() {
    let src = start(Personality::acr(), None).await;
    let dst = common::started().await;
    for i in 0..103 {
        src.seed_blob(&format!("other/r{i:03}"), b"x");
    }
    src.seed_image("team/app", "v1", &[b"team"]);
    src.seed_image("zz/app", "v1", &[b"last page"]);
    let mapping = format!(
        "  - source: \"{}/**\"\n    targets: [\"{}/mirror\"]\n    tags: {{ include: [\"v1\"] }}\n",
        src.host(),
        dst.host()
    );
    let report = run_sync(&config(&[&src, &dst], &mapping)).await.report;
    let text = report.render_text();
    // 105 repositories at 100 a page: two pages; both images found, one on each page.
    assert_eq!(src.stats().op(OpKind::Catalog), 2, "{text}");
    assert!(dst.manifest("mirror/team/app", "v1").is_some(), "{text}");
    assert!(dst.manifest("mirror/zz/app", "v1").is_some(), "{text}");
    assert_eq!(listing(&report, &src).page_size, Some(100));
    assert_eq!(retries(&report), 0, "{text}");
}

#[tokio::test(start_paused = true)]
async fn docker_hub_plain_text_429_is_a_throttle_whose_retry_after_is_honoured() {
    let src = start(Personality::docker_hub(), None).await;
    let dst = common::started().await;
    let tags = seed_tags(&src, "library/app", 3);
    src.faults().push(
        FaultRule::on(
            OpKind::TagList,
            FaultAction::Status {
                code: 429,
                retry_after: Some(RetryAfter::Seconds(7)),
            },
        )
        .times(1),
    );
    let cfg = config(
        &[&src, &dst],
        &all_tags(&src, "library/app", &dst, "mirror/app", ""),
    );
    let report = run_sync(&cfg).await.report;
    let text = report.render_text();
    assert_eq!(report.verdict(), Verdict::Clean, "{text}");
    assert_mirrored(&src, "library/app", &dst, "mirror/app", &tags);
    let lists: Vec<_> = src
        .requests()
        .into_iter()
        .filter(|r| r.op == OpKind::TagList)
        .collect();
    // The throttled page, the page, and the `last=` probe proving it whole (issue 39).
    assert_eq!(lists.len(), 3, "{lists:?}");
    assert_eq!(lists[0].status, 429);
    assert!(
        lists[1].at - lists[0].at >= std::time::Duration::from_secs(7),
        "Retry-After honoured"
    );
    let throttled: u64 = report.registries.iter().map(|r| r.stats.throttled).sum();
    assert_eq!(throttled, 1, "{text}");
}

#[tokio::test(start_paused = true)]
async fn entries_that_are_not_strings_and_empty_links_are_skipped_and_the_rest_is_mirrored() {
    for (name, malformed, page) in [
        ("not a string", MalformedListing::EntryNotAString, Some(2)),
        ("empty Link", MalformedListing::EmptyLink, None),
    ] {
        let personality = Personality {
            tag_list_malformed: Some(malformed),
            ..Personality::default()
        };
        let src = start(personality, page).await;
        let dst = common::started().await;
        let tags = seed_tags(&src, "lib/app", 5);
        let cfg = config(
            &[&src, &dst],
            &all_tags(&src, "lib/app", &dst, "mirror/app", ""),
        );
        let report = run_sync(&cfg).await.report;
        let text = report.render_text();
        assert_eq!(report.verdict(), Verdict::Clean, "{name}: {text}");
        assert_mirrored(&src, "lib/app", &dst, "mirror/app", &tags);
        let skipped = listing(&report, &src).malformed_entries_skipped;
        match malformed {
            // Three odd entries on each of three pages.
            MalformedListing::EntryNotAString => assert_eq!(skipped, 9, "{name}"),
            _ => assert_eq!(skipped, 0, "{name}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_listing_fails_only_the_mapping_that_needs_it() {
    for (name, malformed, says) in [
        ("html", MalformedListing::HtmlPage, "not JSON"),
        (
            "nowhere",
            MalformedListing::LinkToNowhere,
            "pointed nowhere",
        ),
        (
            "off origin",
            MalformedListing::LinkOffOrigin,
            "another origin",
        ),
        ("endless", MalformedListing::EndlessTokens, "loops"),
    ] {
        let personality = Personality {
            tag_list_malformed: Some(malformed),
            ..Personality::default()
        };
        let src = start(personality, Some(2)).await;
        let dst = common::started().await;
        seed_tags(&src, "lib/app", 5);
        // The glob needs the listing; the exact tag does not.
        let mappings = format!(
            "{}  - source: \"{}/lib/app\"\n    targets: [\"{}/exact/app\"]\n    tags: {{ exact: [\"t-001\"] }}\n",
            all_tags(&src, "lib/app", &dst, "mirror/app", ""),
            src.host(),
            dst.host()
        );
        let report = run_sync(&config(&[&src, &dst], &mappings)).await.report;
        let text = report.render_text();
        assert_eq!(report.totals.mappings_failed, 1, "{name}: {text}");
        assert!(text.contains(says), "{name}: {text}");
        assert!(text.contains("lib/app"), "{name}: {text}");
        assert!(
            dst.manifest("exact/app", "t-001").is_some(),
            "{name}: {text}"
        );
        assert!(dst.tags("mirror/app").is_empty(), "{name}");
        // A decided answer is not retried; the endless pages stop after a few.
        assert_eq!(retries(&report), 0, "{name}: {text}");
        assert!(src.stats().op(OpKind::TagList) <= 6, "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_target_listing_linking_nowhere_is_never_read_as_an_empty_repository() {
    let personality = Personality {
        tag_list_malformed: Some(MalformedListing::LinkToNowhere),
        ..Personality::default()
    };
    let src = common::started().await;
    let dst = start(personality, Some(2)).await;
    let tags = seed_tags(&src, "lib/app", 3);
    for i in 0..5 {
        dst.seed_image("mirror/app", &format!("old-{i}"), &[b"old"]);
    }
    // Pruning needs the target's whole listing: the mapping fails, nothing is deleted.
    let cfg = config(
        &[&src, &dst],
        &all_tags(&src, "lib/app", &dst, "mirror/app", "    prune: true\n"),
    );
    let run = run_sync(&cfg).await;
    let text = run.report.render_text();
    assert_eq!(run.report.totals.mappings_failed, 1, "{text}");
    assert!(text.contains("pointed nowhere"), "{text}");
    assert_eq!(dst.tags("mirror/app").len(), 5);
    assert!(run.pruned.is_none_or(|p| p.deleted == 0));
    // Without pruning the listing is not needed: each image is compared by a HEAD instead.
    let cfg = config(
        &[&src, &dst],
        &all_tags(&src, "lib/app", &dst, "mirror/app", ""),
    );
    let report = run_sync(&cfg).await.report;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    assert_mirrored(&src, "lib/app", &dst, "mirror/app", &tags);
}

#[tokio::test(start_paused = true)]
async fn a_page_of_10000_tags_is_read_in_one_request_and_proven_whole_by_one_probe() {
    let src = common::started().await;
    let dst = common::started().await;
    for i in 0..10_000 {
        src.seed_image("lib/app", &format!("t-{i:05}"), &[b"same"]);
    }
    src.seed_image("lib/app", "pick", &[b"the one"]);
    let mapping = format!(
        "  - source: \"{}/lib/app\"\n    targets: [\"{}/mirror/app\"]\n    tags: {{ include: [\"pick\"] }}\n",
        src.host(),
        dst.host()
    );
    let report = run_sync(&config(&[&src, &dst], &mapping)).await.report;
    assert_eq!(report.verdict(), Verdict::Clean, "{}", report.render_text());
    // One page, then `n=10001&last=pick`: nothing after it (issue 39).
    assert_eq!(src.stats().op(OpKind::TagList), 2);
    assert!(dst.manifest("mirror/app", "pick").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_link_that_is_not_text_fails_the_listing_instead_of_ending_it() {
    let src = start(Personality::default(), Some(2)).await;
    let dst = common::started().await;
    seed_tags(&src, "lib/app", 4);
    // `n=0` and a byte outside visible ASCII: no page can be read from it.
    src.hostile().add(HostileRule::new(
        OpKind::TagList,
        Some("lib/app"),
        vec![Hostility::Header(
            "link",
            b"</v2/lib/app/tags/list?n=0&last=\xff>; rel=\"next\"".to_vec(),
        )],
    ));
    let cfg = config(
        &[&src, &dst],
        &all_tags(&src, "lib/app", &dst, "mirror/app", ""),
    );
    let report = run_sync(&cfg).await.report;
    let text = report.render_text();
    assert_eq!(report.totals.mappings_failed, 1, "{text}");
    assert!(text.contains("Link header is not text"), "{text}");
    assert!(dst.tags("mirror/app").is_empty(), "{text}");
    assert_eq!(src.stats().op(OpKind::TagList), 1);
}
