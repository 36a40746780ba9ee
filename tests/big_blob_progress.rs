//! A large blob's progress through the real binary against the real registry: in plain mode
//! (and under `--log-format json`) a line per 10% of the blob, none without a display.

mod common;

use common::{code, ferry_env, push_one_layer, text};
use ferry_distribution::{RegistryClient, RegistryOptions};
use ferry_testkit::distribution::RealRegistry;
use serde_json::Value;

/// The layer: 20 MiB, above the lowered threshold below (the default is 64 MiB).
const LAYER: usize = 20 << 20;
const THRESHOLD: &str = "16777216";

/// `ferry --progress MODE [extra…] copy SRC DST` with the large-blob threshold lowered.
async fn copy(mode: &str, extra: &[&str], src: &str, dst: &str) -> std::process::Output {
    let mut args = vec!["--progress", mode];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "copy",
        src,
        dst,
        "--src-tls-verify=false",
        "--dest-tls-verify=false",
    ]);
    ferry_env(&args, &[("FERRY_LARGE_BLOB_BYTES", THRESHOLD)]).await
}

/// The percentages of the text lines that report `short` (`…@sha256:<12 hex>… 40% …`).
fn text_percents(stderr: &str, short: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter(|l| l.contains(short))
        .filter_map(|l| {
            let after = l.split(short).nth(1)?;
            // `src/big@sha256:<12 hex>` is followed by `…`, then the percentage.
            let word = after.split_whitespace().nth(1)?;
            word.strip_suffix('%')?.parse().ok()
        })
        .collect()
}

fn assert_tenths(percents: &[u64], what: &str) {
    assert_eq!(
        percents.last(),
        Some(&100),
        "{what}: ends at 100%: {percents:?}"
    );
    assert!(
        percents.windows(2).all(|w| w[0] < w[1]),
        "{what}: strictly rising: {percents:?}"
    );
    assert!(
        percents.iter().all(|p| p % 10 == 0),
        "{what}: whole tenths: {percents:?}"
    );
    assert!(
        percents.len() >= 5,
        "{what}: a line per 10% (a 20 MiB blob read in pieces well under 2 MiB): {percents:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_blob_logs_a_line_per_tenth_in_plain_mode_and_under_json_logs() {
    let Some(registry) = RealRegistry::start_for_test().await.expect("registry") else {
        return;
    };
    // The copies go to another registry: within one, ferry mounts the blob from the source
    // repository and reads nothing (issue 42), so there would be no progress to show.
    let Some(target) = RealRegistry::start_for_test().await.expect("target") else {
        return;
    };
    let to = target.host();
    let client = RegistryClient::new(RegistryOptions::insecure_at(&registry.url())).unwrap();
    let layer = ferry_testkit::noise(28, LAYER);
    let digest =
        ferry_distribution::Digest::of_bytes(ferry_distribution::Algorithm::Sha256, &layer);
    push_one_layer(
        &client,
        "src/big",
        "1",
        r#"{"architecture":"amd64","os":"linux"}"#,
        &layer,
    )
    .await;
    let host = registry.host();
    let src = format!("{host}/src/big:1");
    let hex = digest.to_string();
    let short = format!("src/big@sha256:{}", &hex["sha256:".len()..][..12]);

    // Plain: text lines `…/src/big@sha256:<12 hex>… 40% 8.0 MiB/20.0 MiB 210.0 MiB/s ETA 1s`.
    let out = copy("plain", &[], &src, &format!("{to}/plain/big:1")).await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    let percents = text_percents(&stderr, &short);
    assert_tenths(&percents, "plain");
    let last = stderr
        .lines()
        .rfind(|l| l.contains(&short))
        .unwrap_or_default();
    assert!(
        last.contains("20.0 MiB/20.0 MiB") && last.contains("/s ETA 0s"),
        "the last line has the bytes, the rate and the ETA: {last}"
    );

    // JSON logs: the same lines as records of `ferry::blob`, with the numbers as fields.
    let out = copy(
        "plain",
        &["--log-format", "json"],
        &src,
        &format!("{to}/json/big:1"),
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    let records: Vec<Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["target"] == "ferry::blob")
        .collect();
    let percents: Vec<u64> = records
        .iter()
        .filter_map(|r| r["fields"]["percent"].as_u64())
        .collect();
    assert_tenths(&percents, "json");
    let last = records.last().expect("a record");
    assert_eq!(last["level"], "INFO");
    assert_eq!(last["fields"]["blob"], hex.as_str());
    assert_eq!(last["fields"]["bytes_read"], LAYER as u64);
    assert_eq!(last["fields"]["size"], LAYER as u64);
    assert!(
        last["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(&format!("{host}/{short}")) && m.contains(" 100% ")),
        "{last}"
    );

    // No display, no lines; and above the default threshold's reach (64 MiB) none either.
    let out = copy("none", &[], &src, &format!("{to}/none/big:1")).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(text_percents(&text(&out.stderr), &short).is_empty());
    let out = common::ferry(&[
        "--progress",
        "plain",
        "copy",
        &src,
        &format!("{to}/default/big:1"),
        "--src-tls-verify=false",
        "--dest-tls-verify=false",
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        text_percents(&text(&out.stderr), &short).is_empty(),
        "a 20 MiB blob is under the default 64 MiB: {}",
        text(&out.stderr)
    );
}
