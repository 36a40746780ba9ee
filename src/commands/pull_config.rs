//! `ferry pull-config`: renders the config's mirror rules (ferry-config's `pull` module) as a
//! runtime's pull configuration: containerd hosts.toml files, registries.conf, IDMS or ITMS.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use ferry_config::pull::{Format, PullRule, Scope, Unexpressed, pull_rules};

use crate::cli::ConfigArg;
use crate::exit::Exit;
use crate::progress::{Progress, print_stdout};

pub const AFTER_HELP: &str = "\
Examples:
  ferry pull-config -c mirror.yaml --format registries-conf > /etc/containers/registries.conf.d/ferry.conf
  ferry pull-config -c mirror.yaml --format containerd --root /etc/containerd/certs.d
  ferry pull-config -c mirror.yaml --format idms | kubectl apply -f -
  ferry pull-config -c mirror.yaml --format itms --json

A mapping whose target keeps the source's repository path is a prefix rule; one that renames
it (a/b to m/c, or a target group's m/a/b) is an exact rule. containerd mirrors whole hosts
at the same path, so it takes prefix rules only; an IDMS lists only mappings that keep the
source's digests (no platform filter, or platforms_keep_digest). Whatever a format cannot say
is named on stderr with the reason. Nothing is sent to any registry.

Exit codes:
  0  every registry mapping is in the output
  1  some mappings or targets could not be expressed (named on stderr); the rest is written
  2  nothing could be expressed, or --root could not be written
  3  the configuration is invalid
  64 the command line is wrong";

#[derive(Debug, Args)]
pub struct PullConfigArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// What to write: containerd `hosts.toml` files, a containers-registries.conf (podman,
    /// CRI-O), or an OpenShift ImageDigestMirrorSet / ImageTagMirrorSet.
    #[arg(long, value_enum)]
    pub format: PullFormat,
    /// With `--format containerd`: write `<DIR>/<host>/hosts.toml` for each source registry
    /// (containerd's `config_path`, e.g. /etc/containerd/certs.d) instead of printing them.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// `metadata.name` of the IDMS or ITMS object.
    #[arg(long, value_name = "NAME", default_value = "ferry-mirror")]
    pub name: String,
    /// Print the rules, the files and what was left out as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PullFormat {
    /// containerd `hosts.toml`, one per source registry.
    Containerd,
    /// containers-registries.conf(5) `[[registry]]` entries (podman, CRI-O, buildah, skopeo).
    RegistriesConf,
    /// OpenShift `ImageDigestMirrorSet` (pulls by digest).
    Idms,
    /// OpenShift `ImageTagMirrorSet` (pulls by tag).
    Itms,
}

impl PullFormat {
    fn format(self) -> Format {
        match self {
            PullFormat::Containerd => Format::Containerd,
            PullFormat::RegistriesConf => Format::RegistriesConf,
            PullFormat::Idms => Format::Idms,
            PullFormat::Itms => Format::Itms,
        }
    }

    fn name(self) -> &'static str {
        match self {
            PullFormat::Containerd => "containerd",
            PullFormat::RegistriesConf => "registries-conf",
            PullFormat::Idms => "idms",
            PullFormat::Itms => "itms",
        }
    }
}

/// One file of the output: its path (relative to `--root` for containerd) and text.
struct File {
    path: String,
    text: String,
}

pub fn run(args: &PullConfigArgs, progress: &Progress) -> Exit {
    if args.root.is_some() && args.format != PullFormat::Containerd {
        progress.eprint("error: --root is for --format containerd only");
        return Exit::Usage;
    }
    let path = args.config.path();
    let config = match super::load_config(path, progress) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let all = pull_rules(&config);
    let format = args.format.format();
    let mut left_out: Vec<Unexpressed> = all.unexpressed;
    let mut rules: Vec<&PullRule> = Vec::new();
    for rule in &all.rules {
        match format.reason_refused(rule) {
            None => rules.push(rule),
            Some(reason) => left_out.push(Unexpressed {
                mapping: rule.mapping,
                line: rule.line,
                source: rule.source(),
                target: Some(rule.mirror()),
                reason,
            }),
        }
    }
    left_out.sort_by_key(|u| u.mapping);
    let origin = path.display().to_string();
    let files = match args.format {
        PullFormat::Containerd => containerd(&rules),
        PullFormat::RegistriesConf => vec![registries_conf(&rules, &origin)],
        PullFormat::Idms | PullFormat::Itms => vec![mirror_set(args.format, &rules, &args.name)],
    };
    for u in &left_out {
        let target = u
            .target
            .as_deref()
            .map(|t| format!(" -> {t}"))
            .unwrap_or_default();
        progress.eprint(&format!(
            "warning: {origin}:{}: mapping {} ({}{target}) is not in the {} output: {}",
            u.line,
            u.mapping,
            u.source,
            args.format.name(),
            u.reason
        ));
    }
    let exit = match (rules.is_empty(), left_out.is_empty()) {
        (_, true) => Exit::Clean,
        (false, false) => Exit::Partial,
        (true, false) => Exit::Failed,
    };
    if let Some(root) = &args.root {
        if let Err(e) = write_tree(root, &files) {
            progress.eprint(&format!(
                "error: cannot write under {}: {e}",
                root.display()
            ));
            return Exit::Failed;
        }
        for f in &files {
            progress.eprint(&format!("wrote {}", root.join(&f.path).display()));
        }
    }
    if args.json {
        let value = serde_json::json!({
            "format": args.format.name(),
            "rules": rules.iter().map(|r| rule_json(r)).collect::<Vec<_>>(),
            "files": files.iter().map(|f| serde_json::json!({"path": f.path, "text": f.text})).collect::<Vec<_>>(),
            "left_out": left_out.iter().map(|u| serde_json::json!({
                "mapping": u.mapping, "line": u.line, "source": u.source,
                "target": u.target, "reason": u.reason,
            })).collect::<Vec<_>>(),
        });
        crate::progress::println_stdout(&format!("{value:#}"));
    } else if args.root.is_none() {
        let many = files.len() > 1 || args.format == PullFormat::Containerd;
        for f in &files {
            if many {
                print_stdout(&format!("# {}\n", f.path));
            }
            print_stdout(&f.text);
        }
    }
    exit
}

