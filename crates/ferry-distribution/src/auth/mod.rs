//! The one token path: which credentials a registry gets, how its challenge is answered (none,
//! Basic, or Bearer tokens per scope set, cached and refreshed before expiry), and scopes.

pub mod docker_config;
pub mod token;

use crate::secret::Secret;

pub use token::{AuthScheme, Authenticator};

/// The credentials ferry presents to one registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Credentials {
    #[default]
    Anonymous,
    Basic {
        username: String,
        password: Secret,
    },
    /// A static bearer token sent as is.
    Bearer {
        token: Secret,
    },
    /// An OAuth2 refresh token (docker `identitytoken`), exchanged with the POST form.
    IdentityToken {
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
    pub fn none() -> Self {
        Scopes(Vec::new())
    }

    pub fn pull(repository: &str) -> Self {
        Scopes(vec![format!("repository:{repository}:pull")])
    }

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

    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// The cache key: the scopes in a stable order.
    pub fn key(&self) -> String {
        self.0.join(" ")
    }

    /// These scopes plus any the registry named in its challenge.
    pub fn with(&self, extra: Option<&str>) -> Self {
        let mut v = self.0.clone();
        if let Some(extra) = extra {
            for s in extra.split(' ').filter(|s| !s.is_empty()) {
                if !v.iter().any(|x| x == s) {
                    v.push(s.to_owned());
                }
            }
        }
        v.sort();
        Scopes(v)
    }
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
    fn credentials_describe_without_secrets() {
        let c = Credentials::Basic {
            username: "alice".into(),
            password: Secret::new("s3cret"),
        };
        assert!(!c.describe().contains("s3cret"));
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
