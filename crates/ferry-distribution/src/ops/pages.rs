//! The pager behind every paged listing (tags, catalog, referrers): every page of one walk under
//! one retry budget, one deadline and one byte budget, `Link` followed on the registry's origin.

use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

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
            run_stats: None,
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
    /// Every name of `listing`, in the registry's order. A `Link` is followed as
    /// the registry wrote it (an opaque `next_page` token as much as a `last=`), on the
    /// listing's own path (a Link naming another path keeps its query, see [`on_path`]). A
    /// `Link` back to a page already read, or pages that bring no new name while linking on,
    /// would end (or loop) the walk early: the listing is then incomplete, which is an error,
    /// never the end of the list. A Link-less page, in a walk that saw no Link, may be a
    /// silent cut (Nexus group repositories): when it holds the page size the registry showed,
    /// or more names than any Link-less listing of the registry a probe proved whole, the walk
    /// asks once more with `n=<its size>&last=<last name>`, goes on while the answers come back
    /// as full as asked, and ends when one is shorter or brings nothing new (issue 39).
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
        let style = self.listing_style();
        let mut walk = Walk::new(&self.gate().policy, MAX_LISTING_BYTES);
        let call = walk.call(operation, repository);
        let error = |kind| Error::new(self.host(), repository, operation, kind);
        let mut url = first.clone();
        let mut names = Vec::new();
        let mut seen = HashSet::new();
        let mut read = HashSet::new();
        let mut stale = 0;
        let mut saw_link = false;
        let mut probing = false;
        // The size of the Link-less page the walk is probing behind (the `n` it asks with).
        let mut cut_at: Option<usize> = None;
        for page_no in 0..MAX_PAGES {
            let page_max = walk.page_limit(MAX_PAGE_BYTES);
            let room = max_items.saturating_sub(names.len());
            let walk_ref = &walk;
            let fetched = self
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
                .await;
            let (page, next, page_bytes) = match fetched {
                Ok(fetched) => fetched,
                // A probe the registry refuses (it may not take `last=`) proves nothing: the
                // listing ends where the registry's own pages ended.
                Err(e)
                    if probing
                        && e.status()
                            .is_some_and(|s| (400..500).contains(&s) && s != 429) =>
                {
                    tracing::debug!(registry = self.host(), repository, %e, "the {what}'s `last=` probe was refused: the listing ends with its last page");
                    return Ok(names);
                }
                // A later page that is not there is a Link to nowhere, never a repository
                // that does not exist (a target's prune listing would read it as empty).
                Err(mut e) if page_no > 0 && e.is_not_found() => {
                    e.kind = ErrorKind::InvalidResponse(format!(
                        "page {} of the {what} ({}) answered 404 after {} names: the Link \
                         pointed nowhere, the listing is incomplete",
                        page_no + 1,
                        crate::text::for_error(url.path()),
                        names.len()
                    ));
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            walk.spend(page_bytes);
            read.insert(url.clone());
            if page.skipped > 0 {
                style.note_malformed(page.skipped);
                tracing::warn!(
                    registry = self.host(),
                    repository,
                    "page {} of the {what} held {} entries that are not strings (the first: \
                     entry {} is {}): skipped, the other names are read",
                    page_no + 1,
                    page.skipped,
                    page.first_skipped.0 + 1,
                    page.first_skipped.1
                );
            }
            let count = page.names.len();
            let last_name = page.names.last().cloned();
            // Names as the registry listed them (a name repeated on a later page is kept, as
            // it always was); only a probe's page, which may be a page already read again,
            // adds just the names not seen before.
            let mut fresh = 0;
            for name in page.names {
                let new = seen.insert(name.clone());
                fresh += usize::from(new);
                if new || !probing {
                    names.push(name);
                }
            }
            stale = if fresh == 0 { stale + 1 } else { 0 };
            if probing && fresh > 0 {
                style.note_truncation(cut_at);
                tracing::info!(
                    registry = self.host(),
                    repository,
                    "the {what} cut a page without a Link: {fresh} more names after asking with `last=`"
                );
            }
            let next = next.map(|n| on_path(n, &first, what, self.host(), style));
            match next {
                Some(n) if read.contains(&n) => {
                    return Err(error(ErrorKind::InvalidResponse(format!(
                        "the {what}'s Link points back at a page already read ({}) after {} \
                         names: the listing is incomplete",
                        crate::text::for_error(n.as_str()),
                        names.len()
                    ))));
                }
                Some(n) if stale >= STALE_PAGES => {
                    return Err(error(ErrorKind::InvalidResponse(format!(
                        "the {what}'s Link led to {stale} pages in a row that brought no new \
                         name ({} names so far, next {}): the listing loops and is incomplete",
                        names.len(),
                        crate::text::for_error(n.as_str()),
                    ))));
                }
                Some(n) => {
                    saw_link = true;
                    probing = false;
                    style.note_link(&n, count);
                    url = n;
                }
                None => {
                    // A Link-less page may be the end or a silent cut (Nexus group
                    // repositories: nexus-public #117, #209). It is asked on with `last=` when
                    // it could be a cut: a probe's page that came back as full as asked, or a
                    // first page holding the page size the registry showed, or more names than
                    // any Link-less listing of this registry was proven whole with.
                    let cut = !saw_link
                        && fresh > 0
                        && last_name.is_some()
                        && match cut_at {
                            Some(n) => count == n,
                            None => {
                                style.page_size() == Some(count as u64)
                                    || count as u64 > style.whole_up_to()
                            }
                        };
                    match last_name.filter(|_| cut) {
                        Some(last) => {
                            probing = true;
                            let n = *cut_at.get_or_insert(count);
                            url = with_last(&first, &last, n);
                            if read.contains(&url) {
                                return Ok(names);
                            }
                        }
                        None => {
                            // A probe that brought nothing after a first page proves listings
                            // of that many names whole on this registry.
                            if probing && fresh == 0 && page_no == 1 {
                                style.note_whole(cut_at);
                            }
                            return Ok(names);
                        }
                    }
                }
            }
        }
        Err(error(ErrorKind::TooLarge {
            what,
            limit: MAX_PAGES as u64,
        }))
    }
}

