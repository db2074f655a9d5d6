//! Artifact metadata (simplestreams-shaped index and products) and the
//! search path of locations it is looked up in.

pub mod config;
