//! The `run` and `preflight` commands.

use super::driver::{Driver, RunOutcome};
use super::node::{NodeSeams, READY_STATUS};
use super::preflight;
use crate::config::Config;
use crate::error::Result;
use crate::fsutil::{self, RunLock};
use crate::journal::JournalFile;
use crate::systemd::notify::Notifier;
use std::time::Duration;
use tracing::{info, warn};

/// How long a second `run` waits for the first to finish before refusing.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How a `run` that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// This run wrote kubelet.env (at this instant): the join starts now
    /// ([`watch_join`]).
    Bootstrapped(std::time::Instant),
    /// kubelet.env was there already.
    NothingToDo,
}

/// `node-bootstrap run`: the ExecStart of k8s-node-bootstrap.service.
/// `notifier` tells systemd each step and, once kubelet.env is in place,
/// `READY=1` (the caller reports a failure there).
pub async fn run(config: &Config, notifier: &Notifier) -> Result<Ran> {
    let _lock = RunLock::acquire(&config.paths.run_lock(), LOCK_WAIT)?;
    info!(
        message_id = crate::message_ids::RUN_STARTED,
        step = "run",
        version = crate::agent_upgrade::identity::version(),
        "node-bootstrap run started"
    );
    crate::panic_hook::panic_if_asked();
    if config.paths.kubelet_env.exists() {
        info!(step = "run", path = %config.paths.kubelet_env.display(), "kubelet.env is in place; nothing to do");
        notifier.ready(READY_STATUS);
        return Ok(Ran::NothingToDo);
    }
    for dir in [
        config.paths.kubelet_env.parent(),
        Some(config.paths.state_dir.as_path()),
        config.agent.binary.parent(),
    ]
    .into_iter()
    .flatten()
    {
        match fsutil::remove_stale_temps(dir) {
            Ok(0) => {}
            Ok(n) => {
                info!(path = %dir.display(), removed = n, "removed temp files an interrupted run left behind")
            }
            Err(e) => warn!(path = %dir.display(), error = %e, "could not clean temp files"),
        }
    }
    // One system bus connection for preflight and every step after it.
    let bus = crate::systemd::agent_bus().await;
    preflight::first_failure(preflight::run_checks_on(config, &bus).await)?;
    let bus = bus?;
    let boot_id = crate::boot::id(&config.paths.run_dir)?;
    if crate::reboot::finish_pending_wipe(&config.reboot_inputs(), &boot_id).await? {
        info!(step = "reboot", path = %config.paths.docker_datadir.display(), "docker's old datadir wiped");
    }
    let seams = NodeSeams::new(config, &boot_id, bus, notifier);
    let driver = Driver {
        seams: &seams,
        journal: JournalFile::new(config.paths.state_journal()),
        boot_id,
        agent_upgrade_enabled: config.agent.upgrade
            != crate::agent_upgrade::config::AutoUpgrade::Off,
        os_update_enabled: config.os_update.enabled,
        addon_enabled: config.addon.enabled,
        kubelet_sysext_enabled: kubelet_is_sysext(config),
    };
    match driver.run().await? {
        RunOutcome::Complete => Ok(Ran::Bootstrapped(std::time::Instant::now())),
        RunOutcome::Handover { binary } => {
            // exec ends this process's metrics: publish them first.
            crate::textfile::publish_before_exit(config, "handover");
            Err(hand_over(&binary))
        }
    }
}

/// Whether this node's kubelet is the system extension (`kubelet.backend`
/// against the release running now). A backend the node cannot have is
/// the `runtime` step's to refuse, in the journal; until then, no sysext.
fn kubelet_is_sysext(config: &Config) -> bool {
    use crate::kubelet_sysext::backend::{Runs, on_node};
    on_node(config.kubelet.backend, &config.paths.os_release).is_ok_and(|r| r.runs == Runs::Sysext)
}

/// After a run that wrote kubelet.env (and published its outcome): the
/// join, watched for `cluster.join_watch_secs` ([`super::join_watch`]).
/// Never fails.
pub async fn watch_join(config: &Config, notifier: &Notifier, kubelet_env_at: std::time::Instant) {
    super::join_watch::watch(config, notifier, kubelet_env_at).await;
}

/// Replaces this process with the new agent at `binary`, same arguments
/// and environment; returns only if that fails.
fn hand_over(binary: &std::path::Path) -> crate::error::Error {
    use std::os::unix::process::CommandExt;
    let e = std::process::Command::new(binary)
        .args(std::env::args_os().skip(1))
        .exec();
    crate::error::Error::internal(format!(
        "the new agent {} is installed but could not be started: {e}",
        binary.display()
    ))
}

/// `node-bootstrap preflight`: every check of `run`'s preflight, then
/// the API server asked once ([`preflight::api_server`]); the caller prints
/// them and fails with [`preflight::first_failure`].
pub async fn preflight(config: &Config) -> Vec<preflight::Check> {
    let mut checks = preflight::run_checks(config).await;
    checks.push(preflight::Check {
        name: "api server",
        outcome: preflight::api_server(config).await,
    });
    checks
}
