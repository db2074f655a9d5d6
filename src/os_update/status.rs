//! update_engine's status values and the pure interpretation of a status
//! sequence: still going, no update, failed, or updated and waiting for a
//! reboot.
//!
//! Facts of the real update_engine (Flatcar `update_attempter.cc`;
//! docs/formats.md §7) this relies on:
//! - `AttemptUpdate` does nothing unless the status is IDLE; when it does
//!   start, the status is CHECKING_FOR_UPDATE before the call returns.
//! - A successful update check sets `last_checked_time` to the current time;
//!   "no update" then goes CHECKING_FOR_UPDATE -> IDLE.
//! - An update goes UPDATE_AVAILABLE -> DOWNLOADING (progress 0..1) ->
//!   VERIFYING -> FINALIZING -> UPDATED_NEED_REBOOT.
//! - A failure goes through REPORTING_ERROR_EVENT back to IDLE, resetting
//!   `new_version` to "0.0.0"; so IDLE alone does not mean "no update".
//! - Signals can be lost, so GetStatus is polled as well; an observer may
//!   miss any intermediate state.

use serde::{Deserialize, Serialize};
use std::fmt;

/// `current_operation` of GetStatus / StatusUpdate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpdateStatus {
    Idle,
    CheckingForUpdate,
    UpdateAvailable,
    Downloading,
    Verifying,
    Finalizing,
    UpdatedNeedReboot,
    ReportingErrorEvent,
    /// A string this agent does not know.
    Other(String),
}

impl UpdateStatus {
    pub fn parse(s: &str) -> UpdateStatus {
        match s {
            "UPDATE_STATUS_IDLE" => UpdateStatus::Idle,
            "UPDATE_STATUS_CHECKING_FOR_UPDATE" => UpdateStatus::CheckingForUpdate,
            "UPDATE_STATUS_UPDATE_AVAILABLE" => UpdateStatus::UpdateAvailable,
            "UPDATE_STATUS_DOWNLOADING" => UpdateStatus::Downloading,
            "UPDATE_STATUS_VERIFYING" => UpdateStatus::Verifying,
            "UPDATE_STATUS_FINALIZING" => UpdateStatus::Finalizing,
            "UPDATE_STATUS_UPDATED_NEED_REBOOT" => UpdateStatus::UpdatedNeedReboot,
            "UPDATE_STATUS_REPORTING_ERROR_EVENT" => UpdateStatus::ReportingErrorEvent,
            other => UpdateStatus::Other(other.to_string()),
        }
    }

    /// The wire string (`UPDATE_STATUS_IDLE`, ...).
    pub fn as_str(&self) -> &str {
        match self {
            UpdateStatus::Idle => "UPDATE_STATUS_IDLE",
            UpdateStatus::CheckingForUpdate => "UPDATE_STATUS_CHECKING_FOR_UPDATE",
            UpdateStatus::UpdateAvailable => "UPDATE_STATUS_UPDATE_AVAILABLE",
            UpdateStatus::Downloading => "UPDATE_STATUS_DOWNLOADING",
            UpdateStatus::Verifying => "UPDATE_STATUS_VERIFYING",
            UpdateStatus::Finalizing => "UPDATE_STATUS_FINALIZING",
            UpdateStatus::UpdatedNeedReboot => "UPDATE_STATUS_UPDATED_NEED_REBOOT",
            UpdateStatus::ReportingErrorEvent => "UPDATE_STATUS_REPORTING_ERROR_EVENT",
            UpdateStatus::Other(s) => s,
        }
    }

    /// UPDATE_AVAILABLE through FINALIZING: an update is being applied.
    pub fn is_applying(&self) -> bool {
        matches!(
            self,
            UpdateStatus::UpdateAvailable
                | UpdateStatus::Downloading
                | UpdateStatus::Verifying
                | UpdateStatus::Finalizing
        )
    }
}

