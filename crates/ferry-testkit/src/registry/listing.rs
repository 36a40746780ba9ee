//! Tag-listing faults of the test registry: pages after the first that fail, or whose `Link`
//! points back at themselves (a listing that would end early), switched on and off at runtime.

use std::sync::{Arc, Mutex, MutexGuard};

/// What a page after the first does under a listing fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaterPage {
    /// Answer this status (with an OCI error body) instead of the page.
    Fail(u16),
    /// Answer the page, but with `Link: rel="next"` naming the page itself while more tags
    /// remain: a client that stops at a repeated `Link` misses the rest.
    LinkToItself,
}

/// Runtime handle to the listing faults; cheap to clone, shared with the server.
#[derive(Debug, Clone, Default)]
pub struct ListingFaults {
    rules: Arc<Mutex<Vec<(String, LaterPage)>>>,
}

impl ListingFaults {
    fn lock(&self) -> MutexGuard<'_, Vec<(String, LaterPage)>> {
        self.rules.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every page after the first of a listing of a repository starting with `prefix` does
    /// `what` (the first page is served as usual), until [`ListingFaults::clear`].
    pub fn later_pages(&self, prefix: impl Into<String>, what: LaterPage) {
        self.lock().push((prefix.into(), what));
    }

    /// Removes every listing fault.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// The fault for a page after the first of `repo`'s listing, if any (first rule wins).
    pub(crate) fn later_page(&self, repo: &str) -> Option<LaterPage> {
        self.lock()
            .iter()
            .find(|(prefix, _)| repo.starts_with(prefix.as_str()))
            .map(|(_, what)| *what)
    }
}
