//! The pager behind every paged name listing (a repository's tags, the registry's catalog): each
//! page under one retry budget, `Link: rel="next"` followed on the registry's origin only, bounds.

use crate::auth::Scopes;
use crate::client::RegistryClient;
use crate::error::{Error, ErrorKind};
use crate::operation::Operation;
use crate::retry::{Call, Failure};

use super::{expect_status, invalid, read_page};

/// No listing walks more pages than this.
pub const MAX_PAGES: usize = 10_000;
const MAX_PAGE_BYTES: u64 = 16 * 1024 * 1024;

/// One paged listing: what it is, where it starts and how much of it is believed.
pub(crate) struct Listing<'a> {
    /// The operation of each page (errors name it; it decides replay).
    pub operation: Operation,
    /// The repository listed, if any (the catalog names none).
    pub repository: Option<&'a str>,
    /// What the request needs to be allowed.
    pub scopes: Scopes,
    /// The first page.
    pub first: url::Url,
    /// The JSON field holding the page's names (`tags`, `repositories`).
    pub field: &'static str,
    /// What the listing is, for errors (`tag list`, `catalog`).
    pub what: &'static str,
    /// The most names believed; past it the listing is an error.
    pub max_items: usize,
}

impl RegistryClient {
    /// Every name of `listing`, in the registry's order. A `Link` back to a page already read
    /// would end (or loop) the walk early: the listing is then incomplete, which is an error,
    /// never the end of the list.
    pub(crate) async fn walk_pages(&self, listing: Listing<'_>) -> Result<Vec<String>, Error> {
        let Listing {
            operation,
            repository,
            scopes,
            first,
            field,
            what,
            max_items,
        } = listing;
        let budget = self.gate().policy.budget();
        let call = Call::new(operation, repository);
        let error = |kind| Error::new(self.host(), repository, operation, kind);
        let mut url = first;
        let mut names = Vec::new();
        let mut read = std::collections::HashSet::new();
        for _page in 0..MAX_PAGES {
            let (page, next) = self
                .run_with_budget(call, &budget, |_| {
                    let url = url.clone();
                    let scopes = &scopes;
                    async move {
                        let response = self.send(scopes, |http| http.get(url.clone())).await?;
                        let response = expect_status(response, &[200]).await?;
                        let (body, next) = read_page(self, response, MAX_PAGE_BYTES).await?;
                        let page = page_names(&body, field)
                            .map_err(|e| invalid(format!("{what} is not JSON: {e}")))?;
                        Ok::<_, Failure>((page, next))
                    }
                })
                .await?;
            names.extend(page);
            if names.len() > max_items {
                return Err(error(ErrorKind::TooLarge {
                    what,
                    limit: max_items as u64,
                }));
            }
            read.insert(url.clone());
            match next {
                Some(n) if read.contains(&n) => {
                    return Err(error(ErrorKind::InvalidResponse(format!(
                        "the {what}'s Link points back at a page already read ({n}) after {} \
                         names: the listing is incomplete",
                        names.len()
                    ))));
                }
                Some(n) => url = n,
                None => return Ok(names),
            }
        }
        Err(error(ErrorKind::TooLarge {
            what,
            limit: MAX_PAGES as u64,
        }))
    }
}

/// The names under `field` of one page (`null` or absent: none).
fn page_names(body: &[u8], field: &str) -> Result<Vec<String>, serde_json::Error> {
    let mut page: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body)?;
    match page.remove(field) {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(list) => serde_json::from_value(list),
    }
}
