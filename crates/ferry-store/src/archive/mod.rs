//! Tar archives of images: an OCI image layout packed as one tar (`oci-archive:`, skopeo's
//! format; `ferry export`'s bundle), written streaming; read back, and `docker save` output,
//! by seeking, never extracted (a compressed one, or one from a pipe, from a spool file).

pub mod docker;
pub mod input;
pub mod reader;
pub mod reader_tar;
mod stores;
pub mod stream;
pub mod streamed;
pub mod writer;
pub(crate) mod writer_tar;

pub use stores::Stores;
