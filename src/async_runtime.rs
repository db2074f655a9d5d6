//! The async runtime a command runs on. The agent's I/O is a few
//! connections at a time; `status` and the helpers need only one thread,
//! `run` and `assets pull` (parallel ranged parts, hashing) two.

use crate::error::{Error, Result};

pub fn current_thread() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(start_error)
}

pub fn multi_thread() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(start_error)
}

fn start_error(e: std::io::Error) -> Error {
    Error::internal(format!("cannot start the async runtime: {e}"))
}
