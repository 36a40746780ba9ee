//! `ferry inspect --format`: skopeo's Go-template-style output, substituted by hand (no engine):
//! `{{.Field}}`, `{{.Labels.KEY}}`, `{{json .}}`, `{{json .Field}}` over skopeo inspect's fields.

use serde_json::Value;

/// The fields, in the order `skopeo inspect` prints them (its `ImageInspectOutput`).
pub const FIELDS: [&str; 11] = [
    "Name",
    "Digest",
    "RepoTags",
    "Created",
    "DockerVersion",
    "Labels",
    "Architecture",
    "Os",
    "Layers",
    "LayersData",
    "Env",
];

/// One piece of a template.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    /// Text printed as it is.
    Text(String),
    /// `{{.Field}}` or `{{.Labels.KEY}}` (`json`: `{{json .Field}}`); `field` None is `.`.
    Value {
        field: Option<String>,
        key: Option<String>,
        json: bool,
    },
}

/// A parsed `--format` template.
#[derive(Debug)]
pub struct Template(Vec<Piece>);

impl Template {
    /// Parses `text`; an action ferry does not know (an unknown field, a function other than
    /// `json`, an unclosed `{{`) is a usage error naming it.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                return Err(format!(
                    "--format: {{{{ at {:?} is never closed",
                    &rest[open..]
                ));
            };
            pieces.push(action(after[..close].trim())?);
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        Ok(Template(pieces))
    }

    /// Whether the template shows `RepoTags` (which costs a tag listing).
    pub fn needs_tags(&self) -> bool {
        self.0.iter().any(|p| match p {
            Piece::Value { field: None, .. } => true,
            Piece::Value { field: Some(f), .. } => f == "RepoTags",
            Piece::Text(_) => false,
        })
    }

    /// The template filled from `data` (the fields in [`FIELDS`] order), ending with a line
    /// break as skopeo's does.
    pub fn render(&self, data: &[(&str, Value)]) -> String {
        let mut out = String::new();
        for piece in &self.0 {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Value { field, key, json } => {
                    let value = match field {
                        None => whole(data),
                        Some(f) => {
                            let v = data
                                .iter()
                                .find(|(name, _)| name == f)
                                .map(|(_, v)| v.clone())
                                .unwrap_or(Value::Null);
                            match key {
                                Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
                                None => v,
                            }
                        }
                    };
                    match (json, field.as_deref(), key) {
                        (true, None, _) => out.push_str(&object_json(data)),
                        (true, _, _) => out.push_str(&value.to_string()),
                        (false, Some("Created"), None) => out.push_str(&go_time(&value)),
                        // A missing map key prints as Go's templates print it.
                        (false, _, Some(_)) if value.is_null() => out.push_str("<no value>"),
                        (false, _, _) => out.push_str(&go_text(&value)),
                    }
                }
            }
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out
    }
}

/// One `{{…}}`: `.`, `.Field`, `.Labels.KEY`, or `json` before any of them.
fn action(inner: &str) -> Result<Piece, String> {
    let (json, path) = match inner.strip_prefix("json") {
        Some(rest) if rest.starts_with(char::is_whitespace) => (true, rest.trim()),
        _ => (false, inner),
    };
    if path == "." {
        if !json {
            return Err("--format: {{.}} is not supported: use {{json .}}".into());
        }
        return Ok(Piece::Value {
            field: None,
            key: None,
            json,
        });
    }
    let Some(path) = path.strip_prefix('.') else {
        return Err(format!(
            "--format: {{{{{inner}}}}} is not supported: ferry knows {{{{.Field}}}}, \
             {{{{.Labels.KEY}}}}, {{{{json .}}}} and {{{{json .Field}}}}"
        ));
    };
    let (field, key) = match path.split_once('.') {
        Some((f, k)) => (f, Some(k.to_owned())),
        None => (path, None),
    };
    if !FIELDS.contains(&field) {
        return Err(format!(
            "--format: unknown field .{field}: the fields are {}",
            FIELDS.join(", ")
        ));
    }
    if key.is_some() && field != "Labels" {
        return Err(format!(
            "--format: .{path}: only .Labels has keys to look up (.Labels.KEY)"
        ));
    }
    Ok(Piece::Value {
        field: Some(field.to_owned()),
        key,
        json,
    })
}

/// `{{json .}}`: the fields as one JSON object, in skopeo's order.
fn object_json(data: &[(&str, Value)]) -> String {
    let members: Vec<String> = data
        .iter()
        .map(|(name, v)| format!("{}:{v}", Value::from(*name)))
        .collect();
    format!("{{{}}}", members.join(","))
}

