//! `ferry convert`: a regsync.yml or a `skopeo sync --src yaml` file read into ferry's config
//! shapes (registries, mappings, `TagFilterSpec`) and rendered as a mirror.yaml, with a
//! `# ferry convert:` comment on every construct that has no exact equivalent.
//!
//! Rendering: every scalar is written as a JSON string (JSON is YAML's flow subset, so any text
//! a foreign file holds is quoted safely), and comment text is cut to one line. A password
//! written in the foreign file is never copied into the output: the registry's `password:`
//! reads a `${VAR}` the comment names, so the printed config holds no secret.

mod regsync;
mod skopeo;

use std::fmt::Write as _;

use serde_yaml::Value;

use crate::filter::TagFilterSpec;

pub use regsync::regsync;
pub use skopeo::{SkopeoOptions, skopeo_sync};

/// Why a file could not be converted at all.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// Not YAML.
    #[error("{file}: not YAML: {message}")]
    Yaml {
        /// The file, as named.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// YAML, but not the shape of the format.
    #[error("{file}: {message}")]
    Shape {
        /// The file, as named.
        file: String,
        /// What was wrong.
        message: String,
    },
}

/// A converted config: the mirror.yaml text and how many notes it carries.
#[derive(Debug, Clone)]
pub struct Converted {
    /// The mirror.yaml, comments included.
    pub yaml: String,
    /// `# ferry convert:` notes in it (constructs without an exact equivalent).
    pub notes: usize,
    /// Environment variables the config reads (`${VAR}`) that the user must set.
    pub env: Vec<String>,
}

/// One registry of the output.
#[derive(Debug, Default)]
struct Registry {
    host: String,
    url: Option<String>,
    username: Option<String>,
    /// The `${VAR}` text of the password.
    password: Option<String>,
    insecure: Option<bool>,
    requests_per_second: Option<f64>,
    max_concurrent: Option<u64>,
    notes: Vec<String>,
}

/// One mapping of the output.
#[derive(Debug, Default)]
struct Mapping {
    source: String,
    targets: Vec<String>,
    tags: Option<TagFilterSpec>,
    digests: Vec<String>,
    platforms: Vec<String>,
    referrers: Option<bool>,
    referrer_include: Vec<String>,
    interval: Option<String>,
    schedule: Option<String>,
    notes: Vec<String>,
}

/// The whole output.
#[derive(Debug, Default)]
struct Doc {
    /// Said once, at the top.
    header: Vec<String>,
    notes: Vec<String>,
    images_in_flight: Option<u64>,
    registries: Vec<Registry>,
    mappings: Vec<Mapping>,
    env: Vec<String>,
}

impl Doc {
    /// The error when nothing could be converted: `what`, then every note saying why (each
    /// escaped and capped: they quote the foreign file).
    fn nothing_converted(&self, file: &str, what: &str) -> ConvertError {
        let mut message = what.to_owned();
        for note in &self.notes {
            message.push_str("; ");
            message.push_str(&ferry_distribution::text::for_error(note));
        }
        ConvertError::Shape {
            file: file.to_owned(),
            message,
        }
    }
}

impl Doc {
    fn registry(&mut self, host: &str) -> &mut Registry {
        let at = match self.registries.iter().position(|r| r.host == host) {
            Some(at) => at,
            None => {
                self.registries.push(Registry {
                    host: host.to_owned(),
                    ..Registry::default()
                });
                self.registries.len() - 1
            }
        };
        &mut self.registries[at]
    }

    /// A `${VAR}` for a password the foreign file wrote out, named after the host.
    fn password_var(&mut self, host: &str) -> String {
        let name: String = host
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        let var = format!("FERRY_PASSWORD_{name}");
        self.need_env(&var);
        format!("${{{var}}}")
    }

    fn need_env(&mut self, var: &str) {
        if !self.env.iter().any(|v| v == var) {
            self.env.push(var.to_owned());
        }
    }

