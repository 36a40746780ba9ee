#![deny(missing_docs)]
//! The OCI distribution client ferry is built on: references, digests, auth, transport,
//! the one retry shape, AIMD windows and breakers, and the registry operations.
//!
//! A table of contents, the modules by what they hold:
//!
//! - Names and content: [`reference`] (image references, tags), [`digest`], [`media`] (media
//!   types), [`text`] (terminal-safe text from outside), [`link`] (the `Link` header's next page).
//! - One registry: [`client`] ([`RegistryClient`], its options and the ping), [`ops`] (every
//!   registry operation, as client methods), [`operation`] ([`Operation`] and its replay
//!   table), [`error`] ([`Error`], [`ErrorKind`]).
//! - Credentials: [`auth`] (the one token path, credential discovery), [`challenge`]
//!   (`WWW-Authenticate`), [`identity`] (mutual-TLS client certificates), and [`Secret`].
//! - Pacing and guarding: [`retry`] (the one retry shape and classifier), [`gate`] (a
//!   registry's policy, windows, pacer, breaker and counters), [`breaker`], [`stats`],
//!   [`limit`] (the size bound for streams from outside).
//! - What registries turned out to be: [`capabilities`] (learned per run), [`quirks`] (the one
//!   place for registry quirks).
//! - Internals (crate-private): the AIMD window, the pacer and its throttle evidence, and the
//!   module of [`Secret`] (exported here).

pub mod auth;
pub mod breaker;
pub mod capabilities;
pub mod challenge;
pub mod client;
pub mod digest;
pub mod error;
pub mod gate;
pub mod identity;
pub mod limit;
pub mod media;
pub mod operation;
pub mod ops;
pub mod quirks;
pub mod reference;
pub mod retry;
pub mod stats;
pub mod stop;
mod support;
pub mod text;

pub mod link;

pub(crate) mod evidence;
pub(crate) mod pacer;
pub(crate) mod secret;
pub(crate) mod window;

pub use client::{RegistryClient, RegistryOptions, RunScope};
pub use digest::{Algorithm, Digest};
pub use error::{Error, ErrorKind};
pub use operation::Operation;
pub use reference::Reference;
pub use secret::Secret;
pub use stop::StopSignal;
