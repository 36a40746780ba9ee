//! Matching notices to mappings, coalescing bursts, the bound, and one more sync after a run.

use std::path::Path;

use super::*;
use ferry_store::event_journal::EventJournal;

fn config() -> Config {
    let yaml = "version: 1\nmappings:\n  - source: src.example/team/app\n    targets: [dst.example/team/app]\n    tags: { include: [\"v*\"] }\n  - source: src.example/team/newest\n    targets: [dst.example/team/newest]\n    tags: { latest: 2 }\n  - source: src.example/all/*\n    target_group: mirror\ntarget_groups:\n  mirror: [dst.example/m]\n";
    ferry_config::parse(yaml, Path::new("watch.yaml"), &|_| None).expect("parses")
}

/// A well-formed sha256 digest of one repeated hex character.
fn dg(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
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
            .offer(&[push(None, "team/app", "v1", &dg('a'))], now)
            .await
            .ignored,
        1,
        "no config yet"
    );
    intake.set_config(&config());
    let notices = [
        push(Some("src.example"), "team/app", "v1", &dg('a')),
        push(Some("evil.example"), "team/app", "v1", &dg('a')),
        push(None, "team/app", "latest", &dg('a')),
        push(None, "team/other", "v1", &dg('a')),
        push(None, "all/thing", "v1", &dg('a')),
        push(None, "team/newest", "9", &dg('b')),
        Notice {
            delete: true,
            ..push(None, "team/app", "v2", &dg('c'))
        },
    ];
    let out = intake.offer(&notices, now).await;
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
    assert_eq!(intake.offer(&v1(&dg('a')), now).await.queued, 1);
    for _ in 0..9 {
        assert_eq!(intake.offer(&v1(&dg('a')), now).await.coalesced, 1);
    }
    let key = rx.recv().await.unwrap();
    assert!(rx.try_recv().is_err(), "ten events, one sync");
    intake.start(&key).unwrap();
    // The same push announced again while it syncs: covered.
    intake.offer(&v1(&dg('a')), now).await;
    intake.finish(&key, true, now).await;
    assert!(rx.try_recv().is_err());
    // A redelivery after it ended clean is a duplicate; a new push queues a sync, and a new
    // push while that one syncs is one more sync after it, however many events.
    assert_eq!(intake.offer(&v1(&dg('a')), now).await.coalesced, 1);
    assert!(rx.try_recv().is_err(), "a redelivery after the sync");
    intake.offer(&v1(&dg('c')), now).await;
    intake.start(&rx.recv().await.unwrap()).unwrap();
    intake.offer(&v1(&dg('b')), now).await;
    intake.offer(&v1(&dg('b')), now).await;
    assert_eq!(intake.oldest_unmirrored(), Some(now));
    intake.finish(&key, true, now).await;
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
            .offer(&[push(None, "team/app", "v1", &dg('a'))], now)
            .await
            .queued,
        1
    );
    assert_eq!(
        intake
            .offer(&[push(None, "team/app", "v2", &dg('a'))], now)
            .await
            .refused,
        1
    );
    // Refused, not remembered: a later event for it is offered afresh.
    assert_eq!(
        intake
            .offer(&[push(None, "team/app", "v2", &dg('a'))], now)
            .await
            .refused,
        1
    );
}

#[tokio::test(start_paused = true)]
async fn an_unclean_sync_is_queued_again_twice_then_left_to_the_poll() {
    let (intake, mut rx) = Intake::new(16);
    intake.set_config(&config());
    let now = Instant::now();
    intake
        .offer(&[push(None, "team/app", "v1", &dg('a'))], now)
        .await;
    let key = rx.recv().await.unwrap();
    for _ in 0..LATE_TAG_REQUEUES {
        intake.start(&key).unwrap();
        assert!(intake.finish(&key, false, now).await, "queued once more");
        assert_eq!(rx.try_recv().ok(), Some(key.clone()));
    }
    intake.start(&key).unwrap();
    assert!(
        !intake.finish(&key, false, now).await,
        "the poll is the net now"
    );
    assert!(rx.try_recv().is_err());
    assert_eq!(
        intake.oldest_unmirrored(),
        Some(now),
        "not on every target until the poll"
    );
    intake.mirrored([1]).await;
    assert_eq!(
        intake.oldest_unmirrored(),
        Some(now),
        "another mapping's run"
    );
    intake.mirrored([0]).await;
    assert_eq!(intake.oldest_unmirrored(), None);
    // A clean end resets the count.
    intake
        .offer(&[push(None, "team/app", "v1", &dg('b'))], now)
        .await;
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    assert!(intake.finish(&key, false, now).await);
}

