//! Tests of the in-process registry over real HTTP with reqwest: uploads, mounts, pagination,
//! manifest checks, token auth, and every fault knob.
