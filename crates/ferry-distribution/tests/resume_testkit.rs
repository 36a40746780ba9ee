//! Uploads resumed from what the session holds: a 416 whose session holds more than ferry
//! thought, a session an earlier process recorded in the journal, and a stop at a chunk boundary.

mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use common::{client_at, sha256};
use ferry_distribution::RegistryClient;
use ferry_distribution::error::ErrorKind;
use ferry_distribution::ops::push::{BlobPush, InMemory, PushFlow, UploadShape};
use ferry_distribution::ops::{RecordedSession, UploadJournal, UploadKey};
use ferry_testkit::registry::{OpKind, RequestRecord, TestRegistry};
use futures::future::BoxFuture;
use url::Url;

const CHUNK: u64 = 64 << 10;

fn shape() -> UploadShape {
    UploadShape {
        chunk_size: CHUNK,
        monolithic_limit: 1024,
    }
}

fn layer(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn body_len(r: &RequestRecord) -> u64 {
    r.headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

fn patched_bytes(reg: &TestRegistry) -> u64 {
    reg.requests()
        .iter()
        .filter(|r| r.op == OpKind::UploadPatch && r.status == 202)
        .map(body_len)
        .sum()
}

/// A journal held in memory: what was recorded, forgotten, and whether the run stops.
#[derive(Debug, Default)]
struct Journal {
    held: Mutex<Option<RecordedSession>>,
    records: Mutex<Vec<u64>>,
    forgotten: AtomicBool,
    stop_after: Mutex<Option<usize>>,
}

impl UploadJournal for Journal {
    fn recall<'a>(
        &'a self,
        _key: UploadKey<'a>,
        _origin: &'a Url,
    ) -> BoxFuture<'a, Option<RecordedSession>> {
        let held = self.held.lock().unwrap().clone();
        Box::pin(async move { held })
    }
    fn record<'a>(
        &'a self,
        _key: UploadKey<'a>,
        location: &'a Url,
        offset: u64,
    ) -> BoxFuture<'a, ()> {
        *self.held.lock().unwrap() = Some(RecordedSession {
            location: location.clone(),
            offset,
        });
        self.records.lock().unwrap().push(offset);
        Box::pin(async {})
    }
    fn forget<'a>(&'a self, _key: UploadKey<'a>) -> BoxFuture<'a, ()> {
        *self.held.lock().unwrap() = None;
        self.forgotten.store(true, Ordering::SeqCst);
        Box::pin(async {})
    }
    fn stopping(&self) -> bool {
        let after = *self.stop_after.lock().unwrap();
        after.is_some_and(|n| self.records.lock().unwrap().len() >= n)
    }
}

fn client_with(reg: &TestRegistry, journal: std::sync::Arc<Journal>) -> RegistryClient {
    let mut options = common::options_at(&reg.url(), common::fast_policy(3));
    options.journal = Some(journal);
    RegistryClient::new(options).unwrap()
}

/// Pushes `bytes` to `lib/app` with no session given: the journal decides whether a recorded
/// one is resumed.
async fn push_fresh(c: &RegistryClient, bytes: &Bytes) -> Result<(), ferry_distribution::Error> {
    let digest = sha256(bytes);
    let push = BlobPush {
        repository: "lib/app",
        digest: &digest,
        size: bytes.len() as u64,
        shape: shape(),
        session: None,
    };
    c.push_blob(push, None, &InMemory(bytes.clone()))
        .await
        .map(|_| ())
}

