//! The `addon` config section.

use crate::config::FieldResult;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAddon {
    /// Run the docker addon phase (default false until configured).
    #[serde(default)]
    pub enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddonSettings {
    pub enabled: bool,
}

impl RawAddon {
    pub fn validate(self) -> FieldResult<AddonSettings> {
        Ok(AddonSettings {
            enabled: self.enabled,
        })
    }
}
