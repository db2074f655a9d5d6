//! The config file's `metrics` section ([`crate::metrics::config`]), read as the
//! agent reads it: through [`crate::config::Config`], errors named by file and field.

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
    let c = load(r#"{"metrics": {"textfile_dir": "/var/lib/node_exporter/textfile_collector"}}"#)
        .unwrap();
    assert_eq!(
        c.metrics.textfile_dir,
        Some(PathBuf::from(
            crate::metrics::config::RECOMMENDED_TEXTFILE_DIR
        ))
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
