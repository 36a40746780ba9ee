//! The test fixture runs with the state directory as the binary does: an upload cut off part
//! way is journalled there, and the next run over the same directory resumes it.

mod common;

use common::{ALL_TAGS, QUICK_RETRY, RunOptions, run_sync_with};
use ferry_distribution::{Algorithm, Digest, StopSignal};
use ferry_store::resume::StateDir;
use ferry_testkit::registry::{FaultAction, FaultRule, OpKind};

const MIB: usize = 1024 * 1024;

#[tokio::test(start_paused = true)]
async fn an_upload_cut_off_after_its_first_chunk_is_resumed_by_the_next_run_from_the_journal() {
    let (src, dst) = common::pair().await;
    let layer = ferry_testkit::noise(36, 3 * MIB);
    src.seed_image("lib/big", "v1", &[&layer]);
    let digest = Digest::of_bytes(Algorithm::Sha256, &layer);
    let config = common::config()
        .registries(&[&src, &dst], &[QUICK_RETRY])
        .engine(r#"chunk_size: "1MiB", monolithic_limit: "1MiB""#)
        .mapping(
            format!("{}/lib/big", src.host()),
            &[format!("{}/m/big", dst.host())],
            &[ALL_TAGS],
        )
        .build();
    // The first chunk lands; every later PATCH loses its connection part way.
    dst.faults().push(FaultRule::on(
        OpKind::UploadPatch,
        FaultAction::Delay(Default::default()),
    ));
    dst.faults().push(
        FaultRule::on(
            OpKind::UploadPatch,
            FaultAction::ResetBody { after_bytes: 1000 },
        )
        .forever(),
    );
    let state = tempfile::tempdir().unwrap();
    let options = || RunOptions {
        state_dir: Some(state.path()),
        ..RunOptions::default()
    };
    let first = run_sync_with(&config, options()).await.report;
    assert_eq!(first.totals.images_failed, 1, "{}", first.render_text());
    assert!(!dst.has_blob("m/big", &digest.to_string()));
    let journal = StateDir::open(state.path(), StopSignal::default()).unwrap();
    let record = journal.path_for(&dst.host(), "m/big", &digest);
    assert!(record.is_file(), "no record at {}", record.display());

    // The next run over the same state directory asks the session what it holds and sends
    // only the two chunks it lacks.
    dst.faults().clear_rules();
    dst.reset_stats();
    let second = run_sync_with(&config, options()).await.report;
    assert_eq!(second.totals.images_synced, 1, "{}", second.render_text());
    assert_eq!(dst.blob(&digest.to_string()).as_deref(), Some(&layer[..]));
    let stats = dst.stats();
    assert_eq!(stats.op(OpKind::UploadStatus), 1, "{stats:?}");
    assert_eq!(stats.op(OpKind::UploadPatch), 2, "{stats:?}");
    assert_eq!(stats.op(OpKind::UploadStart), 0, "{stats:?}");
    assert!(!record.exists(), "the finished upload's record stays");
}
