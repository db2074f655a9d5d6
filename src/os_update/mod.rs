//! OS updates through update_engine (`com.coreos.update1`) on the system bus.
//!
//! [`run_update`] asks update_engine for an update (`AttemptUpdate`) and
//! follows it to the end: `StatusUpdate` signals, plus a `GetStatus` poll
//! every `os_update.poll_interval` because signals can be lost. The pure
//! interpretation of what it sees lives in [`status`]; this module is the
//! thin D-Bus client and the bounded wait.
//!
//! Outcomes: [`UpdateOutcome::NoUpdate`], or
//! [`UpdateOutcome::RebootPending`] once update_engine reports
//! UPDATED_NEED_REBOOT (the caller records it and reboots). Everything else
//! is a [`crate::error::ErrorClass::Retryable`] error with a message that says what was
//! seen: update_engine reported an error, made no progress for
//! `os_update.stall_timeout`, did not finish within `os_update.timeout`, did
//! not start, or is not on the bus. update_engine keeps running whatever it
//! was doing; the next run (systemd restarts the unit) first follows that
//! operation to its end ([`status::Before::Settle`]) instead of calling
//! `AttemptUpdate`, which update_engine ignores unless IDLE.
//!
//! [`pending_reboot`] only reads `GetStatus`: used when updates are disabled,
//! to learn whether an update applied earlier still waits for a reboot.

pub mod config;
pub(crate) mod status;

pub use status::{StatusReport, UpdateStatus};

use crate::error::{Error, Result};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// What the os-update step found, as recorded in the state journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsUpdateRecord {
    pub outcome: OsOutcome,
    /// VERSION_ID the node runs now.
    pub current_version: String,
    /// The version it boots next, when a reboot is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_version: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OsOutcome {
    /// update_engine found nothing newer.
    NoUpdate,
    /// An update is installed and waits for a reboot.
    RebootPending,
    /// Updates are disabled in config and none is pending.
    Disabled,
}

/// update_engine's well-known bus name.
pub const BUS_NAME: &str = "com.coreos.update1";
/// Its object.
pub const OBJECT_PATH: &str = "/com/coreos/update1";
/// Its interface.
pub const INTERFACE: &str = "com.coreos.update1.Manager";

const STEP: &str = "os-update";
/// Longest wait for one D-Bus method reply (the D-Bus default).
const CALL_TIMEOUT: Duration = Duration::from_secs(25);

#[zbus::proxy(
    interface = "com.coreos.update1.Manager",
    default_service = "com.coreos.update1",
    default_path = "/com/coreos/update1"
)]
trait Manager {
    fn attempt_update(&self) -> zbus::Result<()>;
    fn reset_status(&self) -> zbus::Result<()>;
    fn get_status(&self) -> zbus::Result<(i64, f64, String, String, i64)>;
    #[zbus(signal)]
    fn status_update(
        &self,
        last_checked_time: i64,
        progress: f64,
        current_operation: &str,
        new_version: &str,
        new_size: i64,
    ) -> zbus::Result<()>;
}

/// How an update attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum UpdateOutcome {
    /// update_engine checked and found nothing newer.
    NoUpdate,
    /// An update is applied; the node must reboot into `new_version`
    /// (`"0.0.0"` when update_engine no longer knows it, e.g. after it
    /// restarted).
    RebootPending { new_version: String },
}

/// A thin client of update_engine on one bus connection.
#[derive(Debug, Clone)]
pub struct UpdateEngine {
    proxy: ManagerProxy<'static>,
}

