//! regsync.yml (regclient's `regsync`, format as its cmd/regsync/config.go reads it) into a
//! mirror.yaml: `creds` to `registries`, `sync` entries of type repository, image and registry
//! to `mappings`, `defaults` applied to each entry as regsync applies them.
//!
//! regsync matches `tags.allow` and `tags.deny` anchored (`^pattern$`), keeps a tag matching
//! any allow and no deny, and ORs its `semverRange` list; ferry's `regex` is one unanchored
//! regex, so the allow list becomes `^(?:a|b)$` and each deny `^(?:d)$`.

use serde_yaml::{Mapping as YamlMap, Value};

use super::{ConvertError, Converted, Doc, Mapping, key, parse_yaml, text, texts};
use crate::filter::TagFilterSpec;
use ferry_distribution::reference::Reference;

/// Converts the regsync.yml text `input` (named `file` in messages and the header).
pub fn regsync(file: &str, input: &str) -> Result<Converted, ConvertError> {
    let root = parse_yaml(file, input)?;
    let Value::Mapping(root) = root else {
        return Err(ConvertError::Shape {
            file: file.to_owned(),
            message: "a regsync.yml is a mapping with `version`, `creds`, `defaults` and `sync`"
                .to_owned(),
        });
    };
    let mut doc = Doc {
        header: vec![format!(
            "Converted from regsync config {file} by `ferry convert regsync`; check every \
             `ferry convert:` note below, then `ferry validate` and `ferry sync --dry-run`."
        )],
        ..Doc::default()
    };
    let empty = YamlMap::new();
    let defaults = match root.get("defaults") {
        Some(Value::Mapping(d)) => d,
        _ => &empty,
    };
    for (k, v) in &root {
        match key(k).as_str() {
            "version" => {
                if text(v).as_deref() != Some("1") {
                    doc.notes.push(format!(
                        "regsync `version: {}`: read as version 1",
                        text(v).unwrap_or_default()
                    ));
                }
            }
            "creds" => creds(&mut doc, v),
            "defaults" => defaults_notes(&mut doc, defaults),
            "sync" => {}
            other => doc.notes.push(format!(
                "regsync `{other}` has no ferry equivalent: left out"
            )),
        }
    }
    match root.get("sync") {
        Some(Value::Sequence(entries)) => {
            for (i, entry) in entries.iter().enumerate() {
                match entry {
                    Value::Mapping(e) => sync_entry(&mut doc, i, e, defaults),
                    _ => doc
                        .notes
                        .push(format!("regsync sync[{i}] is not a mapping: left out")),
                }
            }
        }
        _ => {
            return Err(ConvertError::Shape {
                file: file.to_owned(),
                message: "no `sync:` list: nothing to convert".to_owned(),
            });
        }
    }
    if doc.mappings.is_empty() {
        return Err(doc.nothing_converted(file, "no `sync:` entry could be converted"));
    }
    Ok(doc.render())
}

/// regsync's `{{env "NAME"}}` as ferry's `${NAME}`; `None` for any other template.
fn template(doc: &mut Doc, value: &str) -> Option<String> {
    let Some(inner) = value
        .trim()
        .strip_prefix("{{")
        .and_then(|v| v.strip_suffix("}}"))
    else {
        return (!value.contains("{{")).then(|| value.to_owned());
    };
    let inner = inner.trim();
    let name = inner
        .strip_prefix("env")?
        .trim()
        .strip_prefix('"')?
        .strip_suffix('"')?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    doc.need_env(name);
    Some(format!("${{{name}}}"))
}

