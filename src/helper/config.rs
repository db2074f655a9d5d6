//! The `helpers` config section.

use crate::config::FieldResult;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHelpers {}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HelpersSettings {}

impl RawHelpers {
    pub fn validate(self) -> FieldResult<HelpersSettings> {
        Ok(HelpersSettings {})
    }
}
