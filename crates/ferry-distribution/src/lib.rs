#![deny(missing_docs)]
//! The OCI distribution client ferry is built on: references, digests, auth, transport,
//! the one retry shape, AIMD windows and breakers, and the registry operations.

pub mod auth;
pub mod breaker;
pub mod capabilities;
pub mod challenge;
pub mod client;
pub mod digest;
pub mod error;
pub mod evidence;
pub mod gate;
pub mod identity;
pub mod limit;
pub mod link;
pub mod media;
pub mod operation;
pub mod ops;
pub mod pacer;
pub mod quirks;
pub mod reference;
pub mod retry;
pub mod secret;
pub mod stats;
pub mod text;
pub mod window;

pub use secret::Secret;

pub use client::{RegistryClient, RegistryOptions};
pub use digest::{Algorithm, Digest};
pub use error::{Error, ErrorKind};
pub use operation::Operation;
pub use reference::Reference;
