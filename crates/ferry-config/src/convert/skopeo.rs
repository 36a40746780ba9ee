//! A `skopeo sync --src yaml` file (skopeo-sync(1): registry hosts at the top, each with
//! `images`, `images-by-tag-regex`, `images-by-semver`, `credentials`, `tls-verify`,
//! `cert-dir`) into a mirror.yaml whose targets are `--dest PREFIX` as `skopeo sync --dest
//! docker FILE PREFIX` names them: PREFIX/<last path part of the image>, or with `--scoped`
//! PREFIX/<registry>/<image>.

use serde_yaml::{Mapping as YamlMap, Value};

use super::{ConvertError, Converted, Doc, Mapping, key, parse_yaml, text, texts};
use crate::filter::TagFilterSpec;
use ferry_distribution::digest::Digest;

/// How `skopeo sync` was (or would be) run with the file.
#[derive(Debug, Clone, Default)]
pub struct SkopeoOptions {
    /// The destination registry and path (`my-registry.local.lan/repo`).
    pub dest: String,
    /// `--scoped`: the source's whole name under the destination.
    pub scoped: bool,
    /// `--dest-tls-verify=false`: the destination is plain HTTP or its certificate unchecked.
    pub dest_insecure: bool,
    /// `--all`: every platform of an index (skopeo's default is the running platform's).
    pub all: bool,
}

/// Converts the skopeo sync YAML text `input` (named `file` in messages and the header).
pub fn skopeo_sync(
    file: &str,
    input: &str,
    options: &SkopeoOptions,
) -> Result<Converted, ConvertError> {
    let shape = |message: &str| ConvertError::Shape {
        file: file.to_owned(),
        message: message.to_owned(),
    };
    let dest = options.dest.trim_end_matches('/');
    if dest.is_empty() || dest.contains("://") {
        return Err(shape(
            "--dest must be a registry and path (my-registry.local.lan/repo), no scheme",
        ));
    }
    let root = parse_yaml(file, input)?;
    let Value::Mapping(root) = root else {
        return Err(shape(
            "a skopeo sync file is a mapping of registry hosts, each with `images` and the like",
        ));
    };
    let mut doc = Doc {
        header: vec![format!(
            "Converted from skopeo sync file {file} (--dest {dest}{}) by `ferry convert \
             skopeo-sync`; check every `ferry convert:` note below, then `ferry validate` and \
             `ferry sync --dry-run`.",
            if options.scoped { " --scoped" } else { "" }
        )],
        ..Doc::default()
    };
    if !options.all {
        doc.notes.push(
            "skopeo sync without --all copies only the running machine's platform of a \
             multi-platform image; ferry copies every platform (add `platforms: [os/arch]` to a \
             mapping to copy fewer)"
                .to_owned(),
        );
    }
    if options.dest_insecure {
        let host = dest.split('/').next().unwrap_or(dest).to_owned();
        doc.registry(&host).insecure = Some(true);
    }
    for (k, v) in &root {
        let host = key(k);
        let Value::Mapping(reg) = v else {
            doc.notes
                .push(format!("skopeo sync `{host}` is not a mapping: left out"));
            continue;
        };
        registry(&mut doc, &host, reg, dest, options.scoped);
    }
    if doc.mappings.is_empty() {
        return Err(doc.nothing_converted(
            file,
            "no image to convert (no registry names `images` and the like)",
        ));
    }
    Ok(doc.render())
}

fn target(dest: &str, host: &str, image: &str, scoped: bool) -> String {
    if scoped {
        format!("{dest}/{host}/{image}")
    } else {
        let base = image.rsplit('/').next().unwrap_or(image);
        format!("{dest}/{base}")
    }
}

fn registry(doc: &mut Doc, host: &str, reg: &YamlMap, dest: &str, scoped: bool) {
    for (k, v) in reg {
        let name = key(k);
        match name.as_str() {
            "images" => {
                let Value::Mapping(images) = v else {
                    doc.notes.push(format!(
                        "skopeo sync {host} `images` is not a mapping: left out"
                    ));
                    continue;
                };
                for (image, refs) in images {
                    let image = key(image);
                    let mut m = Mapping {
                        source: format!("{host}/{image}"),
                        targets: vec![target(dest, host, &image, scoped)],
                        ..Mapping::default()
                    };
                    let refs = texts(refs);
                    if !refs.is_empty() {
                        let (digests, tags): (Vec<String>, Vec<String>) =
                            refs.into_iter().partition(|r| Digest::parse(r).is_ok());
                        m.digests = digests;
                        // Digests alone select no tag (ferry's rule for a mapping with
                        // `digests` and no `tags`).
                        if !tags.is_empty() {
                            m.tags = Some(TagFilterSpec {
                                exact: tags,
                                ..TagFilterSpec::default()
                            });
                        }
                    }
                    m.referrers = Some(false);
                    doc.mappings.push(m);
                }
            }
            "images-by-tag-regex" | "images-by-semver" => {
                let Value::Mapping(images) = v else {
                    doc.notes.push(format!(
                        "skopeo sync {host} `{name}` is not a mapping: left out"
                    ));
                    continue;
                };
                for (image, rule) in images {
                    let image = key(image);
                    let rule = text(rule).unwrap_or_default();
                    let mut spec = TagFilterSpec::default();
                    let mut notes = Vec::new();
                    if name == "images-by-tag-regex" {
                        spec.regex = Some(rule);
                    } else {
                        spec.semver = Some(rule);
                        notes.push(format!(
                            "skopeo sync {host}/{image} images-by-semver is read with ferry's \
                             version rules (docs/config.md): lenient versions, prereleases only \
                             for a range naming one, as Masterminds/semver does"
                        ));
                    }
                    doc.mappings.push(Mapping {
                        source: format!("{host}/{image}"),
                        targets: vec![target(dest, host, &image, scoped)],
                        tags: Some(spec),
                        referrers: Some(false),
                        notes,
                        ..Mapping::default()
                    });
                }
            }
            "credentials" => {
                let username = v.get("username").and_then(text);
                let written = v.get("password").and_then(text);
                if let (Some(u), Some(_)) = (username, written) {
                    let var = doc.password_var(host);
                    let r = doc.registry(host);
                    r.username = Some(u);
                    r.notes.push(format!(
                        "skopeo sync {host} `credentials.password` is not copied here: set {} \
                         to it",
                        &var[2..var.len() - 1]
                    ));
                    r.password = Some(var);
                } else {
                    doc.registry(host).notes.push(format!(
                        "skopeo sync {host} `credentials` without username and password: left out"
                    ));
                }
            }
            "tls-verify" => match v.as_bool() {
                Some(false) => doc.registry(host).insecure = Some(true),
                Some(true) => {}
                None => doc.notes.push(format!(
                    "skopeo sync {host} `tls-verify` is not true or false"
                )),
            },
            "cert-dir" => {
                let dir = text(v).unwrap_or_default();
                doc.registry(host).notes.push(format!(
                    "skopeo sync {host} `cert-dir: {dir}`: ferry's `ca_bundle` is one PEM file \
                     (cat {dir}/*.crt > ca.pem); a client certificate goes in \
                     `client_cert`/`client_key`"
                ));
            }
            other => doc.notes.push(format!(
                "skopeo sync {host} `{other}` has no ferry equivalent: left out"
            )),
        }
    }
}
