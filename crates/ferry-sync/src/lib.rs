#![deny(missing_docs)]
//! ferry's sync layer, the run: the prepare phase that resolves every mapping, the engine that
//! copies what is stale, pruning, the dry run, verify, export and import, and their reports.
//!
//! A run goes through one door, [`Run`]: made from a config and a [`RunContext`] (the registry
//! clients, the archives it reads and writes, the upload journal, the mode, the stop and the
//! progress), it `sync`s, `dry_run`s, `verify`s, `export`s or `import`s, and returns one
//! outcome that a caller only renders and maps to an exit code.
//!
//! ```no_run
//! use std::path::Path;
//!
//! use ferry_sync::{Outcome, Run, RunContext, Verdict};
//!
//! async fn mirror(path: &Path) -> Result<bool, ferry_sync::ConfigError> {
//!     let config = ferry_sync::load(path)?;
//!     let ctx = RunContext::new(&config);
//!     match Run::new(config, ctx).sync().await {
//!         Outcome::Synced(outcome) => {
//!             print!("{}", outcome.render_text());
//!             Ok(outcome.verdict() == Verdict::Clean)
//!         }
//!         Outcome::DryRun(outcome) => {
//!             print!("{}", outcome.render_text());
//!             Ok(true)
//!         }
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! The public modules, in the order a run meets them (what to mirror is `ferry_config`'s,
//! images on disk `ferry_store`'s):
//!
//! - [`run`]: the front door, [`Run`], its [`RunContext`] and outcomes.
//! - [`registries`]: one client per registry host for the run; [`ecr`] gives it ECR's
//!   credentials and repositories.
//! - [`Source`]: where an image is read from (a registry repository, a layout, an archive),
//!   opened through [`Run::source`].
//! - [`plan`]: every mapping as the prepare phase resolved it; [`dryrun`] measures it.
//! - [`progress`] counts the engine while it runs; [`report`] is what it did, failures that
//!   are not a registry's answer being [`SyncError`]s ([`error`]).
//! - [`prune`] deletes what the source no longer has.
//! - [`verify`] proves the targets hold what a sync would leave there (`ferry verify`).
//! - [`import`]: `ferry import`'s placement of a bundle's images and its outcome.
//!
//! The prepare phase (`prepare`) and the engine (`engine`) are the run's own, reached only
//! through [`Run`].

pub mod bundle_trust;
pub mod dryrun;
pub mod ecr;
pub(crate) mod engine;
pub mod error;
pub mod import;
mod import_stream;
pub(crate) mod in_window;
mod outcome;
pub mod plan;
pub(crate) mod prepare;
pub mod progress;
pub mod prune;
pub mod registries;
mod repair;
pub mod report;
pub mod run;
mod source;
mod tag_cache;
mod totals;
pub mod verify;

pub use dryrun::DryRun;
pub use error::SyncError;
pub use ferry_config::{Config, ConfigError, load};
pub use ferry_distribution::StopSignal;
pub use plan::Plan;
pub use prepare::PrepareTracker;
pub use prepare::signatures::{SignatureCheck, inspect as inspect_signatures};
pub use progress::SyncProgress;
pub use prune::PruneReport;
pub use registries::Registries;
pub use report::{SyncReport, Totals, Verdict};
pub use run::{DryRunOutcome, Mode, Outcome, Run, RunContext, RunOutcome};
pub use source::Source;
