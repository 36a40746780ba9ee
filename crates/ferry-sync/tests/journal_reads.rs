//! The state directory is read once per blob and destination: the tee's decision (feed this
//! upload or let it resume from its recorded offset) and the upload's own come from one answer.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use url::Url;

use common::layout::HandLayout;
use common::{ALL_TAGS, QUICK_RETRY, RunOptions, run_sync_with};
use ferry_distribution::StopSignal;
use ferry_distribution::ops::{RecordedSession, UploadJournal, UploadKey};
use ferry_store::resume::StateDir;

/// The binary's journal (a state directory), counting how often each method is called.
#[derive(Debug)]
struct Counting {
    state: StateDir,
    recalls: AtomicUsize,
    forgets: AtomicUsize,
}

impl UploadJournal for Counting {
    fn recall<'a>(
        &'a self,
        key: UploadKey<'a>,
        origin: &'a Url,
    ) -> BoxFuture<'a, Option<RecordedSession>> {
        self.recalls.fetch_add(1, Ordering::SeqCst);
        self.state.recall(key, origin)
    }
    fn record<'a>(
        &'a self,
        key: UploadKey<'a>,
        location: &'a Url,
        offset: u64,
    ) -> BoxFuture<'a, ()> {
        self.state.record(key, location, offset)
    }
    fn forget<'a>(&'a self, key: UploadKey<'a>) -> BoxFuture<'a, ()> {
        self.forgets.fetch_add(1, Ordering::SeqCst);
        self.state.forget(key)
    }
    fn stopping(&self) -> bool {
        self.state.stopping()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_blob_upload_asks_the_state_directory_once() {
    let dst = common::started().await;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("app");
    let mut layout = HandLayout::new(&src);
    let image = layout.image("amd64", &[b"first layer", b"second layer"]);
    layout.tag(&image, Some("v1"));
    let host = dst.host();
    let config = common::config()
        .entry(&host, &dst.url(), &[QUICK_RETRY])
        .mapping(
            format!("oci:{}", src.display()),
            &[format!("{host}/team/app")],
            &[ALL_TAGS],
        )
        .build();
    let journal = Arc::new(Counting {
        state: StateDir::open(&tmp.path().join("state"), StopSignal::default()).unwrap(),
        recalls: AtomicUsize::new(0),
        forgets: AtomicUsize::new(0),
    });
    let options = RunOptions {
        journal: Some(journal.clone()),
        ..RunOptions::default()
    };
    let report = run_sync_with(&config, options).await.report;
    assert_eq!(report.totals.images_synced, 1, "{}", report.render_text());
    // Two layers and the config blob, each uploaded once: one read of the journal each.
    assert_eq!(journal.forgets.load(Ordering::SeqCst), 3);
    assert_eq!(journal.recalls.load(Ordering::SeqCst), 3);
}
