//! The `metrics` config section: where the agent publishes its Prometheus
//! textfile, if anywhere.
//!
//! ```json
//! "metrics": { "textfile_dir": "/var/lib/node_exporter/textfile_collector" }
//! ```
//!
//! `textfile_dir` (default: unset, nothing published): the directory
//! node_exporter's textfile collector reads (`--collector.textfile.directory=`);
//! the agent writes `<textfile_dir>/node_bootstrap.prom` and keeps the
//! counters behind it in `<state_dir>/metrics.json`. Created (0755) if
//! missing. Must be absolute and outside `/usr` (read-only on Flatcar).
//!
//! Off when unset, so an agent run by hand or by a test never writes into a
//! directory it was not given; the Ignition module sets it to
//! [`RECOMMENDED_TEXTFILE_DIR`] unless the node's config says otherwise,
//! so delivered nodes publish. Flatcar ships no node_exporter, so there is
//! no OS directory to follow; that one is the directory node_exporter's own
//! documentation and most deployments use, on `/var` (writable on Flatcar).

use crate::settings::{FieldError, FieldResult, absolute_path};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The directory the Ignition module configures (see module docs).
pub const RECOMMENDED_TEXTFILE_DIR: &str = "/var/lib/node_exporter/textfile_collector";

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    /// node_exporter's textfile directory (default: unset, off).
    pub textfile_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSettings {
    /// `None`: publish nothing.
    pub textfile_dir: Option<PathBuf>,
}

impl MetricsSettings {
    /// The section as a config file writes it (unset: `null`, off).
    pub fn to_raw(&self) -> RawMetrics {
        RawMetrics {
            textfile_dir: self.textfile_dir.clone(),
        }
    }
}

impl RawMetrics {
    pub fn validate(self) -> FieldResult<MetricsSettings> {
        let field = "metrics.textfile_dir";
        let Some(dir) = self.textfile_dir else {
            return Ok(MetricsSettings::default());
        };
        let dir = absolute_path(field, dir)?;
        if dir.starts_with("/usr") {
            return Err(FieldError::new(
                field,
                format!(
                    "{} is under /usr, which is read-only on Flatcar; use a directory under /var",
                    dir.display()
                ),
            ));
        }
        if dir.parent().is_none() {
            return Err(FieldError::new(field, "must be a directory below /"));
        }
        Ok(MetricsSettings {
            textfile_dir: Some(dir),
        })
    }
}
