//! Rebooting the node when (and only when) the OS or docker changed.
//!
//! When docker's version changes, its data directory must not survive into
//! the new version: a runtime unit that wipes it during shutdown is
//! installed first (docs/formats.md §8), and a failure to install it stops the
//! reboot. The runtime unit lives in /run and is lost with the power, so a
//! persistent marker (`<state_dir>/docker-datadir-wipe-pending`, holding the
//! boot id that asked) is made durable first ([`owe_wipe`]), before the
//! state journal records the reboot: a power cut between the two must not
//! leave a journal that says "rebooting with a wipe" and no marker, which
//! the next boot would take as a reboot done and a wipe nobody owes. The
//! shutdown unit removes the marker after wiping, and a later boot's `run`
//! that still finds it wipes the datadir itself before anything else
//! ([`finish_pending_wipe`]). Then logind is asked to reboot and the process
//! waits to be stopped; if it is still alive after `reboot.wait_secs`, it
//! exits with a retryable error and systemd runs it again, which asks again.

pub mod config;

use crate::error::{Error, Result, ResultExt as _};
use crate::systemd::manager::Systemd;
use std::convert::Infallible;
use std::path::Path;
use tracing::{info, warn};

/// The runtime unit that wipes docker's data directory at shutdown.
pub const CLEANUP_UNIT: &str = "node-bootstrap-docker-cleanup.service";

/// The persistent "wipe still owed" marker.
pub fn wipe_marker(paths: &crate::settings::Paths) -> std::path::PathBuf {
    paths.state_dir.join("docker-datadir-wipe-pending")
}

