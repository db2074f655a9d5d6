//! OS updates through update_engine (`com.coreos.update1`) on the system bus.

pub mod config;
