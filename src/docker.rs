//! The Docker Engine API over its unix socket, the one client of it: which
//! docker runs (the addon's reboot decision, `status`), and a connection
//! for the helpers' containers.

use crate::error::{Error, Result};
use bollard::Docker;
use std::path::Path;
use std::time::Duration;

/// The oldest API we speak: Docker 1.12 (Container Linux's oldest addon).
pub const MIN_API: bollard::ClientVersion = bollard::ClientVersion {
    major_version: 1,
    minor_version: 24,
};

/// What `GET /version` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonVersion {
    /// e.g. `17.03.2-ce`.
    pub version: String,
    pub api_version: String,
}

/// Connects to the Docker socket and agrees on an API version, within
/// `timeout`. Errors say which socket and why.
pub async fn connect(socket: &Path, timeout: Duration) -> Result<Docker> {
    let docker = client(socket, timeout)?;
    match tokio::time::timeout(timeout, docker.negotiate_version()).await {
        Ok(Ok(d)) => Ok(d),
        Ok(Err(e)) => Err(Error::retryable(format!(
            "cannot reach Docker at {}: {e}",
            socket.display()
        ))),
        Err(_) => Err(Error::retryable(format!(
            "cannot reach Docker at {}: no answer within {}s",
            socket.display(),
            timeout.as_secs_f32()
        ))),
    }
}

/// The running daemon's version, in one request within `timeout`; an
/// absent socket says docker is not up.
pub async fn version(socket: &Path, timeout: Duration) -> Result<DaemonVersion> {
    if !socket.exists() {
        return Err(Error::retryable(format!(
            "no Docker socket at {}",
            socket.display()
        )));
    }
    let docker = client(socket, timeout)?;
    match tokio::time::timeout(timeout, docker.version()).await {
        Ok(Ok(v)) => Ok(DaemonVersion {
            version: v.version.unwrap_or_default(),
            api_version: v.api_version.unwrap_or_default(),
        }),
        Ok(Err(e)) => Err(Error::retryable(format!(
            "Docker at {}: {e}",
            socket.display()
        ))),
        Err(_) => Err(Error::retryable(format!(
            "Docker at {} did not answer within {}ms",
            socket.display(),
            timeout.as_millis()
        ))),
    }
}

fn client(socket: &Path, timeout: Duration) -> Result<Docker> {
    Docker::connect_with_unix(
        &socket.to_string_lossy(),
        timeout.as_secs().max(1),
        &MIN_API,
    )
    .map_err(|e| Error::retryable(format!("cannot reach Docker at {}: {e}", socket.display())))
}
