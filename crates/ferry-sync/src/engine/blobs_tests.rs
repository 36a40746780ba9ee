//! The BlobScheduler vouches only for work it did (a dropped transfer leaves its blob pending, an
//! unplanned blob or place is an error) and plans a place in one generation only.

use std::sync::Arc;
use std::time::Duration;

use ferry_distribution::Digest;
use ferry_testkit::registry::TestRegistry;

use super::BlobScheduler;
use crate::engine::destination::Destination;
use crate::engine::graph::BlobRef;
use crate::engine::transfer::UploadShape;
use crate::registries::Registries;
use crate::source::Source;

fn registries(regs: &[&TestRegistry]) -> Registries {
    let registries: String = regs
        .iter()
        .map(|r| {
            format!(
                "  - host: \"{}\"\n    url: \"{}\"\n    insecure: true\n",
                r.host(),
                r.url()
            )
        })
        .collect();
    let text = format!(
        "version: 1\nregistries:\n{registries}mappings:\n  - source: \"{}/lib/a\"\n    targets: [\"{}/mirror/a\"]\n",
        regs[0].host(),
        regs[1].host()
    );
    let config = ferry_config::parse(&text, std::path::Path::new("mirror.yaml"), &|_| None)
        .expect("the test config parses");
    Registries::new(&config)
}

async fn pair() -> (TestRegistry, TestRegistry) {
    let start = || async {
        TestRegistry::builder()
            .start()
            .await
            .expect("test registry starts")
    };
    (start().await, start().await)
}

/// Two test registries, `bytes` seeded as a blob of `lib/a` in the first, and a scheduler with
/// one-request uploads: what every test here starts from.
struct Setup {
    src: TestRegistry,
    dst: TestRegistry,
    digest: String,
    source: Source,
    target: ferry_distribution::RegistryClient,
    blob: BlobRef,
    scheduler: BlobScheduler,
}

impl Setup {
    async fn new(bytes: &[u8]) -> Setup {
        let (src, dst) = pair().await;
        let digest = src.seed_blob("lib/a", bytes);
        let regs = registries(&[&src, &dst]);
        let source = Source::Registry {
            client: regs.client(&src.host()).await.unwrap(),
            repository: "lib/a".into(),
        };
        let target = regs.client(&dst.host()).await.unwrap();
        let blob = BlobRef {
            digest: Digest::parse(&digest).unwrap(),
            size: bytes.len() as u64,
        };
        let shape = UploadShape {
            chunk_size: 64 * 1024,
            monolithic_limit: 64 * 1024,
        };
        let scheduler = BlobScheduler::new(2, shape, Arc::default());
        Setup {
            src,
            dst,
            digest,
            source,
            target,
            blob,
            scheduler,
        }
    }

    /// A repository of the target registry.
    fn place(&self, repository: &str) -> Destination {
        place(&self.target, repository)
    }
}

