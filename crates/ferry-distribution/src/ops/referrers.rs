//! Referrers of a manifest (signatures, SBOMs, attestations): the OCI 1.1 referrers API with
//! paging, or `None` when the registry does not offer it and the tag schema must be used.

use crate::auth::Scopes;
use crate::client::RegistryClient;
use crate::digest::Digest;
use crate::error::Error;
use crate::operation::Operation;
use crate::retry::Failure;

use super::pages::Walk;
use super::{Segment, expect_status, invalid, read_page, repository_url};

const MAX_PAGES: usize = 100;
const MAX_PAGE_BYTES: u64 = 4 << 20;
/// No referrers listing (every page of one manifest's referrers together) is read past this: two
/// full pages, some 40,000 referrers.
pub const MAX_REFERRERS_BYTES: u64 = 8 << 20;

/// One entry of a referrers index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Referrer {
    /// The referrer manifest's media type.
    #[serde(rename = "mediaType")]
    pub media_type: String,
    /// The referrer manifest's digest.
    pub digest: Digest,
    /// Its size in bytes.
    pub size: u64,
    /// What kind of artifact it is (a signature, an SBOM), when it says.
    #[serde(rename = "artifactType", default)]
    pub artifact_type: Option<String>,
}

#[derive(serde::Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<Referrer>,
}

/// One answer of the referrers endpoint.
enum Answer {
    /// No referrers API: a 404 (after a redirect on the origin or not), or a redirect elsewhere.
    Absent,
    /// The first page answered, but not with an image index (GAR's sign-in page, HTML): what
    /// was wrong with it.
    NotAnIndex(String),
    /// A page of entries, the next page's URL and the bytes read.
    Page(Vec<Referrer>, Option<url::Url>, usize),
}

impl RegistryClient {
    /// Every referrer of `digest`, or `None` when the registry has no referrers API (404). The
    /// answer is learned once per registry: after a 404, no request is sent again.
    pub async fn list_referrers(
        &self,
        repository: &str,
        digest: &Digest,
    ) -> Result<Option<Vec<Referrer>>, Error> {
        if self.referrers_api() == Some(false) {
            return Ok(None);
        }
        let scopes = Scopes::pull(repository);
        // One retry budget, one deadline and one byte budget for every page.
        let mut walk = Walk::new(&self.gate().policy, MAX_REFERRERS_BYTES);
        let call = walk.call(Operation::ReferrersList, Some(repository));
        let name = self.repository_for(Operation::ReferrersList, repository)?;
        let mut url = repository_url(
            self,
            &name,
            &[Segment::Fixed("referrers"), Segment::Digest(digest)],
        );
        let mut all = Vec::new();
        for page_no in 0..MAX_PAGES {
            let page_max = walk.page_limit(MAX_PAGE_BYTES);
            let walk_ref = &walk;
            let page = self
                .run_with_budget(call, walk.budget(), |_| {
                    let url = url.clone();
                    let scopes = &scopes;
                    async move {
                        let mut response = self.send(scopes, |http| http.get(url.clone())).await?;
                        // A redirect is followed once, on the registry's own origin; one that
                        // ends in a 404 (GHCR: a 303 to a page that is not there) is no
                        // referrers API, as a 404 is.
                        if response.status().is_redirection() {
                            let Some(to) = redirect_target(self, &response) else {
                                return Ok(Answer::Absent);
                            };
                            response = self.send(scopes, |http| http.get(to.clone())).await?;
                        }
                        if response.status().as_u16() == 404 {
                            return Ok(Answer::Absent);
                        }
                        let response = expect_status(response, &[200]).await?;
                        let (body, next) =
                            read_page(self, response, page_max).await.map_err(|f| {
                                walk_ref.over_budget(
                                    f,
                                    MAX_PAGE_BYTES,
                                    "referrers list (all pages)",
                                )
                            })?;
                        match serde_json::from_slice::<Index>(&body) {
                            Ok(index) => {
                                Ok::<_, Failure>(Answer::Page(index.manifests, next, body.len()))
                            }
                            // The first answer that is not an index says the endpoint is not a
                            // referrers API here (issue 39: GAR's sign-in page); a later page
                            // of a listing that was one is a broken listing.
                            Err(e) if page_no == 0 => Ok(Answer::NotAnIndex(format!(
                                "{}: {e}",
                                crate::text::for_error(&String::from_utf8_lossy(
                                    &body[..body.len().min(64)]
                                ))
                            ))),
                            Err(e) => Err(invalid(format!("referrers index is not JSON: {e}"))),
                        }
                    }
                })
                .await?;
            match page {
                Answer::Absent => {
                    self.learn_referrers_api(false);
                    return Ok(None);
                }
                Answer::NotAnIndex(what) => {
                    // Issue 31's rule: one odd answer fails nothing that does not need it. The
                    // spec's tag schema stands in, as for a registry without the API.
                    if self.referrers_api().is_none() {
                        tracing::warn!(
                            registry = self.host(),
                            repository,
                            "the referrers endpoint answered something that is not an image \
                             index ({what}): read as no referrers API; referrers are found by \
                             the tag schema (sha256-<hex>, .sig, .att, .sbom) on this registry"
                        );
                    }
                    self.learn_referrers_api(false);
                    return Ok(None);
                }
                Answer::Page(entries, next, read) => {
                    walk.spend(read);
                    self.learn_referrers_api(true);
                    all.extend(entries);
                    match next {
                        Some(n) if n != url => url = n,
                        _ => return Ok(Some(all)),
                    }
                }
            }
        }
        Ok(Some(all))
    }
}

/// Where a redirect of the referrers endpoint points, when that is on the registry's own origin
/// (credentials are never sent elsewhere); `None` makes the redirect read as no referrers API.
fn redirect_target(client: &RegistryClient, response: &reqwest::Response) -> Option<url::Url> {
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)?
        .to_str()
        .ok()?;
    match client.same_origin(location) {
        Ok(url) => Some(url),
        Err(f) => {
            tracing::debug!(registry = client.host(), reason = %f, "referrers redirect not followed: no referrers API");
            None
        }
    }
}
