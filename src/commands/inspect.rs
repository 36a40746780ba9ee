//! `ferry inspect`: one image's manifest as a registry or a layout serves it (digest, media type,
//! size, an index's platforms, the config's summary, layers, referrers), `--raw` and `--config`.

use clap::Args;
use ferry_config::Origin;
use ferry_distribution::ops::{Manifest, Referrer};
use ferry_distribution::{Digest, Error, Operation, media};
use ferry_sync::report::human_bytes;
use ferry_sync::{Run, RunContext, Source};
use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::cli::RegistryAccess;
use crate::exit::{self, Exit};
use crate::progress::{Progress, print_stdout};

/// The exit codes and examples `ferry inspect --help` ends with (docs/inspect.md says the same).
pub const AFTER_HELP: &str = "\
Examples:
  ferry inspect docker.io/library/alpine:3.20
  ferry inspect registry.local:5000/mirror/alpine@sha256:<digest> --json
  ferry inspect oci:./mirror/library/alpine:3.20 --raw > manifest.json
  ferry inspect registry.local:5000/app:v1 --config-blob --tls-verify=false
  ferry inspect registry.local:5000/app:v1 --signatures -c mirror.yaml
  ferry inspect --format '{{.Digest}}' docker.io/library/alpine:3.20
  ferry inspect --format '{{json .}}' registry.local:5000/app:v1 --cert-dir ./certs

Exit codes:
  0  the image was shown
  2  it could not be: no such image, a registry error, a manifest over the size limit
  3  the -c config is invalid
  4  the registry refused the credentials
  64 the command line is wrong (a flag, or a reference ferry cannot read)";

/// No config blob is read past this (the manifest limit: a config is JSON of the same order).
const CONFIG_LIMIT: u64 = 4 * 1024 * 1024;

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The image: `host/repo:tag`, `host/repo@sha256:…` (`docker://` accepted; no tag or digest
    /// means `latest`), or in a layout, `oci:DIR:TAG` / `oci:DIR@sha256:…`.
    pub reference: String,
    /// Print the manifest's bytes exactly as served (no newline added), nothing else.
    #[arg(long, conflicts_with_all = ["config_blob", "json"])]
    pub raw: bool,
    /// Print the image's config blob exactly as served (skopeo's `inspect --config`; `-c` is
    /// the registries config); a single-platform image only.
    #[arg(long, conflicts_with = "json")]
    pub config_blob: bool,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also list the image's signatures (its `.sig` layers and Sigstore bundle referrers), who
    /// signed each and whether it verifies under the `signatures:` of the -c config's mapping
    /// for this repository (without one, each is shown unverified).
    #[arg(long)]
    pub signatures: bool,
    /// Print only what this Go-template-style text names, as skopeo's `inspect --format`:
    /// `{{.Digest}}`, `{{.Name}}`, `{{json .}}`, `{{.Labels}}`, … (docs/inspect.md lists them).
    #[arg(long, short = 'f', value_name = "TEMPLATE", conflicts_with_all = ["raw", "config_blob", "json", "signatures"])]
    pub format: Option<String>,
    #[command(flatten)]
    pub one: crate::cli::OneRegistryArgs,
    #[command(flatten)]
    pub tls: crate::cli::AccessArgs,
    #[command(flatten)]
    pub access: RegistryAccess,
}

