//! Matching notices to mappings, coalescing bursts, the bound, and one more sync after a run.

use std::path::Path;

use super::*;

fn config() -> Config {
    let yaml = "version: 1\nmappings:\n  - source: src.example/team/app\n    targets: [dst.example/team/app]\n    tags: { include: [\"v*\"] }\n  - source: src.example/team/newest\n    targets: [dst.example/team/newest]\n    tags: { latest: 2 }\n  - source: src.example/all/*\n    target_group: mirror\ntarget_groups:\n  mirror: [dst.example/m]\n";
    ferry_config::parse(yaml, Path::new("watch.yaml"), &|_| None).expect("parses")
}

fn push(host: Option<&str>, repository: &str, tag: &str, digest: &str) -> Notice {
    Notice {
        host: host.map(str::to_owned),
        repository: repository.into(),
        tag: Some(tag.into()),
        digest: Some(digest.into()),
        delete: false,
    }
}

#[tokio::test(start_paused = true)]
async fn a_notice_picks_only_among_the_config_s_mappings() {
    let (intake, mut rx) = Intake::new(16);
    let now = Instant::now();
    assert_eq!(
        intake
            .offer(&[push(None, "team/app", "v1", "sha256:a")], now)
            .ignored,
        1,
        "no config yet"
    );
    intake.set_config(&config());
    let notices = [
        push(Some("src.example"), "team/app", "v1", "sha256:a"),
        push(Some("evil.example"), "team/app", "v1", "sha256:a"),
        push(None, "team/app", "latest", "sha256:a"),
        push(None, "team/other", "v1", "sha256:a"),
        push(None, "all/thing", "v1", "sha256:a"),
        push(None, "team/newest", "9", "sha256:b"),
        Notice {
            delete: true,
            ..push(None, "team/app", "v2", "sha256:c")
        },
    ];
    let out = intake.offer(&notices, now);
    assert_eq!(
        out,
        Offered {
            queued: 2,
            coalesced: 0,
            ignored: 5,
            refused: 0
        }
    );
    assert_eq!(
        rx.recv().await,
        Some(Key {
            mapping: 0,
            tag: Some("v1".into())
        })
    );
    assert_eq!(
        rx.recv().await,
        Some(Key {
            mapping: 1,
            tag: None
        }),
        "latest: the whole mapping"
    );
    let (_, narrowed) = intake
        .start(&Key {
            mapping: 0,
            tag: Some("v1".into()),
        })
        .unwrap();
    assert_eq!(narrowed.mappings.len(), 1);
    let m = &narrowed.mappings[0];
    assert_eq!(m.index, 0);
    assert!(m.tags.names_its_tags() && !m.prune);
    assert_eq!(m.tags.select(&["v1", "v2"]).selected, ["v1"]);
}

