//! The `sources` config section: where artifact metadata is searched.

use crate::config::FieldResult;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSources {}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourcesSettings {}

impl RawSources {
    pub fn validate(self) -> FieldResult<SourcesSettings> {
        Ok(SourcesSettings {})
    }
}