/// `repository` on the registry `target` is a client of.
fn place(target: &ferry_distribution::RegistryClient, repository: &str) -> Destination {
    Destination::Registry {
        client: target.clone(),
        repository: repository.into(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_transfer_dropped_part_way_is_run_again_by_the_next_caller_never_reported_done() {
    let bytes = vec![7u8; 300_000];
    let t = Setup::new(&bytes).await;
    let place = place(&t.target, "mirror/a");
    t.scheduler.need(&t.blob, &t.source, place.clone(), true);

    // The source sends the first bytes and then nothing: the caller gives up (a timeout) with
    // the transfer part way.
    t.src.body_stalls().stall_blob_bodies(1000);
    let dropped = tokio::time::timeout(
        Duration::from_secs(2),
        t.scheduler.ensure(&t.blob.digest, &place),
    )
    .await;
    assert!(dropped.is_err(), "the stalled transfer cannot finish");
    assert!(!t.dst.has_blob("mirror/a", &t.digest));

    // The next caller must not read that as done: it transfers the blob.
    t.src.body_stalls().clear();
    t.scheduler.ensure(&t.blob.digest, &place).await.unwrap();
    assert!(
        t.dst.has_blob("mirror/a", &t.digest),
        "ensure said Ok: the blob must be there"
    );
    assert_eq!(t.dst.blob(&t.digest).as_deref(), Some(bytes.as_slice()));
}

#[tokio::test(start_paused = true)]
async fn a_blob_or_a_place_never_planned_is_an_error_not_a_success() {
    let t = Setup::new(b"planned").await;
    let place = |repo: &str| place(&t.target, repo);
    t.scheduler
        .need(&t.blob, &t.source, place("mirror/a"), true);

    t.scheduler
        .ensure(&t.blob.digest, &place("mirror/a"))
        .await
        .unwrap();
    let elsewhere = t
        .scheduler
        .ensure(&t.blob.digest, &place("mirror/b"))
        .await
        .expect_err("mirror/b was never planned");
    assert!(
        elsewhere
            .to_string()
            .contains("never scheduled for this place"),
        "{elsewhere}"
    );
    // A broken plan invariant, typed as one (not a registry's answer).
    assert!(
        matches!(elsewhere, crate::error::SyncError::Unplanned { .. }),
        "{elsewhere:?}"
    );
    assert!(!t.dst.has_blob("mirror/b", &t.digest));

    let other = Digest::parse(&t.src.seed_blob("lib/a", b"never planned")).unwrap();
    let unknown = t
        .scheduler
        .ensure(&other, &place("mirror/a"))
        .await
        .expect_err("that blob was never planned");
    assert!(
        unknown.to_string().contains("was never scheduled"),
        "{unknown}"
    );
}

/// A place an earlier, started generation of a blob already has is not planned again in the
/// pending one: that generation would hold the place from the earlier one and mount the blob
/// into the repository from itself (one extra upload POST; issue 39's import_roundtrip flake).
#[tokio::test(start_paused = true)]
async fn a_place_a_started_generation_has_is_not_planned_again_in_the_next() {
    // The source registry lives to the test's end (dropping it stops it).
    let Setup {
        src: _src,
        dst,
        source,
        target,
        blob,
        scheduler,
        ..
    } = Setup::new(b"shared layer").await;
    let place = |repo: &str| place(&target, repo);
    // mirror/one's first image: the first generation, run to its end.
    scheduler.need(&blob, &source, place("mirror/one"), true);
    scheduler
        .ensure(&blob.digest, &place("mirror/one"))
        .await
        .unwrap();
    // mirror/two joins (a second generation, pending), then mirror/one's second image.
    scheduler.need(&blob, &source, place("mirror/two"), true);
    assert_eq!(
        scheduler.need(&blob, &source, place("mirror/one"), true),
        0,
        "already there"
    );
    scheduler
        .ensure(&blob.digest, &place("mirror/two"))
        .await
        .unwrap();
    scheduler
        .ensure(&blob.digest, &place("mirror/one"))
        .await
        .unwrap();
    let posts: Vec<String> = dst
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| format!("{} {}", r.path, r.query.as_deref().unwrap_or_default()))
        .collect();
    // One upload into mirror/one, one mount into mirror/two: nothing mounted from itself.
    assert_eq!(posts.len(), 2, "{posts:#?}");
    assert!(
        posts
            .iter()
            .filter(|p| p.starts_with("/v2/mirror/one/"))
            .all(|p| !p.contains("from=mirror%2Fone") && !p.contains("from=mirror/one")),
        "{posts:#?}"
    );
    assert_eq!(
        scheduler
            .counters
            .mounted
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

/// Places join a pending job in any order and each is found again (the job keeps them sorted,
/// each once, issue 42's memory): one upload, a mount into every other repository, and an outcome
/// per place, a place planned twice included.
#[tokio::test(start_paused = true)]
async fn places_planned_in_any_order_each_get_their_own_outcome() {
    let t = Setup::new(b"one layer, many repositories").await;
    let order = ["m/d", "m/a", "m/f", "m/b", "m/e", "m/a", "m/c"];
    let added: Vec<u64> = order
        .iter()
        .map(|r| t.scheduler.need(&t.blob, &t.source, t.place(r), true))
        .collect();
    assert_eq!(added, [28, 0, 0, 0, 0, 0, 0], "one generation, one read");
    for repo in ["m/a", "m/b", "m/c", "m/d", "m/e", "m/f"] {
        t.scheduler
            .ensure(&t.blob.digest, &t.place(repo))
            .await
            .unwrap();
        assert!(t.dst.has_blob(repo, &t.digest), "{repo}");
    }
    let counted = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(counted(&t.scheduler.counters.copied), 1);
    assert_eq!(counted(&t.scheduler.counters.mounted), 5);
    let unplanned = t.scheduler.ensure(&t.blob.digest, &t.place("m/g")).await;
    assert!(unplanned.is_err(), "m/g was never planned");
    assert!(t.src.has_blob("lib/a", &t.digest));
}