fn creds(doc: &mut Doc, v: &Value) {
    let Value::Sequence(entries) = v else {
        doc.notes
            .push("regsync `creds` is not a list: left out".to_owned());
        return;
    };
    for (i, entry) in entries.iter().enumerate() {
        let Value::Mapping(e) = entry else {
            doc.notes
                .push(format!("regsync creds[{i}] is not a mapping: left out"));
            continue;
        };
        let Some(host) = e.get("registry").and_then(text) else {
            doc.notes
                .push(format!("regsync creds[{i}] names no `registry`: left out"));
            continue;
        };
        let host = if host == "docker.io" || host == "index.docker.io" {
            "docker.io".to_owned()
        } else {
            host
        };
        let mut notes = Vec::new();
        let mut out = super::Registry::default();
        let mut tls = None;
        for (k, v) in e {
            let name = key(k);
            match name.as_str() {
                "registry" => {}
                "tls" => tls = text(v),
                "hostname" => match text(v) {
                    Some(h) if h != host => out.url = Some(h),
                    _ => {}
                },
                "user" => match text(v).and_then(|u| template(doc, &u)) {
                    Some(u) => out.username = Some(u),
                    None => notes.push(
                        "regsync `user` is a template other than {{env \"NAME\"}}: write the \
                         user name here"
                            .to_owned(),
                    ),
                },
                "pass" | "token" => {
                    let written = text(v).unwrap_or_default();
                    let value = match template(doc, &written) {
                        Some(t) if t.starts_with("${") && t.ends_with('}') => t,
                        other => {
                            let var = doc.password_var(&host);
                            notes.push(match other {
                                Some(_) => format!(
                                    "regsync `{name}` was written out in the file; it is not \
                                     copied here: set {} to it",
                                    &var[2..var.len() - 1]
                                ),
                                None => format!(
                                    "regsync `{name}` is a template ferry cannot run (`{{{{file \
                                     …}}}}` and the like): set {} to the secret",
                                    &var[2..var.len() - 1]
                                ),
                            });
                            var
                        }
                    };
                    if name == "token" {
                        notes.push(
                            "regsync `token` is sent as a bearer token (ferry's `type: token`)"
                                .to_owned(),
                        );
                    }
                    out.password = Some(value);
                }
                "reqPerSec" => {
                    out.requests_per_second = v.as_f64().filter(|n| *n > 0.0);
                }
                "reqConcurrent" => out.max_concurrent = v.as_u64().filter(|n| *n > 0),
                "regcert" => notes.push(
                    "regsync `regcert` holds the CA certificate itself: write it to a PEM file \
                     and name that file in `ca_bundle`"
                        .to_owned(),
                ),
                "clientCert" | "clientKey" => notes.push(format!(
                    "regsync `{name}` holds the PEM itself: write it to a file and name that \
                     file in `{}`",
                    if name == "clientCert" {
                        "client_cert"
                    } else {
                        "client_key"
                    }
                )),
                "credHelper" => notes.push(
                    "regsync `credHelper`: ferry runs no credential helper; it reads the \
                     docker/podman login files when `auth` is left out"
                        .to_owned(),
                ),
                other => notes.push(format!(
                    "regsync creds `{other}` has no ferry equivalent: left out"
                )),
            }
        }
        match tls.as_deref() {
            None | Some("enabled") => {}
            Some("disabled") => {
                out.insecure = Some(true);
                notes.push(
                    "regsync `tls: disabled` (plain HTTP): ferry's `insecure: true` allows \
                     plain HTTP and also skips certificate checks over HTTPS"
                        .to_owned(),
                );
            }
            Some("insecure") => out.insecure = Some(true),
            Some(other) => notes.push(format!("regsync `tls: {other}` is not known: left out")),
        }
        if let Some(u) = &out.url {
            let scheme = if out.insecure == Some(true) && tls.as_deref() == Some("disabled") {
                "http"
            } else {
                "https"
            };
            out.url = Some(format!("{scheme}://{u}"));
        }
        if out.username.is_some() && out.password.is_none() {
            notes.push("regsync `user` without `pass`: left out".to_owned());
            out.username = None;
        }
        let slot = doc.registry(&host);
        *slot = super::Registry {
            host: host.clone(),
            notes,
            ..out
        };
    }
}

/// The defaults that are not applied per mapping: said once.
fn defaults_notes(doc: &mut Doc, d: &YamlMap) {
    for (k, v) in d {
        let name = key(k);
        match name.as_str() {
            // Applied to each mapping.
            "interval" | "schedule" | "referrers" | "referrerFilters" => {}
            "parallel" => match v.as_u64().filter(|n| *n > 0) {
                Some(n) => doc.images_in_flight = Some(n),
                None => doc
                    .notes
                    .push("regsync `defaults.parallel` is not a positive number: left out".into()),
            },
            "ratelimit" => doc.notes.push(
                "regsync `defaults.ratelimit` (skip while the source's pull limit is low): ferry \
                 slows down on the registry's 429s and Retry-After instead; set \
                 `requests_per_second` on a registry to pace it"
                    .to_owned(),
            ),
            other => doc.notes.push(format!(
                "regsync `defaults.{other}` has no ferry equivalent: left out"
            )),
        }
    }
}

