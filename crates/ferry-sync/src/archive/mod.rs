//! OCI image layouts packed as one tar (`oci-archive:`, skopeo's format; `ferry export`'s
//! bundle): the streaming writer here, the reader beside it.

pub mod writer;
mod writer_tar;