impl fmt::Display for UpdateStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One GetStatus answer or StatusUpdate signal (`xdssx`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// Unix time of the last successful update check (0 = never).
    pub last_checked_time: i64,
    /// Download progress, 0.0 to 1.0.
    pub progress: f64,
    pub current_operation: UpdateStatus,
    /// Version being installed ("0.0.0" when none).
    pub new_version: String,
    /// Payload size in bytes.
    pub new_size: i64,
}

impl StatusReport {
    pub fn from_wire(t: (i64, f64, String, String, i64)) -> StatusReport {
        StatusReport {
            last_checked_time: t.0,
            progress: t.1,
            current_operation: UpdateStatus::parse(&t.2),
            new_version: t.3,
            new_size: t.4,
        }
    }

    /// `new_version` unless it is the "none" placeholder.
    pub fn known_new_version(&self) -> Option<&str> {
        let v = self.new_version.trim();
        (!v.is_empty() && v != "0.0.0").then_some(v)
    }

    /// e.g. `UPDATE_STATUS_DOWNLOADING (42%)`.
    pub fn describe(&self) -> String {
        if self.current_operation == UpdateStatus::Downloading {
            format!(
                "{} ({:.0}% of {} bytes)",
                self.current_operation,
                self.progress * 100.0,
                self.new_size
            )
        } else {
            self.current_operation.to_string()
        }
    }
}

/// What to do before asking for an update, given the current status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// IDLE: call AttemptUpdate.
    Attempt,
    /// An update is already applied and waits for a reboot.
    AlreadyPending { new_version: String },
    /// Another operation (update_engine's own periodic check, or an earlier
    /// run's attempt) is under way; AttemptUpdate would be ignored. Follow
    /// it until IDLE or UPDATED_NEED_REBOOT.
    Settle,
}

pub fn before_attempt(r: &StatusReport) -> Before {
    match r.current_operation {
        UpdateStatus::Idle => Before::Attempt,
        UpdateStatus::UpdatedNeedReboot => Before::AlreadyPending {
            new_version: r.new_version.clone(),
        },
        _ => Before::Settle,
    }
}

/// Where an update attempt stands after an observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Still going (or not visibly started yet).
    Running,
    /// The check found no update.
    NoUpdate,
    /// The attempt failed; the message says how it was seen.
    Failed(String),
    /// Applied; the node must reboot into `new_version`.
    NeedReboot { new_version: String },
}

/// Follows one AttemptUpdate through status reports (signals and polls, in
/// arrival order, any of them possibly missing).
#[derive(Debug, Clone)]
pub struct Tracker {
    baseline_checked: i64,
    started: bool,
    applying: Option<UpdateStatus>,
    error_seen: bool,
    new_version: Option<String>,
    last: Option<(UpdateStatus, u32)>,
}

impl Tracker {
    /// `before` is the status read just before AttemptUpdate.
    pub fn new(before: &StatusReport) -> Tracker {
        Tracker {
            baseline_checked: before.last_checked_time,
            started: false,
            applying: None,
            error_seen: false,
            new_version: None,
            last: None,
        }
    }

    /// Whether anything visible has happened since AttemptUpdate.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Whether `r` differs from the previous observation (status, or
    /// progress by at least 0.1%). Used to detect a stalled engine.
    pub fn is_change(&self, r: &StatusReport) -> bool {
        let p = (r.progress.clamp(0.0, 1.0) * 1000.0) as u32;
        self.last.as_ref() != Some(&(r.current_operation.clone(), p))
    }