pub async fn run(args: &InspectArgs, progress: &Progress) -> Exit {
    let reference = super::without_docker_transport(&args.reference);
    let (origin, name) = match image_of(reference) {
        Ok(found) => found,
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
    };
    let template = match args
        .format
        .as_deref()
        .map(super::inspect_format::Template::parse)
    {
        Some(Err(message)) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
        Some(Ok(t)) => Some(t),
        None => None,
    };
    let mut config = match &args.access.config {
        Some(path) => match super::load_registries(path, progress) {
            Ok(c) => c,
            Err(code) => return code,
        },
        None => super::empty_config(),
    };
    if let Origin::Registry { registry, .. } = &origin {
        match super::access::Access::new(&args.tls).one(&args.one) {
            Ok(access) => access.apply_to_host(&mut config, registry),
            Err(message) => {
                progress.eprint(&format!("error: {message}"));
                return Exit::Usage;
            }
        }
    }
    let ctx = RunContext::new(&config);
    let run = Run::new(config.clone(), ctx);
    // The policy of the -c config's mapping whose source is this repository, if it has one.
    let policy = config
        .mappings
        .iter()
        .find(|m| m.origin == origin && m.signatures.is_some())
        .and_then(|m| m.signatures.clone());
    let shown = match &template {
        Some(template) => formatted(template, &origin, &name, &run).await,
        None => inspect(args, &origin, &name, &run, policy.as_ref()).await,
    };
    match shown {
        Ok(()) => Exit::Clean,
        Err(Failure::Registry(e)) => {
            progress.eprint(&format!("error: inspect {reference}: {e}"));
            for hint in crate::hints::for_error(&["inspect"], &e) {
                progress.eprint(&hint);
            }
            exit::for_error(&e)
        }
        Err(Failure::Content(message)) => {
            progress.eprint(&format!("error: inspect {reference}: {message}"));
            Exit::Failed
        }
    }
}

enum Failure {
    Registry(Error),
    Content(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Registry(e)
    }
}

/// The repository or layout `reference` names and the tag or digest in it (`latest` when a
/// registry reference names neither, as skopeo and crane take it).
fn image_of(reference: &str) -> Result<(Origin, String), String> {
    let (origin, tag, digest) = super::copy::parse_source(reference)?;
    match (tag, digest, &origin) {
        (_, Some(digest), _) => Ok((origin, digest)),
        (Some(tag), None, _) => Ok((origin, tag)),
        (None, None, Origin::Registry { .. }) => Ok((origin, "latest".to_owned())),
        (
            None,
            None,
            Origin::OciLayout { .. } | Origin::OciArchive { .. } | Origin::DockerArchive { .. },
        ) => Err(format!(
            "{reference} names no tag or digest: say which image of the layout (e.g. {reference}:latest)"
        )),
    }
}

async fn inspect(
    args: &InspectArgs,
    origin: &Origin,
    name: &str,
    run: &Run,
    policy: Option<&ferry_config::SignaturePolicy>,
) -> Result<(), Failure> {
    let source = run.source(origin).await?;
    let manifest = source.get_manifest(name).await?;
    if args.raw {
        crate::progress::write_stdout(&manifest.bytes);
        return Ok(());
    }
    let doc: Value = serde_json::from_slice(&manifest.bytes)
        .map_err(|e| Failure::Content(format!("manifest {} is not JSON: {e}", manifest.digest)))?;
    if args.config_blob {
        let Some(config) = descriptor(&doc["config"]) else {
            return Err(Failure::Content(format!(
                "{} ({}) has no config: inspect one platform's manifest by its digest",
                manifest.digest, manifest.media_type
            )));
        };
        let bytes = read_config(&source, &config).await?;
        crate::progress::write_stdout(&bytes);
        return Ok(());
    }
    let shown = Shown::of(&source, &manifest, &doc).await?;
    let image = match Digest::parse(name) {
        Ok(_) => format!("{}@{name}", source.name()),
        Err(_) => format!("{}:{name}", source.name()),
    };
    let signatures = match args.signatures {
        true => Some(ferry_sync::inspect_signatures(&source, &manifest.digest, policy).await?),
        false => None,
    };
    if args.json {
        let mut doc = shown.to_json(&image, &manifest);
        if let Some(list) = &signatures {
            doc["signatures"] = json!({"policy": policy.is_some(), "found": list});
        }
        crate::progress::println_stdout(&format!("{doc:#}"));
    } else {
        let mut text = shown.render(&image, &manifest);
        if let Some(list) = &signatures {
            text.push_str(&render_signatures(list, policy.is_some()));
        }
        print_stdout(&text);
    }
    Ok(())
}

