//! Every registry operation ferry performs, and the one table that says whether each may be sent
//! again when its outcome is unknown. Replay is decided here, per operation, never per HTTP method.

use std::fmt;

/// Declares [`Operation`] and [`Operation::ALL`] from one list, so a new operation cannot be left
/// out of `ALL` (and so out of the replay-table test that walks it).
macro_rules! operations {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// A registry operation. The retry layer asks it whether a request whose outcome is
        /// unknown (a 502/504 or a connection lost after the request went out) may be sent again.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Operation {
            $($(#[$doc])* $name,)*
        }

        impl Operation {
            /// Every operation, in declaration order, for tables and tests.
            pub const ALL: [Operation; [$(stringify!($name)),*].len()] = [$(Operation::$name),*];
        }
    };
}

operations! {
    /// `GET /v2/`: learn whether and how the registry wants authentication.
    Ping,
    /// `GET <realm>?service=&scope=` (or the OAuth2 POST form): mint a bearer token.
    TokenExchange,
    /// `GET /v2/<name>/tags/list`, one page.
    TagList,
    /// `HEAD /v2/<name>/manifests/<ref>`.
    ManifestHead,
    /// `GET /v2/<name>/manifests/<ref>`.
    ManifestGet,
    /// `PUT /v2/<name>/manifests/<tag>`.
    ManifestPutByTag,
    /// `PUT /v2/<name>/manifests/<digest>`.
    ManifestPutByDigest,
    /// `DELETE /v2/<name>/manifests/<digest>`.
    ManifestDeleteByDigest,
    /// `DELETE /v2/<name>/manifests/<tag>`.
    TagDelete,
    /// `HEAD /v2/<name>/blobs/<digest>`.
    BlobHead,
    /// `GET /v2/<name>/blobs/<digest>` (possibly ranged, possibly redirected).
    BlobGet,
    /// `POST /v2/<name>/blobs/uploads/`: open an upload session.
    UploadStart,
    /// `POST /v2/<name>/blobs/uploads/?mount=<digest>&from=<repo>`.
    Mount,
    /// `PATCH <location>` with `Content-Range`: bytes at an explicit offset.
    UploadChunk,
    /// `PATCH <location>` without `Content-Range`: bytes appended wherever the session stands.
    UploadAppend,
    /// `GET <location>`: ask the session how many bytes it holds.
    UploadStatus,
    /// `PUT <location>?digest=<digest>`: close the session, optionally with the last bytes.
    UploadFinish,
    /// `DELETE <location>`: abandon an upload session.
    UploadCancel,
    /// `GET /v2/<name>/referrers/<digest>`, one page.
    ReferrersList,
    /// `GET /v2/_catalog`, one page: the registry's repositories (or ECR's
    /// `DescribeRepositories`, which ferry-sync asks through the AWS SDK).
    Catalog,
    /// ECR's `CreateRepository` (through the AWS SDK, never retried): a missing target
    /// repository made before the first push to it.
    RepositoryCreate,
}

/// Whether a request whose outcome is unknown may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Sending it twice leaves the registry as sending it once would.
    Safe,
    /// Sending it twice can change something a second time: the unknown answer is final.
    Unsafe,
}

impl Operation {
    /// The replay table. docs/retry.md carries the same table with the reasoning for each row; a
    /// test keeps the two in step.
    pub fn replay(self) -> Replay {
        use Operation::*;
        match self {
            // Reads change nothing.
            Ping | TokenExchange | TagList | ManifestHead | ManifestGet | BlobHead | BlobGet
            | UploadStatus | ReferrersList | Catalog => Replay::Safe,
            // Content-addressed writes: the digest names the bytes, so a second copy is the same.
            ManifestPutByDigest | UploadFinish | Mount => Replay::Safe,
            // Creating a repository that exists is answered "already exists", taken as done.
            RepositoryCreate => Replay::Safe,
            // The same bytes under the same tag: the spec makes this PUT idempotent.
            ManifestPutByTag => Replay::Safe,
            // Offset-addressed: a replay of bytes already taken is refused with 416, never doubled.
            UploadChunk => Replay::Safe,
            // A second session is inert and expires; nothing visible changes.
            UploadStart => Replay::Safe,
            // Deleting what a digest names twice ends the same way; cancelling twice too.
            ManifestDeleteByDigest | UploadCancel => Replay::Safe,
            // A tag names no bytes: between the lost reply and the replay someone may have pushed
            // the tag again, and the replay would delete their push.
            TagDelete => Replay::Unsafe,
            // Appends wherever the session stands: a replay of a landed append doubles the bytes.
            UploadAppend => Replay::Unsafe,
        }
    }

    /// True for operations that change registry state; registries that meter reads and writes
    /// separately get a window for each class.
    pub fn is_write(self) -> bool {
        use Operation::*;
        match self {
            RepositoryCreate
            | ManifestPutByTag
            | ManifestPutByDigest
            | ManifestDeleteByDigest
            | TagDelete
            | UploadStart
            | Mount
            | UploadChunk
            | UploadAppend
            | UploadFinish
            | UploadCancel => true,
            Ping | TokenExchange | TagList | ManifestHead | ManifestGet | BlobHead | BlobGet
            | UploadStatus | ReferrersList | Catalog => false,
        }
    }

    /// A short name for logs, errors and reports.
    pub fn name(self) -> &'static str {
        use Operation::*;
        match self {
            Ping => "ping",
            TokenExchange => "token exchange",
            TagList => "tag list",
            ManifestHead => "manifest HEAD",
            ManifestGet => "manifest GET",
            ManifestPutByTag => "manifest PUT (tag)",
            ManifestPutByDigest => "manifest PUT (digest)",
            ManifestDeleteByDigest => "manifest DELETE",
            TagDelete => "tag DELETE",
            BlobHead => "blob HEAD",
            BlobGet => "blob GET",
            UploadStart => "upload start",
            Mount => "blob mount",
            UploadChunk => "upload chunk PATCH",
            UploadAppend => "upload append PATCH",
            UploadStatus => "upload status",
            UploadFinish => "upload finish PUT",
            UploadCancel => "upload cancel",
            ReferrersList => "referrers list",
            Catalog => "catalog list",
            RepositoryCreate => "repository create",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
