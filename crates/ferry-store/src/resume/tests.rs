//! The state directory's records against an attacker who can write files: each damaged or
//! hostile record is ignored (no session recalled) and removed; a good one round-trips.

use std::path::Path;
use std::time::Duration;

use ferry_distribution::Digest;
use ferry_distribution::ops::{UploadJournal, UploadKey};
use url::Url;

use super::{MAX_RECORD_BYTES, Record, StateDir};
use ferry_distribution::StopSignal;

const HOST: &str = "registry.example";

fn digest() -> Digest {
    Digest::parse(&format!("sha256:{}", "ab".repeat(32))).unwrap()
}

fn origin() -> Url {
    Url::parse("https://registry.example/").unwrap()
}

fn location() -> Url {
    Url::parse("https://registry.example/v2/team/app/blobs/uploads/abc?_state=SIGNED").unwrap()
}

fn state(dir: &Path) -> StateDir {
    StateDir::open(&dir.join("state"), StopSignal::default()).unwrap()
}

fn with_key<T>(f: impl FnOnce(UploadKey<'_>) -> T) -> T {
    let d = digest();
    f(UploadKey {
        host: HOST,
        repository: "team/app",
        digest: &d,
        size: 100,
    })
}

/// Runs one of the journal's futures (its file work goes to tokio's blocking pool).
fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Writes `text` where the key's record lives, as a plain 0600 file.
fn plant(state: &StateDir, text: &str) -> std::path::PathBuf {
    let path = state.path_for(HOST, "team/app", &digest());
    std::fs::write(&path, text).unwrap();
    set_mode(&path, 0o600);
    path
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A record as ferry writes it, with `edit` applied to its JSON.
fn record_json(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let record = with_key(|k| Record::new(k, &location(), 40, now()));
    let mut value: serde_json::Value = serde_json::from_str(&record.to_json().unwrap()).unwrap();
    edit(&mut value);
    value.to_string()
}

/// The planted file yields no session and is gone afterwards.
fn refused(state: &StateDir, path: &Path) {
    let recalled = with_key(|k| block(state.recall(k, &origin())));
    assert!(recalled.is_none(), "a hostile record was trusted");
    assert!(
        std::fs::symlink_metadata(path).is_err(),
        "the hostile record was not removed"
    );
}

#[test]
fn a_record_written_is_recalled_with_mode_0600_in_a_0700_directory() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path());
    with_key(|k| block(state.record(k, &location(), 40)));
    let path = state.path_for(HOST, "team/app", &digest());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(state.dir()).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    let recalled = with_key(|k| block(state.recall(k, &origin()))).expect("recalled");
    assert_eq!(recalled.location, location());
    assert_eq!(recalled.offset, 40);
    // Nothing else is left in the directory (the temporary file was renamed).
    assert_eq!(std::fs::read_dir(state.dir()).unwrap().count(), 1);
    // The record's Debug never shows the Location.
    let record = with_key(|k| state.read(k, &origin())).unwrap();
    assert!(!format!("{record:?}").contains("SIGNED"));
    assert!(!format!("{recalled:?}").contains("SIGNED"));
    with_key(|k| block(state.forget(k)));
    assert!(!path.exists());
}

#[test]
fn bad_json_is_ignored_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path());
    let path = plant(&state, "{\"version\": 1, \"host\": ");
    refused(&state, &path);
}

#[test]
fn a_huge_file_is_ignored_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path());
    let big = " ".repeat(MAX_RECORD_BYTES as usize + 1) + &record_json(|_| {});
    let path = plant(&state, &big);
    refused(&state, &path);
}

#[test]
fn a_location_on_another_host_or_scheme_is_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path());
    for elsewhere in [
        "https://attacker.example/v2/team/app/blobs/uploads/abc",
        "http://registry.example/v2/team/app/blobs/uploads/abc",
        "https://registry.example:8443/v2/team/app/blobs/uploads/abc",
        "file:///etc/passwd",
        "/v2/team/app/blobs/uploads/relative",
    ] {
        let path = plant(
            &state,
            &record_json(|v| v["location"] = serde_json::json!(elsewhere)),
        );
        refused(&state, &path);
    }
}

#[test]
fn a_record_naming_another_repository_registry_blob_or_size_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path());
    let edits: [(&str, serde_json::Value); 5] = [
        ("repository", serde_json::json!("other/app")),
        ("host", serde_json::json!("attacker.example")),
        (
            "digest",
            serde_json::json!(format!("sha256:{}", "cd".repeat(32))),
        ),
        ("size", serde_json::json!(101)),
        ("offset", serde_json::json!(101)),
    ];
    for (field, value) in edits {
        let path = plant(&state, &record_json(|v| v[field] = value.clone()));
        refused(&state, &path);
    }
}