/// A session that already holds the first chunk (a reply lost after its bytes landed, seen
/// by ferry as holding nothing) answers ferry's PATCH from 0 with 416: the session's status
/// is the resume point, and the blob goes on from there in the same session, the bytes sent
/// once, with no retry spent and no fresh session probed.
#[tokio::test(start_paused = true)]
async fn a_416_from_a_session_holding_more_goes_on_from_its_range() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let c = client_at(&reg.url(), 3);
    let bytes = Bytes::from(layer(3 * CHUNK as usize + 100));
    let digest = sha256(&bytes);
    let session = c.start_upload_once("lib/app").await.unwrap();
    let session = c
        .patch_chunk_once(&session, 0, CHUNK, bytes.slice(..CHUNK as usize).into())
        .await
        .unwrap();
    let push = BlobPush {
        repository: "lib/app",
        digest: &digest,
        size: bytes.len() as u64,
        shape: shape(),
        session: Some(session),
    };
    let flow = c
        .push_blob(push, None, &InMemory(bytes.clone()))
        .await
        .unwrap();
    assert_eq!(flow, PushFlow::Chunked);
    assert_eq!(reg.blob(&digest.to_string()).as_deref(), Some(&bytes[..]));
    assert_eq!(reg.stats().op(OpKind::UploadStart), 1, "no fresh session");
    assert_eq!(
        patched_bytes(&reg),
        bytes.len() as u64,
        "every byte sent once"
    );
    assert_eq!(c.gate().stats.snapshot().retries, 0);
}

/// A session an earlier process recorded: its status is asked first, only the rest is sent
/// (no POST), and the record goes once the blob is committed.
#[tokio::test(start_paused = true)]
async fn a_recorded_session_is_asked_and_only_the_rest_is_sent() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let plain = client_at(&reg.url(), 3);
    let bytes = Bytes::from(layer(4 * CHUNK as usize));
    let digest = sha256(&bytes);
    let mut session = plain.start_upload_once("lib/app").await.unwrap();
    for i in 0..2u64 {
        let part = bytes.slice((i * CHUNK) as usize..((i + 1) * CHUNK) as usize);
        session = plain
            .patch_chunk_once(&session, i * CHUNK, CHUNK, part.into())
            .await
            .unwrap();
    }
    let journal = std::sync::Arc::new(Journal::default());
    // The record is behind the session (killed after a PATCH landed, before it was recorded).
    *journal.held.lock().unwrap() = Some(RecordedSession {
        location: session.location.clone(),
        offset: CHUNK,
    });
    let c = client_with(&reg, journal.clone());
    let before = reg.requests().len();
    push_fresh(&c, &bytes).await.unwrap();
    assert_eq!(reg.blob(&digest.to_string()).as_deref(), Some(&bytes[..]));
    let after: Vec<_> = reg.requests().into_iter().skip(before).collect();
    assert!(
        !after.iter().any(|r| r.op == OpKind::UploadStart),
        "no new session"
    );
    let sent: u64 = after
        .iter()
        .filter(|r| r.op == OpKind::UploadPatch)
        .map(body_len)
        .sum();
    assert_eq!(sent, 2 * CHUNK, "only the half the session lacked");
    assert!(journal.forgotten.load(Ordering::SeqCst), "record removed");
    assert_eq!(*journal.records.lock().unwrap(), [3 * CHUNK, 4 * CHUNK]);
}

/// A recorded session the registry no longer knows (404) starts over in a new one, silently.
#[tokio::test(start_paused = true)]
async fn a_recorded_session_that_is_gone_starts_over() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let bytes = Bytes::from(layer(2 * CHUNK as usize + 7));
    let digest = sha256(&bytes);
    let journal = std::sync::Arc::new(Journal::default());
    *journal.held.lock().unwrap() = Some(RecordedSession {
        location: Url::parse(&format!("{}/v2/lib/app/blobs/uploads/gone", reg.url())).unwrap(),
        offset: CHUNK,
    });
    let c = client_with(&reg, journal.clone());
    push_fresh(&c, &bytes).await.unwrap();
    assert_eq!(reg.blob(&digest.to_string()).as_deref(), Some(&bytes[..]));
    assert_eq!(reg.stats().op(OpKind::UploadStart), 1, "one new session");
    assert_eq!(patched_bytes(&reg), bytes.len() as u64);
    assert_eq!(c.gate().stats.snapshot().retries, 0, "no retry spent");
}

