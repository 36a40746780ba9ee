//! `ferry doctor`'s text output: the credentials and auth flow, one line per probe, and the
//! capabilities ferry will use as a table whose rows come from the snapshot's own fields.

use std::fmt::Write as _;

use super::{Findings, Outcome};

/// The findings for people (stdout). Every outside string was escaped where it was read.
pub fn text(found: &Findings) -> String {
    let mut out = String::new();
    let repo = found
        .repository
        .as_deref()
        .map_or(String::new(), |r| format!("/{r}"));
    let _ = writeln!(out, "registry     {}{repo}", found.registry);
    let _ = writeln!(
        out,
        "credentials  {} ({})",
        found.credentials.description, found.credentials.source
    );
    let mut auth = found.auth.scheme.clone();
    if let Some(realm) = &found.auth.realm {
        let _ = write!(auth, ", realm {realm}");
    }
    if let Some(service) = &found.auth.service {
        let _ = write!(auth, ", service {service}");
    }
    let _ = writeln!(out, "auth         {auth}");
    for (scopes, granted) in &found.auth.granted {
        let _ = writeln!(out, "  token for {scopes}: grants {}", granted.join(" "));
    }
    let _ = writeln!(out, "\nprobes");
    let width = found
        .probes
        .iter()
        .map(|p| p.probe.len())
        .max()
        .unwrap_or(0);
    for p in &found.probes {
        let mark = match p.outcome {
            Outcome::Ok => "ok     ",
            Outcome::Skipped => "skipped",
            Outcome::Refused => "refused",
            Outcome::Failed => "FAILED ",
        };
        let _ = writeln!(out, "  {:<width$}  {mark}  {}", p.probe, p.detail);
    }
    let _ = writeln!(
        out,
        "\ncapabilities ferry will use (as a sync reports them)"
    );
    for (name, value) in capability_rows(&found.capabilities) {
        let _ = writeln!(out, "  {name:<20}  {value}");
    }
    if let Some(c) = &found.cleanup {
        let _ = writeln!(out, "\ncleanup: {} deleted", c.deleted.len());
        for left in &c.left {
            let _ = writeln!(out, "  left behind: {left}");
        }
        for r in &c.repositories {
            let _ = writeln!(
                out,
                "  repository {r}: made by the mount, now empty (no registry API deletes a repository)"
            );
        }
    }
    let _ = writeln!(out, "\nexit code {}", found.exit_code);
    out
}

/// Each field of the snapshot as it serialises (`upload_flow  docker`), so a capability added
/// to the snapshot shows up here with no change.
pub fn capability_rows(
    snapshot: &ferry_distribution::capabilities::CapabilitiesSnapshot,
) -> Vec<(String, String)> {
    match serde_json::to_value(snapshot) {
        Ok(serde_json::Value::Object(fields)) => fields
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, v)
            })
            .collect(),
        _ => Vec::new(),
    }
}
