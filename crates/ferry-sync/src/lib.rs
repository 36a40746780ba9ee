#![deny(missing_docs)]
//! ferry's sync layer: the mirror.yaml config, tag filters, the prepare phase that resolves
//! every mapping, the engine that copies what is stale, and the report of what happened.
//!
//! A run goes through one door, [`run::run`] (or [`run::dry_run`], which writes nothing): it
//! resolves every mapping, syncs each as soon as it is resolved, prunes, and returns one
//! [`RunOutcome`] that a caller only renders and maps to an exit code.
//!
//! ```no_run
//! use std::{path::Path, sync::Arc};
//!
//! use ferry_sync::{EngineOptions, PrepareOptions, PrepareTracker, Registries, StopSignal};
//!
//! async fn mirror(path: &Path) -> Result<bool, ferry_sync::ConfigError> {
//!     let config = ferry_sync::load(path)?;
//!     let registries = Registries::new(&config);
//!     let tracker = Arc::new(PrepareTracker::new(config.mappings.len()));
//!     let (outcome, ()) = ferry_sync::run::run(
//!         &config,
//!         &registries,
//!         &PrepareOptions::from_config(&config),
//!         tracker,
//!         &EngineOptions::from_settings(&config.engine),
//!         &StopSignal::default(),
//!         |_plan| async {},
//!         |()| async {},
//!     )
//!     .await;
//!     print!("{}", outcome.render_text());
//!     Ok(outcome.verdict() == ferry_sync::Verdict::Clean)
//! }
//! # fn main() {}
//! ```
//!
//! The modules, in the order a run meets them:
//!
//! - [`config`]: mirror.yaml read, checked and resolved into a [`Config`]; [`filter`],
//!   [`platform`] and [`shard`] are the parts of it that select tags, platforms and mappings.
//! - [`registries`]: one client per registry host for the run; [`ecr`] gives it ECR's
//!   credentials and repositories.
//! - [`source`] and [`layout`]: where images are read from and written to besides a registry
//!   (an OCI image-layout directory).
//! - [`prepare`] resolves every mapping into a [`Plan`] ([`plan`]); [`dryrun`] measures it.
//! - [`engine`] copies what the plan says is stale, counted by [`progress`] while it runs and
//!   reported in a [`SyncReport`] ([`report`]), failures that are not a registry's answer
//!   being [`SyncError`]s ([`error`]).
//! - [`prune`] deletes what the source no longer has; [`run`] puts the steps together.
//! - [`verify`] proves the targets hold what a sync would leave there (`ferry verify`).

pub mod dryrun;
pub mod ecr;
pub mod engine;
pub mod error;
pub mod import;
pub(crate) mod in_window;
pub mod plan;
pub mod prepare;
pub mod progress;
pub mod prune;
pub mod registries;
pub mod report;
pub mod run;
pub mod source;
pub mod verify;

pub use dryrun::DryRun;
pub use engine::{EngineOptions, StopSignal};
pub use error::SyncError;
pub use ferry_config::{Config, ConfigError, load};
pub use plan::Plan;
pub use prepare::{PrepareOptions, PrepareTracker};
pub use progress::SyncProgress;
pub use prune::PruneReport;
pub use registries::Registries;
pub use report::{SyncReport, Totals, Verdict};
pub use run::{DryRunOutcome, RunOutcome};