    fn render(&self) -> Converted {
        let mut out = String::new();
        let mut notes = 0;
        let mut comment = |out: &mut String, indent: &str, text: &str, counted: bool| {
            if counted {
                notes += 1;
            }
            let prefix = if counted { "ferry convert: " } else { "" };
            let _ = writeln!(out, "{indent}# {prefix}{}", one_line(text));
        };
        for h in &self.header {
            comment(&mut out, "", h, false);
        }
        for n in &self.notes {
            comment(&mut out, "", n, true);
        }
        out.push_str("version: 1\n");
        if let Some(n) = self.images_in_flight {
            let _ = writeln!(out, "engine:\n  images_in_flight: {n}");
        }
        if !self.registries.is_empty() {
            out.push_str("registries:\n");
        }
        for r in &self.registries {
            for n in &r.notes {
                comment(&mut out, "  ", n, true);
            }
            let _ = writeln!(out, "  - host: {}", q(&r.host));
            if let Some(url) = &r.url {
                let _ = writeln!(out, "    url: {}", q(url));
            }
            match (&r.username, &r.password) {
                (Some(u), Some(p)) => {
                    let _ = writeln!(
                        out,
                        "    auth: {{ type: basic, username: {}, password: {} }}",
                        q(u),
                        q(p)
                    );
                }
                (None, Some(p)) => {
                    let _ = writeln!(out, "    auth: {{ type: token, token: {} }}", q(p));
                }
                _ => {}
            }
            if let Some(i) = r.insecure {
                let _ = writeln!(out, "    insecure: {i}");
            }
            if let Some(n) = r.max_concurrent {
                let _ = writeln!(out, "    max_concurrent: {n}");
            }
            if let Some(n) = r.requests_per_second {
                let _ = writeln!(out, "    requests_per_second: {n}");
            }
        }
        out.push_str("mappings:\n");
        for m in &self.mappings {
            for n in &m.notes {
                comment(&mut out, "  ", n, true);
            }
            let _ = writeln!(out, "  - source: {}", q(&m.source));
            let targets: Vec<String> = m.targets.iter().map(|t| q(t)).collect();
            let _ = writeln!(out, "    targets: [{}]", targets.join(", "));
            if let Some(tags) = &m.tags {
                let _ = writeln!(
                    out,
                    "    tags: {}",
                    serde_json::to_string(tags).unwrap_or_default()
                );
            }
            if !m.digests.is_empty() {
                let list: Vec<String> = m.digests.iter().map(|d| q(d)).collect();
                let _ = writeln!(out, "    digests: [{}]", list.join(", "));
            }
            if !m.platforms.is_empty() {
                let list: Vec<String> = m.platforms.iter().map(|p| q(p)).collect();
                let _ = writeln!(out, "    platforms: [{}]", list.join(", "));
            }
            if !m.referrer_include.is_empty() {
                let list: Vec<String> = m.referrer_include.iter().map(|p| q(p)).collect();
                let _ = writeln!(out, "    referrers: {{ include: [{}] }}", list.join(", "));
            } else if let Some(r) = m.referrers {
                let _ = writeln!(out, "    referrers: {r}");
            }
            if let Some(i) = &m.interval {
                let _ = writeln!(out, "    interval: {}", q(i));
            }
            if let Some(s) = &m.schedule {
                let _ = writeln!(out, "    schedule: {}", q(s));
            }
        }
        Converted {
            yaml: out,
            notes,
            env: self.env.clone(),
        }
    }
}

/// A scalar as YAML reads it back exactly: a JSON string.
fn q(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// Comment text on one line, control characters replaced.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A scalar's text (strings, numbers, booleans), as a foreign file may write any of them.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The text of a list of scalars (a lone scalar is a list of one).
fn texts(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(items) => items.iter().filter_map(text).collect(),
        other => text(other).into_iter().collect(),
    }
}

fn key(k: &Value) -> String {
    text(k).unwrap_or_else(|| "?".to_owned())
}

fn parse_yaml(file: &str, input: &str) -> Result<Value, ConvertError> {
    serde_yaml::from_str(input).map_err(|e| ConvertError::Yaml {
        file: file.to_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_quoted_and_comments_stay_on_one_line() {
        assert_eq!(q("a\"b\nc"), "\"a\\\"b\\nc\"");
        assert_eq!(one_line("a\nversion: 2"), "a version: 2");
    }
}
