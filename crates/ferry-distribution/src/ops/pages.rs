//! The pager behind every paged listing (tags, catalog, referrers): every page of one walk under
//! one retry budget, one deadline and one byte budget, `Link` followed on the registry's origin.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use tokio::time::Instant;

use crate::auth::Scopes;
use crate::client::RegistryClient;
use crate::error::{Error, ErrorKind};
use crate::operation::Operation;
use crate::retry::{Call, Failure, RetryBudget, RetryPolicy};

use super::{expect_status, invalid, read_page};

/// No listing walks more pages than this.
pub const MAX_PAGES: usize = 10_000;
const MAX_PAGE_BYTES: u64 = 16 * 1024 * 1024;
/// No name listing (every page of one tag list or catalog together) is read past this many
/// bytes. A real repository of 100,000 tags lists about 5 MiB; the largest tag list ferry
/// believes (200,000 tags of 128 characters) is about 26 MiB.
pub const MAX_LISTING_BYTES: u64 = 32 * 1024 * 1024;

/// Stands for "no deadline" where the configured one does not fit the clock (30 years).
const FOREVER: std::time::Duration = std::time::Duration::from_secs(30 * 365 * 24 * 3600);

/// What every page of one walk draws from: the retry budget, the deadline (the policy's, once
/// for the walk, not once per page) and the bytes left to read.
pub(crate) struct Walk {
    budget: RetryBudget,
    deadline: Instant,
    bytes_left: u64,
    max_bytes: u64,
}

impl Walk {
    /// A walk starting now under `policy`, reading at most `max_bytes` over all its pages.
    pub(crate) fn new(policy: &RetryPolicy, max_bytes: u64) -> Self {
        Walk {
            budget: policy.budget(),
            // Checked: a configured deadline too far ahead for the clock is no deadline at all.
            deadline: Instant::now()
                .checked_add(policy.deadline)
                .unwrap_or_else(|| Instant::now() + FOREVER),
            bytes_left: max_bytes,
            max_bytes,
        }
    }

    /// The retry budget every page draws from.
    pub(crate) fn budget(&self) -> &RetryBudget {
        &self.budget
    }

    /// The call of one page: the walk's deadline, not a fresh one.
    pub(crate) fn call<'a>(&self, operation: Operation, repository: Option<&'a str>) -> Call<'a> {
        Call {
            operation,
            repository,
            deadline: Some(self.deadline),
        }
    }

    /// The most bytes the next page may have: a page's own bound, or what is left of the walk's.
    pub(crate) fn page_limit(&self, page_max: u64) -> u64 {
        page_max.min(self.bytes_left)
    }

    /// Counts a page read.
    pub(crate) fn spend(&mut self, bytes: usize) {
        self.bytes_left = self.bytes_left.saturating_sub(bytes as u64);
    }

    /// A page refused as too large becomes the whole listing's error when it was the walk's
    /// budget, not the page's own bound, that it broke.
    pub(crate) fn over_budget(
        &self,
        failure: Failure,
        page_max: u64,
        whole: &'static str,
    ) -> Failure {
        match failure {
            Failure::Final(ErrorKind::TooLarge { .. }) if self.bytes_left < page_max => {
                Failure::Final(ErrorKind::TooLarge {
                    what: whole,
                    limit: self.max_bytes,
                })
            }
            other => other,
        }
    }
}

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
    /// The same, for the error of a listing over its byte budget (`tag list (all pages)`).
    pub whole: &'static str,
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
            whole,
            max_items,
        } = listing;
        let mut walk = Walk::new(&self.gate().policy, MAX_LISTING_BYTES);
        let call = walk.call(operation, repository);
        let error = |kind| Error::new(self.host(), repository, operation, kind);
        let mut url = first;
        let mut names = Vec::new();
        let mut read = std::collections::HashSet::new();
        for _page in 0..MAX_PAGES {
            let page_max = walk.page_limit(MAX_PAGE_BYTES);
            let room = max_items.saturating_sub(names.len());
            let walk_ref = &walk;
            let (page, next, page_bytes) = self
                .run_with_budget(call, walk.budget(), |_| {
                    let url = url.clone();
                    let scopes = &scopes;
                    async move {
                        let response = self.send(scopes, |http| http.get(url.clone())).await?;
                        let response = expect_status(response, &[200]).await?;
                        let (body, next) = read_page(self, response, page_max)
                            .await
                            .map_err(|f| walk_ref.over_budget(f, MAX_PAGE_BYTES, whole))?;
                        let page = page_names(&body, field, room).map_err(|e| match e {
                            PageError::TooMany => Failure::Final(ErrorKind::TooLarge {
                                what,
                                limit: max_items as u64,
                            }),
                            PageError::Json(e) => invalid(format!("{what} is not JSON: {e}")),
                        })?;
                        Ok::<_, Failure>((page, next, body.len()))
                    }
                })
                .await?;
            walk.spend(page_bytes);
            names.extend(page);
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

/// Why one page's names were not taken.
enum PageError {
    /// More names than the listing has room left for.
    TooMany,
    /// Not a JSON object whose `field` is a list of strings (or `null`).
    Json(serde_json::Error),
}

/// The names under `field` of one page (`null` or absent: none), at most `room` of them: the
/// list is counted as it is parsed, so a page of a million tiny names is refused before it is
/// held, and every other member is skipped unparsed.
fn page_names(body: &[u8], field: &str, room: usize) -> Result<Vec<String>, PageError> {
    let too_many = Cell::new(false);
    let mut json = serde_json::Deserializer::from_slice(body);
    let page = PageSeed {
        field,
        names: Names {
            room,
            too_many: &too_many,
        },
    }
    .deserialize(&mut json)
    .and_then(|names| json.end().map(|()| names));
    match page {
        Ok(names) => Ok(names),
        Err(_) if too_many.get() => Err(PageError::TooMany),
        Err(e) => Err(PageError::Json(e)),
    }
}

/// One page: a JSON object, of which only `field` is kept.
struct PageSeed<'a> {
    field: &'a str,
    names: Names<'a>,
}

