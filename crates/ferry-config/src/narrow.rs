//! The one narrowing every command uses: a mapping of a single image (`ferry copy`, `ferry
//! import`), and a mapping cut down to one tag (a `ferry watch` event).

use ferry_distribution::digest::Digest;
use ferry_distribution::reference::Tag;

use crate::filter::{TagFilter, TagFilterSpec, TagGlobs};
use crate::{Mapping, Origin, ReferrerFilter, Target};

/// Which image of a source a one-image mapping copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The image a tag names (it must be listed: missing is reported, as `exact` is).
    Tag(Tag),
    /// The image a digest names.
    Digest(Digest),
}

/// How a tag a mapping is narrowed to is selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Narrow {
    /// The tag must be there: missing is reported (as `exact` does). A push event.
    MustExist,
    /// The tag is selected only when the source lists it. A delete event, whose pruning sync
    /// lists the source in full.
    IfListed,
}

impl Mapping {
    /// A mapping (at `index`) that copies the one image `pick` names from `origin` to
    /// `targets`, with nothing else a config could add: no platforms, referrers, pruning,
    /// retag or schedule. Callers set the fields their command takes after.
    pub fn one_image(index: usize, origin: Origin, targets: Vec<Target>, pick: Pick) -> Mapping {
        let (tags, digests) = match pick {
            Pick::Tag(tag) => (exactly(&tag, Narrow::MustExist), Vec::new()),
            Pick::Digest(digest) => (TagFilter::none(), vec![digest]),
        };
        Mapping {
            index,
            source: origin.to_string(),
            origin,
            targets,
            tags,
            digests,
            platforms: Vec::new(),
            referrers: false,
            referrer_filter: ReferrerFilter::default(),
            require_referrers: Vec::new(),
            immutable: TagGlobs::default(),
            prune: false,
            retag: None,
            platforms_keep_digest: false,
            schedule: None,
            line: 0,
            repositories: None,
            signatures: None,
            concurrency: None,
        }
    }

    /// This mapping selecting only `tag` (its digests dropped); everything else it says
    /// (targets, platforms, referrers, retag, pruning) is kept.
    pub fn narrowed_to(&self, tag: &Tag, how: Narrow) -> Mapping {
        Mapping {
            tags: exactly(tag, how),
            digests: Vec::new(),
            ..self.clone()
        }
    }
}

/// A filter selecting `tag` alone. A valid tag holds only `[A-Za-z0-9_.-]`, no glob character,
/// so it compiles as both an exact tag and an include glob.
fn exactly(tag: &Tag, how: Narrow) -> TagFilter {
    let spec = match how {
        Narrow::MustExist => TagFilterSpec {
            exact: vec![tag.as_str().to_owned()],
            ..TagFilterSpec::default()
        },
        Narrow::IfListed => TagFilterSpec {
            include: Some(vec![tag.as_str().to_owned()]),
            ..TagFilterSpec::default()
        },
    };
    TagFilter::compile(&spec).unwrap_or_else(|_| TagFilter::none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(t: &str) -> Tag {
        Tag::parse(t).unwrap()
    }

    #[test]
    fn one_image_of_a_tag_selects_that_tag_alone_and_reports_it_missing() {
        let origin = Origin::OciLayout {
            path: "./in".into(),
        };
        let m = Mapping::one_image(3, origin, Vec::new(), Pick::Tag(tag("1.0")));
        assert_eq!(m.index, 3);
        let picked = m.tags.select(&["1.0", "1.1"]);
        assert_eq!(picked.selected, ["1.0"]);
        assert_eq!(m.tags.select(&["1.1"]).missing_exact, ["1.0"]);
        assert!(m.digests.is_empty() && !m.referrers && !m.prune);
    }

    #[test]
    fn narrowing_keeps_everything_but_the_selection() {
        let origin = Origin::OciLayout {
            path: "./in".into(),
        };
        let digest: Digest = format!("sha256:{:064x}", 1).parse().unwrap();
        let mut m = Mapping::one_image(0, origin, Vec::new(), Pick::Digest(digest));
        m.prune = true;
        m.referrers = true;
        let n = m.narrowed_to(&tag("v2"), Narrow::IfListed);
        assert!(n.prune && n.referrers && n.digests.is_empty());
        assert_eq!(n.tags.select(&["v2", "v3"]).selected, ["v2"]);
        let gone = n.tags.select(&["v3"]);
        assert!(
            gone.missing_exact.is_empty(),
            "a delete's tag is not required to exist"
        );
        let pushed = m.narrowed_to(&tag("v2"), Narrow::MustExist);
        assert_eq!(pushed.tags.select(&["v3"]).missing_exact, ["v2"]);
    }
}
