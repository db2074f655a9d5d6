//! systemd manager operations over D-Bus: installing a runtime unit
//! (written under `/run/systemd/system`, enabled with
//! `EnableUnitFiles(runtime=true, force=true)`, then `Reload`) and rebooting
//! (logind `Reboot(false)`, as locksmith and the Flatcar update operator do,
//! falling back to systemd's `reboot.target` job).

use crate::error::{Context as _, Error, ErrorClass, Result};
use std::path::Path;
use std::time::Duration;
use tracing::{info, warn};
use zbus::OwnedVariant;
use zbus_systemd::{login1, systemd1};

fn dbus_err(what: &str) -> impl FnOnce(zbus::Error) -> Error + '_ {
    move |e| Error::retryable(format!("{what}: {e}"))
}

/// How the reboot was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebootMethod {
    Logind,
    RebootTarget,
}

pub struct Systemd {
    conn: zbus::Connection,
}

impl Systemd {
    pub fn new(conn: zbus::Connection) -> Self {
        Systemd { conn }
    }

    async fn manager(&self) -> Result<systemd1::ManagerProxy<'_>> {
        systemd1::ManagerProxy::new(&self.conn)
            .await
            .map_err(dbus_err("cannot reach systemd on the system bus"))
    }

    /// Writes `name` into `runtime_dir` atomically, enables it for this boot
    /// only and reloads systemd. Every failure is an error (the original
    /// ignored a failure to write its cleanup unit).
    pub async fn install_runtime_unit(
        &self,
        runtime_dir: &Path,
        name: &str,
        contents: &str,
    ) -> Result<()> {
        let path = runtime_dir.join(name);
        crate::fsutil::atomic_write(&path, contents.as_bytes(), crate::fsutil::MODE_PUBLIC)
            .ctx(ErrorClass::Internal, || {
                format!("failed to write runtime unit {}", path.display())
            })?;
        // No reload before the enable: EnableUnitFiles reads the unit
        // paths on disk itself. The one after it is what makes systemd load
        // the unit and the dependency the enable added.
        let manager = self.manager().await?;
        let (_, changes) = manager
            .enable_unit_files(vec![name.to_string()], true, true)
            .await
            .map_err(dbus_err(&format!(
                "systemd EnableUnitFiles({name}, runtime) failed"
            )))?;
        manager
            .reload()
            .await
            .map_err(dbus_err("systemd Reload failed"))?;
        info!(unit = name, path = %path.display(), changes = ?changes, "runtime unit installed and enabled");
        Ok(())
    }

    /// `systemctl enable` of installed unit files `names`
    /// (`EnableUnitFiles(runtime=false, force=false)`: their `[Install]`
    /// links, for every boot), then `Reload`.
    pub async fn enable_units(&self, names: &[&str]) -> Result<()> {
        let manager = self.manager().await?;
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let (_, changes) = manager
            .enable_unit_files(names.clone(), false, false)
            .await
            .map_err(dbus_err(&format!(
                "systemd EnableUnitFiles({}) failed",
                names.join(", ")
            )))?;
        manager
            .reload()
            .await
            .map_err(dbus_err("systemd Reload failed"))?;
        info!(units = ?names, changes = ?changes, "units enabled");
        Ok(())
    }

    /// `systemctl daemon-reload`: systemd reads changed unit files and
    /// drop-ins.
    pub async fn reload(&self) -> Result<()> {
        self.manager()
            .await?
            .reload()
            .await
            .map_err(dbus_err("systemd Reload failed"))
    }

    /// Starts `name` (or restarts it, when `restart`) and waits until its
    /// job ends, within `timeout`. A job that ends other than `done`
    /// (failed, timeout, dependency, canceled) is an error naming the unit
    /// and the result: retryable, since systemd may start it next time.
    pub async fn start_and_wait(&self, name: &str, restart: bool, timeout: Duration) -> Result<()> {
        let verb = if restart { "restart" } else { "start" };
        let manager = self.manager().await?;
        let removed = job_removals(&manager).await?;
        let queued = if restart {
            manager
                .restart_unit(name.to_string(), "replace".into())
                .await
        } else {
            manager.start_unit(name.to_string(), "replace".into()).await
        };
        let job = queued
            .map_err(|e| Error::retryable(format!("systemd refused to {verb} {name}: {e}")))?;
        match wait_for_job(removed, &job, timeout).await {
            Ok(Some(result)) if result == "done" => {
                info!(unit = name, verb, "unit job done");
                Ok(())
            }
            Ok(Some(result)) => Err(Error::retryable(format!(
                "the {verb} job of {name} ended with result {result:?} (journalctl -u {name})"
            ))),
            Ok(None) => Err(Error::retryable(format!(
                "lost systemd's signals while waiting for the {verb} job of {name}"
            ))),
            Err(_) => Err(Error::retryable(format!(
                "the {verb} job of {name} did not end within {}s",
                timeout.as_secs()
            ))),
        }
    }

    /// Runs `argv` (an absolute program path first) as systemd's transient
    /// oneshot service `name`, as `systemd-run --wait --collect` does, and
    /// waits until it exits, within `timeout` (then the unit is stopped).
    /// The program runs as systemd's child, outside this process's sandbox
    /// (units/k8s-node-bootstrap.service): what it mounts is the node's,
    /// not only this process's mount namespace. Its output is in
    /// `journalctl -u <name>`; a non-zero exit is a retryable error
    /// saying so.
    pub async fn run_transient(
        &self,
        name: &str,
        argv: &[String],
        timeout: Duration,
    ) -> Result<()> {
        self.run_transient_to(name, argv, None, timeout).await
    }

    /// [`Systemd::run_transient`], with the program's stdout written to the
    /// file `stdout` (`StandardOutput=file:`) when given.
    pub async fn run_transient_to(
        &self,
        name: &str,
        argv: &[String],
        stdout: Option<&Path>,
        timeout: Duration,
    ) -> Result<()> {
        let program = argv
            .first()
            .ok_or_else(|| Error::internal(format!("transient unit {name}: no program")))?;
        let property = |key: &str, value: zbus::Variant<'_>| -> Result<(String, OwnedVariant)> {
            let owned = OwnedVariant::try_from(value)
                .map_err(|e| Error::internal(format!("transient unit {name}: {key}: {e}")))?;
            Ok((key.to_string(), owned))
        };
        let mut properties = vec![
            property(
                "Description",
                zbus::Variant::from(format!("node-bootstrap: {}", argv.join(" "))),
            )?,
            property("Type", zbus::Variant::from("oneshot"))?,
            property("CollectMode", zbus::Variant::from("inactive-or-failed"))?,
            property(
                "ExecStart",
                zbus::Variant::from(vec![(program.clone(), argv.to_vec(), false)]),
            )?,
        ];
        if let Some(file) = stdout {
            properties.push(property(
                "StandardOutputFile",
                zbus::Variant::from(file.display().to_string()),
            )?);
        }
        let manager = self.manager().await?;
        let removed = job_removals(&manager).await?;
        let job = manager
            .start_transient_unit(name.to_string(), "fail".into(), properties, vec![])
            .await
            .map_err(|e| {
                Error::retryable(format!("systemd refused to run {program} as {name}: {e}"))
            })?;
        match wait_for_job(removed, &job, timeout).await {
            Ok(Some(result)) if result == "done" => {
                info!(unit = name, program = %program, "transient unit done");
                Ok(())
            }
            Ok(Some(result)) => Err(Error::retryable(format!(
                "{} failed (its unit {name} ended with result {result:?}; journalctl -u {name})",
                argv.join(" ")
            ))),
            Ok(None) => Err(Error::retryable(format!(
                "lost systemd's signals while waiting for {name}"
            ))),
            Err(_) => {
                let _ = self.stop_unit(name).await;
                Err(Error::retryable(format!(
                    "{} did not finish within {}s (its unit {name} was stopped)",
                    argv.join(" "),
                    timeout.as_secs()
                )))
            }
        }
    }

    /// Queues a stop job for a unit (a unit that does not exist is fine).
    pub async fn stop_unit(&self, name: &str) -> Result<()> {
        let manager = self.manager().await?;
        match manager
            .stop_unit(name.to_string(), "replace".to_string())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if error_name(&e).as_deref() == Some("org.freedesktop.systemd1.NoSuchUnit") => {
                Ok(())
            }
            Err(e) => Err(Error::retryable(format!(
                "systemd refused to stop {name}: {e}"
            ))),
        }
    }

    /// Asks for a reboot; returns once the request was accepted. logind
    /// first, so its inhibitors (delay locks) are honoured; systemd's
    /// reboot.target only when logind is not on the bus at all.
    pub async fn reboot(&self) -> Result<RebootMethod> {
        let refused = match login1::ManagerProxy::new(&self.conn).await {
            Ok(logind) => match logind.reboot(false).await {
                Ok(()) => return Ok(RebootMethod::Logind),
                Err(e) => e,
            },
            Err(e) => e,
        };
        match error_name(&refused).as_deref() {
            // A shutdown is already under way (e.g. delayed by an inhibitor).
            Some("org.freedesktop.login1.OperationInProgress") => {
                info!(error = %refused, "a shutdown is already in progress");
                return Ok(RebootMethod::Logind);
            }
            Some(
                "org.freedesktop.DBus.Error.ServiceUnknown"
                | "org.freedesktop.DBus.Error.NameHasNoOwner",
            ) => {
                warn!(error = %refused, "logind is not on the bus; asking systemd for reboot.target");
            }
            _ => {
                return Err(Error::retryable(format!(
                    "logind refused the reboot: {refused}"
                )));
            }
        }
        let manager = self.manager().await?;
        manager
            .start_unit("reboot.target".into(), "replace-irreversibly".into())
            .await
            .map_err(dbus_err("systemd refused to start reboot.target"))?;
        Ok(RebootMethod::RebootTarget)
    }
}

