//! Tag listing: every page of `/v2/<name>/tags/list` through the shared pager (`pages.rs`: one
//! retry budget, deadline and byte budget, `Link` on the registry's origin only).

use crate::auth::Scopes;
use crate::client::RegistryClient;
use crate::error::Error;
use crate::operation::Operation;

use super::pages::Listing;
use super::{Segment, repository_url};

/// No listing walks more pages than this.
pub const MAX_TAG_PAGES: usize = super::pages::MAX_PAGES;
/// No repository is believed to have more tags than this.
pub const MAX_TAGS: usize = 200_000;

impl RegistryClient {
    /// Every tag of `repository`, in the registry's order. A repository that does not exist is
    /// an error with status 404 (see [`Error::is_not_found`]). Entries that are manifest
    /// digests, not tags (Artifactory lists an index's children as `sha256:…`: skopeo #2346),
    /// are left out here, logged at debug and counted in [`RegistryClient::listing_style`].
    pub async fn list_tags(&self, repository: &str) -> Result<Vec<String>, Error> {
        use crate::capabilities::{Feature, Support, refuses_tag_list};
        let listed = self
            .walk_tags(repository)
            .await
            .map(|names| self.without_digests(repository, names));
        match &listed {
            Ok(_) => self.capabilities().learn(Feature::TagList, Support::Works),
            Err(e) if e.status().is_some_and(refuses_tag_list) => self
                .capabilities()
                .learn(Feature::TagList, Support::Refused),
            Err(_) => {}
        }
        listed
    }

    fn without_digests(&self, repository: &str, mut names: Vec<String>) -> Vec<String> {
        let before = names.len();
        names.retain(|name| {
            let digest = is_digest_entry(name);
            if digest {
                tracing::debug!(registry = self.host(), repository, entry = ?name, "a tag-list entry that is a manifest digest, not a tag: left out");
            }
            !digest
        });
        self.listing_style()
            .note_digest_entries(before - names.len());
        names
    }

    async fn walk_tags(&self, repository: &str) -> Result<Vec<String>, Error> {
        let name = self.repository_for(Operation::TagList, repository)?;
        let first = repository_url(
            self,
            &name,
            &[Segment::Fixed("tags"), Segment::Fixed("list")],
        );
        self.walk_pages(Listing {
            operation: Operation::TagList,
            repository: Some(repository),
            scopes: Scopes::pull(repository),
            first,
            field: "tags",
            what: "tag list",
            whole: "tag list (all pages)",
            max_items: MAX_TAGS,
        })
        .await
    }

    /// The tags of a repository that may not exist yet: a missing repository has none.
    pub async fn list_tags_or_empty(&self, repository: &str) -> Result<Vec<String>, Error> {
        match self.list_tags(repository).await {
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            other => other,
        }
    }
}

/// A listed entry that is a digest, not a tag: not a valid tag, and either a digest or a
/// `sha256:`/`sha256-`… form of one (the same for `sha384`, `sha512`). A valid tag never is
/// (`sha256-<hex>` is the referrers tag schema's, and cosign's `sha256-<hex>.sig`).
pub(crate) fn is_digest_entry(name: &str) -> bool {
    if crate::reference::Tag::parse(name).is_ok() {
        return false;
    }
    crate::digest::Digest::parse(name).is_ok()
        || ["sha256", "sha384", "sha512"].iter().any(|alg| {
            name.len() > alg.len()
                && name.is_char_boundary(alg.len())
                && name[..alg.len()].eq_ignore_ascii_case(alg)
                && matches!(name.as_bytes()[alg.len()], b':' | b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::is_digest_entry;

    #[test]
    fn digest_entries_are_told_from_tags() {
        let hex = "a".repeat(64);
        assert!(is_digest_entry(&format!("sha256:{hex}")));
        assert!(is_digest_entry("sha256:short"));
        assert!(is_digest_entry(&format!("SHA512-{}", "b".repeat(128))));
        // Valid tags stay tags, digest-like or not.
        assert!(!is_digest_entry(&format!("sha256-{hex}")));
        assert!(!is_digest_entry(&format!("sha256-{hex}.sig")));
        assert!(!is_digest_entry("v1.0"));
        // Not valid tags, but not digests either: rejected by the caller, not skipped.
        assert!(!is_digest_entry("x/../y"));
        assert!(!is_digest_entry("sha1:abc"));
        assert!(!is_digest_entry("é:sha256"));
    }
}
