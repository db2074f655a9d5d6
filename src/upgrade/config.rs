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

use crate::config::{FieldResult, absolute_path, seconds_in};
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

#[derive(Debug, Default, Deserialize)]
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

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    #[test]
    fn defaults_and_errors_name_the_field() {
        let c = Config::from_json("{}", Path::new("/c.json")).unwrap();
        assert_eq!(c.agent.upgrade, super::AutoUpgrade::Off);
        assert_eq!(
            c.agent.previous_binary(),
            Path::new("/opt/bin/node-bootstrap.previous")
        );
        let e = Config::from_json(r#"{"agent":{"upgrade":"major"}}"#, Path::new("/c.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("agent.upgrade"), "{e}");
        let e = Config::from_json(
            r#"{"agent":{"binary":"node-bootstrap"}}"#,
            Path::new("/c.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("field `agent.binary`: must be an absolute path"),
            "{e}"
        );
    }
}