/// systemd's `JobRemoved` signals, subscribed before a job is queued so its
/// end cannot be missed (systemd sends them only while a client subscribed).
async fn job_removals(manager: &systemd1::ManagerProxy<'_>) -> Result<systemd1::JobRemovedStream> {
    let removed = manager
        .receive_job_removed()
        .await
        .map_err(dbus_err("cannot follow systemd's jobs"))?;
    manager
        .subscribe()
        .await
        .map_err(dbus_err("systemd Subscribe failed"))?;
    Ok(removed)
}

/// The result of `job` once it is removed (`None`: the signals ended),
/// or `Err` when `timeout` passed first.
async fn wait_for_job(
    mut removed: systemd1::JobRemovedStream,
    job: &zbus::OwnedObjectPath,
    timeout: Duration,
) -> std::result::Result<Option<String>, tokio::time::error::Elapsed> {
    use futures_util::StreamExt as _;
    let wait = async {
        while let Some(signal) = removed.next().await {
            let Ok(args) = signal.args() else { continue };
            if args.job.as_str() == job.as_str() {
                return Some(args.result.to_string());
            }
        }
        None
    };
    tokio::time::timeout(timeout, wait).await
}

/// The D-Bus error name of a failed call, if it was an error reply.
fn error_name(e: &zbus::Error) -> Option<String> {
    match e {
        zbus::Error::MethodError(name, _, _) => Some(name.to_string()),
        zbus::Error::FDO(fdo) => match fdo.as_ref() {
            zbus::fdo::Error::ServiceUnknown(_) => {
                Some("org.freedesktop.DBus.Error.ServiceUnknown".into())
            }
            zbus::fdo::Error::NameHasNoOwner(_) => {
                Some("org.freedesktop.DBus.Error.NameHasNoOwner".into())
            }
            other => Some(format!("{other:?}")),
        },
        _ => None,
    }
}