#[tokio::test(start_paused = true)]
async fn the_oldest_event_counts_until_it_is_on_every_target() {
    let (intake, mut rx) = Intake::new(16);
    intake.set_config(&config());
    let t0 = Instant::now();
    let v1 = |d: &str| [push(None, "team/app", "v1", d)];
    intake.offer(&v1(&dg('a')), t0).await;
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    // Syncing is not mirrored yet.
    assert_eq!(intake.oldest_unmirrored(), Some(t0));
    let t1 = t0 + std::time::Duration::from_secs(5);
    intake.offer(&v1(&dg('b')), t1).await;
    intake.finish(&key, true, t1).await;
    // The first push is on every target; the one during its sync is the oldest now.
    assert_eq!(intake.oldest_unmirrored(), Some(t1));
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    intake.finish(&key, true, t1).await;
    assert_eq!(intake.oldest_unmirrored(), None);
}

fn pruning_config() -> Config {
    let yaml = "version: 1\nmappings:\n  - source: src.example/team/app\n    targets: [dst.example/team/app]\n    tags: { include: [\"v*\"] }\n    prune: true\n  - source: src.example/team/app\n    targets: [dst.example/keep/app]\n";
    ferry_config::parse(yaml, Path::new("watch.yaml"), &|_| None).expect("parses")
}

fn delete(tag: &str) -> Notice {
    Notice {
        delete: true,
        ..push(None, "team/app", tag, &dg('d'))
    }
}

#[tokio::test(start_paused = true)]
async fn a_delete_prunes_that_tag_in_a_pruning_mapping_only() {
    let (intake, mut rx) = Intake::new(16);
    intake.set_config(&pruning_config());
    let now = Instant::now();
    let out = intake.offer(&[delete("v1"), delete("latest")], now).await;
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
    intake.finish(&key, true, now).await;
    // A push of the same tag syncs it without pruning (in both mappings).
    intake
        .offer(&[push(None, "team/app", "v1", &dg('e'))], now)
        .await;
    let key = rx.recv().await.unwrap();
    assert_eq!(rx.recv().await.unwrap().mapping, 1);
    let (_, narrowed) = intake.start(&key).unwrap();
    assert!(!narrowed.mappings[0].prune);
    // A delete while that sync runs is never covered by it: one more sync, pruning.
    intake.offer(&[delete("v1")], now).await;
    intake.finish(&key, true, now).await;
    let key = rx.recv().await.unwrap();
    let (_, narrowed) = intake.start(&key).unwrap();
    assert!(narrowed.mappings[0].prune);
}

/// An intake journaling into `state` (a fresh temporary directory per test).
fn journaled(state: &Path, queue: usize) -> (Arc<Intake>, mpsc::Receiver<Key>) {
    let journal = EventJournal::open(state, queue).unwrap();
    let (intake, rx) = Intake::with(queue, Some(journal), Some(Arc::new(WatchMetrics::new())));
    intake.set_config(&config());
    (intake, rx)
}

fn entries(state: &Path) -> usize {
    std::fs::read_dir(state.join("events")).unwrap().count()
}