/// A recorded Location on another origin is never sent to (or with credentials): the blob
/// starts over on the registry, and the record is dropped.
#[tokio::test(start_paused = true)]
async fn a_recorded_location_elsewhere_is_never_followed() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let elsewhere = TestRegistry::builder().start().await.unwrap();
    let bytes = Bytes::from(layer(2 * CHUNK as usize));
    let digest = sha256(&bytes);
    let journal = std::sync::Arc::new(Journal::default());
    *journal.held.lock().unwrap() = Some(RecordedSession {
        location: Url::parse(&format!("{}/v2/lib/app/blobs/uploads/x", elsewhere.url())).unwrap(),
        offset: CHUNK,
    });
    let c = client_with(&reg, journal.clone());
    push_fresh(&c, &bytes).await.unwrap();
    assert_eq!(reg.blob(&digest.to_string()).as_deref(), Some(&bytes[..]));
    assert!(elsewhere.requests().is_empty(), "nothing sent elsewhere");
}

/// Stopping: the upload ends after the PATCH in flight, with `Cancelled`, sends no further
/// PATCH and no PUT, and keeps the record of its last acknowledged chunk.
#[tokio::test(start_paused = true)]
async fn a_stop_ends_the_upload_at_a_chunk_boundary_and_keeps_the_record() {
    let reg = TestRegistry::builder().start().await.unwrap();
    let bytes = Bytes::from(layer(4 * CHUNK as usize));
    let journal = std::sync::Arc::new(Journal::default());
    *journal.stop_after.lock().unwrap() = Some(2);
    let c = client_with(&reg, journal.clone());
    let err = push_fresh(&c, &bytes).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Cancelled);
    assert_eq!(reg.stats().op(OpKind::UploadPatch), 2);
    assert_eq!(reg.stats().op(OpKind::UploadPut), 0);
    let held = journal.held.lock().unwrap().clone().expect("record kept");
    assert_eq!(held.offset, 2 * CHUNK);
    assert!(!journal.forgotten.load(Ordering::SeqCst));
}

/// Two runs on one shared client (`ferry watch`'s periodic run and an event sync beside it):
/// each counts only the requests and bytes it sent, and only the run with a journal records its
/// upload there; the registry's own counters hold both.
#[tokio::test(start_paused = true)]
async fn runs_sharing_a_client_count_their_own_requests_and_record_in_their_own_journal() {
    use ferry_distribution::RunScope;
    use std::sync::Arc;

    let reg = TestRegistry::builder().start().await.unwrap();
    let shared = client_at(&reg.url(), 3);
    let journal = Arc::new(Journal::default());
    let periodic = shared.for_run(Arc::new(RunScope::new(Some(journal.clone()))));
    let event = shared.for_run(Arc::new(RunScope::new(None)));

    let first = Bytes::from(layer(3 * CHUNK as usize + 100));
    push_fresh(&periodic, &first).await.unwrap();
    let recorded = journal.records.lock().unwrap().len();
    assert!(
        recorded >= 3,
        "each chunk of the periodic run's upload recorded: {recorded}"
    );
    let second = Bytes::from(layer(2 * CHUNK as usize + 7));
    push_fresh(&event, &second).await.unwrap();
    assert_eq!(
        journal.records.lock().unwrap().len(),
        recorded,
        "the event sync's upload is not in the periodic run's journal"
    );

    let (p, e, all) = (periodic.stats(), event.stats(), shared.stats());
    assert_eq!(p.bytes_written, first.len() as u64);
    assert_eq!(e.bytes_written, second.len() as u64);
    assert!(p.http_requests > 0 && e.http_requests > 0, "{p:?} {e:?}");
    assert_eq!(p.http_requests + e.http_requests, all.http_requests);
    assert_eq!(all.http_requests, reg.requests().len() as u64);
}
