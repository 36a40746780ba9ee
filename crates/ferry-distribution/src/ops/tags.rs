//! Tag listing: every page of `/v2/<name>/tags/list`, following `Link: rel="next"` on the
//! registry's own origin only, with one retry budget for the whole walk and bounds on size; a
//! `Link` back to a page already read is an error (an incomplete listing), never the end.

use crate::auth::Scopes;
use crate::client::RegistryClient;
use crate::error::{Error, ErrorKind};
use crate::operation::Operation;
use crate::retry::{Call, Failure};

use super::{Segment, expect_status, invalid, read_page, repository_url};

/// No listing walks more pages than this.
pub const MAX_TAG_PAGES: usize = 10_000;
/// No repository is believed to have more tags than this.
pub const MAX_TAGS: usize = 200_000;
const MAX_PAGE_BYTES: u64 = 16 * 1024 * 1024;

#[derive(serde::Deserialize)]
struct TagPage {
    tags: Option<Vec<String>>,
}

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
        let scopes = Scopes::pull(repository);
        let budget = self.gate().policy.budget();
        let call = Call::new(Operation::TagList, Some(repository));
        let name = self.repository_for(Operation::TagList, repository)?;
        let mut url = repository_url(
            self,
            &name,
            &[Segment::Fixed("tags"), Segment::Fixed("list")],
        );
        let mut tags = Vec::new();
        let mut read = std::collections::HashSet::new();
        for _page in 0..MAX_TAG_PAGES {
            let (page, next) = self
                .run_with_budget(call, &budget, |_| {
                    let url = url.clone();
                    let scopes = &scopes;
                    async move {
                        let response = self.send(scopes, |http| http.get(url.clone())).await?;
                        let response = expect_status(response, &[200]).await?;
                        let (body, next) = read_page(self, response, MAX_PAGE_BYTES).await?;
                        let page: TagPage = serde_json::from_slice(&body)
                            .map_err(|e| invalid(format!("tag list is not JSON: {e}")))?;
                        Ok::<_, Failure>((page.tags.unwrap_or_default(), next))
                    }
                })
                .await?;
            tags.extend(page);
            if tags.len() > MAX_TAGS {
                return Err(Error::new(
                    self.host(),
                    Some(repository),
                    Operation::TagList,
                    ErrorKind::TooLarge {
                        what: "tag list",
                        limit: MAX_TAGS as u64,
                    },
                ));
            }
            // A `Link` back to a page already read would end (or loop) the walk early: the
            // listing is then incomplete, which is an error, never the end of the list.
            read.insert(url.clone());
            match next {
                Some(n) if read.contains(&n) => {
                    return Err(Error::new(
                        self.host(),
                        Some(repository),
                        Operation::TagList,
                        ErrorKind::InvalidResponse(format!(
                            "the tag list's Link points back at a page already read ({n}) \
                             after {} tags: the listing is incomplete",
                            tags.len()
                        )),
                    ));
                }
                Some(n) => url = n,
                None => return Ok(tags),
            }
        }
        Err(Error::new(
            self.host(),
            Some(repository),
            Operation::TagList,
            ErrorKind::TooLarge {
                what: "tag list (pages)",
                limit: MAX_TAG_PAGES as u64,
            },
        ))
    }

    /// The tags of a repository that may not exist yet: a missing repository has none.
    pub async fn list_tags_or_empty(&self, repository: &str) -> Result<Vec<String>, Error> {
        match self.list_tags(repository).await {
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            other => other,
        }
    }
}