// Issue 39: five deliveries of one event (Pub/Sub is at-least-once; distribution retries) are
// one sync, wherever they fall: while it is queued, while it runs, and after it ended clean.
// A push without a digest (Docker Hub, Quay, Nexus) after that is a sync: the tag may have moved.
#[tokio::test(start_paused = true)]
async fn five_deliveries_of_one_event_are_one_sync() {
    let state = tempfile::tempdir().unwrap();
    let (intake, mut rx) = journaled(state.path(), 16);
    let now = Instant::now();
    let event = [push(Some("src.example"), "team/app", "v1", &dg('a'))];
    assert_eq!(intake.offer(&event, now).await.queued, 1);
    assert_eq!(intake.offer(&event, now).await.coalesced, 1, "queued");
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    assert_eq!(intake.offer(&event, now).await.coalesced, 1, "running");
    assert!(!intake.finish(&key, true, now).await, "nothing after it");
    assert_eq!(entries(state.path()), 0, "the journal entry is removed");
    for _ in 0..2 {
        assert_eq!(intake.offer(&event, now).await.coalesced, 1, "done");
    }
    assert!(rx.try_recv().is_err(), "five deliveries, one sync");
    assert_eq!(entries(state.path()), 0, "a duplicate is not journaled");
    assert_eq!(intake.oldest_unmirrored(), None);
    // Past the window it is a push again (the same digest pushed anew).
    let later = now + DEDUPE_WINDOW;
    assert_eq!(intake.offer(&event, later).await.queued, 1);
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    intake.finish(&key, true, later).await;
    // No digest: resolved at sync time, never a duplicate of a finished sync.
    let tag_only = [Notice {
        digest: None,
        ..push(Some("src.example"), "team/app", "v1", "")
    }];
    assert_eq!(intake.offer(&tag_only, later).await.queued, 1);
    // Another digest for the tag forgets the last sync's: its redelivery is a sync again.
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    intake.finish(&key, true, later).await;
    intake
        .offer(&[push(None, "team/app", "v1", &dg('b'))], later)
        .await;
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    intake.finish(&key, true, later).await;
    assert_eq!(
        intake.offer(&event, later).await.queued,
        1,
        "the tag moved back"
    );
}

// Issue 39: a notice is journaled before `offer` returns (so before the answer); the entry
// stays while its sync is queued, running or failing, and is removed when it ends clean.
// Replayed by the next process, it is queued again with its first arrival's age.
#[tokio::test(start_paused = true)]
async fn an_accepted_event_is_journaled_until_synced_and_replayed_after_a_restart() {
    let state = tempfile::tempdir().unwrap();
    let (intake, mut rx) = journaled(state.path(), 16);
    let now = Instant::now();
    intake
        .offer(&[push(None, "team/app", "v1", &dg('a'))], now)
        .await;
    intake
        .offer(&[push(None, "team/app", "v2", &dg('a'))], now)
        .await;
    assert_eq!(entries(state.path()), 2, "durable when offer returns");
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    assert!(intake.finish(&key, false, now).await, "unclean: once more");
    assert_eq!(entries(state.path()), 2, "kept while it fails");
    // The process dies here; the next one replays both, aged from their first arrival.
    drop((intake, rx));
    tokio::time::advance(std::time::Duration::from_secs(30)).await;
    let journal = EventJournal::open(state.path(), 16).unwrap();
    let mut stamped = journal.replay().await;
    for e in &mut stamped {
        e.received -= 100;
    }
    journal.write(stamped).await;
    let (intake, mut rx) = journaled(state.path(), 16);
    assert_eq!(intake.replay().await, 2);
    let oldest = Instant::now() - intake.oldest_unmirrored().expect("replayed events count");
    assert!(
        oldest >= std::time::Duration::from_secs(100),
        "aged from their first arrival: {oldest:?}"
    );
    for _ in 0..2 {
        let key = rx.recv().await.unwrap();
        intake.start(&key).unwrap();
        intake.finish(&key, true, Instant::now()).await;
    }
    assert_eq!(entries(state.path()), 0, "removed once synced clean");
    assert_eq!(intake.oldest_unmirrored(), None);
    // An entry the config no longer covers is removed at replay.
    let journal = EventJournal::open(state.path(), 16).unwrap();
    let gone = JournalEntry::new(None, "team/gone", Some("v1"), None, false, 1);
    journal.write(vec![gone]).await;
    let (intake, _rx) = journaled(state.path(), 16);
    assert_eq!(intake.replay().await, 0);
    assert_eq!(entries(state.path()), 0);
}

