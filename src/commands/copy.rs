//! `ferry copy`: one image (a tag or a digest) to one target, as a one-mapping config run
//! through the same prepare phase and engine as `ferry sync`.

use std::path::PathBuf;

use ferry_distribution::reference::Tag;
use ferry_distribution::{Digest, Reference};
use ferry_sync::config::{Config, Mapping, Origin, Target};
use ferry_sync::filter::{TagFilter, TagFilterSpec, TagGlobs};
use ferry_sync::platform::Platform;

use crate::cli::CopyArgs;
use crate::exit::Exit;
use crate::progress::Progress;

pub async fn run(args: &CopyArgs, progress: &Progress) -> Exit {
    let mut config = match &args.access.config {
        Some(path) => match super::load_config(path, progress) {
            Ok(c) => c,
            Err(code) => return code,
        },
        None => super::empty_config(),
    };
    match one_mapping(
        super::without_docker_transport(&args.source),
        super::without_docker_transport(&args.target),
        &args.platforms,
        &mut config,
        args.access.insecure,
    ) {
        Ok(mapping) => config.mappings = vec![mapping],
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Failed;
        }
    }
    let options = super::sync::RunOptions {
        dry_run: false,
        json: args.json,
        report: None,
        metrics: None,
        stop: None,
    };
    super::sync::run_config(&config, &options, progress).await
}

/// The mapping that copies `source` (with its tag or digest) to `target`.
fn one_mapping(
    source: &str,
    target: &str,
    platforms: &[String],
    config: &mut Config,
    insecure: bool,
) -> Result<Mapping, String> {
    let (origin, tag, digest) = parse_source(source)?;
    let platforms = platforms
        .iter()
        .map(|p| Platform::parse(p).map_err(|e| format!("--platform {p:?}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let (tags, digests) = match (&tag, &digest) {
        (Some(tag), _) => {
            let spec = TagFilterSpec {
                exact: vec![tag.clone()],
                ..TagFilterSpec::default()
            };
            let filter = TagFilter::compile(&spec).map_err(|e| format!("tag {tag}: {e}"))?;
            (filter, Vec::new())
        }
        (None, Some(digest)) => {
            let digest = Digest::parse(digest).map_err(|e| format!("{source}: {e}"))?;
            (TagFilter::none(), vec![digest])
        }
        (None, None) => {
            return Err(format!(
                "{source} names no tag or digest: say which image to copy (e.g. {source}:latest)"
            ));
        }
    };
    let mut retag = None;
    let target = match target.strip_prefix("oci:") {
        Some(dir) if !dir.is_empty() => Target::OciLayout {
            path: PathBuf::from(dir),
        },
        Some(_) => return Err("oci: names no directory".into()),
        None => {
            let dst = Reference::parse(target).map_err(|e| e.to_string())?;
            if dst.digest.is_some() {
                return Err(format!(
                    "{target}: a target is written under a tag; name the repository, or the \
                     repository and a tag"
                ));
            }
            // `src:a dst:b` pushes the source's image under `b` (a retag, as skopeo does).
            if let Some(to) = dst.tag.as_deref().filter(|to| Some(*to) != tag.as_deref()) {
                retag = Some(Tag::parse(to).map_err(|e| format!("{target}: {e}"))?);
            }
            if insecure {
                super::allow_insecure(config, &dst.registry);
            }
            Target::Registry {
                registry: dst.registry,
                repository: dst.repository,
            }
        }
    };
    if let (true, Origin::Registry { registry, .. }) = (insecure, &origin) {
        super::allow_insecure(config, registry);
    }
    Ok(Mapping {
        index: 0,
        source: origin.to_string(),
        origin,
        targets: vec![target],
        tags,
        digests,
        platforms,
        referrers: false,
        referrer_filter: Default::default(),
        require_referrers: Vec::new(),
        immutable: TagGlobs::default(),
        prune: false,
        retag,
        platforms_keep_digest: false,
        line: 0,
        repositories: None,
    })
}

/// The source of a copy and the image in it: `host/repo:tag`, `host/repo@digest`, or (as skopeo
/// writes it) `oci:<dir>:<tag>` / `oci:<dir>@<digest>`.
fn parse_source(source: &str) -> Result<(Origin, Option<String>, Option<String>), String> {
    let Some(rest) = source.strip_prefix("oci:") else {
        let src = Reference::parse(source).map_err(|e| e.to_string())?;
        let origin = Origin::Registry {
            registry: src.registry,
            repository: src.repository,
        };
        return Ok((origin, src.tag, src.digest.map(|d| d.to_string())));
    };
    let layout = |dir: &str| Origin::OciLayout {
        path: PathBuf::from(dir),
    };
    // `@` starts a digest only when an algorithm follows it; otherwise it is part of the path.
    if let Some((dir, digest)) = rest.rsplit_once('@')
        && digest
            .split_once(':')
            .is_some_and(|(alg, _)| ["sha256", "sha512"].contains(&alg))
    {
        let digest = Digest::parse(digest).map_err(|e| format!("{source}: {e}"))?;
        return Ok((layout(dir), None, Some(digest.to_string())));
    }
    match rest.rsplit_once(':') {
        // A tag holds no `/`; a colon before a path separator belongs to the directory.
        Some((dir, tag)) if !dir.is_empty() && !tag.is_empty() && !tag.contains('/') => {
            Ok((layout(dir), Some(tag.to_owned()), None))
        }
        _ if rest.is_empty() => Err("oci: names no directory".into()),
        _ => Ok((layout(rest), None, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_of_a_tag_or_a_digest_needs_no_listing() {
        let hex = "b".repeat(64);
        for source in [
            "registry.example/lib/app:1.0".to_owned(),
            format!("registry.example/lib/app@sha256:{hex}"),
        ] {
            let mut config = super::super::empty_config();
            let m =
                one_mapping(&source, "other.example/mirror/app", &[], &mut config, false).unwrap();
            assert!(m.tags.names_its_tags(), "{source}");
            assert!(!m.prune && !m.referrers, "{source}");
        }
    }

    #[test]
    fn a_layout_source_names_its_image_as_skopeo_does() {
        let (origin, tag, digest) = parse_source("oci:./images/app:v1").unwrap();
        assert_eq!(
            origin,
            Origin::OciLayout {
                path: PathBuf::from("./images/app")
            }
        );
        assert_eq!((tag.as_deref(), digest), (Some("v1"), None));
        let hex = "a".repeat(64);
        let (_, tag, digest) = parse_source(&format!("oci:/srv/app@sha256:{hex}")).unwrap();
        assert_eq!((tag, digest), (None, Some(format!("sha256:{hex}"))));
        let (origin, tag, _) = parse_source("oci:/srv/app").unwrap();
        assert_eq!(tag, None);
        assert_eq!(
            origin,
            Origin::OciLayout {
                path: PathBuf::from("/srv/app")
            }
        );
        assert!(parse_source("oci:").is_err());
        assert!(parse_source("oci:/srv/app@sha256:zz").is_err());
        let (origin, tag, _) = parse_source("oci:/home/me@work/app:v2").unwrap();
        assert_eq!(tag.as_deref(), Some("v2"));
        assert_eq!(
            origin,
            Origin::OciLayout {
                path: PathBuf::from("/home/me@work/app")
            }
        );
        let (_, tag, _) = parse_source("docker.io/library/alpine:3.20").unwrap();
        assert_eq!(tag.as_deref(), Some("3.20"));
    }
}