#[tokio::test(start_paused = true)]
async fn a_burst_is_one_sync_and_a_new_digest_during_it_is_one_more() {
    let (intake, mut rx) = Intake::new(16);
    intake.set_config(&config());
    let now = Instant::now();
    let v1 = |d: &str| [push(None, "team/app", "v1", d)];
    assert_eq!(intake.offer(&v1("sha256:a"), now).queued, 1);
    for _ in 0..9 {
        assert_eq!(intake.offer(&v1("sha256:a"), now).coalesced, 1);
    }
    let key = rx.recv().await.unwrap();
    assert!(rx.try_recv().is_err(), "ten events, one sync");
    intake.start(&key).unwrap();
    // The same push announced again while it syncs: covered.
    intake.offer(&v1("sha256:a"), now);
    intake.finish(&key, true, now);
    assert!(rx.try_recv().is_err());
    // A new push while it syncs: one more sync after it, however many events.
    intake.offer(&v1("sha256:a"), now);
    intake.start(&rx.recv().await.unwrap()).unwrap();
    intake.offer(&v1("sha256:b"), now);
    intake.offer(&v1("sha256:b"), now);
    assert_eq!(intake.oldest_unmirrored(), Some(now));
    intake.finish(&key, true, now);
    assert_eq!(rx.try_recv().ok(), Some(key.clone()));
    assert!(rx.try_recv().is_err());
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_refuses_and_forgets() {
    let (intake, _rx) = Intake::new(1);
    intake.set_config(&config());
    let now = Instant::now();
    assert_eq!(
        intake
            .offer(&[push(None, "team/app", "v1", "sha256:a")], now)
            .queued,
        1
    );
    assert_eq!(
        intake
            .offer(&[push(None, "team/app", "v2", "sha256:a")], now)
            .refused,
        1
    );
    // Refused, not remembered: a later event for it is offered afresh.
    assert_eq!(
        intake
            .offer(&[push(None, "team/app", "v2", "sha256:a")], now)
            .refused,
        1
    );
}

#[tokio::test(start_paused = true)]
async fn an_unclean_sync_is_queued_again_twice_then_left_to_the_poll() {
    let (intake, mut rx) = Intake::new(16);
    intake.set_config(&config());
    let now = Instant::now();
    intake.offer(&[push(None, "team/app", "v1", "sha256:a")], now);
    let key = rx.recv().await.unwrap();
    for _ in 0..LATE_TAG_REQUEUES {
        intake.start(&key).unwrap();
        assert!(intake.finish(&key, false, now), "queued once more");
        assert_eq!(rx.try_recv().ok(), Some(key.clone()));
    }
    intake.start(&key).unwrap();
    assert!(!intake.finish(&key, false, now), "the poll is the net now");
    assert!(rx.try_recv().is_err());
    assert_eq!(
        intake.oldest_unmirrored(),
        Some(now),
        "not on every target until the poll"
    );
    intake.mirrored([1]);
    assert_eq!(
        intake.oldest_unmirrored(),
        Some(now),
        "another mapping's run"
    );
    intake.mirrored([0]);
    assert_eq!(intake.oldest_unmirrored(), None);
    // A clean end resets the count.
    intake.offer(&[push(None, "team/app", "v1", "sha256:b")], now);
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    assert!(intake.finish(&key, false, now));
}

#[tokio::test(start_paused = true)]
async fn the_oldest_event_counts_until_it_is_on_every_target() {
    let (intake, mut rx) = Intake::new(16);
    intake.set_config(&config());
    let t0 = Instant::now();
    let v1 = |d: &str| [push(None, "team/app", "v1", d)];
    intake.offer(&v1("sha256:a"), t0);
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    // Syncing is not mirrored yet.
    assert_eq!(intake.oldest_unmirrored(), Some(t0));
    let t1 = t0 + std::time::Duration::from_secs(5);
    intake.offer(&v1("sha256:b"), t1);
    intake.finish(&key, true, t1);
    // The first push is on every target; the one during its sync is the oldest now.
    assert_eq!(intake.oldest_unmirrored(), Some(t1));
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    intake.finish(&key, true, t1);
    assert_eq!(intake.oldest_unmirrored(), None);
}

fn pruning_config() -> Config {
    let yaml = "version: 1\nmappings:\n  - source: src.example/team/app\n    targets: [dst.example/team/app]\n    tags: { include: [\"v*\"] }\n    prune: true\n  - source: src.example/team/app\n    targets: [dst.example/keep/app]\n";
    ferry_config::parse(yaml, Path::new("watch.yaml"), &|_| None).expect("parses")
}

fn delete(tag: &str) -> Notice {
    Notice {
        delete: true,
        ..push(None, "team/app", tag, "sha256:gone")
    }
}

#[tokio::test(start_paused = true)]
async fn a_delete_prunes_that_tag_in_a_pruning_mapping_only() {
    let (intake, mut rx) = Intake::new(16);
    intake.set_config(&pruning_config());
    let now = Instant::now();
    let out = intake.offer(&[delete("v1"), delete("latest")], now);
    // Mapping 0 prunes and selects v1; mapping 1 does not prune; `latest` is not selected.
    assert_eq!((out.queued, out.ignored), (1, 1), "{out:?}");
    let key = rx.recv().await.unwrap();
    assert_eq!(key.mapping, 0);
    assert!(rx.try_recv().is_err());
    let (_, narrowed) = intake.start(&key).unwrap();
    let m = &narrowed.mappings[0];
    assert!(m.prune, "the sync a delete asked for prunes");
    assert_eq!(
        m.tags.select(&["v1", "v2"]).selected,
        ["v1"],
        "that tag only"
    );
    intake.finish(&key, true, now);
    // A push of the same tag syncs it without pruning (in both mappings).
    intake.offer(&[push(None, "team/app", "v1", "sha256:new")], now);
    let key = rx.recv().await.unwrap();
    assert_eq!(rx.recv().await.unwrap().mapping, 1);
    let (_, narrowed) = intake.start(&key).unwrap();
    assert!(!narrowed.mappings[0].prune);
    // A delete while that sync runs is never covered by it: one more sync, pruning.
    intake.offer(&[delete("v1")], now);
    intake.finish(&key, true, now);
    let key = rx.recv().await.unwrap();
    let (_, narrowed) = intake.start(&key).unwrap();
    assert!(narrowed.mappings[0].prune);
}
