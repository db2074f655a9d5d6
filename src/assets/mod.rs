//! Cluster assets: pulled from S3 (pull mode) or pushed by terraform over
//! SSH (push mode), unpacked safely and moved into place in one step.

pub mod config;
