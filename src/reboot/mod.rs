//! Rebooting the node when (and only when) the OS or docker changed, with
//! the docker datadir cleanup unit installed first when docker changed.

pub mod config;
