//! The D-Bus seam to systemd and logind on the system bus, and the one way
//! the agent connects to that bus (also for update_engine).
//!
//! `manager` starts jobs, installs runtime units and asks for reboots;
//! `units` reads the state of the flow's units for `status`; `notify`
//! speaks the notification protocol (`READY=1`, `STATUS=`) of `run`'s unit.

pub mod manager;
pub mod notify;
pub mod units;

use crate::error::{Error, Result};
use std::time::Duration;

/// How long the agent's work waits for the system bus to answer a connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the agent's work waits for one method reply (D-Bus's default).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(25);

/// Connects to the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else the default
/// socket) within `connect`; every method call on the connection is
/// bounded by `calls`. Unreachable is retryable: the bus may be starting.
pub async fn system_bus(connect: Duration, calls: Duration) -> Result<zbus::Connection> {
    let address = std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
        .unwrap_or_else(|_| "unix:path=/run/dbus/system_bus_socket".to_string());
    let build = async {
        zbus::connection::Builder::system()
            .method_timeout(calls)
            .build()
            .await
    };
    match tokio::time::timeout(connect, build).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(Error::retryable(format!(
            "cannot connect to the system bus at {address}: {e}"
        ))),
        Err(_) => Err(Error::retryable(format!(
            "the system bus at {address} did not answer within {}ms",
            connect.as_millis()
        ))),
    }
}

/// The system bus as the agent's work uses it ([`CONNECT_TIMEOUT`],
/// [`CALL_TIMEOUT`]).
pub async fn agent_bus() -> Result<zbus::Connection> {
    system_bus(CONNECT_TIMEOUT, CALL_TIMEOUT).await
}
