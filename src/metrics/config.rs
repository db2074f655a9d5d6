//! The `metrics` config section: whether the agent publishes its
//! Prometheus textfile, and where.
//!
//! ```json
//! "metrics": {
//!   "enabled": true,
//!   "textfile_dir": "/var/lib/node_exporter/textfile_collector"
//! }
//! ```
//!
//! `enabled` (default `true`): write `<textfile_dir>/node_bootstrap.prom`
//! and keep the counters behind it in `<state_dir>/metrics.json`. `false`
//! writes neither.
//!
//! `textfile_dir` (default `/var/lib/node_exporter/textfile_collector`):
//! the directory node_exporter's textfile collector reads
//! (`--collector.textfile.directory=`). Flatcar ships no node_exporter, so
//! there is no OS default to follow; this is the directory node_exporter's
//! own documentation and most deployments use, on `/var` (writable on
//! Flatcar). Created (0755) if missing. Must be absolute and outside `/usr`
//! (read-only on Flatcar).

use crate::config::{FieldError, FieldResult, absolute_path};
use serde::Deserialize;
use std::path::PathBuf;

/// Where node_exporter's textfile collector reads by default (see module docs).
pub const DEFAULT_TEXTFILE_DIR: &str = "/var/lib/node_exporter/textfile_collector";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    /// Publish the textfile (default true).
    pub enabled: Option<bool>,
    /// node_exporter's textfile directory (default above).
    pub textfile_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSettings {
    pub enabled: bool,
    pub textfile_dir: PathBuf,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        RawMetrics::default()
            .validate()
            .expect("defaults are valid")
    }
}

impl RawMetrics {
    pub fn validate(self) -> FieldResult<MetricsSettings> {
        let field = "metrics.textfile_dir";
        let dir = absolute_path(
            field,
            self.textfile_dir
                .unwrap_or_else(|| PathBuf::from(DEFAULT_TEXTFILE_DIR)),
        )?;
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
            enabled: self.enabled.unwrap_or(true),
            textfile_dir: dir,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::{Path, PathBuf};

    fn load(text: &str) -> crate::error::Result<Config> {
        Config::from_json(text, Path::new("/etc/node-bootstrap/config.json"))
    }

    #[test]
    fn defaults_publish_to_node_exporters_textfile_directory() {
        let c = load("{}").unwrap();
        assert!(c.metrics.enabled);
        assert_eq!(
            c.metrics.textfile_dir,
            PathBuf::from("/var/lib/node_exporter/textfile_collector")
        );
        let c = load(r#"{"metrics": {"enabled": false, "textfile_dir": "/var/lib/prometheus/node-exporter"}}"#)
            .unwrap();
        assert!(!c.metrics.enabled);
        assert_eq!(
            c.metrics.textfile_dir,
            PathBuf::from("/var/lib/prometheus/node-exporter")
        );
    }

    #[test]
    fn bad_directories_are_named_by_field() {
        for (dir, says) in [
            ("var/lib/x", "must be an absolute path"),
            ("/usr/local/share/metrics", "read-only on Flatcar"),
            ("/", "must be a directory below /"),
        ] {
            let err = load(&format!(r#"{{"metrics": {{"textfile_dir": "{dir}"}}}}"#)).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("field `metrics.textfile_dir`") && msg.contains(says),
                "{dir}: {msg}"
            );
            assert_eq!(err.exit_code(), crate::error::exit::CONFIG);
        }
        let err = load(r#"{"metrics": {"dir": "/x"}}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `dir`"), "{err}");
    }
}
