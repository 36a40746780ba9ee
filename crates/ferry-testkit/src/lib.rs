//! Test-only parts for ferry: an in-process OCI registry with fault knobs (`registry`) and a
//! harness that starts the real CNCF distribution registry on loopback (`distribution`).

pub mod distribution;
pub mod registry;
