//! The registry's catalog: every page of `/v2/_catalog` through the shared pager (one retry
//! budget, deadline and byte budget, `Link` on the registry's origin only), for whole-registry mappings.

use crate::auth::Scopes;
use crate::client::RegistryClient;
use crate::error::{Error, ErrorKind};
use crate::operation::Operation;

use super::pages::Listing;

/// Repositories asked for per catalog page (`n`); a registry may answer with fewer and a `Link`.
pub const CATALOG_PAGE_SIZE: usize = 1000;

impl RegistryClient {
    /// Every repository name the registry's catalog lists, as sent (unvalidated: the caller
    /// decides which are names), at most `max` of them: a longer catalog is an error
    /// (`ErrorKind::TooLarge`), never a silent cut. Asks for the `registry:catalog:*` scope.
    pub async fn list_repositories(&self, max: usize) -> Result<Vec<String>, Error> {
        let mut first = self.api_url("_catalog");
        first
            .query_pairs_mut()
            .append_pair("n", &CATALOG_PAGE_SIZE.min(max.max(1)).to_string());
        self.walk_pages(Listing {
            operation: Operation::Catalog,
            repository: None,
            scopes: Scopes::catalog(),
            first,
            field: "repositories",
            what: "catalog",
            whole: "catalog (all pages)",
            max_items: max,
        })
        .await
        .map_err(|e| self.catalog_error(e))
    }

    /// A catalog failure said as what it means for a whole-registry mapping: a 404 is a
    /// registry that serves no catalog, a refusal is a catalog that needs other credentials.
    fn catalog_error(&self, mut e: Error) -> Error {
        if let ErrorKind::Status {
            status: 404,
            message,
            ..
        } = &mut e.kind
        {
            *message = Some(
                "the registry serves no catalog (/v2/_catalog): list its repositories in the \
                 config, one mapping each, instead of a whole-registry mapping"
                    .to_owned(),
            );
        } else if e.is_auth() {
            e.kind = ErrorKind::Auth(format!(
                "the catalog (/v2/_catalog) needs credentials allowed to list every repository \
                 (Harbor: a system administrator's); sent: {}",
                self.credentials().describe()
            ));
        }
        e
    }
}
