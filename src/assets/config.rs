//! The `assets` config section.

use crate::config::FieldResult;
use serde::Deserialize;

/// How assets reach the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AssetsMode {
    /// terraform copies them over SSH; the agent only waits.
    #[default]
    Push,
    /// The agent pulls a bundle from S3.
    Pull,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAssets {
    #[serde(default)]
    pub mode: AssetsMode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetsSettings {
    pub mode: AssetsMode,
}

impl RawAssets {
    pub fn validate(self) -> FieldResult<AssetsSettings> {
        Ok(AssetsSettings { mode: self.mode })
    }
}
