//! `ferry <command> --help` against the docs: every flag a command's help lists is in its docs
//! section, every flag a section names exists, and every command `ferry --help` lists has one.

mod common;

use common::{code, ferry, text};

/// Each command, the docs file that documents its flags, and the heading of that section.
const DOCUMENTED: &[(&[&str], &str, &str)] = &[
    (&["sync"], "docs/commands.md", "## ferry sync"),
    (&["watch"], "docs/commands.md", "## ferry watch"),
    (&["validate"], "docs/commands.md", "## ferry validate"),
    (&["tags"], "docs/commands.md", "## ferry tags"),
    (&["copy"], "docs/commands.md", "## ferry copy"),
    (&["export"], "docs/commands.md", "## ferry export"),
    (&["import"], "docs/commands.md", "## ferry import"),
    (&["inspect"], "docs/inspect.md", "## Flags"),
    (&["verify"], "docs/commands.md", "## ferry verify"),
    (&["doctor"], "docs/commands.md", "## ferry doctor"),
    (&["pull-config"], "docs/pull-config.md", "## Flags"),
    (
        &["auth", "check"],
        "docs/commands.md",
        "## ferry auth check",
    ),
    (
        &["convert", "regsync"],
        "docs/commands.md",
        "## ferry convert regsync",
    ),
    (
        &["convert", "skopeo-sync"],
        "docs/commands.md",
        "## ferry convert skopeo-sync",
    ),
    (&["completions"], "docs/commands.md", "## ferry completions"),
];

/// Every `--name` in `text` (a name is lower-case letters, digits and inner dashes).
fn flags_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("--") {
        let start = i + at;
        let before = start.checked_sub(1).map(|b| bytes[b]);
        let name: String = text[start + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let name = name.trim_end_matches('-').to_owned();
        let word_start = !before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-');
        if word_start && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.push(format!("--{name}"));
        }
        i = start + 2 + name.len().max(1);
    }
    out.sort();
    out.dedup();
    out
}

/// The flags an `--help` output lists in its options: lines that start with `-x, --name` or
/// `--name`.
fn help_flags(help: &str) -> Vec<String> {
    let mut out: Vec<String> = help
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            // `-c, --config <FILE>`: the long name after the short one.
            let l = match l.as_bytes() {
                [b'-', c, b',', b' ', ..] if c.is_ascii_alphanumeric() => &l[4..],
                _ => l,
            };
            l.starts_with("--")
                .then(|| flags_in(l.split(' ').next().unwrap_or("")))
        })
        .flatten()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The text of `file` from the line `heading` to the next heading of the same level.
fn section(file: &str, heading: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let start = doc
        .lines()
        .position(|l| l == heading)
        .unwrap_or_else(|| panic!("{file} has no section {heading:?}"));
    doc.lines()
        .skip(start + 1)
        .take_while(|l| !l.starts_with("## ") && !l.starts_with("# "))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn help(args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.push("--help");
    let out = ferry(&all).await;
    assert_eq!(code(&out), 0, "ferry {all:?}");
    text(&out.stdout)
}

#[tokio::test]
async fn every_commands_help_matches_its_docs() {
    let root = help(&[]).await;
    let global = help_flags(&root);
    assert!(global.contains(&"--progress".to_owned()), "{global:?}");
    let global_doc = flags_in(&section("docs/commands.md", "## Global flags"));
    let mut problems = Vec::new();
    for f in &global {
        if !global_doc.contains(f) {
            problems.push(format!(
                "global flag {f} is not in docs/commands.md's Global flags"
            ));
        }
    }
    // Every command `ferry --help` lists (and each of `ferry auth`'s) has a docs section.
    let listed = |help: &str| -> Vec<String> {
        help.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            // A wrapped description goes on further in; a command's name is two spaces in.
            .filter(|l| !l[2..].starts_with(' '))
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .filter(|c| c != "help")
            .collect()
    };
    let mut commands: Vec<Vec<String>> = Vec::new();
    for c in listed(&root) {
        let sub = listed(&help(&[&c]).await);
        if sub.is_empty() {
            commands.push(vec![c]);
        } else {
            commands.extend(sub.into_iter().map(|s| vec![c.clone(), s]));
        }
    }
    assert!(commands.len() >= DOCUMENTED.len(), "{commands:?}");
    for c in &commands {
        if !DOCUMENTED
            .iter()
            .any(|(args, _, _)| args.iter().eq(c.iter()))
        {
            problems.push(format!(
                "ferry {} has no docs section in this test's list",
                c.join(" ")
            ));
        }
    }
    for (args, file, heading) in DOCUMENTED {
        let name = args.join(" ");
        let own: Vec<String> = help_flags(&help(args).await)
            .into_iter()
            .filter(|f| !global.contains(f))
            .collect();
        let documented = flags_in(&section(file, heading));
        for f in &own {
            if !documented.contains(f) {
                problems.push(format!(
                    "ferry {name}: {f} is in --help but not in {file} {heading:?}"
                ));
            }
        }
        for f in &documented {
            if !own.contains(f) && !global.contains(f) {
                problems.push(format!(
                    "ferry {name}: {file} {heading:?} names {f}, which --help does not list"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "help and docs disagree:\n{}",
        problems.join("\n")
    );
}

#[test]
fn flags_are_read_as_words() {
    assert_eq!(
        flags_in("`--src-tls-verify=false`, `-c`, `--config FILE`"),
        ["--config", "--src-tls-verify"]
    );
    assert!(flags_in("a -- b x--y").is_empty());
    let help = "Options:\n      --dry-run\n          Resolve --json\n  -c, --config <FILE>\n  -v, --verbose...\n";
    assert_eq!(help_flags(help), ["--config", "--dry-run", "--verbose"]);
}