/// `--format TEMPLATE`: the template filled from the image as skopeo names its fields. For an
/// index, as skopeo does, the fields of config and layers are the child's for this machine's
/// platform (linux/amd64 on x86_64, linux/arm64 on aarch64; else the first child), and Digest
/// the index's.
async fn formatted(
    template: &super::inspect_format::Template,
    origin: &Origin,
    name: &str,
    run: &Run,
) -> Result<(), Failure> {
    let source = run.source(origin).await?;
    let manifest = source.get_manifest(name).await?;
    let parse = |m: &Manifest| {
        serde_json::from_slice::<Value>(&m.bytes)
            .map_err(|e| Failure::Content(format!("manifest {} is not JSON: {e}", m.digest)))
    };
    let mut doc = parse(&manifest)?;
    if media::is_index(&manifest.media_type) {
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        let children = doc["manifests"].as_array().cloned().unwrap_or_default();
        let child = children
            .iter()
            .find(|m| m["platform"]["os"] == "linux" && m["platform"]["architecture"] == arch)
            .or(children.first())
            .and_then(descriptor);
        if let Some(child) = child {
            doc = parse(&source.get_manifest(&child.digest.to_string()).await?)?;
        }
    }
    let config = match descriptor(&doc["config"]) {
        Some(d) if d.media_type != media::OCI_EMPTY_JSON => {
            serde_json::from_slice(&read_config(&source, &d).await?).unwrap_or(Value::Null)
        }
        _ => Value::Null,
    };
    let tags = match template.needs_tags() {
        true => Some(source.list_tags().await?),
        false => None,
    };
    let digest = manifest.digest.to_string();
    let fields = super::inspect_format::fields(&source.name(), &digest, tags, &doc, &config);
    print_stdout(&template.render(&fields));
    Ok(())
}

/// A descriptor's digest, size and media type, when it has a valid digest.
#[derive(Debug, Clone)]
struct Descriptor {
    digest: Digest,
    size: u64,
    media_type: String,
}

fn descriptor(value: &Value) -> Option<Descriptor> {
    Some(Descriptor {
        digest: Digest::parse(value["digest"].as_str()?).ok()?,
        size: value["size"].as_u64().unwrap_or(0),
        media_type: value["mediaType"].as_str().unwrap_or_default().to_owned(),
    })
}

/// The config blob's bytes, at most [`CONFIG_LIMIT`] and checked against its digest.
async fn read_config(source: &Source, config: &Descriptor) -> Result<Vec<u8>, Failure> {
    if config.size > CONFIG_LIMIT {
        return Err(Failure::Content(format!(
            "config {} declares {} bytes, over the {CONFIG_LIMIT}-byte limit",
            config.digest, config.size
        )));
    }
    let mut stream = source.open_blob(&config.digest, config.size, 0).await?;
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|f| match f.into_kind() {
            Ok(kind) => Failure::Registry(source.error(Operation::BlobGet, kind)),
            Err(e) => Failure::Registry(*e),
        })?;
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > config.size {
            return Err(Failure::Content(format!(
                "config {} is longer than the {} bytes its descriptor declares",
                config.digest, config.size
            )));
        }
    }
    let actual = Digest::of_bytes(config.digest.algorithm(), &bytes);
    if actual != config.digest {
        return Err(Failure::Content(format!(
            "config {} does not match its digest: the bytes hash to {actual}",
            config.digest
        )));
    }
    Ok(bytes)
}

/// What `ferry inspect` shows of one manifest.
struct Shown {
    /// An index's children: platform (`os/arch[/variant]`, or `unknown`) and descriptor.
    platforms: Vec<(String, Descriptor)>,
    /// A manifest's config summary (when it has a readable one).
    config: Option<(Descriptor, Value)>,
    layers: Vec<Descriptor>,
    /// Where referrers were looked up (`api`, `tag schema`, `layout`) and what was found.
    referrers: (String, Vec<Referrer>),
}

