//! The one token path: which credentials a registry gets, how its challenge is answered (none,
//! Basic, or Bearer tokens per scope set, cached and refreshed before expiry), and scopes.

pub mod discover;
pub mod docker_config;
pub mod learned;
pub(crate) mod token;

use crate::secret::Secret;

pub use token::{AuthScheme, Authenticator};

/// The credentials ferry presents to one registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Credentials {
    /// No credentials: tokens are asked for without a user, and Basic is never sent.
    #[default]
    Anonymous,
    /// A user name and password: sent as Basic, or used to mint bearer tokens.
    Basic {
        /// The user name.
        username: String,
        /// The password; never printed.
        password: Secret,
    },
    /// A static bearer token sent as is.
    Bearer {
        /// The token; never printed.
        token: Secret,
    },
    /// An OAuth2 refresh token (docker `identitytoken`), exchanged with the POST form.
    IdentityToken {
        /// The refresh token; never printed.
        token: Secret,
    },
}

impl Credentials {
    /// A one-line description that never contains the secret, for `ferry auth check` and logs.
    pub fn describe(&self) -> String {
        match self {
            Credentials::Anonymous => "anonymous".to_owned(),
            Credentials::Basic { username, .. } => format!("basic as {username}"),
            Credentials::Bearer { .. } => "static bearer token".to_owned(),
            Credentials::IdentityToken { .. } => "identity token".to_owned(),
        }
    }
}

impl From<docker_config::DockerCredential> for Credentials {
    fn from(c: docker_config::DockerCredential) -> Self {
        match c {
            docker_config::DockerCredential::Basic { username, password } => {
                Credentials::Basic { username, password }
            }
            docker_config::DockerCredential::IdentityToken { token } => {
                Credentials::IdentityToken { token }
            }
        }
    }
}

/// What a request needs to be allowed: `repository:<name>:<actions>` scopes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scopes(Vec<String>);

impl Scopes {
    /// No scope: what `/v2/` and a catalog-free request need.
    pub fn none() -> Self {
        Scopes(Vec::new())
    }

    /// Read access to `repository`.
    pub fn pull(repository: &str) -> Self {
        Scopes(vec![format!("repository:{repository}:pull")])
    }

    /// Reading the registry's catalog (`GET /v2/_catalog`), which whole-registry mappings ask
    /// for by name; a challenge cannot add it to any other operation (see [`Scopes::with`]).
    pub fn catalog() -> Self {
        Scopes(vec!["registry:catalog:*".to_owned()])
    }

    /// Read and write access to `repository` (a push reads too: HEADs before writes).
    pub fn push(repository: &str) -> Self {
        Scopes(vec![format!("repository:{repository}:pull,push")])
    }

    /// Push on the target plus pull on the source, in one token, as a cross-repository mount
    /// needs.
    pub fn mount(target: &str, source: &str) -> Self {
        let mut s = Scopes::push(target);
        if source != target {
            s.0.push(format!("repository:{source}:pull"));
        }
        s.0.sort();
        s
    }

    /// One scope of these: the one with the most actions (`pull,push` before `pull`), for a
    /// token service that refuses tokens for several scopes.
    pub fn widest(&self) -> Self {
        let actions = |s: &String| s.rsplit(':').next().map_or(0, |a| a.split(',').count());
        Scopes(
            self.0
                .iter()
                .max_by_key(|s| actions(s))
                .cloned()
                .into_iter()
                .collect(),
        )
    }

    /// The scope strings, as sent in a token request.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// The cache key: the scopes in a stable order.
    pub fn key(&self) -> String {
        self.0.join(" ")
    }

    /// The repositories these scopes name.
    fn repositories(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|s| scope_repository(s))
    }

    /// These scopes plus those a challenge asked for on the same repositories. A challenge is
    /// the registry's word, not the operation's: a scope on another repository, a registry-wide
    /// scope (`registry:catalog:*`) or anything unparsable is left out, so a hostile registry
    /// cannot have ferry's credentials exchanged for access the operation never named.
    pub fn with(&self, extra: Option<&str>) -> Self {
        let mut v = self.0.clone();
        for s in extra.unwrap_or("").split(' ').filter(|s| !s.is_empty()) {
            let named = scope_repository(s).is_some_and(|r| self.repositories().any(|o| o == r));
            if !named {
                tracing::debug!(scope = ?s, "challenge scope outside the operation's repositories: not asked for");
            } else if !v.iter().any(|x| x == s) {
                v.push(s.to_owned());
            }
        }
        v.sort();
        Scopes(v)
    }
}

/// The repository of a `repository:<name>:<actions>` scope (names may hold `:port`), when its
/// actions are ones ferry itself asks for.
fn scope_repository(scope: &str) -> Option<&str> {
    let (name, actions) = scope.strip_prefix("repository:")?.rsplit_once(':')?;
    let known = actions
        .split(',')
        .all(|a| matches!(a, "pull" | "push" | "delete"));
    (known && !name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_scopes_ask_push_on_the_target_and_pull_on_the_source() {
        let s = Scopes::mount("mirror/app", "base/app");
        assert_eq!(
            s.as_slice(),
            [
                "repository:base/app:pull",
                "repository:mirror/app:pull,push"
            ]
        );
        assert_eq!(
            Scopes::mount("a", "a").as_slice(),
            ["repository:a:pull,push"]
        );
    }

    #[test]
    fn challenge_scopes_are_limited_to_the_operations_repositories() {
        let s = Scopes::push("mirror/app");
        let asked = "repository:mirror/app:pull,push,delete repository:prod/app:pull,push \
                     registry:catalog:* repository:mirror/app:* repository:mirror/app";
        assert_eq!(
            s.with(Some(asked)).as_slice(),
            [
                "repository:mirror/app:pull,push",
                "repository:mirror/app:pull,push,delete"
            ]
        );
        let m = Scopes::mount("mirror/app", "base/app");
        assert_eq!(
            m.with(Some("repository:base/app:pull,push repository:other:pull"))
                .as_slice(),
            [
                "repository:base/app:pull",
                "repository:base/app:pull,push",
                "repository:mirror/app:pull,push"
            ]
        );
        assert_eq!(s.with(None), s);
    }

    #[test]
    fn the_widest_scope_is_the_one_with_the_most_actions() {
        let m = Scopes::mount("mirror/app", "base/app");
        assert_eq!(m.widest().as_slice(), ["repository:mirror/app:pull,push"]);
        assert_eq!(Scopes::none().widest(), Scopes::none());
    }

    #[test]
    fn credentials_describe_without_secrets() {
        let c = Credentials::Basic {
            username: "alice".into(),
            password: Secret::new("s3cret"),
        };
        assert!(!c.describe().contains("s3cret"));
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
