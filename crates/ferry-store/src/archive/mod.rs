//! Tar archives of images: an OCI image layout packed as one tar (`oci-archive:`, skopeo's
//! format; `ferry export`'s bundle), written streaming; read back, and `docker save` output,
//! by seeking, never extracted.

pub mod docker;
pub mod reader;
pub mod reader_tar;
mod stores;
pub mod writer;
pub(crate) mod writer_tar;

pub use stores::Stores;
