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
    /// an error with status 404 (see [`Error::is_not_found`]).
    pub async fn list_tags(&self, repository: &str) -> Result<Vec<String>, Error> {
        use crate::capabilities::{Feature, Support, refuses_tag_list};
        let listed = self.walk_tags(repository).await;
        match &listed {
            Ok(_) => self.capabilities().learn(Feature::TagList, Support::Works),
            Err(e) if e.status().is_some_and(refuses_tag_list) => self
                .capabilities()
                .learn(Feature::TagList, Support::Refused),
            Err(_) => {}
        }
        listed
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
