//! `ferry copy`: one image (a tag or a digest) to one target, as a one-mapping config run
//! through the same prepare phase and engine as `ferry sync`.

use std::path::PathBuf;

use ferry_distribution::Reference;
use ferry_sync::config::{Config, Mapping, Target};
use ferry_sync::filter::{TagFilter, TagFilterSpec};

use crate::cli::CopyArgs;
use crate::exit;
use crate::progress::Progress;

pub async fn run(args: &CopyArgs, progress: &Progress) -> u8 {
    let mut config = match &args.access.config {
        Some(path) => match super::load_config(path, progress) {
            Ok(c) => c,
            Err(code) => return code,
        },
        None => super::empty_config(),
    };
    match one_mapping(
        &args.source,
        &args.target,
        &mut config,
        args.access.insecure,
    ) {
        Ok(mapping) => config.mappings = vec![mapping],
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return exit::FAILED;
        }
    }
    let options = super::sync::RunOptions {
        dry_run: false,
        json: args.json,
        report: None,
    };
    super::sync::run_config(&config, &options, progress).await
}

/// The mapping that copies `source` (with its tag or digest) to `target`.
fn one_mapping(
    source: &str,
    target: &str,
    config: &mut Config,
    insecure: bool,
) -> Result<Mapping, String> {
    let src = Reference::parse(source).map_err(|e| e.to_string())?;
    let (tags, digests) = match (&src.tag, &src.digest) {
        (Some(tag), _) => {
            let spec = TagFilterSpec {
                exact: vec![tag.clone()],
                ..TagFilterSpec::default()
            };
            let filter = TagFilter::compile(&spec).map_err(|e| format!("tag {tag}: {e}"))?;
            (filter, Vec::new())
        }
        (None, Some(digest)) => (TagFilter::none(), vec![digest.to_string()]),
        (None, None) => {
            return Err(format!(
                "{source} names no tag or digest: say which image to copy (e.g. {source}:latest)"
            ));
        }
    };
    let target = match target.strip_prefix("oci:") {
        Some(dir) if !dir.is_empty() => Target::OciLayout {
            path: PathBuf::from(dir),
        },
        Some(_) => return Err("oci: names no directory".into()),
        None => {
            let dst = Reference::parse(target).map_err(|e| e.to_string())?;
            if dst.digest.is_some() || (dst.tag.is_some() && dst.tag != src.tag) {
                return Err(format!(
                    "{target}: the copy keeps the source's tag; name the target repository only"
                ));
            }
            if insecure {
                super::allow_insecure(config, &dst.registry);
            }
            Target::Registry {
                reference: format!("{}/{}", dst.registry, dst.repository),
            }
        }
    };
    if insecure {
        super::allow_insecure(config, &src.registry);
    }
    Ok(Mapping {
        index: 0,
        source: format!("{}/{}", src.registry, src.repository),
        targets: vec![target],
        tags,
        digests,
        platforms: Vec::new(),
        referrers: false,
        prune: false,
        line: 0,
    })
}
