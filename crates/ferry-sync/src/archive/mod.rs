//! Tar archives of images: an OCI image layout packed as one tar (`oci-archive:`, a ferry
//! bundle) and `docker save` output (`docker-archive:`), read by seeking, never extracted.

pub(crate) mod docker;
pub mod reader;
pub(crate) mod reader_tar;