// Issue 39: a sync the event syncs left to the poll keeps its entry until a clean periodic run
// of its mapping; a full journal refuses (503) rather than accept what it cannot keep.
#[tokio::test(start_paused = true)]
async fn a_stranded_entry_waits_for_the_poll_and_a_full_journal_refuses() {
    let state = tempfile::tempdir().unwrap();
    let (intake, mut rx) = journaled(state.path(), 2);
    let now = Instant::now();
    // A thousand notices of one request for one fresh tag share one entry, written once.
    let same = vec![push(None, "team/app", "v0", &dg('a')); 1000];
    let out = intake.offer(&same, now).await;
    assert_eq!(
        (out.queued, out.coalesced, out.refused),
        (1, 999, 0),
        "{out:?}"
    );
    assert_eq!(entries(state.path()), 1);
    let key = rx.recv().await.unwrap();
    intake.start(&key).unwrap();
    intake.finish(&key, true, now).await;
    assert_eq!(entries(state.path()), 0);
    intake
        .offer(&[push(None, "team/app", "v1", &dg('a'))], now)
        .await;
    let key = rx.recv().await.unwrap();
    for _ in 0..=LATE_TAG_REQUEUES {
        intake.start(&key).unwrap();
        intake.finish(&key, false, now).await;
        let _ = rx.try_recv();
    }
    assert_eq!(
        entries(state.path()),
        1,
        "left to the poll, still journaled"
    );
    intake
        .offer(&[push(None, "team/app", "v2", &dg('a'))], now)
        .await;
    let out = intake
        .offer(&[push(None, "team/app", "v3", &dg('a'))], now)
        .await;
    assert_eq!(out.refused, 1, "the journal holds two: {out:?}");
    assert_eq!(entries(state.path()), 2);
    intake.mirrored([0]).await;
    assert_eq!(entries(state.path()), 1, "v2 is still queued");
}

// Issue 39: a digest that is not `sha256:<64 hex>` or `sha512:<128 hex>` is ignored and
// counted; unique well-formed digests for one tag keep at most MAX_DIGESTS_PER_KEY: 300
// requests of 1000 notices (the 1 MiB body's worth) leave the intake's holdings bounded.
#[tokio::test(start_paused = true)]
async fn a_flood_of_unique_digests_holds_a_bounded_queue() {
    let state = tempfile::tempdir().unwrap();
    let (intake, mut rx) = journaled(state.path(), 16);
    let now = Instant::now();
    let junk: Vec<Notice> = (0..1000)
        .map(|i| push(None, "team/app", "v1", &format!("sha256:{i:0>1024}")))
        .collect();
    let out = intake.offer(&junk, now).await;
    assert_eq!(out.ignored, 1000, "{out:?}");
    assert_eq!(intake.footprint(), Footprint::default());
    let upper = push(None, "team/app", "v1", &dg('A'));
    assert_eq!(intake.offer(&[upper], now).await.ignored, 1);
    let sha512 = format!("sha512:{}", "f".repeat(128));
    assert_eq!(
        intake
            .offer(&[push(None, "team/app", "v1", &sha512)], now)
            .await
            .queued,
        1
    );
    let mut n = 0u64;
    for round in 0..300 {
        let unique: Vec<Notice> = (0..1000)
            .map(|_| {
                n += 1;
                push(None, "team/app", "v1", &format!("sha256:{n:064x}"))
            })
            .collect();
        let out = intake.offer(&unique, now).await;
        assert_eq!(out.coalesced, 1000, "round {round}: {out:?}");
        if round == 150 {
            // Half way, the sync starts: events during it want one more after it.
            let key = rx.recv().await.unwrap();
            intake.start(&key).unwrap();
        }
    }
    let held = intake.footprint();
    assert_eq!(held.keys, 1);
    assert_eq!(held.digests, 2 * MAX_DIGESTS_PER_KEY, "{held:?}");
    assert!(held.bytes <= 2 * MAX_DIGESTS_PER_KEY * 135 + 2, "{held:?}");
    assert_eq!(held.journal, 1, "one entry for the tag");
    let metrics = intake.metrics.as_ref().unwrap().encode();
    assert!(
        metrics.contains("ferry_events_ignored_total{reason=\"bad_digest\"} 1001"),
        "{metrics}"
    );
}
