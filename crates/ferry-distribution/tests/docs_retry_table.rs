//! docs/retry.md carries the replay table with the reasoning; this test keeps it and
//! `Operation::replay` in step, so neither can change without the other.

use ferry_distribution::operation::{Operation, Replay};

#[test]
fn docs_retry_table_matches_the_code() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/retry.md"))
        .expect("docs/retry.md exists");
    for op in Operation::ALL {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| {} |", op.name())))
            .unwrap_or_else(|| panic!("docs/retry.md has no row for {:?} ({})", op, op.name()));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let documented = cells.get(3).copied().unwrap_or_default();
        let expected = match op.replay() {
            Replay::Safe => "safe",
            Replay::Unsafe => "unsafe",
        };
        assert_eq!(
            documented,
            expected,
            "docs/retry.md says {documented} for {}",
            op.name()
        );
    }
}