fn rule_json(r: &PullRule) -> serde_json::Value {
    serde_json::json!({
        "mapping": r.mapping,
        "line": r.line,
        "source": r.source(),
        "mirror": r.mirror(),
        "scope": match r.scope { Scope::Prefix => "prefix", Scope::Exact => "exact" },
        "digests_kept": r.digests_kept,
        "mirror_insecure": r.mirror_insecure,
    })
}

/// A TOML basic string (what registries.conf and hosts.toml values are written as).
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Rules grouped by their source, in first-seen order, each mirror once.
fn by_source<'a>(rules: &[&'a PullRule]) -> Vec<(String, Vec<&'a PullRule>)> {
    let mut groups: Vec<(String, Vec<&PullRule>)> = Vec::new();
    for rule in rules {
        let source = rule.source();
        let at = match groups.iter().position(|(s, _)| *s == source) {
            Some(at) => at,
            None => {
                groups.push((source, Vec::new()));
                groups.len() - 1
            }
        };
        if !groups[at].1.iter().any(|r| r.mirror() == rule.mirror()) {
            groups[at].1.push(rule);
        }
    }
    groups
}

fn registries_conf(rules: &[&PullRule], origin: &str) -> File {
    let mut text = format!(
        "# Written by `ferry pull-config --format registries-conf` from {origin}.\n\
         # Each entry pulls a source from its mirror first, then from the source itself.\n"
    );
    for (source, mirrors) in by_source(rules) {
        text.push_str(&format!(
            "\n[[registry]]\nprefix = {0}\nlocation = {0}\n",
            toml_string(&source)
        ));
        if mirrors[0].source_insecure {
            text.push_str("insecure = true\n");
        }
        for m in mirrors {
            text.push_str(&format!(
                "\n[[registry.mirror]]\nlocation = {}\n",
                toml_string(&m.mirror())
            ));
            if m.mirror_insecure {
                text.push_str("insecure = true\n");
            }
        }
    }
    File {
        path: "registries.conf".into(),
        text,
    }
}

/// The registry API endpoint containerd should send a host's requests to.
fn server_url(host: &str) -> String {
    match host {
        "docker.io" => "https://registry-1.docker.io".into(),
        host => format!("https://{host}"),
    }
}

fn containerd(rules: &[&PullRule]) -> Vec<File> {
    let mut hosts: BTreeMap<&str, Vec<&PullRule>> = BTreeMap::new();
    for rule in rules {
        let mirrors = hosts.entry(rule.source_host.as_str()).or_default();
        if !mirrors.iter().any(|r| r.mirror_host == rule.mirror_host) {
            mirrors.push(rule);
        }
    }
    hosts
        .into_iter()
        .map(|(host, mirrors)| {
            let mut text = format!("server = {}\n", toml_string(&server_url(host)));
            for m in mirrors {
                let url = m
                    .mirror_url
                    .clone()
                    .unwrap_or_else(|| server_url(&m.mirror_host));
                text.push_str(&format!(
                    "\n[host.{}]\n  capabilities = [\"pull\", \"resolve\"]\n",
                    toml_string(url.trim_end_matches('/'))
                ));
                if m.mirror_insecure {
                    text.push_str("  skip_verify = true\n");
                }
            }
            File {
                path: format!("{host}/hosts.toml"),
                text,
            }
        })
        .collect()
}

fn mirror_set(format: PullFormat, rules: &[&PullRule], name: &str) -> File {
    let (kind, field) = match format {
        PullFormat::Idms => ("ImageDigestMirrorSet", "imageDigestMirrors"),
        _ => ("ImageTagMirrorSet", "imageTagMirrors"),
    };
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let mut text = format!(
        "apiVersion: config.openshift.io/v1\nkind: {kind}\nmetadata:\n  name: {}\nspec:\n  {field}:\n",
        q(name)
    );
    for (source, mirrors) in by_source(rules) {
        text.push_str(&format!("    - source: {}\n      mirrors:\n", q(&source)));
        for m in mirrors {
            text.push_str(&format!("        - {}\n", q(&m.mirror())));
        }
    }
    if rules.is_empty() {
        text = text.replace(&format!("  {field}:\n"), &format!("  {field}: []\n"));
    }
    File {
        path: format!("{}.yaml", format.name()),
        text,
    }
}

/// Writes each file under `root`, through a temporary file renamed into place; a host that
/// would name anything but one directory below `root` is refused.
fn write_tree(root: &Path, files: &[File]) -> std::io::Result<()> {
    for f in files {
        let (dir, _) = f.path.rsplit_once('/').unwrap_or(("", ""));
        if dir.is_empty() || dir == "." || dir == ".." || dir.contains(['/', '\\', '\0']) {
            return Err(std::io::Error::other(format!(
                "refusing the host directory {dir:?}"
            )));
        }
        let dir = root.join(dir);
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(".hosts.toml.ferry-tmp");
        std::fs::write(&tmp, &f.text)?;
        std::fs::rename(&tmp, dir.join("hosts.toml"))?;
    }
    Ok(())
}
