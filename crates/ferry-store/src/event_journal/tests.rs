//! The event journal: written and replayed, one file per tag asked for, and every hostile or
//! damaged file refused with a reason rather than trusted or a panic.

use super::*;

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn push(tag: &str, received: u64) -> JournalEntry {
    JournalEntry::new(
        Some("src.example"),
        "team/app",
        Some(tag),
        Some(DIGEST),
        false,
        received,
    )
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn entries_written_are_replayed_oldest_first_and_removed_when_told() {
    let state = tempfile::tempdir().unwrap();
    let journal = EventJournal::open(state.path(), 16).unwrap();
    let written = journal
        .write(vec![push("v2", 200), push("v1", 100), push("v2", 300)])
        .await;
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    // One file per tag asked for: the second v2 replaced the first.
    assert_eq!(names(journal.dir()).len(), 2);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(journal.dir()), 0o700);
        let file = journal.path_of(&push("v1", 0).id());
        assert_eq!(mode(&file), 0o600);
    }
    let again = EventJournal::open(state.path(), 16).unwrap();
    let replayed = again.replay().await;
    assert_eq!(replayed, [push("v1", 100), push("v2", 300)]);
    again.remove(vec![push("v1", 0).id()]).await;
    assert_eq!(again.replay().await, [push("v2", 300)]);
}

#[tokio::test]
async fn past_the_limit_the_newest_entries_are_removed_at_replay() {
    let state = tempfile::tempdir().unwrap();
    let journal = EventJournal::open(state.path(), 16).unwrap();
    let entries: Vec<_> = (0..5).map(|i| push(&format!("v{i}"), 100 + i)).collect();
    journal.write(entries.clone()).await;
    let small = EventJournal::open(state.path(), 3).unwrap();
    assert_eq!(small.replay().await, entries[..3]);
    assert_eq!(names(small.dir()).len(), 3);
}

// A damaged, planted or hostile file is named in a warning, removed, and never a panic; a
// temporary a killed process left is removed; any other file is left alone.
#[tokio::test]
async fn a_hostile_or_damaged_file_is_refused_and_removed() {
    let state = tempfile::tempdir().unwrap();
    let journal = EventJournal::open(state.path(), 16).unwrap();
    journal.write(vec![push("good", 100)]).await;
    let dir = journal.dir().to_path_buf();
    let at = |e: &JournalEntry| dir.join(format!("{}.event", e.id()));
    let write = |path: &Path, bytes: &[u8]| {
        std::fs::write(path, bytes).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    };
    // Not JSON; a truncated entry; too large.
    write(&at(&push("a", 0)), b"\xff\xfe not json");
    let whole = serde_json::to_vec(&push("b", 100)).unwrap();
    write(&at(&push("b", 0)), &whole[..whole.len() / 2]);
    write(
        &at(&push("c", 0)),
        &vec![b' '; MAX_ENTRY_BYTES as usize + 1],
    );
    // Filed under another entry's name (a copy, or a planted redirect to another tag).
    write(
        &at(&push("d", 0)),
        &serde_json::to_vec(&push("other", 100)).unwrap(),
    );
    // A junk digest, a control character in a name, from the future.
    let mut junk = push("e", 100);
    junk.digest = Some(format!("sha256:{}", "x".repeat(1000)));
    write(&at(&junk), &serde_json::to_vec(&junk).unwrap());
    let control = push("f\u{1b}[2J", 100);
    write(&at(&control), &serde_json::to_vec(&control).unwrap());
    let future = push("g", unix_now() + 7 * 24 * 3600);
    write(&at(&future), &serde_json::to_vec(&future).unwrap());
    // A symbolic link at an entry's name (to a good entry elsewhere).
    let elsewhere = state.path().join("elsewhere");
    let linked = push("h", 100);
    write(&elsewhere, &serde_json::to_vec(&linked).unwrap());
    #[cfg(unix)]
    std::os::unix::fs::symlink(&elsewhere, at(&linked)).unwrap();
    // World-writable.
    let loose = push("i", 100);
    write(&at(&loose), &serde_json::to_vec(&loose).unwrap());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(at(&loose), std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    // A temporary a killed process left, and an operator's own file.
    let temporary = dir.join(format!(".{}.event.123.0.tmp", push("j", 0).id()));
    write(&temporary, b"{");
    write(&dir.join("README"), b"mine");

    let replayed = journal.replay().await;
    assert_eq!(replayed, [push("good", 100)]);
    assert_eq!(
        names(&dir),
        [
            "README".to_owned(),
            format!("{}.event", push("good", 0).id())
        ]
    );
    assert!(elsewhere.exists(), "the link's target is not touched");
}

#[tokio::test]
async fn a_state_directory_others_can_write_is_refused() {
    let state = tempfile::tempdir().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let events = state.path().join("events");
        std::fs::create_dir(&events).unwrap();
        std::fs::set_permissions(&events, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = EventJournal::open(state.path(), 4).unwrap_err();
        assert!(e.to_string().contains("group- or world-writable"), "{e}");
        std::fs::remove_dir(&events).unwrap();
        std::os::unix::fs::symlink(state.path(), &events).unwrap();
        let e = EventJournal::open(state.path(), 4).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }
}

// Spread over the writers, each result is still its own entry's: one entry too large to keep
// fails alone, in its place.
#[tokio::test]
async fn each_result_is_its_own_entry_s_over_the_writers() {
    let state = tempfile::tempdir().unwrap();
    let journal = EventJournal::open(state.path(), 4096).unwrap();
    let mut entries: Vec<_> = (0..100).map(|i| push(&format!("v{i}"), 1)).collect();
    entries[37].repository = "r".repeat(MAX_ENTRY_BYTES as usize);
    let results = journal.write(entries).await;
    assert_eq!(results.len(), 100);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r.is_err(), i == 37, "entry {i}: {r:?}");
    }
    assert_eq!(names(journal.dir()).len(), 99);
}