impl Shown {
    async fn of(source: &Source, manifest: &Manifest, doc: &Value) -> Result<Shown, Failure> {
        let list = |key: &str| doc[key].as_array().cloned().unwrap_or_default();
        let platforms = match media::is_index(&manifest.media_type) {
            false => Vec::new(),
            true => list("manifests")
                .iter()
                .filter_map(|m| Some((platform_of(&m["platform"]), descriptor(m)?)))
                .collect(),
        };
        let layers = list("layers").iter().filter_map(descriptor).collect();
        let config = match descriptor(&doc["config"]) {
            Some(d) if d.media_type != media::OCI_EMPTY_JSON => {
                let bytes = read_config(source, &d).await?;
                let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                Some((d, value))
            }
            _ => None,
        };
        // A registry that fails the referrers lookup still shows the image; the line says why
        // its referrers are unknown.
        let referrers = match referrers(source, &manifest.digest).await {
            Ok((found_by, list)) => (found_by.to_owned(), list),
            Err(Failure::Registry(e)) => (format!("unknown: {e}"), Vec::new()),
            Err(Failure::Content(why)) => (format!("unknown: {why}"), Vec::new()),
        };
        Ok(Shown {
            platforms,
            config,
            layers,
            referrers,
        })
    }

    fn to_json(&self, image: &str, manifest: &Manifest) -> Value {
        let desc = |d: &Descriptor| json!({"digest": d.digest.to_string(), "size": d.size, "media_type": d.media_type});
        json!({
            "image": image,
            "digest": manifest.digest.to_string(),
            "media_type": manifest.media_type,
            "size": manifest.bytes.len(),
            "platforms": self.platforms.iter().map(|(p, d)| {
                let mut v = desc(d);
                v["platform"] = json!(p);
                v
            }).collect::<Vec<_>>(),
            "config": self.config.as_ref().map(|(d, c)| {
                let mut v = desc(d);
                v["created"] = c["created"].clone();
                v["os"] = c["os"].clone();
                v["architecture"] = c["architecture"].clone();
                v["variant"] = c["variant"].clone();
                v["labels"] = c["config"]["Labels"].clone();
                v
            }),
            "layers": self.layers.iter().map(desc).collect::<Vec<_>>(),
            "referrers": {
                "found_by": self.referrers.0,
                "manifests": self.referrers.1.iter().map(|r| json!({
                    "digest": r.digest.to_string(), "size": r.size,
                    "media_type": r.media_type, "artifact_type": r.artifact_type,
                })).collect::<Vec<_>>(),
            },
        })
    }

