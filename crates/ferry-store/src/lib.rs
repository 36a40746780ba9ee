//! ferry's images on disk: OCI image-layout directories, `oci-archive:` and `docker-archive:`
//! tars, the bundle record `ferry export` writes, the layout lock and the state directory.
//!
//! Nothing here sends a request or knows a mapping: the run (`ferry-sync`) opens a store place
//! a config names and reads or writes images through it.
//!
//! - [`layout`]: an OCI image-layout directory, read and written, with its lock and pruning.
//! - [`archive`]: a tar holding a layout (or `docker save` output), read by seeking and
//!   written as one stream.
//! - [`bundle`]: the `ferry-bundle.json` record of an export, and the bases `--since` reads.
//! - [`event_journal`]: the push events `ferry watch` accepted and has not yet synced, in the
//!   state directory, for the next process.
//! - [`resume`]: the state directory, where uploads in flight are recorded for the next process.
//! - [`store`]: the read and write traits a layout and an archive both implement.
//! - [`fsio`]: atomic writes and no-follow opens, the one place files are created.
//! - [`StoreError`]: what failed on which path.

pub mod archive;
pub mod bundle;
mod error;
pub mod event_journal;
pub(crate) mod fsio;
pub mod layout;
pub mod resume;
pub mod store;

pub use error::StoreError;

/// Text from a tar, a bundle record or `index.json` as an error quotes it: cut to
/// `text::SHOWN_BYTES` and escaped by the one function registry text goes through, in quotes.
pub(crate) fn quoted(text: &str) -> String {
    format!("\"{}\"", ferry_distribution::text::for_error(text))
}

/// A parser's complaint about outside bytes (serde quotes the values it refuses), bounded and
/// escaped as outside text.
pub(crate) fn complaint(e: impl std::fmt::Display) -> String {
    ferry_distribution::text::for_error(&e.to_string())
}
