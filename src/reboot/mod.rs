//! Rebooting the node when (and only when) the OS or docker changed.
//!
//! When docker's version changes, its data directory must not survive into
//! the new version: a runtime unit that wipes it during shutdown is
//! installed first (FORMATS.md §6), and a failure to install it stops the
//! reboot. Then logind is asked to reboot and the process waits to be
//! stopped; if it is still alive after `reboot.wait_secs`, it exits with a
//! retryable error and systemd runs it again, which asks again.

pub mod config;

use crate::config::Config;
use crate::error::{Error, Result, ResultExt as _};
use crate::systemd::manager::Systemd;
use std::convert::Infallible;
use std::path::Path;
use tracing::info;

/// The runtime unit that wipes docker's data directory at shutdown.
pub const CLEANUP_UNIT: &str = "node-bootstrap-docker-cleanup.service";

/// The cleanup unit's text. Refuses data directories that are not at least
/// two levels deep (a typo must not wipe `/` or `/var`).
pub fn cleanup_unit(docker_datadir: &Path) -> Result<String> {
    let depth = docker_datadir
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .count();
    let text = docker_datadir
        .to_str()
        .filter(|s| !s.contains(['"', '\\', '\n', '%']));
    match (depth >= 2, text) {
        (true, Some(dir)) => Ok(format!(
            "# Installed by node-bootstrap for this boot only: the docker version changes\n\
             # with the reboot, so its old data directory must not survive it.\n\
             [Unit]\n\
             Description=Wipe docker's data directory before the docker version changes\n\
             DefaultDependencies=no\n\
             Before=docker.service umount.target\n\
             \n\
             [Service]\n\
             Type=oneshot\n\
             RemainAfterExit=yes\n\
             ExecStart=/usr/bin/rm -rf \"{dir}\"\n\
             \n\
             [Install]\n\
             RequiredBy=umount.target\n"
        )),
        _ => Err(Error::config(format!(
            "refusing to wipe docker data directory {:?}: it must be an absolute path at least two levels deep \
             without quotes, backslashes or %",
            docker_datadir.display().to_string()
        ))),
    }
}

/// Installs the cleanup unit when asked, requests the reboot, and waits.
pub async fn reboot(
    config: &Config,
    systemd: &Systemd,
    reason: &str,
    wipe_docker_datadir: bool,
) -> Result<Infallible> {
    if wipe_docker_datadir {
        let unit = cleanup_unit(&config.paths.docker_datadir)?;
        systemd
            .install_runtime_unit(&config.paths.systemd_runtime_dir, CLEANUP_UNIT, &unit)
            .await
            .context(|| "failed to install the docker datadir cleanup unit; not rebooting")?;
    }
    let method = systemd
        .reboot()
        .await
        .context(|| format!("failed to request the reboot ({reason})"))?;
    info!(phase = "reboot", reason, method = ?method, wait_secs = config.reboot.wait.as_secs(), "reboot requested; waiting to be stopped");
    tokio::time::sleep(config.reboot.wait).await;
    Err(Error::retryable(format!(
        "reboot requested ({reason}) but the node is still up after {}s; something delays the shutdown",
        config.reboot.wait.as_secs()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleanup_unit_wipes_the_configured_datadir_at_shutdown() {
        let u = cleanup_unit(Path::new("/var/lib/docker")).unwrap();
        assert!(u.contains("ExecStart=/usr/bin/rm -rf \"/var/lib/docker\"\n"));
        assert!(u.contains("DefaultDependencies=no\n"));
        assert!(u.contains("[Install]\nRequiredBy=umount.target\n"));
    }

    #[test]
    fn shallow_or_odd_datadirs_are_refused() {
        for bad in ["/", "/var", "/var/lib/do\"cker", "/var/lib/%h"] {
            let err = cleanup_unit(Path::new(bad)).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("refusing to wipe docker data directory"),
                "{bad}: {err}"
            );
        }
    }
}