#[test]
fn an_expired_or_future_record_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path()).with_lifetime(Duration::from_secs(3600));
    let path = plant(
        &state,
        &record_json(|v| v["updated"] = serde_json::json!(now() - 3601)),
    );
    refused(&state, &path);
    let path = plant(
        &state,
        &record_json(|v| v["updated"] = serde_json::json!(now() + 3 * 24 * 3600)),
    );
    refused(&state, &path);
}

#[test]
fn a_symlink_at_the_record_name_is_not_followed_and_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path());
    let target = tmp.path().join("elsewhere.json");
    std::fs::write(&target, record_json(|_| {})).unwrap();
    set_mode(&target, 0o600);
    let path = state.path_for(HOST, "team/app", &digest());
    std::os::unix::fs::symlink(&target, &path).unwrap();
    refused(&state, &path);
    assert!(target.exists(), "the link's target is left alone");
    // Writing a record replaces the link, never writes through it.
    std::os::unix::fs::symlink(&target, &path).unwrap();
    with_key(|k| block(state.record(k, &location(), 40)));
    assert!(
        !std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        record_json(|_| {}),
        "the link's target is unchanged"
    );
}

#[test]
fn a_fifo_at_the_record_name_does_not_block_and_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path());
    let path = state.path_for(HOST, "team/app", &digest());
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo(3) reads a NUL-terminated path that lives for the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    refused(&state, &path);
}

#[test]
fn a_group_or_world_writable_record_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path());
    for mode in [0o620, 0o602, 0o666] {
        let path = plant(&state, &record_json(|_| {}));
        set_mode(&path, mode);
        refused(&state, &path);
    }
}

#[test]
fn a_state_directory_others_can_write_or_a_symlink_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let open = tmp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    set_mode(&open, 0o777);
    assert!(StateDir::open(&open, StopSignal::default()).is_err());
    let link = tmp.path().join("link");
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    set_mode(&real, 0o700);
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(StateDir::open(&link, StopSignal::default()).is_err());
    assert!(StateDir::open(&real, StopSignal::default()).is_ok());
}

#[test]
fn the_sweep_removes_expired_records_and_stale_temporary_files() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path()).with_lifetime(Duration::ZERO);
    with_key(|k| block(state.record(k, &location(), 40)));
    let path = state.path_for(HOST, "team/app", &digest());
    assert!(path.exists());
    state.sweep();
    assert!(!path.exists(), "a record past its lifetime is swept");
}

/// Sets `path`'s modification time `ago` in the past.
fn age(path: &Path, ago: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::SystemTime::now() - ago)
        .unwrap();
}

/// The sweep removes only ferry's own files: a bundle's `.tar.json` kept in the state directory
/// for `--since` (and any other file there), however old, stays; an expired record and an old
/// temporary of one go.
#[test]
fn the_sweep_removes_only_ferrys_own_files() {
    let tmp = tempfile::tempdir().unwrap();
    let state = state(tmp.path());
    let dir = state.dir().to_path_buf();
    let week_and_a_day = Duration::from_secs(8 * 24 * 3600);
    let kept: Vec<_> = [
        "bundle-full.tar.json",
        "weekly-48.tar.json",
        &format!("{}.json.bak", "a".repeat(64)),
        &format!("{}.json", "A".repeat(64)),
        ".notes.tmp",
        ".bundle-full.tar.json.1.0.tmp",
    ]
    .iter()
    .map(|name| {
        let path = dir.join(name);
        std::fs::write(&path, b"{}").unwrap();
        set_mode(&path, 0o600);
        age(&path, week_and_a_day);
        path
    })
    .collect();
    with_key(|k| block(state.record(k, &location(), 40)));
    let record = state.path_for(HOST, "team/app", &digest());
    age(&record, week_and_a_day);
    let name = record.file_name().unwrap().to_string_lossy().into_owned();
    let temporary = dir.join(crate::fsio::temp_name_ending(&name, "tmp"));
    std::fs::write(&temporary, b"{").unwrap();
    age(&temporary, Duration::from_secs(2 * 3600));
    state.sweep();
    assert!(!record.exists(), "an expired record is swept");
    assert!(!temporary.exists(), "a record's old temporary is swept");
    for path in &kept {
        assert!(path.exists(), "{} is not ferry's: kept", path.display());
    }
}

#[test]
fn the_journal_stops_with_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let stop = StopSignal::default();
    let state = StateDir::open(&tmp.path().join("s"), stop.clone()).unwrap();
    assert!(!state.stopping());
    stop.stop();
    assert!(state.stopping());
}