fn whole(data: &[(&str, Value)]) -> Value {
    Value::Object(
        data.iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}

/// A value as Go's templates print it: a string bare, a list `[a b]`, a map `map[k:v]` (keys
/// sorted), nothing for null.
fn go_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(list) => format!(
            "[{}]",
            list.iter().map(go_text).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let mut pairs: Vec<(&String, &Value)> = map.iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_text(v)))
                .collect();
            format!("map[{}]", inner.join(" "))
        }
        other => other.to_string(),
    }
}

/// `Created` as Go prints a `time.Time`: `2026-11-30 10:00:00 +0000 UTC`.
fn go_time(value: &Value) -> String {
    match value
        .as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
    {
        Some(t) => t
            .with_timezone(&chrono::Utc)
            .format("%Y-%m-%d %H:%M:%S%.f +0000 UTC")
            .to_string(),
        None => go_text(value),
    }
}

/// The fields of an image as skopeo names them: `name` (repository), the manifest's `digest`,
/// its `tags`, its `manifest` document and its config document (`Null` without one).
pub fn fields(
    name: &str,
    digest: &str,
    tags: Option<Vec<String>>,
    manifest: &Value,
    config: &Value,
) -> Vec<(&'static str, Value)> {
    let layers: Vec<Value> = manifest["layers"].as_array().cloned().unwrap_or_default();
    let or = |v: &Value, empty: Value| if v.is_null() { empty } else { v.clone() };
    vec![
        ("Name", Value::from(name)),
        ("Digest", Value::from(digest)),
        ("RepoTags", Value::from(tags.unwrap_or_default())),
        ("Created", config["created"].clone()),
        (
            "DockerVersion",
            or(&config["docker_version"], Value::from("")),
        ),
        ("Labels", config["config"]["Labels"].clone()),
        ("Architecture", or(&config["architecture"], Value::from(""))),
        ("Os", or(&config["os"], Value::from(""))),
        (
            "Layers",
            layers.iter().map(|l| l["digest"].clone()).collect(),
        ),
        (
            "LayersData",
            layers
                .iter()
                .map(|l| {
                    serde_json::json!({
                        "MIMEType": l["mediaType"],
                        "Digest": l["digest"],
                        "Size": l["size"],
                        "Annotations": l["annotations"],
                    })
                })
                .collect(),
        ),
        ("Env", config["config"]["Env"].clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Vec<(&'static str, Value)> {
        let manifest = serde_json::json!({"layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:aa", "size": 3}
        ]});
        let config = serde_json::json!({
            "created": "2026-11-30T10:00:00Z", "architecture": "amd64", "os": "linux",
            "config": {"Labels": {"b": "2", "a": "1"}, "Env": ["PATH=/bin"]}
        });
        fields(
            "reg.example/app",
            "sha256:dd",
            Some(vec!["v1".into()]),
            &manifest,
            &config,
        )
    }

    #[test]
    fn fields_are_substituted_as_go_templates_print_them() {
        let render = |t: &str| Template::parse(t).unwrap().render(&data());
        assert_eq!(render("{{.Digest}}"), "sha256:dd\n");
        assert_eq!(
            render("{{ .Name }}:{{.Os}}/{{.Architecture}}"),
            "reg.example/app:linux/amd64\n"
        );
        assert_eq!(render("{{.Labels}}"), "map[a:1 b:2]\n");
        assert_eq!(render("{{.Labels.a}} {{.Labels.zz}}"), "1 <no value>\n");
        assert_eq!(render("{{.Layers}}"), "[sha256:aa]\n");
        assert_eq!(render("{{.Created}}"), "2026-11-30 10:00:00 +0000 UTC\n");
        assert_eq!(render("{{json .Env}}"), "[\"PATH=/bin\"]\n");
        let whole: Value = serde_json::from_str(&render("{{json .}}")).unwrap();
        assert_eq!(whole["RepoTags"], serde_json::json!(["v1"]));
        assert!(render("{{json .}}").starts_with("{\"Name\":\"reg.example/app\",\"Digest\""));
    }

    #[test]
    fn an_unknown_field_or_action_is_refused_naming_it() {
        let err = Template::parse("{{.Digest}} {{.Size}}").unwrap_err();
        assert!(err.contains("unknown field .Size"), "{err}");
        assert!(Template::parse("{{.Digest").is_err());
        assert!(Template::parse("{{index .Labels \"a\"}}").is_err());
        assert!(Template::parse("{{.Os.x}}").is_err());
        assert!(!Template::parse("{{.Digest}}").unwrap().needs_tags());
        assert!(Template::parse("{{json .}}").unwrap().needs_tags());
    }
}
