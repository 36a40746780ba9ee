//! Unknown fields, all at once: the YAML value tree walked against the JSON Schema of `raw.rs`
//! (the field sets serde checks), each unknown key reported with a "did you mean" and removed.
//!
//! serde stops at the first unknown field; walking the locator's tree of the text first lets one
//! run report every one of them, and the rest of the file (with them blanked out, so every other
//! position stays) still goes through serde and the checks, so a bad digest or an unknown target
//! group is reported in the same run. The field
//! sets are the schema's, generated from the same types serde reads, so they cannot drift.
//! A key of a neighbouring format (regsync's `creds`, skopeo sync's `tls-verify`, …) is named
//! with the ferry field it maps to and a pointer to `ferry convert`.

use schemars::schema_for;
use serde_json::Value as Schema;

use crate::check::Checker;
use crate::locate::{FieldPath, Locator, Position, Segment, Shape};
use crate::raw::RawConfig;

/// One key no type at its place takes.
pub struct Unknown {
    /// The object holding the key.
    pub parent: FieldPath,
    /// The key as written.
    pub key: String,
    /// The message: what was expected, or what the key is called in ferry.
    pub message: String,
}

/// Reads the interpolated text into the raw types: every unknown field is pushed as a problem
/// (at its key) and blanked out of the text, then serde reads the rest; a syntax or type error
/// is pushed at its place and ends the reading (`None`).
pub(crate) fn read_raw(text: &str, checker: &mut Checker<'_>) -> Option<RawConfig> {
    let unknown = find(checker.locator);
    for u in &unknown {
        let at = checker.locator.key(&u.parent.key(&u.key));
        checker.push(&u.parent, at, u.message.clone());
    }
    let paths: Vec<FieldPath> = unknown.iter().map(|u| u.parent.key(&u.key)).collect();
    let text = checker.locator.blank(text, &paths);
    let deserializer = serde_yaml::Deserializer::from_str(&text);
    match serde_path_to_error::deserialize(deserializer) {
        Ok(raw) => Some(raw),
        Err(error) => {
            let path = FieldPath(
                error
                    .path()
                    .iter()
                    .filter_map(|segment| match segment {
                        serde_path_to_error::Segment::Seq { index } => Some(Segment::Index(*index)),
                        serde_path_to_error::Segment::Map { key } => {
                            Some(Segment::Key(key.clone()))
                        }
                        _ => None,
                    })
                    .collect(),
            );
            let inner = error.into_inner();
            let at = inner
                .location()
                .filter(|l| l.line() > 0)
                .map(|l| Position {
                    line: l.line(),
                    column: l.column(),
                })
                .unwrap_or_else(|| checker.locator.value(&path));
            checker.push(&path, at, serde_message(&inner.to_string()));
            None
        }
    }
}

/// serde_yaml's message without its own path prefix and trailing position (ours replace them).
fn serde_message(text: &str) -> String {
    let mut message = text;
    if let Some(at) = message.rfind(" at line ") {
        let tail = &message[at + " at line ".len()..];
        if tail
            .split(" column ")
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            message = &message[..at];
        }
    }
    if let Some((head, rest)) = message.split_once(": ")
        && !head.is_empty()
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.[]-".contains(c))
    {
        message = rest;
    }
    message.to_string()
}

/// Every key of the document (as the locator read it) that no type at its place takes.
pub fn find(locator: &Locator) -> Vec<Unknown> {
    let root = schema_for!(RawConfig);
    let root = root.as_value();
    let mut out = Vec::new();
    walk(root, locator, &[root], &FieldPath::root(), &mut out);
    out
}

/// The schemas `schema` stands for: `$ref`s followed, `anyOf`/`oneOf`/`allOf` flattened.
fn alternatives<'s>(root: &'s Schema, schema: &'s Schema, out: &mut Vec<&'s Schema>, depth: u8) {
    if depth > 16 {
        return;
    }
    if let Some(name) = schema
        .get("$ref")
        .and_then(Schema::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        if let Some(def) = root.pointer(&format!("/$defs/{name}")) {
            alternatives(root, def, out, depth + 1);
        }
        return;
    }
    let mut combined = false;
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(list) = schema.get(key).and_then(Schema::as_array) {
            combined = true;
            for s in list {
                alternatives(root, s, out, depth + 1);
            }
        }
    }
    if !combined {
        out.push(schema);
    }
}