/// The cleanup unit's text. Refuses data directories that are not at least
/// two levels deep (a typo must not wipe `/` or `/var`).
pub fn cleanup_unit(docker_datadir: &Path, marker: &Path) -> Result<String> {
    let depth = docker_datadir
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .count();
    let plain = |p: &Path| {
        p.to_str()
            .filter(|s| !s.contains(['"', '\\', '\n', '%']))
            .map(str::to_string)
    };
    match (depth >= 2, plain(docker_datadir), plain(marker)) {
        (true, Some(dir), Some(marker)) => Ok(format!(
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
             ExecStartPost=/usr/bin/rm -f \"{marker}\"\n\
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

/// What rebooting reads of the agent's config: its own section and the
/// node's paths.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a crate::settings::Paths,
    pub reboot: &'a config::RebootSettings,
}

/// Makes the "wipe owed" marker durable, naming this boot (which will not
/// wipe; the shutdown or a later boot will). Refuses, before writing it, a
/// data directory the cleanup unit would refuse.
pub fn owe_wipe(config: &Inputs<'_>, boot_id: &str) -> Result<()> {
    let marker = wipe_marker(config.paths);
    cleanup_unit(&config.paths.docker_datadir, &marker)?;
    crate::fsutil::write_file(
        "docker datadir wipe marker",
        &marker,
        format!("{boot_id}\n").as_bytes(),
        crate::fsutil::MODE_PUBLIC,
    )
}

/// Installs the cleanup unit when asked (the marker is written already, by
/// [`owe_wipe`]), requests the reboot, and waits.
pub async fn reboot(
    config: &Inputs<'_>,
    systemd: &Systemd,
    reason: &str,
    wipe_docker_datadir: bool,
) -> Result<Infallible> {
    if wipe_docker_datadir {
        let marker = wipe_marker(config.paths);
        let unit = cleanup_unit(&config.paths.docker_datadir, &marker)?;
        systemd
            .install_runtime_unit(&config.paths.systemd_runtime_dir, CLEANUP_UNIT, &unit)
            .await
            .context(|| "failed to install the docker datadir cleanup unit; not rebooting")?;
    }
    let method = systemd
        .reboot()
        .await
        .context(|| format!("failed to request the reboot ({reason})"))?;
    info!(step = "reboot", reason, method = ?method, wait_secs = config.reboot.wait.as_secs(), "reboot requested; waiting to be stopped");
    tokio::time::sleep(config.reboot.wait).await;
    Err(Error::retryable(format!(
        "reboot requested ({reason}) but the node is still up after {}s; something delays the shutdown",
        config.reboot.wait.as_secs()
    )))
}

/// Wipes docker's datadir if a reboot asked for it and the shutdown did
/// not (power lost before the cleanup unit ran). Called at the start of
/// `run`, before anything can use docker's data. Returns whether it wiped.
pub async fn finish_pending_wipe(config: &Inputs<'_>, boot_id: &str) -> Result<bool> {
    let marker = wipe_marker(config.paths);
    let owner = crate::fsutil::read_optional(&marker)
        .map_err(|e| Error::internal(format!("failed to read {}: {e}", marker.display())))?;
    let Some(owner) = owner else { return Ok(false) };
    if owner.trim() == boot_id {
        // This boot asked for the reboot, which has not happened yet.
        return Ok(false);
    }
    let datadir = &config.paths.docker_datadir;
    cleanup_unit(datadir, &marker)?; // the same safety checks as the unit
    warn!(step = "reboot", path = %datadir.display(),
        "the docker datadir wipe did not run at shutdown (power loss?); wiping it now");
    stop_docker().await?;
    match remove_contents(datadir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(Error::internal(format!(
                "failed to wipe docker's datadir {}: {e}",
                datadir.display()
            )));
        }
    }
    std::fs::remove_file(&marker)
        .map_err(|e| Error::internal(format!("failed to remove {}: {e}", marker.display())))?;
    if let Some(dir) = marker.parent() {
        let _ = crate::fsutil::fsync_dir(dir);
    }
    Ok(true)
}

/// Removes everything inside `dir`, not `dir` itself: in the agent's
/// sandbox (units/k8s-node-bootstrap.service) the datadir is a mount point
/// of its own (`ReadWritePaths=`) in a read-only /var/lib, which it may
/// empty but not remove. An empty datadir is what docker makes of a
/// missing one.
fn remove_contents(dir: &std::path::Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Docker must not run on the datadir being wiped: stop it if it runs.
async fn stop_docker() -> Result<()> {
    let Ok(conn) = crate::systemd::agent_bus().await else {
        return Ok(()); // no systemd to have started docker
    };
    let units = crate::systemd::units::Units::new(conn.clone());
    let running = |u: &str| {
        let units = &units;
        let u = u.to_string();
        async move {
            // Not loaded (GetUnit, which never loads it) is not running.
            units.loaded_unit(&u).await.is_ok_and(|s| {
                s.is_some_and(|s| s.active_state != "inactive" && s.active_state != "failed")
            })
        }
    };
    if !running("docker.service").await {
        return Ok(());
    }
    let systemd = Systemd::new(conn);
    for unit in ["docker.socket", "docker.service"] {
        systemd.stop_unit(unit).await?;
    }
    for _ in 0..300 {
        if !running("docker.service").await {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(Error::retryable(
        "docker.service did not stop within 30s; not wiping its datadir under it",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleanup_unit_wipes_the_configured_datadir_at_shutdown() {
        let u = cleanup_unit(
            Path::new("/var/lib/docker"),
            Path::new("/var/lib/node-bootstrap/m"),
        )
        .unwrap();
        assert!(u.contains("ExecStart=/usr/bin/rm -rf \"/var/lib/docker\"\n"));
        assert!(u.contains("ExecStartPost=/usr/bin/rm -f \"/var/lib/node-bootstrap/m\"\n"));
        assert!(u.contains("DefaultDependencies=no\n"));
        assert!(u.contains("[Install]\nRequiredBy=umount.target\n"));
    }

    #[test]
    fn shallow_or_odd_datadirs_are_refused() {
        for bad in ["/", "/var", "/var/lib/do\"cker", "/var/lib/%h"] {
            let err = cleanup_unit(Path::new(bad), Path::new("/m")).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("refusing to wipe docker data directory"),
                "{bad}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn a_wipe_the_shutdown_missed_is_done_by_the_next_boots_run() {
        let d = tempfile::tempdir().unwrap();
        let text = format!(
            r#"{{"paths": {{"state_dir": "{0}/state", "docker_datadir": "{0}/var/lib/docker"}}}}"#,
            d.path().display()
        );
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        let paths = crate::settings::section::<crate::settings::RawPaths>(&file, "paths")
            .validate()
            .unwrap();
        let reboot = config::RawReboot::default().validate().unwrap();
        let config = Inputs {
            paths: &paths,
            reboot: &reboot,
        };
        let data = config.paths.docker_datadir.join("image/marker");
        std::fs::create_dir_all(data.parent().unwrap()).unwrap();
        std::fs::write(&data, "1.12's data").unwrap();
        // Nothing owed: nothing happens.
        assert!(!finish_pending_wipe(&config, "b1").await.unwrap());
        let marker = wipe_marker(config.paths);
        owe_wipe(&config, "b1").unwrap();
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "b1\n");
        // Same boot: the reboot is still to come, and its shutdown wipes.
        assert!(!finish_pending_wipe(&config, "b1").await.unwrap());
        assert!(data.exists());
        // A later boot finds the wipe still owed (power lost before the shutdown).
        assert!(finish_pending_wipe(&config, "b2").await.unwrap());
        assert!(!data.exists());
        assert_eq!(
            std::fs::read_dir(&config.paths.docker_datadir)
                .unwrap()
                .count(),
            0,
            "emptied, the directory itself kept"
        );
        assert!(!marker.exists());
        assert!(!finish_pending_wipe(&config, "b3").await.unwrap());
    }
}