impl UpdateEngine {
    pub async fn new(conn: &zbus::Connection) -> Result<Self> {
        let proxy = ManagerProxy::builder(conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(|e| dbus_error("setting up the update_engine proxy", e))?;
        Ok(UpdateEngine { proxy })
    }

    pub async fn get_status(&self) -> Result<StatusReport> {
        let t = with_timeout("GetStatus", self.proxy.get_status())
            .await?
            .map_err(|e| dbus_error("GetStatus", e))?;
        Ok(StatusReport::from_wire(t))
    }

    /// `AttemptUpdate()`: starts an update check if update_engine is IDLE,
    /// otherwise does nothing.
    pub async fn attempt_update(&self) -> Result<()> {
        with_timeout("AttemptUpdate", self.proxy.attempt_update())
            .await?
            .map_err(|e| dbus_error("AttemptUpdate", e))
    }

    /// `ResetStatus()`: from UPDATED_NEED_REBOOT back to IDLE (forgets the
    /// applied update's reboot marker); an error in other busy states.
    pub async fn reset_status(&self) -> Result<()> {
        with_timeout("ResetStatus", self.proxy.reset_status())
            .await?
            .map_err(|e| dbus_error("ResetStatus", e))
    }
}

async fn with_timeout<T>(what: &str, fut: impl Future<Output = T>) -> Result<T> {
    tokio::time::timeout(CALL_TIMEOUT, fut).await.map_err(|_| {
        Error::retryable(format!(
            "update_engine: {what} got no answer within {}s",
            CALL_TIMEOUT.as_secs()
        ))
    })
}

fn dbus_error(what: &str, e: zbus::Error) -> Error {
    let not_running = match &e {
        zbus::Error::MethodError(name, _, _) => matches!(
            name.as_str(),
            "org.freedesktop.DBus.Error.ServiceUnknown"
                | "org.freedesktop.DBus.Error.NameHasNoOwner"
                | "org.freedesktop.DBus.Error.NoReply"
        ),
        zbus::Error::FDO(f) => matches!(
            **f,
            zbus::fdo::Error::ServiceUnknown(_)
                | zbus::fdo::Error::NameHasNoOwner(_)
                | zbus::fdo::Error::NoReply(_)
        ),
        _ => false,
    };
    if not_running {
        Error::retryable(format!(
            "update_engine ({BUS_NAME}) is not running on the system bus: {what}: {e}"
        ))
    } else {
        Error::retryable(format!("update_engine: {what} failed: {e}"))
    }
}

/// Asks update_engine for an update and waits for the outcome, bounded by
/// `settings.timeout` overall and `settings.stall_timeout` without progress.
pub async fn run_update(
    engine: &UpdateEngine,
    settings: &config::OsUpdateSettings,
) -> Result<UpdateOutcome> {
    let t0 = Instant::now();
    let deadline = t0 + settings.timeout;
    // Subscribe before anything else so no transition is missed between the
    // first GetStatus and AttemptUpdate.
    let mut signals = engine
        .proxy
        .receive_status_update()
        .await
        .map_err(|e| dbus_error("subscribing to StatusUpdate", e))?
        .fuse();
    let first = engine.get_status().await?;
    info!(step = STEP, status = %first.current_operation, new_version = %first.new_version,
        last_checked_time = first.last_checked_time, "update_engine status before the attempt");

    let mut tracker: Option<status::Tracker> = None;
    match status::before_attempt(&first) {
        status::Before::AlreadyPending { new_version } => {
            info!(step = STEP, new_version = %new_version, "an update is already applied and waits for a reboot");
            return Ok(UpdateOutcome::RebootPending { new_version });
        }
        status::Before::Attempt => {
            engine.attempt_update().await?;
            info!(step = STEP, "update check requested (AttemptUpdate)");
            tracker = Some(status::Tracker::new(&first));
        }
        status::Before::Settle => {
            info!(step = STEP, status = %first.describe(),
                "update_engine is busy with another operation; following it before asking for an update");
        }
    }

    let mut watch = Watch::new(settings, &first);
    let mut poll = tokio::time::interval_at(t0 + settings.poll_interval, settings.poll_interval);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut signals_open = true;
    loop {
        let (report, via) = tokio::select! {
            sig = signals.next(), if signals_open => match sig {
                Some(msg) => match msg.message().body().deserialize::<(i64, f64, String, String, i64)>() {
                    Ok(t) => (StatusReport::from_wire(t), "signal"),
                    Err(e) => {
                        warn!(step = STEP, error = %e, "ignoring a malformed StatusUpdate signal");
                        continue;
                    }
                },
                None => {
                    warn!(step = STEP, "StatusUpdate signal stream ended; relying on GetStatus polls");
                    signals_open = false;
                    continue;
                }
            },
            _ = poll.tick() => (engine.get_status().await?, "poll"),
            _ = tokio::time::sleep_until(deadline) => {
                return Err(Error::retryable(format!(
                    "update_engine did not finish within {}s (os_update.timeout_secs); last status {}",
                    settings.timeout.as_secs(),
                    watch.last.describe()
                )));
            }
        };
        let now = Instant::now();
        let progress = match &mut tracker {
            None => settle(engine, settings, report, &mut watch, &mut tracker, now).await?,
            Some(t) => follow(t, &report, &mut watch, now, via)?,
        };
        if let Progress::Done(outcome) = progress {
            return Ok(outcome);
        }
        if now.duration_since(watch.last_change) >= settings.stall_timeout {
            return Err(Error::retryable(format!(
                "update_engine made no progress for {}s (os_update.stall_timeout_secs); status {}",
                settings.stall_timeout.as_secs(),
                watch.last.describe()
            )));
        }
    }
}

/// Whether following update_engine came to an end.
enum Progress {
    Done(UpdateOutcome),
    Going,
}

/// While another operation runs: wait for its end, then ask for an update
/// (the tracker then follows that attempt).
async fn settle(
    engine: &UpdateEngine,
    settings: &config::OsUpdateSettings,
    report: StatusReport,
    watch: &mut Watch,
    tracker: &mut Option<status::Tracker>,
    now: Instant,
) -> Result<Progress> {
    watch.see(&report, now, report != watch.last);
    match report.current_operation {
        UpdateStatus::UpdatedNeedReboot => {
            info!(step = STEP, new_version = %report.new_version, "the running operation applied an update; reboot pending");
            Ok(Progress::Done(UpdateOutcome::RebootPending {
                new_version: report.new_version,
            }))
        }
        UpdateStatus::Idle => {
            // Read the status afresh: the baseline must be the state
            // AttemptUpdate starts from.
            let base = engine.get_status().await?;
            if base.current_operation == UpdateStatus::Idle {
                engine.attempt_update().await?;
                info!(
                    step = STEP,
                    "previous operation ended; update check requested (AttemptUpdate)"
                );
                *tracker = Some(status::Tracker::new(&base));
                *watch = Watch::new(settings, &base);
            }
            Ok(Progress::Going)
        }
        _ => Ok(Progress::Going),
    }
}

/// Following our own attempt: what its status says now.
fn follow(
    t: &mut status::Tracker,
    report: &StatusReport,
    watch: &mut Watch,
    now: Instant,
    via: &str,
) -> Result<Progress> {
    let changed = t.is_change(report);
    let verdict = t.observe(report);
    watch.see(report, now, changed);
    if changed {
        info!(step = STEP, status = %report.current_operation, progress = report.progress,
            new_version = %report.new_version, via, "update_engine status");
    } else {
        debug!(step = STEP, status = %report.current_operation, via, "update_engine status unchanged");
    }
    match verdict {
        status::Verdict::NoUpdate => {
            info!(step = STEP, "no update available");
            Ok(Progress::Done(UpdateOutcome::NoUpdate))
        }
        status::Verdict::NeedReboot { new_version } => {
            info!(step = STEP, new_version = %new_version, "update applied; reboot pending");
            Ok(Progress::Done(UpdateOutcome::RebootPending { new_version }))
        }
        status::Verdict::Failed(why) => Err(Error::retryable(format!("OS update failed: {why}"))),
        status::Verdict::Running => {
            let idle_for = now.duration_since(watch.attempt_at);
            if !t.started()
                && report.current_operation == UpdateStatus::Idle
                && idle_for >= watch.idle_grace
            {
                return Err(Error::retryable(format!(
                    "OS update failed: update_engine stayed IDLE for {:.1}s after AttemptUpdate \
                     without checking (it did not start, or its check failed and the signals were lost)",
                    idle_for.as_secs_f64()
                )));
            }
            Ok(Progress::Going)
        }
    }
}

/// Timing state of the wait: when things last changed.
struct Watch {
    last: StatusReport,
    last_change: Instant,
    attempt_at: Instant,
    idle_grace: Duration,
}

impl Watch {
    fn new(settings: &config::OsUpdateSettings, first: &StatusReport) -> Watch {
        let now = Instant::now();
        Watch {
            last: first.clone(),
            last_change: now,
            attempt_at: now,
            // Two polls must have seen the untouched IDLE.
            idle_grace: settings.poll_interval * 2,
        }
    }
    fn see(&mut self, r: &StatusReport, now: Instant, changed: bool) {
        if changed {
            self.last_change = now;
        }
        self.last = r.clone();
    }
}

/// Whether an update applied earlier waits for a reboot: the new version if
/// update_engine says UPDATED_NEED_REBOOT, else `None`. Only reads
/// `GetStatus` (for when `os_update.enabled` is false).
pub async fn pending_reboot(engine: &UpdateEngine) -> Result<Option<String>> {
    let r = engine.get_status().await?;
    debug!(step = STEP, status = %r.current_operation, "update_engine status");
    Ok((r.current_operation == UpdateStatus::UpdatedNeedReboot).then_some(r.new_version))
}