impl<'de> DeserializeSeed<'de> for PageSeed<'_> {
    type Value = Vec<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PageSeed<'_> {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
        let mut names = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == self.field {
                // A repeated member replaces the earlier one, as a JSON object's last wins.
                names = map.next_value_seed(self.names)?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(names)
    }
}

/// The list of names: `null`, or strings, at most `room`.
#[derive(Clone, Copy)]
struct Names<'a> {
    room: usize,
    too_many: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for Names<'_> {
    type Value = Vec<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Names<'_> {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of names")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Vec<String>, E> {
        Ok(Vec::new())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<String>, E> {
        Ok(Vec::new())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let mut names = Vec::new();
        while let Some(name) = seq.next_element::<String>()? {
            if names.len() >= self.room {
                self.too_many.set(true);
                return Err(A::Error::custom("more names than the listing has room for"));
            }
            names.push(name);
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_configured_deadline_past_the_clock_is_no_deadline() {
        let mut policy = RetryPolicy::default();
        policy.deadline = std::time::Duration::MAX;
        let walk = Walk::new(&policy, 1);
        let deadline = walk.call(Operation::TagList, None).deadline.unwrap();
        assert!(deadline > Instant::now() + std::time::Duration::from_secs(365 * 24 * 3600));
    }

    #[test]
    fn a_page_is_parsed_within_its_room() {
        let page = br#"{"name":"x","tags":["a","b"],"other":{"deep":[1,2]}}"#;
        assert!(matches!(page_names(page, "tags", 2), Ok(n) if n == ["a", "b"]));
        assert!(matches!(
            page_names(page, "tags", 1),
            Err(PageError::TooMany)
        ));
        assert!(matches!(page_names(br#"{"tags":null}"#, "tags", 0), Ok(n) if n.is_empty()));
        assert!(matches!(page_names(br#"{}"#, "tags", 0), Ok(n) if n.is_empty()));
        assert!(matches!(
            page_names(br#"{"tags":[1]}"#, "tags", 5),
            Err(PageError::Json(_))
        ));
        assert!(matches!(
            page_names(br#"{"tags":[]} x"#, "tags", 5),
            Err(PageError::Json(_))
        ));
    }
}
