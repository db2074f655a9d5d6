//! The `os_update` config section.

use crate::settings::{FieldResult, seconds_in};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawOsUpdate {
    /// Ask update_engine for an update during bootstrap (default false).
    #[serde(default)]
    pub enabled: bool,
    /// Give up waiting for the update after this long, seconds (default 2400;
    /// must stay below the unit's TimeoutStartSec of 1h).
    pub timeout_secs: Option<u64>,
    /// GetStatus poll interval alongside the signals, seconds (default 5).
    pub poll_interval_secs: Option<u64>,
    /// Give up when update_engine shows no progress (no status change, no
    /// download progress) for this long, seconds (default 600).
    pub stall_timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsUpdateSettings {
    pub enabled: bool,
    pub timeout: Duration,
    pub poll_interval: Duration,
    pub stall_timeout: Duration,
}

impl OsUpdateSettings {
    /// The section as a config file writes it, every default filled in.
    pub fn to_raw(&self) -> RawOsUpdate {
        RawOsUpdate {
            enabled: self.enabled,
            timeout_secs: Some(self.timeout.as_secs()),
            poll_interval_secs: Some(self.poll_interval.as_secs()),
            stall_timeout_secs: Some(self.stall_timeout.as_secs()),
        }
    }
}

impl RawOsUpdate {
    pub fn validate(self) -> FieldResult<OsUpdateSettings> {
        Ok(OsUpdateSettings {
            enabled: self.enabled,
            timeout: seconds_in(
                "os_update.timeout_secs",
                self.timeout_secs.unwrap_or(2400),
                1,
                3300,
            )?,
            poll_interval: seconds_in(
                "os_update.poll_interval_secs",
                self.poll_interval_secs.unwrap_or(5),
                1,
                60,
            )?,
            stall_timeout: seconds_in(
                "os_update.stall_timeout_secs",
                self.stall_timeout_secs.unwrap_or(600),
                1,
                3300,
            )?,
        })
    }
}
