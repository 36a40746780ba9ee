//! The tag cache against time, damage and hostile names: believed within its TTL only, a
//! damaged or misfiled file ignored, names never reaching the file system, bounded by selection.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ferry_distribution::{Algorithm, Digest};

use super::{Seen, TagCache, file_name};

const HOUR: Duration = Duration::from_secs(3600);

fn digest(x: &str) -> Digest {
    Digest::of_bytes(Algorithm::Sha256, x.as_bytes())
}

fn seen(registry: &str, repository: &str, selected: &[&str], confirmed: &[(&str, &str)]) -> Seen {
    Seen {
        registry: registry.to_owned(),
        repository: repository.to_owned(),
        selected: selected.iter().map(|t| t.to_string()).collect(),
        confirmed: confirmed
            .iter()
            .map(|(t, d)| (t.to_string(), digest(d)))
            .collect(),
    }
}

async fn load(dir: &std::path::Path, now: u64) -> Arc<TagCache> {
    Arc::new(TagCache::load(dir, HOUR, now, false).await)
}

#[tokio::test]
async fn a_confirmed_tag_is_believed_within_the_ttl_and_for_its_digest_only() {
    let dir = tempfile::tempdir().unwrap();
    let first = load(dir.path(), 1000).await;
    assert!(!first.holds("r", "app", "v1", &digest("a"), None));
    first
        .store(vec![seen("r", "app", &["v1"], &[("v1", "a")])])
        .await;

    let later = load(dir.path(), 1000 + 3599).await;
    assert!(later.holds("r", "app", "v1", &digest("a"), None));
    assert!(
        !later.holds("r", "app", "v1", &digest("b"), None),
        "another digest"
    );
    assert!(
        later.holds("r", "app", "v1", &digest("b"), Some(&digest("a"))),
        "the fallback"
    );
    assert!(
        !later.holds("r", "other", "v1", &digest("a"), None),
        "another repository"
    );
    assert!(
        !later.holds("r2", "app", "v1", &digest("a"), None),
        "another registry"
    );
    assert!(
        !load(dir.path(), 1000 + 3600)
            .await
            .holds("r", "app", "v1", &digest("a"), None),
        "the TTL is over"
    );
    assert!(
        !load(dir.path(), 999)
            .await
            .holds("r", "app", "v1", &digest("a"), None),
        "a time in the future"
    );
    let ignoring = TagCache::load(dir.path(), HOUR, 1001, true).await;
    assert!(
        !ignoring.holds("r", "app", "v1", &digest("a"), None),
        "--no-cache"
    );
    let zero = TagCache::load(dir.path(), Duration::ZERO, 1000, false).await;
    assert!(
        !zero.holds("r", "app", "v1", &digest("a"), None),
        "a TTL of zero"
    );
}

#[tokio::test]
async fn a_believed_tag_keeps_its_time_and_an_unselected_tag_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    load(dir.path(), 1000)
        .await
        .store(vec![seen(
            "r",
            "app",
            &["v1", "v2"],
            &[("v1", "a"), ("v2", "b")],
        )])
        .await;
    // Half an hour on: v1 believed (not confirmed again), v2 no longer selected.
    let run = load(dir.path(), 2800).await;
    assert!(run.holds("r", "app", "v1", &digest("a"), None));
    run.store(vec![seen("r", "app", &["v1"], &[("v1", "a")])])
        .await;
    // The run reported v1 confirmed, but it was believed: its time stays 1000, so it expires
    // an hour after the last real confirmation.
    let after = load(dir.path(), 4599).await;
    assert!(after.holds("r", "app", "v1", &digest("a"), None));
    assert!(
        !load(dir.path(), 4600)
            .await
            .holds("r", "app", "v1", &digest("a"), None)
    );
    assert!(
        !after.holds("r", "app", "v2", &digest("b"), None),
        "dropped"
    );
}

#[tokio::test]
async fn a_damaged_or_misfiled_cache_is_ignored_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tag-cache");
    std::fs::create_dir(&cache).unwrap();
    let path = cache.join(file_name("r"));
    for junk in [
        &b"{not json"[..],
        br#"{"ferry_tag_cache":2,"registry":"r","entries":[]}"#,
        br#"{"ferry_tag_cache":1,"registry":"r","entries":[{"repository":"app","tag":"v1","digest":"md5:x","confirmed":1}]}"#,
    ] {
        std::fs::write(&path, junk).unwrap();
        let run = load(dir.path(), 1000).await;
        assert!(!run.holds("r", "app", "v1", &digest("a"), None));
        run.store(vec![seen("r", "app", &["v1"], &[("v1", "a")])]).await;
        assert!(load(dir.path(), 1001).await.holds("r", "app", "v1", &digest("a"), None), "rewritten");
    }
    // Registry r's file moved under registry s's name is neither s's nor r's.
    std::fs::rename(&path, cache.join(file_name("s"))).unwrap();
    let misfiled = load(dir.path(), 1001).await;
    assert!(!misfiled.holds("s", "app", "v1", &digest("a"), None));
    assert!(!misfiled.holds("r", "app", "v1", &digest("a"), None));
}

#[tokio::test]
async fn hostile_names_reach_no_path() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let names = ["../../x", "a/%2f..%2fb", "/etc/passwd"];
    let run = load(&state, 1000).await;
    run.store(
        names
            .iter()
            .map(|n| seen(n, n, &[n], &[(n, "a")]))
            .collect(),
    )
    .await;
    let mut files: Vec<String> = std::fs::read_dir(state.join("tag-cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut expected: Vec<String> = names.iter().map(|n| file_name(n)).collect();
    expected.push("lock".into());
    expected.sort();
    assert_eq!(files, expected);
    let top: HashSet<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(top, HashSet::from(["state".to_owned()]));
    let again = load(&state, 1001).await;
    for n in names {
        assert!(again.holds(n, n, n, &digest("a"), None));
    }
}

#[tokio::test]
async fn two_runs_storing_at_once_keep_both() {
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<Arc<TagCache>> =
        futures::future::join_all((0..8).map(|_| load(dir.path(), 1000))).await;
    let stores = runs.into_iter().enumerate().map(|(i, run)| {
        let repo = format!("app{i}");
        tokio::spawn(run.store(vec![seen("r", &repo, &["v1"], &[("v1", "a")])]))
    });
    for s in futures::future::join_all(stores).await {
        s.unwrap();
    }
    let after = load(dir.path(), 1001).await;
    for i in 0..8 {
        assert!(
            after.holds("r", &format!("app{i}"), "v1", &digest("a"), None),
            "app{i}"
        );
    }
}