    pub fn observe(&mut self, r: &StatusReport) -> Verdict {
        let p = (r.progress.clamp(0.0, 1.0) * 1000.0) as u32;
        self.last = Some((r.current_operation.clone(), p));
        if let Some(v) = r.known_new_version() {
            self.new_version = Some(v.to_string());
        }
        match &r.current_operation {
            UpdateStatus::Idle => {
                if self.error_seen {
                    Verdict::Failed(
                        "update_engine reported an error (UPDATE_STATUS_REPORTING_ERROR_EVENT) and went back to IDLE"
                            .into(),
                    )
                } else if let Some(s) = &self.applying {
                    Verdict::Failed(format!(
                        "update_engine went back to IDLE after {s} without reaching UPDATE_STATUS_UPDATED_NEED_REBOOT \
                         (the update failed; its error report was not seen)"
                    ))
                } else if self.started || r.last_checked_time > self.baseline_checked {
                    // Either CHECKING was seen, or the check completed
                    // successfully while no report was seen.
                    Verdict::NoUpdate
                } else {
                    Verdict::Running
                }
            }
            UpdateStatus::UpdatedNeedReboot => Verdict::NeedReboot {
                new_version: self
                    .new_version
                    .clone()
                    .unwrap_or_else(|| r.new_version.clone()),
            },
            UpdateStatus::ReportingErrorEvent => {
                self.started = true;
                self.error_seen = true;
                Verdict::Running
            }
            s => {
                self.started = true;
                if s.is_applying() {
                    self.applying = Some(s.clone());
                }
                Verdict::Running
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(op: &str, progress: f64, checked: i64, v: &str) -> StatusReport {
        StatusReport {
            last_checked_time: checked,
            progress,
            current_operation: UpdateStatus::parse(op),
            new_version: v.into(),
            new_size: 1000,
        }
    }
    const IDLE: &str = "UPDATE_STATUS_IDLE";
    const CHECK: &str = "UPDATE_STATUS_CHECKING_FOR_UPDATE";
    const AVAIL: &str = "UPDATE_STATUS_UPDATE_AVAILABLE";
    const DL: &str = "UPDATE_STATUS_DOWNLOADING";
    const VERIFY: &str = "UPDATE_STATUS_VERIFYING";
    const FIN: &str = "UPDATE_STATUS_FINALIZING";
    const REBOOT: &str = "UPDATE_STATUS_UPDATED_NEED_REBOOT";
    const ERR: &str = "UPDATE_STATUS_REPORTING_ERROR_EVENT";

    fn run(before: StatusReport, seq: &[StatusReport]) -> Vec<Verdict> {
        let mut t = Tracker::new(&before);
        seq.iter().map(|s| t.observe(s)).collect()
    }

    #[test]
    fn status_strings_round_trip() {
        for s in [IDLE, CHECK, AVAIL, DL, VERIFY, FIN, REBOOT, ERR] {
            assert_eq!(UpdateStatus::parse(s).as_str(), s);
            assert!(!matches!(UpdateStatus::parse(s), UpdateStatus::Other(_)));
        }
        assert_eq!(
            UpdateStatus::parse("UPDATE_STATUS_ATTEMPTING_ROLLBACK"),
            UpdateStatus::Other("UPDATE_STATUS_ATTEMPTING_ROLLBACK".into())
        );
    }

    #[test]
    fn full_update_ends_in_need_reboot_with_the_version() {
        let v = run(
            r(IDLE, 0.0, 100, "0.0.0"),
            &[
                r(CHECK, 0.0, 100, "0.0.0"),
                r(AVAIL, 0.0, 200, "1745.7.0"),
                r(DL, 0.5, 200, "1745.7.0"),
                r(VERIFY, 0.0, 200, "1745.7.0"),
                r(FIN, 0.0, 200, "1745.7.0"),
                r(REBOOT, 0.0, 200, "1745.7.0"),
            ],
        );
        assert!(v[..5].iter().all(|x| *x == Verdict::Running), "{v:?}");
        assert_eq!(
            v[5],
            Verdict::NeedReboot {
                new_version: "1745.7.0".into()
            }
        );
    }

    #[test]
    fn need_reboot_keeps_the_version_seen_earlier_if_it_reads_0_0_0() {
        let v = run(
            r(IDLE, 0.0, 0, "0.0.0"),
            &[r(DL, 0.2, 5, "1745.7.0"), r(REBOOT, 0.0, 5, "0.0.0")],
        );
        assert_eq!(
            v[1],
            Verdict::NeedReboot {
                new_version: "1745.7.0".into()
            }
        );
    }

    #[test]
    fn check_then_idle_is_no_update() {
        let v = run(
            r(IDLE, 0.0, 100, "0.0.0"),
            &[r(CHECK, 0.0, 100, "0.0.0"), r(IDLE, 0.0, 160, "0.0.0")],
        );
        assert_eq!(v[1], Verdict::NoUpdate);
    }

    #[test]
    fn stale_idle_is_not_no_update() {
        // The original bootstrapper's bug: IDLE before the attempt shows up.
        let v = run(r(IDLE, 0.0, 100, "0.0.0"), &[r(IDLE, 0.0, 100, "0.0.0")]);
        assert_eq!(v[0], Verdict::Running);
    }

    #[test]
    fn unseen_successful_check_is_no_update() {
        // All signals lost, the poll only ever saw IDLE, but the check time moved.
        let v = run(r(IDLE, 0.0, 100, "0.0.0"), &[r(IDLE, 0.0, 101, "0.0.0")]);
        assert_eq!(v[0], Verdict::NoUpdate);
    }

    #[test]
    fn error_event_then_idle_is_failure_not_no_update() {
        let v = run(
            r(IDLE, 0.0, 100, "0.0.0"),
            &[
                r(CHECK, 0.0, 100, "0.0.0"),
                r(ERR, 0.0, 100, "0.0.0"),
                r(IDLE, 0.0, 100, "0.0.0"),
            ],
        );
        assert_eq!(v[1], Verdict::Running);
        let Verdict::Failed(m) = &v[2] else {
            panic!("{v:?}")
        };
        assert!(m.contains("REPORTING_ERROR_EVENT"), "{m}");
    }

    #[test]
    fn idle_after_download_without_seen_error_is_failure() {
        let v = run(
            r(IDLE, 0.0, 100, "0.0.0"),
            &[r(DL, 0.3, 200, "1745.7.0"), r(IDLE, 0.0, 200, "0.0.0")],
        );
        let Verdict::Failed(m) = &v[1] else {
            panic!("{v:?}")
        };
        assert!(
            m.contains("went back to IDLE after UPDATE_STATUS_DOWNLOADING"),
            "{m}"
        );
    }

    #[test]
    fn before_attempt_decides_by_status() {
        assert_eq!(before_attempt(&r(IDLE, 0.0, 0, "0.0.0")), Before::Attempt);
        assert_eq!(
            before_attempt(&r(REBOOT, 0.0, 0, "1745.7.0")),
            Before::AlreadyPending {
                new_version: "1745.7.0".into()
            }
        );
        for s in [CHECK, AVAIL, DL, VERIFY, FIN, ERR, "SOMETHING_NEW"] {
            assert_eq!(
                before_attempt(&r(s, 0.0, 0, "0.0.0")),
                Before::Settle,
                "{s}"
            );
        }
    }

    #[test]
    fn progress_changes_count_as_change() {
        let mut t = Tracker::new(&r(IDLE, 0.0, 0, "0.0.0"));
        let a = r(DL, 0.10, 0, "1");
        assert!(t.is_change(&a));
        t.observe(&a);
        assert!(!t.is_change(&r(DL, 0.1000001, 0, "1")));
        assert!(t.is_change(&r(DL, 0.11, 0, "1")));
        assert!(t.is_change(&r(VERIFY, 0.10, 0, "1")));
    }

    #[test]
    fn describe_shows_download_progress() {
        assert_eq!(
            r(DL, 0.421, 0, "1").describe(),
            "UPDATE_STATUS_DOWNLOADING (42% of 1000 bytes)"
        );
        assert_eq!(r(IDLE, 0.0, 0, "1").describe(), "UPDATE_STATUS_IDLE");
    }
}
