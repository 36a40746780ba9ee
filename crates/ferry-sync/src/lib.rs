#![deny(missing_docs)]
//! ferry's sync layer: the mirror.yaml config, tag filters, the prepare phase that resolves
//! every mapping, the engine that copies what is stale, and the report of what happened.

pub mod config;
pub mod dryrun;
pub mod ecr;
pub mod engine;
pub mod error;
pub mod filter;
pub mod in_window;
pub mod layout;
pub mod plan;
pub mod platform;
pub mod prepare;
pub mod progress;
pub mod prune;
pub mod registries;
pub mod report;
pub mod run;
pub mod shard;
pub mod source;
