//! The `agent` config section: whether `run` upgrades the agent first, and
//! where the agent is installed.
//!
//! ```json
//! "agent": {
//!   "upgrade": "minor",
//!   "binary": "/opt/bin/node-bootstrap",
//!   "check_timeout_secs": 10
//! }
//! ```
//!
//! `upgrade`: `off` (default), `patch` (newest of the same major.minor) or
//! `minor` (newest of the same major). A new major is never taken by `run`.
//! Where agents come from is the `sources` section (product
//! `node-bootstrap`, series `any`, the node's arch).

use crate::settings::{FieldResult, absolute_path, seconds_in};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Where the agent is installed (Ignition puts it there).
pub const DEFAULT_BINARY: &str = "/opt/bin/node-bootstrap";

/// How far `run` upgrades the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AutoUpgrade {
    #[default]
    Off,
    /// The newest agent of the running major.minor.
    Patch,
    /// The newest agent of the running major.
    Minor,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    pub upgrade: Option<AutoUpgrade>,
    /// The installed agent binary (default /opt/bin/node-bootstrap).
    pub binary: Option<PathBuf>,
    /// How long a new binary has to answer `version --json` (default 10).
    pub check_timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSettings {
    pub upgrade: AutoUpgrade,
    pub binary: PathBuf,
    pub check_timeout: Duration,
}

impl Default for AgentSettings {
    fn default() -> Self {
        RawAgent::default().validate().expect("defaults are valid")
    }
}

impl AgentSettings {
    /// Where the previous binary is kept for `upgrade --rollback`.
    pub fn previous_binary(&self) -> PathBuf {
        let mut name = self.binary.file_name().unwrap_or_default().to_os_string();
        name.push(".previous");
        self.binary.with_file_name(name)
    }
}

impl AgentSettings {
    /// The section as a config file writes it, every default filled in.
    pub fn to_raw(&self) -> RawAgent {
        RawAgent {
            upgrade: Some(self.upgrade),
            binary: Some(self.binary.clone()),
            check_timeout_secs: Some(self.check_timeout.as_secs()),
        }
    }
}

impl RawAgent {
    pub fn validate(self) -> FieldResult<AgentSettings> {
        let binary = absolute_path(
            "agent.binary",
            self.binary.unwrap_or_else(|| PathBuf::from(DEFAULT_BINARY)),
        )?;
        Ok(AgentSettings {
            upgrade: self.upgrade.unwrap_or_default(),
            binary,
            check_timeout: seconds_in(
                "agent.check_timeout_secs",
                self.check_timeout_secs.unwrap_or(10),
                1,
                300,
            )?,
        })
    }
}
