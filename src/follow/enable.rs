//! `node-bootstrap follow --enable`: turns following on for a node that is
//! already running (Ignition ran once, at its first boot, so the ignition
//! module's `follow` switch reaches only new nodes). It does on the node
//! what that switch does in the Ignition config:
//!
//! 1. `follow.enabled: true` in the agent's config file (the other keys,
//!    and the `follow` section's other settings, kept as they are;
//!    written atomically with the file's mode);
//! 2. the three follow units, as this agent carries them (the same files
//!    as units/ of the release it was built from), written to
//!    `/etc/systemd/system` where they differ;
//! 3. `systemctl enable` of the timer and of the boot-time converge unit,
//!    a reload, and the timer started: the first run comes within its
//!    `OnBootSec=`/`OnUnitInactiveSec=`.
//!
//! Run again, it changes nothing. It never starts a change itself.

use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil;
use serde_json::{Value, json};
use std::path::Path;
use tracing::info;

/// The follow units, as the ignition module installs them.
pub const UNITS: [(&str, &str); 3] = [
    (
        "node-bootstrap-follow.service",
        include_str!("../../units/node-bootstrap-follow.service"),
    ),
    (
        "node-bootstrap-follow.timer",
        include_str!("../../units/node-bootstrap-follow.timer"),
    ),
    (
        "node-bootstrap-follow-converge.service",
        include_str!("../../units/node-bootstrap-follow-converge.service"),
    ),
];

/// What the ignition module enables of them (the service runs only from
/// its timer).
pub const ENABLED: [&str; 2] = [
    "node-bootstrap-follow.timer",
    "node-bootstrap-follow-converge.service",
];

/// Where units go.
pub const UNIT_DIR: &str = "/etc/systemd/system";

/// The agent's config `text` (`None`: there is no file) with
/// `follow.enabled` true; `None` when it is already.
pub fn enabled_config(text: Option<&str>, path: &Path) -> Result<Option<String>> {
    let mut config: Value = match text {
        Some(t) => serde_json::from_str(t).map_err(|e| {
            Error::new(
                ErrorClass::Config,
                format!("{}: not JSON ({e}); nothing was changed", path.display()),
            )
        })?,
        None => json!({}),
    };
    let Some(top) = config.as_object_mut() else {
        return Err(Error::new(
            ErrorClass::Config,
            format!("{}: not a JSON object; nothing was changed", path.display()),
        ));
    };
    let follow = top.entry("follow").or_insert_with(|| json!({}));
    let Some(follow) = follow.as_object_mut() else {
        return Err(Error::new(
            ErrorClass::Config,
            format!(
                "{}: follow is not an object; nothing was changed",
                path.display()
            ),
        ));
    };
    if follow.get("enabled") == Some(&Value::Bool(true)) {
        return Ok(None);
    }
    follow.insert("enabled".into(), Value::Bool(true));
    let mut out = serde_json::to_string_pretty(&config).expect("JSON serializes");
    out.push('\n');
    Ok(Some(out))
}

/// What `--enable` changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Enabled {
    pub config_changed: bool,
    pub units_written: Vec<String>,
}

/// Steps 1 and 2 of the module docs: the config at `config`, the units
/// under `unit_dir`.
pub fn write_files(config: &Path, unit_dir: &Path) -> Result<Enabled> {
    let mut done = Enabled::default();
    let text = fsutil::read_optional(config).ctx(ErrorClass::Config, || {
        format!("cannot read {}", config.display())
    })?;
    if let Some(next) = enabled_config(text.as_deref(), config)? {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(config).map_or(0o644, |m| m.permissions().mode() & 0o7777);
        fsutil::write_file("the agent's config", config, next.as_bytes(), mode)?;
        done.config_changed = true;
    }
    for (name, contents) in UNITS {
        let path = unit_dir.join(name);
        if std::fs::read_to_string(&path).is_ok_and(|t| t == contents) {
            continue;
        }
        fsutil::write_file(
            "a follow unit",
            &path,
            contents.as_bytes(),
            fsutil::MODE_PUBLIC,
        )?;
        done.units_written.push(name.to_string());
    }
    Ok(done)
}

/// `follow --enable` (module docs).
pub async fn enable(config: &Path) -> Result<Enabled> {
    let done = write_files(config, Path::new(UNIT_DIR))?;
    let bus = crate::systemd::agent_bus().await?;
    let systemd = crate::systemd::manager::Systemd::new(bus);
    systemd.enable_units(&ENABLED).await?;
    systemd
        .start_and_wait(ENABLED[0], false, std::time::Duration::from_secs(30))
        .await?;
    info!(step = "follow", config = %config.display(), config_changed = done.config_changed,
        units = ?done.units_written, "following the cluster's version is on: the timer runs `node-bootstrap follow`");
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_gets_follow_enabled_and_keeps_everything_else() {
        let p = Path::new("/etc/node-bootstrap/config.json");
        let text = r#"{"cluster": {"api_timeout_secs": 5}, "follow": {"stable_checks": 5}}"#;
        let out: Value =
            serde_json::from_str(&enabled_config(Some(text), p).unwrap().unwrap()).unwrap();
        assert_eq!(
            out,
            json!({"cluster": {"api_timeout_secs": 5}, "follow": {"stable_checks": 5, "enabled": true}})
        );
        // The result reads as the agent's config.
        let raw: crate::follow::config::RawFollow =
            serde_json::from_value(out["follow"].clone()).unwrap();
        assert!(raw.validate().unwrap().enabled);
        // Again: nothing to do.
        assert_eq!(enabled_config(Some(&out.to_string()), p).unwrap(), None);
        // No file: one with just that.
        let none: Value = serde_json::from_str(&enabled_config(None, p).unwrap().unwrap()).unwrap();
        assert_eq!(none, json!({"follow": {"enabled": true}}));
        for bad in ["[1]", "{", r#"{"follow": 3}"#] {
            let e = enabled_config(Some(bad), p).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Config, "{bad}");
            assert!(e.to_string().contains("nothing was changed"), "{e}");
        }
    }

    #[test]
    fn the_files_are_written_once() {
        let d = tempfile::tempdir().unwrap();
        let config = d.path().join("config.json");
        std::fs::write(&config, "{}").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
        let units = d.path().join("units");
        std::fs::create_dir(&units).unwrap();
        let first = write_files(&config, &units).unwrap();
        assert!(first.config_changed);
        assert_eq!(first.units_written.len(), 3);
        assert_eq!(
            std::fs::read_to_string(units.join("node-bootstrap-follow.timer")).unwrap(),
            include_str!("../../units/node-bootstrap-follow.timer")
        );
        assert_eq!(
            std::fs::metadata(&config).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(write_files(&config, &units).unwrap(), Enabled::default());
    }
}
