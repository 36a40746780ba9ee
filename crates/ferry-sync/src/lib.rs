//! ferry sync (placeholder)