/// Pages in a row that bring no new name, while linking on, before the walk calls it a loop.
const STALE_PAGES: usize = 3;

/// The next page on the listing's own path: a `Link` naming another path (Artifactory's
/// without the repository key, RTFACT-18971; Nexus's with its internal `/repository/<name>/`
/// prefix, nexus-public #1011) keeps its query, which is what pages, on the path every page
/// of a listing shares. The origin was checked already (`same_origin`).
fn on_path(
    next: url::Url,
    first: &url::Url,
    what: &str,
    host: &str,
    style: &ListingStyle,
) -> url::Url {
    if next.path() == first.path() {
        return next;
    }
    style.note_repair();
    tracing::warn!(
        registry = host,
        "the {what}'s Link names the path {} instead of {}: followed on the listing's own path \
         with the Link's query",
        crate::text::for_error(next.path()),
        first.path()
    );
    let mut fixed = first.clone();
    fixed.set_query(next.query());
    fixed.set_fragment(None);
    fixed
}

/// The listing's first page asked again after `last`, `n` at the page size seen: the probe of
/// a Link-less page that may be a cut.
fn with_last(first: &url::Url, last: &str, n: usize) -> url::Url {
    let kept: Vec<(String, String)> = first
        .query_pairs()
        .filter(|(k, _)| k != "last" && k != "n")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut url = first.clone();
    url.set_query(None);
    url.query_pairs_mut()
        .extend_pairs(kept)
        .append_pair("n", &n.to_string())
        .append_pair("last", last);
    url
}

/// How one registry pages its listings, learned from its answers, and what its listings held
/// that was not a name. Shared by every clone of its client; the report shows its snapshot.
#[derive(Debug, Default)]
pub struct ListingStyle {
    page_size: AtomicU64,
    /// The most names a Link-less listing held that a `last=` probe proved whole (nothing
    /// came after it): listings up to that size are not probed again.
    whole_up_to: AtomicU64,
    links: AtomicU64,
    opaque_links: AtomicU64,
    truncations: AtomicU64,
    links_repaired: AtomicU64,
    digest_entries_skipped: AtomicU64,
    malformed_entries_skipped: AtomicU64,
}

