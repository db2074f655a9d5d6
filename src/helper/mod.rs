//! The oneshot control-plane helpers run by `bootkube.service` and
//! `tectonic.service`.

pub mod config;
