//! Which mappings cover a push of one tag (`Config::mappings_for`): the source's registry and
//! repository, normalised as references are, and the mapping's tag filter.

use ferry_distribution::reference::{Reference, Tag};

use crate::{Config, Mapping, Origin};

/// How a mapping covers a pushed tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// Its filter selects the tag on its own: a sync of that tag mirrors the push.
    Tag,
    /// Its filter judges a tag against the whole listing (`latest: N`): only a sync of the
    /// whole mapping can tell whether the push is mirrored.
    Listing,
}

impl Config {
    /// The mappings whose source is `repository` on `host` and whose filter may select `tag`,
    /// in config order. `host` is normalised as a reference's registry is (Docker Hub's aliases
    /// are `docker.io`, letter case does not count, a port does); `None` (an event that names no
    /// host) matches the repository on any registry. A whole-registry mapping (`repositories:`)
    /// covers no push: it is expanded through the catalog by a full run.
    pub fn mappings_for(
        &self,
        host: Option<&str>,
        repository: &str,
        tag: &Tag,
    ) -> Vec<(&Mapping, Coverage)> {
        let wanted = match host {
            Some(host) => match normalised(host, repository) {
                Some((host, repository)) => (Some(host), repository),
                None => return Vec::new(),
            },
            None => (None, repository.to_owned()),
        };
        self.mappings
            .iter()
            .filter(|m| m.repositories.is_none())
            .filter(|m| match &m.origin {
                Origin::Registry {
                    registry,
                    repository,
                } => *repository == wanted.1 && wanted.0.as_ref().is_none_or(|h| h == registry),
                _ => false,
            })
            .filter_map(|m| {
                if m.tags.spec().latest.is_some() {
                    return Some((m, Coverage::Listing));
                }
                let selected = !m.tags.select(&[tag.as_str()]).selected.is_empty();
                selected.then_some((m, Coverage::Tag))
            })
            .collect()
    }
}

/// `host` and `repository` as a reference `host/repository` names them (`index.docker.io` and
/// `alpine` are `docker.io` and `library/alpine`); `None` when they are no such reference, or
/// `host` is not read as a registry there (a bare word is a path component, which no source's
/// registry ever is).
fn normalised(host: &str, repository: &str) -> Option<(String, String)> {
    let r = Reference::parse(&format!("{host}/{repository}")).ok()?;
    if r.tag.is_some() || r.digest.is_some() {
        return None;
    }
    let same =
        r.repository == repository || r.repository.strip_prefix("library/") == Some(repository);
    same.then_some((r.registry, r.repository))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn config() -> Config {
        let yaml = "version: 1
mappings:
  - source: docker.io/library/alpine
    targets: [dst.example/alpine]
  - source: localhost:5000/team/app
    targets: [dst.example/app]
    tags: { include: [\"v*\"] }
  - source: src.example/team/newest
    targets: [dst.example/newest]
    tags: { latest: 2 }
  - source: src.example/all/*
    target_group: mirror
  - source: other.example/team/app
    targets: [dst.example/app2]
  - source: docker.io/team/app
    targets: [dst.example/app3]
target_groups:
  mirror: [dst.example/m]
";
        crate::parse(yaml, Path::new("c.yaml"), &|_| None).expect("the test config parses")
    }

    fn covered(c: &Config, host: Option<&str>, repository: &str, tag: &str) -> Vec<usize> {
        let tag = Tag::parse(tag).expect("a valid tag");
        c.mappings_for(host, repository, &tag)
            .into_iter()
            .map(|(m, _)| m.index)
            .collect()
    }

    #[test]
    fn docker_hub_s_aliases_and_letter_case_name_one_host_and_a_port_does_not() {
        let c = config();
        for host in [
            "docker.io",
            "registry-1.docker.io",
            "index.docker.io",
            "Docker.IO",
        ] {
            assert_eq!(
                covered(&c, Some(host), "library/alpine", "3.20"),
                [0],
                "{host}"
            );
        }
        // Docker Hub's official images are named without `library/` by some events.
        assert_eq!(covered(&c, Some("index.docker.io"), "alpine", "3.20"), [0]);
        assert_eq!(covered(&c, Some("LOCALHOST:5000"), "team/app", "v1"), [1]);
        assert!(covered(&c, Some("localhost"), "team/app", "v1").is_empty());
        assert!(covered(&c, Some("localhost:5001"), "team/app", "v1").is_empty());
        // A bare word is not a host any source names (`team/app` is Docker Hub's repository).
        assert!(covered(&c, Some("team"), "app", "v1").is_empty());
        assert_eq!(covered(&c, Some("docker.io"), "team/app", "v1"), [5]);
        // No host: the repository on any registry (the filter still decides).
        assert_eq!(covered(&c, None, "team/app", "v1"), [1, 4, 5]);
        assert_eq!(covered(&c, None, "team/app", "1.0"), [4, 5]);
    }

    #[test]
    fn a_whole_registry_mapping_covers_no_push_and_latest_asks_for_the_listing() {
        let c = config();
        assert!(covered(&c, Some("src.example"), "all/thing", "v1").is_empty());
        assert!(covered(&c, None, "all/thing", "v1").is_empty());
        // Its origin names the registry and the prefix: not a repository of its own either.
        assert!(covered(&c, Some("src.example"), "all", "v1").is_empty());
        let tag = Tag::parse("9").unwrap();
        let newest = c.mappings_for(Some("src.example"), "team/newest", &tag);
        assert_eq!(newest.len(), 1);
        assert_eq!(newest[0].0.index, 2);
        assert_eq!(newest[0].1, Coverage::Listing);
        let app = c.mappings_for(
            Some("localhost:5000"),
            "team/app",
            &Tag::parse("v2").unwrap(),
        );
        assert_eq!(app[0].1, Coverage::Tag);
    }

    #[test]
    fn a_tag_the_filter_refuses_is_covered_by_no_mapping() {
        let c = config();
        assert!(covered(&c, Some("localhost:5000"), "team/app", "latest").is_empty());
        assert_eq!(covered(&c, Some("localhost:5000"), "team/app", "v9"), [1]);
        // Another repository of the same registry, or the same on another registry.
        assert!(covered(&c, Some("localhost:5000"), "team/other", "v1").is_empty());
        assert!(covered(&c, Some("evil.example"), "team/app", "v1").is_empty());
    }
}