/// How a registry's listings page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Paging {
    /// No listing of the run was followed by a `Link`.
    #[default]
    Unknown,
    /// `Link`s that name `last=` (the distribution spec's cursor).
    Last,
    /// `Link`s without `last=`: an opaque token (Quay's `next_page`), followed as written.
    Opaque,
    /// Pages cut without a `Link` (Nexus group repositories), read on by asking with `last=`.
    CutWithoutLink,
}

/// A registry's listing style as the report shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ListingSnapshot {
    /// Entries per page the registry serves, seen on a page a `Link` followed (the latest).
    pub page_size: Option<u64>,
    /// How its pages link.
    pub paging: Paging,
    /// `Link`s naming another path, followed on the listing's own path with their query.
    pub links_repaired: u64,
    /// Tag-list entries that were manifest digests (`sha256:…`), not tags: left out.
    pub digest_entries_skipped: u64,
    /// Listing entries that were not strings: left out, with a warning.
    pub malformed_entries_skipped: u64,
}

impl ListingStyle {
    /// The page size the registry showed, if any.
    pub fn page_size(&self) -> Option<u64> {
        Some(self.page_size.load(Ordering::Acquire)).filter(|&n| n > 0)
    }

    fn note_link(&self, next: &url::Url, count: usize) {
        self.links.fetch_add(1, Ordering::AcqRel);
        if count > 0 {
            self.page_size.store(count as u64, Ordering::Release);
        }
        if !next.query_pairs().any(|(k, _)| k == "last") {
            self.opaque_links.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The largest Link-less listing proven whole by a probe (0: none yet).
    fn whole_up_to(&self) -> u64 {
        self.whole_up_to.load(Ordering::Acquire)
    }

    fn note_whole(&self, count: Option<usize>) {
        if let Some(count) = count {
            self.whole_up_to.fetch_max(count as u64, Ordering::AcqRel);
        }
    }

    /// A probe found names after a Link-less page of `cut_at` names: the registry cuts there,
    /// which is its page size when no `Link` showed one.
    fn note_truncation(&self, cut_at: Option<usize>) {
        self.truncations.fetch_add(1, Ordering::AcqRel);
        if let Some(n) = cut_at.filter(|&n| n > 0) {
            let _ =
                self.page_size
                    .compare_exchange(0, n as u64, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    fn note_repair(&self) {
        self.links_repaired.fetch_add(1, Ordering::AcqRel);
    }

    fn note_malformed(&self, n: usize) {
        self.malformed_entries_skipped
            .fetch_add(n as u64, Ordering::AcqRel);
    }

    pub(crate) fn note_digest_entries(&self, n: usize) {
        self.digest_entries_skipped
            .fetch_add(n as u64, Ordering::AcqRel);
    }

    /// What the registry's listings showed so far.
    pub fn snapshot(&self) -> ListingSnapshot {
        let paging = if self.truncations.load(Ordering::Acquire) > 0 {
            Paging::CutWithoutLink
        } else if self.opaque_links.load(Ordering::Acquire) > 0 {
            Paging::Opaque
        } else if self.links.load(Ordering::Acquire) > 0 {
            Paging::Last
        } else {
            Paging::Unknown
        };
        ListingSnapshot {
            page_size: self.page_size(),
            paging,
            links_repaired: self.links_repaired.load(Ordering::Acquire),
            digest_entries_skipped: self.digest_entries_skipped.load(Ordering::Acquire),
            malformed_entries_skipped: self.malformed_entries_skipped.load(Ordering::Acquire),
        }
    }
}

/// Why one page's names were not taken.
enum PageError {
    /// More names than the listing has room left for.
    TooMany,
    /// Not a JSON object whose `field` is a list of strings (or `null`).
    Json(serde_json::Error),
}

/// One page's names, and the entries that were not strings.
#[derive(Debug, Default)]
struct Page {
    names: Vec<String>,
    /// Entries of the list that were not strings (skipped).
    skipped: usize,
    /// The first of them: its index in the list and what it was.
    first_skipped: (usize, &'static str),
}

/// The names under `field` of one page (`null` or absent: none), at most `room` of them: the
/// list is counted as it is parsed, so a page of a million tiny names is refused before it is
/// held, and every other member is skipped unparsed. An entry that is not a string (`42`,
/// `{}`) is skipped and counted, never held.
fn page_names(body: &[u8], field: &str, room: usize) -> Result<Page, PageError> {
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
        Ok(page) => Ok(page),
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
    type Value = Page;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Page, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PageSeed<'_> {
    type Value = Page;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page, A::Error> {
        let mut page = Page::default();
        while let Some(key) = map.next_key::<String>()? {
            if key == self.field {
                // A repeated member replaces the earlier one, as a JSON object's last wins.
                page = map.next_value_seed(self.names)?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(page)
    }
}

/// The list of names: `null`, or entries, at most `room` strings.
#[derive(Clone, Copy)]
struct Names<'a> {
    room: usize,
    too_many: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for Names<'_> {
    type Value = Page;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Page, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Names<'_> {
    type Value = Page;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of names")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Page, E> {
        Ok(Page::default())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Page, E> {
        Ok(Page::default())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Page, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Page, A::Error> {
        let mut page = Page::default();
        let mut index = 0;
        while let Some(entry) = seq.next_element::<Entry>()? {
            match entry {
                Entry::Name(name) => {
                    if page.names.len() >= self.room {
                        self.too_many.set(true);
                        return Err(A::Error::custom("more names than the listing has room for"));
                    }
                    page.names.push(name);
                }
                Entry::Other(kind) => {
                    if page.skipped == 0 {
                        page.first_skipped = (index, kind);
                    }
                    page.skipped += 1;
                }
            }
            index += 1;
        }
        Ok(page)
    }
}

/// One entry of a list of names: a string, or what else it was (skipped unread).
enum Entry {
    Name(String),
    Other(&'static str),
}

impl<'de> serde::Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Entry, D::Error> {
        d.deserialize_any(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = Entry;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a name")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Entry, E> {
        Ok(Entry::Name(v.to_owned()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Entry, E> {
        Ok(Entry::Name(v))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Entry, E> {
        Ok(Entry::Other("a boolean"))
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Entry, E> {
        Ok(Entry::Other("a number"))
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Entry, E> {
        Ok(Entry::Other("a number"))
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Entry, E> {
        Ok(Entry::Other("a number"))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Entry, E> {
        Ok(Entry::Other("null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entry, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Entry::Other("a list"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Entry::Other("an object"))
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
        assert!(matches!(page_names(page, "tags", 2), Ok(p) if p.names == ["a", "b"]));
        assert!(matches!(
            page_names(page, "tags", 1),
            Err(PageError::TooMany)
        ));
        assert!(matches!(page_names(br#"{"tags":null}"#, "tags", 0), Ok(p) if p.names.is_empty()));
        assert!(matches!(page_names(br#"{}"#, "tags", 0), Ok(p) if p.names.is_empty()));
        assert!(matches!(
            page_names(br#"{"tags":"a"}"#, "tags", 5),
            Err(PageError::Json(_))
        ));
        assert!(matches!(
            page_names(br#"{"tags":[]} x"#, "tags", 5),
            Err(PageError::Json(_))
        ));
    }

    #[test]
    fn entries_that_are_not_strings_are_skipped_and_counted() {
        let page = br#"{"tags":["a",1,{"x":[1]},null,true,[2],"b",-1.5]}"#;
        let page = page_names(page, "tags", 2).unwrap_or_default();
        assert_eq!(page.names, ["a", "b"]);
        assert_eq!(page.skipped, 6);
        assert_eq!(page.first_skipped, (1, "a number"));
    }
}