    /// Every text from outside (a media type, a label, a platform, a creation time) goes out
    /// escaped and capped (`ferry_distribution::text::for_error`): a label's newline cannot
    /// start a line of its own (a second `digest` line), nor an escape sequence reach the
    /// terminal.
    fn render(&self, image: &str, manifest: &Manifest) -> String {
        use ferry_distribution::text::for_error as esc;
        let mut out = format!(
            "image       {}\ndigest      {}\nmedia type  {}\nsize        {} bytes\n",
            esc(image),
            manifest.digest,
            esc(&manifest.media_type),
            manifest.bytes.len()
        );
        if !self.platforms.is_empty() {
            out.push_str(&format!("platforms   {}\n", self.platforms.len()));
            let width = self
                .platforms
                .iter()
                .map(|(p, _)| p.len())
                .max()
                .unwrap_or(0);
            for (p, d) in &self.platforms {
                let p = esc(p);
                out.push_str(&format!(
                    "  {p:<width$}  {}  {}\n",
                    d.digest,
                    human_bytes(d.size)
                ));
            }
        }
        if let Some((d, c)) = &self.config {
            out.push_str(&format!(
                "config      {}  {}\n",
                d.digest,
                human_bytes(d.size)
            ));
            let text = |v: &Value| v.as_str().map(esc);
            if let Some(created) = text(&c["created"]) {
                out.push_str(&format!("  created   {created}\n"));
            }
            if c["os"].is_string() {
                out.push_str(&format!("  platform  {}\n", esc(&platform_of(c))));
            }
            if let Some(labels) = c["config"]["Labels"].as_object() {
                for (k, v) in labels {
                    out.push_str(&format!(
                        "  label     {}={}\n",
                        esc(k),
                        esc(v.as_str().unwrap_or_default())
                    ));
                }
            }
        }
        if !self.layers.is_empty() {
            let total: u64 = self.layers.iter().map(|l| l.size).sum();
            out.push_str(&format!(
                "layers      {}, {}\n",
                self.layers.len(),
                human_bytes(total)
            ));
            for l in &self.layers {
                out.push_str(&format!("  {}  {}\n", l.digest, human_bytes(l.size)));
            }
        }
        let (found_by, list) = &self.referrers;
        match list.is_empty() {
            true => out.push_str(&format!("referrers   none ({found_by})\n")),
            false => {
                out.push_str(&format!("referrers   {} ({found_by})\n", list.len()));
                for r in list {
                    out.push_str(&format!(
                        "  {}  {}\n",
                        r.digest,
                        esc(r.artifact_type.as_deref().unwrap_or(&r.media_type))
                    ));
                }
            }
        }
        out
    }
}

/// The signatures section: one line per signature, its signer and whether it verifies.
fn render_signatures(list: &[ferry_sync::SignatureCheck], policy: bool) -> String {
    let under = match policy {
        true => "under the mapping's signatures: policy",
        false => "no policy: -c with a mapping for this repository that has signatures:",
    };
    let mut out = format!("signatures  {} ({under})\n", list.len());
    for s in list {
        // The signer comes from the signature's certificate: outside text.
        let signer =
            ferry_distribution::text::for_error(s.signer.as_deref().unwrap_or("signer unknown"));
        let state = match (&s.error, &s.logged_at) {
            (None, Some(at)) => format!("verified, logged {at}"),
            (None, None) => "verified".to_owned(),
            (Some(e), _) => format!("NOT VERIFIED: {e}"),
        };
        out.push_str(&format!("  {}  {signer}  {state}\n", s.place));
    }
    out
}

/// `os/arch[/variant]` of an index entry's `platform` (or a config), `unknown` without one.
fn platform_of(p: &Value) -> String {
    match (p["os"].as_str(), p["architecture"].as_str()) {
        (Some(os), Some(arch)) => match p["variant"].as_str() {
            Some(v) => format!("{os}/{arch}/{v}"),
            None => format!("{os}/{arch}"),
        },
        _ => "unknown".to_owned(),
    }
}

/// The referrers of `digest`: the registry's referrers API, else its tag-schema index
/// (`sha256-<hex>`), or the layout's index entries naming it as their subject.
async fn referrers(
    source: &Source,
    digest: &Digest,
) -> Result<(&'static str, Vec<Referrer>), Failure> {
    let layout = source.is_store();
    if let Some(list) = source.list_referrers(digest).await? {
        return Ok((
            if layout {
                "layout index"
            } else {
                "referrers API"
            },
            list,
        ));
    }
    let tag = digest.fallback_tag();
    let entries = match source.head_manifest(&tag).await? {
        None => Vec::new(),
        Some(_) => {
            let index = source.get_manifest(&tag).await?;
            let doc: Value = serde_json::from_slice(&index.bytes).unwrap_or(Value::Null);
            doc["manifests"]
                .as_array()
                .map(|list| {
                    list.iter()
                        .filter_map(|m| serde_json::from_value(m.clone()).ok())
                        .collect()
                })
                .unwrap_or_default()
        }
    };
    Ok(("tag schema", entries))
}
