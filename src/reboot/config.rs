//! The `reboot` config section.

use crate::settings::{FieldResult, seconds_in};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawReboot {
    /// After asking for a reboot, how long to wait to be stopped before
    /// exiting with a retryable error, seconds (default 300).
    pub wait_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebootSettings {
    pub wait: Duration,
}

impl RebootSettings {
    /// The section as a config file writes it, every default filled in.
    pub fn to_raw(&self) -> RawReboot {
        RawReboot {
            wait_secs: Some(self.wait.as_secs()),
        }
    }
}

impl RawReboot {
    pub fn validate(self) -> FieldResult<RebootSettings> {
        Ok(RebootSettings {
            wait: seconds_in("reboot.wait_secs", self.wait_secs.unwrap_or(300), 1, 3600)?,
        })
    }
}