fn sync_entry(doc: &mut Doc, i: usize, e: &YamlMap, defaults: &YamlMap) {
    let source = e.get("source").and_then(text).unwrap_or_default();
    let target = e.get("target").and_then(text).unwrap_or_default();
    let kind = e.get("type").and_then(text).unwrap_or_default();
    let mut m = Mapping::default();
    let here = format!("regsync sync[{i}] ({source})");
    match kind.as_str() {
        "repository" | "image" => {
            let (Ok(src), Ok(dst)) = (Reference::parse(&source), Reference::parse(&target)) else {
                doc.notes.push(format!(
                    "{here}: source or target is not a reference ferry reads: left out"
                ));
                return;
            };
            m.source = format!("{}/{}", src.registry, src.repository);
            m.targets = vec![format!("{}/{}", dst.registry, dst.repository)];
            if kind == "image" {
                match (&src.digest, &src.tag) {
                    (Some(d), _) => m.digests.push(d.to_string()),
                    (None, tag) => {
                        m.tags = Some(TagFilterSpec {
                            exact: vec![tag.clone().unwrap_or_else(|| "latest".to_owned())],
                            ..TagFilterSpec::default()
                        });
                    }
                }
                if dst.tag.is_some() && dst.tag != src.tag {
                    m.notes.push(format!(
                        "{here}: the target's tag {} differs from the source's; ferry keeps \
                         the source's tag",
                        dst.tag.clone().unwrap_or_default()
                    ));
                }
            } else if src.tag.is_some() || src.digest.is_some() {
                m.notes.push(format!(
                    "{here}: a repository entry's tag or digest is ignored, as regsync does"
                ));
            }
        }
        "registry" => {
            m.source = format!("{}/**", source.trim_end_matches('/'));
            m.targets = vec![target.trim_end_matches('/').to_owned()];
            m.notes.push(format!(
                "{here}: type registry: every repository of the catalog, at most \
                 max_repositories (1000 by default)"
            ));
        }
        other => {
            doc.notes.push(format!(
                "{here}: type `{other}` is not repository, image or registry: left out"
            ));
            return;
        }
    }
    for (k, v) in e {
        let name = key(k);
        match name.as_str() {
            "source" | "target" | "type" | "interval" | "schedule" | "referrers"
            | "referrerFilters" => {}
            "tags" => tags(&mut m, &here, v),
            "platforms" => m.platforms = texts(v),
            "platform" => {
                m.platforms = texts(v);
                m.notes.push(format!(
                    "{here}: regsync `platform` copies that one image; ferry copies an index \
                     holding only it"
                ));
            }
            "repos" => m.notes.push(format!(
                "{here}: regsync `repos` allow/deny has no ferry equivalent (a whole-registry \
                 source takes every repository under its prefix): left out"
            )),
            other => m.notes.push(format!(
                "{here}: regsync `{other}` has no ferry equivalent: left out"
            )),
        }
    }
    // Defaults as regsync applies them: the entry's own schedule or interval, else the
    // defaults' schedule, else their interval.
    let own = |k: &str| e.get(k).and_then(text).filter(|t| !t.is_empty());
    let default = |k: &str| defaults.get(k).and_then(text).filter(|t| !t.is_empty());
    let (interval, schedule) = match (own("interval"), own("schedule")) {
        (None, None) => match default("schedule") {
            Some(s) => (None, Some(s)),
            None => (default("interval"), None),
        },
        (i, s) => (i, s),
    };
    if let Some(s) = schedule {
        match crate::Schedule::cron(&s) {
            Ok(_) => m.schedule = Some(s),
            Err(e) => m.notes.push(format!("{here}: schedule left out: {e}")),
        }
    } else if let Some(i) = interval {
        match crate::Schedule::interval(&i) {
            Ok(_) => m.interval = Some(i),
            Err(e) => m.notes.push(format!(
                "{here}: interval {i} left out ({e}); write it as ferry reads durations"
            )),
        }
    }
    let referrers = e
        .get("referrers")
        .or_else(|| defaults.get("referrers"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    m.referrers = Some(referrers);
    if referrers {
        let filters = e
            .get("referrerFilters")
            .or_else(|| defaults.get("referrerFilters"));
        if let Some(Value::Sequence(list)) = filters {
            for f in list {
                if let Some(t) = f.get("artifactType").and_then(text) {
                    m.referrer_include.push(t);
                }
                if f.get("annotations").is_some() {
                    m.notes.push(format!(
                        "{here}: regsync referrerFilters `annotations` has no ferry equivalent: \
                         left out"
                    ));
                }
            }
        }
    }
    doc.mappings.push(m);
}

fn tags(m: &mut Mapping, here: &str, v: &Value) {
    let Value::Mapping(t) = v else {
        m.notes
            .push(format!("{here}: regsync `tags` is not a mapping: left out"));
        return;
    };
    let mut spec = m.tags.take().unwrap_or_default();
    for (k, v) in t {
        match key(k).as_str() {
            "allow" => {
                let list = texts(v);
                if !list.is_empty() {
                    spec.regex = Some(format!("^(?:{})$", list.join("|")));
                }
            }
            "deny" => spec
                .deny
                .extend(texts(v).iter().map(|d| format!("^(?:{d})$"))),
            "semverRange" => {
                let list = texts(v);
                if !list.is_empty() {
                    spec.semver = Some(list.join(" || "));
                    m.notes.push(format!(
                        "{here}: semverRange is read with ferry's version rules (docs/config.md): \
                         lenient versions, prereleases only for a range naming one"
                    ));
                }
            }
            other => m.notes.push(format!(
                "{here}: regsync tags `{other}` has no ferry equivalent: left out"
            )),
        }
    }
    m.tags = Some(spec);
}
