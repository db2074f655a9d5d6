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

use crate::config::{FieldError, FieldResult, absolute_path};
use serde::Deserialize;
use std::path::PathBuf;

/// The directory the Ignition module configures (see module docs).
pub const RECOMMENDED_TEXTFILE_DIR: &str = "/var/lib/node_exporter/textfile_collector";

#[derive(Debug, Default, Deserialize)]
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

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::{Path, PathBuf};

    fn load(text: &str) -> crate::error::Result<Config> {
        Config::from_json(text, Path::new("/etc/node-bootstrap/config.json"))
    }

    #[test]
    fn unset_publishes_nothing_and_a_directory_turns_it_on() {
        assert_eq!(load("{}").unwrap().metrics.textfile_dir, None);
        assert_eq!(
            load(r#"{"metrics": {}}"#).unwrap().metrics.textfile_dir,
            None
        );
        let c =
            load(r#"{"metrics": {"textfile_dir": "/var/lib/node_exporter/textfile_collector"}}"#)
                .unwrap();
        assert_eq!(
            c.metrics.textfile_dir,
            Some(PathBuf::from(super::RECOMMENDED_TEXTFILE_DIR))
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
        let err = load(r#"{"metrics": {"enabled": true}}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `enabled`"), "{err}");
    }
}
