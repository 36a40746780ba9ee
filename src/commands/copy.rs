//! `ferry copy`: one image (a tag or a digest), or with `--all-tags` every tag of a repository,
//! to one target, as a one-mapping config run through the same prepare phase and engine as sync.

use std::path::PathBuf;

use ferry_config::filter::{TagFilter, TagFilterSpec};
use ferry_config::platform::Platform;
use ferry_config::{Mapping, Origin, Pick, Target};
use ferry_distribution::reference::Tag;
use ferry_distribution::{Digest, Reference};

use crate::cli::CopyArgs;
use crate::exit::Exit;
use crate::progress::Progress;

pub async fn run(args: &CopyArgs, progress: &Progress) -> Exit {
    let mut config = match &args.access.config {
        Some(path) => match super::load_registries(path, progress) {
            Ok(c) => c,
            Err(code) => return code,
        },
        None => super::empty_config(),
    };
    let (source, target) = (
        super::without_docker_transport(&args.source),
        super::without_docker_transport(&args.target),
    );
    if args.preserve_digests {
        tracing::debug!("--preserve-digests: ferry always keeps the source's digests");
    }
    let all_tags = args.all_tags.then_some(args.include.as_slice());
    let mapping = match one_mapping(source, target, &args.platforms, all_tags) {
        Ok(mapping) => mapping,
        Err(message) => {
            // Every reason one_mapping refuses is in the command line itself (no request was
            // sent): exit 64, as clap's own refusals.
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
    };
    config.mappings = vec![mapping];
    let access = match super::access::for_config(&config, &args.tls, &args.src, &args.dest) {
        Ok(a) => a,
        Err(message) => {
            progress.eprint(&format!("error: {message}"));
            return Exit::Usage;
        }
    };
    let options = super::sync::RunOptions {
        dry_run: false,
        json: args.json,
        report: args.report.report.clone(),
        metrics: None,
        stop: None,
        registries: None,
        copy: Some(format!("{source} -> {target}")),
        state_dir: args.state_dir.clone().or(config.state_dir.clone()),
        state_dir_named: true,
        every_host: Some(access.every_host()),
        command: "copy",
        digestfile: args.digestfile.clone(),
        tag_cache: super::sync::TagCacheUse::Off,
    };
    super::sync::run_config(&config, &options, progress).await
}

/// The mapping that copies `source` (with its tag or digest) to `target`; with `all_tags` (the
/// `--include` globs, none meaning `*`), every tag of the source repository.
fn one_mapping(
    source: &str,
    target: &str,
    platforms: &[String],
    all_tags: Option<&[String]>,
) -> Result<Mapping, String> {
    let (origin, tag, digest) = parse_source(source)?;
    let platforms = platforms
        .iter()
        .map(|p| Platform::parse(p).map_err(|e| format!("--platform {p:?}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(include) = all_tags {
        return all_tags_mapping(source, target, origin, (tag, digest), platforms, include);
    }
    let pick = match (&tag, &digest) {
        (Some(tag), _) => Pick::Tag(Tag::parse(tag).map_err(|e| format!("tag {tag}: {e}"))?),
        (None, Some(digest)) => {
            Pick::Digest(Digest::parse(digest).map_err(|e| format!("{source}: {e}"))?)
        }
        // A registry image named without a tag is `latest`, as skopeo, docker and `ferry
        // inspect` take it (silently, as skopeo does; docs/commands.md says so).
        (None, None) if matches!(origin, Origin::Registry { .. }) => {
            Pick::Tag(Tag::parse("latest").map_err(|e| format!("tag latest: {e}"))?)
        }
        (None, None) => {
            return Err(format!(
                "{source} names no tag or digest: say which image to copy (e.g. {source}:latest)"
            ));
        }
    };
    let mut retag = None;
    let target = match target.strip_prefix("oci:") {
        // `oci-archive:FILE[:REF]`, as skopeo writes it: the image goes in named REF (else its tag).
        None if target.starts_with("oci-archive:") => {
            Target::parse(target).map_err(|e| e.replace("source", "target"))?
        }
        Some(rest) => {
            // `oci:DIR:TAG`, as skopeo writes it: the image goes in under TAG.
            let (dir, to) = split_layout_tag(rest);
            if dir.is_empty() {
                return Err("oci: names no directory".into());
            }
            if let Some(to) = to.filter(|to| Some(*to) != tag.as_deref()) {
                retag = Some(Tag::parse(to).map_err(|e| format!("{target}: {e}"))?);
            }
            Target::OciLayout {
                path: PathBuf::from(dir),
            }
        }
        None => {
            unsupported_transport(target)?;
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
            Target::Registry {
                registry: dst.registry,
                repository: dst.repository,
            }
        }
    };
    let mut mapping = Mapping::one_image(0, origin, vec![target], pick);
    mapping.platforms = platforms;
    mapping.retag = retag;
    Ok(mapping)
}

/// `copy --all-tags SRC DST`: every tag of SRC (that an `--include` glob matches) to DST, both
/// repositories without a tag.
fn all_tags_mapping(
    source: &str,
    target: &str,
    origin: Origin,
    image: (Option<String>, Option<String>),
    platforms: Vec<Platform>,
    include: &[String],
) -> Result<Mapping, String> {
    if image.0.is_some() || image.1.is_some() {
        return Err(format!(
            "--all-tags copies every tag of a repository: name {source} without a tag or digest"
        ));
    }
    let spec = TagFilterSpec {
        include: (!include.is_empty()).then(|| include.to_vec()),
        ..TagFilterSpec::default()
    };
    let tags = TagFilter::compile(&spec).map_err(|e| format!("--include: {e}"))?;
    let tagged = match target.strip_prefix("oci:") {
        Some(rest) => split_layout_tag(rest).1.is_some(),
        None => Reference::parse(target).is_ok_and(|r| r.tag.is_some() || r.digest.is_some()),
    };
    if tagged {
        return Err(format!(
            "--all-tags keeps each tag: name {target} without a tag or digest"
        ));
    }
    // The target side as a one-image copy parses it; the tag here is only a placeholder.
    let mut mapping = one_mapping(&format!("{source}:latest"), target, &[], None)?;
    mapping.source = origin.to_string();
    mapping.origin = origin;
    mapping.tags = tags;
    mapping.platforms = platforms;
    Ok(mapping)
}

/// The source of a copy and the image in it: `host/repo:tag`, `host/repo@digest`, or (as skopeo
/// writes it) `oci:<dir>:<tag>` / `oci:<dir>@<digest>`, `oci-archive:<file>:<ref>` /
/// `docker-archive:<file>:<ref>` (the image whose `ref.name` or `RepoTags` entry is `<ref>`,
/// taken under that reference's tag; `latest` for a docker reference without one), and as
/// skopeo reads them `docker-archive:<file>` (its only image) and `docker-archive:<file>:@N`
/// (the Nth), taken as `latest`.
pub(super) fn parse_source(
    source: &str,
) -> Result<(Origin, Option<String>, Option<String>), String> {
    if source.starts_with("oci-archive:") || source.starts_with("docker-archive:") {
        let origin = Origin::parse(source)?;
        let (Origin::OciArchive { reference, .. } | Origin::DockerArchive { reference, .. }) =
            &origin
        else {
            return Err(format!("{source}: not an archive"));
        };
        let docker = matches!(origin, Origin::DockerArchive { .. });
        // As skopeo reads a docker-archive: no `:REF` is its only image, `:@N` the Nth; either
        // is taken as `latest` (the archive checks the count when it is opened).
        if docker && reference.as_deref().is_none_or(|r| r.starts_with('@')) {
            return Ok((origin, Some("latest".to_owned()), None));
        }
        let Some(reference) = reference else {
            return Err(format!(
                "{source} names no image: say which one (e.g. {source}:repo:tag)"
            ));
        };
        let tag = ferry_store::archive::reader::tag_of_reference(reference)
            .or_else(|| docker.then(|| "latest".to_owned()));
        if tag.is_none() {
            return Err(format!(
                "{source}: the image {reference:?} has no tag to copy it under"
            ));
        }
        return Ok((origin, tag, None));
    }
    let Some(rest) = source.strip_prefix("oci:") else {
        unsupported_transport(source)?;
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
    match split_layout_tag(rest) {
        ("", _) => Err("oci: names no directory".into()),
        (dir, tag) => Ok((layout(dir), tag.map(str::to_owned), None)),
    }
}

/// The transports ferry reads and writes, as skopeo spells them.
pub(super) const TRANSPORTS: &str = "docker:// (or a bare registry reference), oci:DIR[:TAG], \
     oci-archive:FILE[:REF] and docker-archive:FILE[:REF] (a source only)";

/// Refuses a reference in one of skopeo's transports ferry does not speak (`dir:`,
/// `containers-storage:`, …), naming the ones it does, instead of reading `dir` as a host.
pub(super) fn unsupported_transport(reference: &str) -> Result<(), String> {
    const OTHERS: [&str; 7] = [
        "dir",
        "containers-storage",
        "docker-daemon",
        "sif",
        "ostree",
        "tarball",
        "atomic",
    ];
    match reference.split_once(':') {
        Some((transport, _)) if OTHERS.contains(&transport) => Err(format!(
            "{reference}: ferry does not support the {transport}: transport; it supports {TRANSPORTS}"
        )),
        _ => Ok(()),
    }
}

/// `DIR:TAG` → (`DIR`, `TAG`), as skopeo splits `oci:` references: the text after the last
/// colon is a tag when it is not empty and holds no `/` (a colon before a path separator belongs
/// to the directory, `C:/x` or `./a:b/c`); otherwise the whole text is the directory.
fn split_layout_tag(rest: &str) -> (&str, Option<&str>) {
    match rest.rsplit_once(':') {
        Some((dir, tag)) if !tag.is_empty() && !tag.contains('/') => (dir, Some(tag)),
        _ => (rest, None),
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
            let m = one_mapping(&source, "other.example/mirror/app", &[], None).unwrap();
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

    #[test]
    fn a_layout_target_takes_a_tag_as_skopeo_writes_it() {
        let m = one_mapping("registry.example/app:1.0", "oci:./lay:stable", &[], None).unwrap();
        assert_eq!(
            m.targets,
            vec![Target::OciLayout {
                path: PathBuf::from("./lay")
            }]
        );
        assert_eq!(m.retag.as_ref().map(Tag::as_str), Some("stable"));
        // The source's own tag, or none, keeps the image's tag.
        for target in ["oci:./lay:1.0", "oci:./lay", "oci:./a:b/lay"] {
            let m = one_mapping("registry.example/app:1.0", target, &[], None).unwrap();
            assert_eq!(m.retag, None, "{target}");
        }
        assert!(one_mapping("registry.example/app:1.0", "oci::x", &[], None).is_err());
        assert!(one_mapping("registry.example/app:1.0", "oci:./lay:bad..tag!", &[], None).is_err());
    }
}
