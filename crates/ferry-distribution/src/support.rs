//! What a registry showed about one feature ([`Support`]: unknown, works, refused, ignored): the
//! one answer both the upload capabilities and the learned auth behaviour record.

use serde::Serialize;

/// What a registry showed about one feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Support {
    /// Not used in this run, so not known.
    Unknown,
    /// Used, and it worked.
    Works,
    /// The registry answered that it does not do this.
    Refused,
    /// The registry accepted the request and did something else (a mount answered with an
    /// upload session for a blob the source repository holds).
    Ignored,
}

impl Support {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Support::Unknown => 0,
            Support::Works => 1,
            Support::Refused => 2,
            Support::Ignored => 3,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Support {
        match v {
            1 => Support::Works,
            2 => Support::Refused,
            3 => Support::Ignored,
            _ => Support::Unknown,
        }
    }

    /// Refused or ignored: not worth asking again this run.
    pub fn is_unavailable(self) -> bool {
        matches!(self, Support::Refused | Support::Ignored)
    }
}