fn walk(
    root: &Schema,
    locator: &Locator,
    schemas: &[&Schema],
    path: &FieldPath,
    out: &mut Vec<Unknown>,
) {
    let mut flat = Vec::new();
    for s in schemas {
        alternatives(root, s, &mut flat, 0);
    }
    match locator.shape(path) {
        Shape::Map(keys) => {
            let objects: Vec<&Schema> = flat
                .iter()
                .copied()
                .filter(|s| {
                    s.get("properties").is_some() || s.get("additionalProperties").is_some()
                })
                .collect();
            if objects.is_empty() {
                return;
            }
            // An open map (`target_groups`): any key, each value of the one schema.
            let open: Vec<&Schema> = objects
                .iter()
                .filter_map(|s| s.get("additionalProperties"))
                .filter(|a| a.is_object())
                .collect();
            let closed = objects
                .iter()
                .all(|s| s.get("additionalProperties") == Some(&Schema::Bool(false)));
            let mut known: Vec<&str> = objects
                .iter()
                .filter_map(|s| s.get("properties").and_then(Schema::as_object))
                .flat_map(|p| p.keys().map(String::as_str))
                .collect();
            known.sort_unstable();
            known.dedup();
            for name in keys {
                let props: Vec<&Schema> = objects
                    .iter()
                    .filter_map(|s| s.get("properties").and_then(|p| p.get(name.as_str())))
                    .collect();
                if !props.is_empty() {
                    walk(root, locator, &props, &path.key(name), out);
                } else if !closed {
                    walk(root, locator, &open, &path.key(name), out);
                } else {
                    out.push(Unknown {
                        parent: path.clone(),
                        message: message(name, &known, path),
                        key: name.clone(),
                    });
                }
            }
        }
        Shape::Seq(len) => {
            let items: Vec<&Schema> = flat.iter().filter_map(|s| s.get("items")).collect();
            if items.is_empty() {
                return;
            }
            for i in 0..len {
                walk(root, locator, &items, &path.index(i), out);
            }
        }
        Shape::Other => {}
    }
}

/// What regsync and skopeo sync call what ferry calls something else: (their key, whose, the
/// ferry field or what to do instead).
const FOREIGN: &[(&str, &str, &str)] = &[
    ("creds", "regsync", "`registries` (one entry per `host`)"),
    ("sync", "regsync", "`mappings`"),
    ("registry", "regsync", "`host` (in `registries`)"),
    ("user", "regsync", "`auth.username` (in `registries`)"),
    ("pass", "regsync", "`auth.password` (in `registries`)"),
    ("regcert", "regsync", "`ca_bundle` (in `registries`)"),
    (
        "reqPerSec",
        "regsync",
        "`requests_per_second` (in `registries`)",
    ),
    (
        "reqConcurrent",
        "regsync",
        "`max_concurrent` (in `registries`)",
    ),
    ("target", "regsync", "`targets` (a list)"),
    (
        "parallel",
        "regsync",
        "a mapping's `concurrency` (or the top-level `concurrency`)",
    ),
    (
        "allow",
        "regsync",
        "`regex` (one regex: join regsync's list with `|`)",
    ),
    (
        "images",
        "skopeo sync",
        "`mappings` (one per image, `source: REGISTRY/IMAGE`)",
    ),
    (
        "images-by-tag-regex",
        "skopeo sync",
        "a mapping's `tags.regex`",
    ),
    (
        "images-by-semver",
        "skopeo sync",
        "a mapping's `tags.semver`",
    ),
    (
        "tls-verify",
        "skopeo sync",
        "`insecure` (in `registries`, inverted)",
    ),
    (
        "credentials",
        "skopeo sync",
        "`auth` (in `registries`: `username`, `password`)",
    ),
    (
        "cert-dir",
        "skopeo sync",
        "`ca_bundle` (in `registries`: one PEM file)",
    ),
];

fn message(key: &str, known: &[&str], parent: &FieldPath) -> String {
    let mut text = format!("unknown field `{key}`");
    if let Some(near) = nearest(key, known) {
        text.push_str(&format!(": did you mean `{near}`?"));
        return text;
    }
    if let Some((_, whose, ferry)) = FOREIGN.iter().find(|(k, ..)| *k == key) {
        let command = if *whose == "regsync" {
            "ferry convert regsync FILE"
        } else {
            "ferry convert skopeo-sync FILE --dest PREFIX"
        };
        text.push_str(&format!(
            ": {whose}'s spelling; ferry's is {ferry} (`{command}` converts a whole {whose} file)"
        ));
        return text;
    }
    // skopeo sync's top level is registry hosts.
    if parent.0.is_empty() && (key.contains('.') || key.contains(':') || key == "localhost") {
        text.push_str(
            ": a registry host at the top reads like a skopeo sync file (`ferry convert \
             skopeo-sync FILE --dest PREFIX` converts one)",
        );
        return text;
    }
    let list: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
    match list.as_slice() {
        [] => text.push_str(", expected no field here"),
        [one] => text.push_str(&format!(", expected {one}")),
        _ => text.push_str(&format!(", expected one of {}", list.join(", "))),
    }
    text
}

/// The known field closest to `key` by edit distance, if close enough to be a slip.
fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = (key.chars().count() / 3).clamp(1, 3);
    known
        .iter()
        .map(|k| (distance(&key.to_lowercase(), &k.to_lowercase()), *k))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_keys_and_foreign_spellings_are_named() {
        assert_eq!(distance("tagz", "tags"), 1);
        assert_eq!(distance("target", "targets"), 1);
        assert_eq!(
            nearest("target", &["source", "tags", "targets"]),
            Some("targets")
        );
        assert_eq!(nearest("colour", &["source", "tags", "targets"]), None);
        let m = message("creds", &["version", "registries"], &FieldPath::root());
        assert!(
            m.contains("regsync's spelling; ferry's is `registries`"),
            "{m}"
        );
        assert!(m.contains("ferry convert regsync FILE"), "{m}");
        let m = message("tls-verify", &["host"], &FieldPath::root().key("x"));
        assert!(
            m.contains("skopeo sync's spelling") && m.contains("insecure"),
            "{m}"
        );
        let m = message("docker.io", &["version"], &FieldPath::root());
        assert!(m.contains("skopeo sync file"), "{m}");
    }
}
