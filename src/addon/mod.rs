//! The docker addon phase: pick, fetch, verify and activate the docker
//! version the cluster needs (torcx, or systemd-sysext).

pub mod config;
