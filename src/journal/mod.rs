//! The state journal: what each step of the flow did, when, and how it
//! ended. `run` and the helpers write it; `status` reads it.
//!
//! One JSON file (`<state_dir>/state.json`, schema below) replaced atomically
//! on every change, under an `flock` so `run` and a helper writing at the
//! same moment never lose each other's update. It lives on disk, so it
//! outlives reboots; how durable each write is, the writer chooses
//! ([`JournalFile::update_with`]): the helpers and the record before a
//! reboot request are fsynced; `run`'s per-step records are not (see
//! `flow::driver`), since the flow re-derives a lost record from the node. A step is a phase of `run`
//! (`cluster-version`, `os-update`, …) or a helper (`helper/bootkube`).
//!
//! Each record carries the id of the boot it was written in (a random id kept
//! in the per-boot tmpfs `run_dir`), so the flow can tell "done before the
//! reboot" from "done in this boot".

use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// Version of the on-disk schema. Readers refuse newer versions.
pub const SCHEMA: u32 = 1;
/// The journal's file mode: root and its group only, since helper output
/// tails could carry something a script echoed.
pub const MODE: u32 = 0o640;
/// Events kept in `history` (oldest dropped first).
pub const HISTORY_LIMIT: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepStatus {
    Running,
    Done,
    Failed,
}

/// The latest attempt of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub status: StepStatus,
    /// Boot id (see module docs) of the boot this attempt ran in.
    pub boot_id: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// Attempts so far, across restarts and boots.
    pub attempts: u32,
    /// Step-specific outcome (e.g. `{"version": "v1.9.6+coreos.0"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
    /// Last lines of a helper's output, for `status`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_tail: Vec<String>,
}

/// One line of history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: String,
    pub boot_id: String,
    pub step: String,
    pub event: StepStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateJournal {
    pub schema: u32,
    #[serde(default)]
    pub steps: BTreeMap<String, StepRecord>,
    #[serde(default)]
    pub history: Vec<Event>,
}

impl Default for StateJournal {
    fn default() -> Self {
        StateJournal {
            schema: SCHEMA,
            steps: BTreeMap::new(),
            history: Vec::new(),
        }
    }
}

impl StateJournal {
    pub fn step(&self, name: &str) -> Option<&StepRecord> {
        self.steps.get(name)
    }

    /// Parses the file's text; a newer schema or bad JSON is [`ErrorClass::BadInput`].
    pub fn parse(text: &str, path: &Path) -> Result<StateJournal> {
        let j: StateJournal = serde_json::from_str(text).ctx(ErrorClass::BadInput, || {
            format!("state journal {} is corrupt", path.display())
        })?;
        if j.schema > SCHEMA {
            return Err(Error::bad_input(format!(
                "state journal {} has schema {} but this agent reads up to {SCHEMA}",
                path.display(),
                j.schema
            )));
        }
        Ok(j)
    }

    fn push_event(&mut self, boot_id: &str, step: &str, event: StepStatus, detail: Option<String>) {
        self.history.push(Event {
            at: now_rfc3339(),
            boot_id: boot_id.into(),
            step: step.into(),
            event,
            detail,
        });
        if self.history.len() > HISTORY_LIMIT {
            let excess = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..excess);
        }
    }

    /// Records that `step` started in `boot_id`.
    pub fn begin(&mut self, boot_id: &str, step: &str) {
        let attempts = self.steps.get(step).map_or(0, |r| r.attempts) + 1;
        self.steps.insert(
            step.to_string(),
            StepRecord {
                status: StepStatus::Running,
                boot_id: boot_id.into(),
                started_at: now_rfc3339(),
                ended_at: None,
                attempts,
                result: None,
                error: None,
                error_class: None,
                log_tail: Vec::new(),
            },
        );
        self.push_event(boot_id, step, StepStatus::Running, None);
    }

    /// Records that `step` finished with `result`.
    pub fn finish(&mut self, boot_id: &str, step: &str, result: serde_json::Value) {
        let rec = self.entry(boot_id, step);
        rec.status = StepStatus::Done;
        rec.ended_at = Some(now_rfc3339());
        rec.result = Some(result);
        rec.error = None;
        rec.error_class = None;
        self.push_event(boot_id, step, StepStatus::Done, None);
    }

    /// Records that `step` failed.
    pub fn fail(&mut self, boot_id: &str, step: &str, err: &Error, log_tail: Vec<String>) {
        let rec = self.entry(boot_id, step);
        rec.status = StepStatus::Failed;
        rec.ended_at = Some(now_rfc3339());
        rec.error = Some(err.to_string());
        rec.error_class = Some(err.class());
        rec.log_tail = log_tail;
        self.push_event(boot_id, step, StepStatus::Failed, Some(err.to_string()));
    }

    /// Forgets a step (its result is gone and it must run again).
    pub fn forget(&mut self, step: &str) {
        self.steps.remove(step);
    }

    fn entry(&mut self, boot_id: &str, step: &str) -> &mut StepRecord {
        self.steps
            .entry(step.to_string())
            .or_insert_with(|| StepRecord {
                status: StepStatus::Running,
                boot_id: boot_id.into(),
                started_at: now_rfc3339(),
                ended_at: None,
                attempts: 1,
                result: None,
                error: None,
                error_class: None,
                log_tail: Vec::new(),
            })
    }
}

/// The journal file on disk.
#[derive(Debug, Clone)]
pub struct JournalFile {
    path: PathBuf,
}

impl JournalFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JournalFile { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the journal; `Ok(None)` if there is none yet.
    pub fn load(&self) -> Result<Option<StateJournal>> {
        let text = fsutil::read_optional(&self.path).ctx(ErrorClass::BadInput, || {
            format!("failed to read state journal {}", self.path.display())
        })?;
        text.map(|t| StateJournal::parse(&t, &self.path))
            .transpose()
    }

    /// Read-modify-write under the journal lock, replacing the file
    /// atomically and durably. A corrupt journal is moved aside
    /// (`state.json.corrupt`) and started afresh: the flow re-derives what it
    /// needs from the node itself.
    pub fn update<T>(&self, f: impl FnOnce(&mut StateJournal) -> T) -> Result<T> {
        self.update_with(fsutil::Durability::Durable, f)
    }

    /// [`update`](Self::update), as durable as asked.
    pub fn update_with<T>(
        &self,
        durability: fsutil::Durability,
        f: impl FnOnce(&mut StateJournal) -> T,
    ) -> Result<T> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).ctx(ErrorClass::Internal, || {
            format!("failed to create state dir {}", dir.display())
        })?;
        let lock_path = self.path.with_extension("lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .ctx(ErrorClass::Internal, || {
                format!("failed to open {}", lock_path.display())
            })?;
        let _guard = Flock::lock(lock_file, FlockArg::LockExclusive).map_err(|(_, e)| {
            Error::internal(format!("failed to lock {}: {e}", lock_path.display()))
        })?;
        let mut journal = match self.load() {
            Ok(j) => j.unwrap_or_default(),
            Err(e) => {
                let aside = self.path.with_extension("json.corrupt");
                tracing::warn!(path = %self.path.display(), error = %e, aside = %aside.display(),
                    "state journal unreadable; moving it aside and starting a new one");
                std::fs::rename(&self.path, &aside).ctx(ErrorClass::Internal, || {
                    format!("failed to move aside {}", self.path.display())
                })?;
                StateJournal::default()
            }
        };
        let out = f(&mut journal);
        let text = serde_json::to_vec_pretty(&journal).expect("journal serializes");
        // Not world-readable: it keeps helpers' last output lines and errors.
        fsutil::write_file_with("state journal", &self.path, &text, MODE, durability)?;
        Ok(out)
    }
}

/// Current time as RFC 3339 UTC, second precision.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    now.format(&time::format_description::well_known::Rfc3339)
        .expect("RFC 3339 formatting cannot fail for UTC")
}

/// This boot's id: a random id kept in `run_dir/boot-id` (tmpfs, so it is
/// new after every reboot). Created on first use in a boot.
pub fn boot_id(run_dir: &Path) -> Result<String> {
    let path = run_dir.join("boot-id");
    if let Some(id) = fsutil::read_optional(&path).ctx(ErrorClass::Internal, || {
        format!("failed to read boot id {}", path.display())
    })? {
        let id = id.trim();
        if !id.is_empty() {
            return Ok(id.to_string());
        }
    }
    let id = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    // Two processes racing here: whichever rename lands last wins, and both
    // re-read below, so every caller in this boot agrees on one id.
    fsutil::write_file(
        "boot id",
        &path,
        format!("{id}\n").as_bytes(),
        fsutil::MODE_PUBLIC,
    )?;
    let stored = std::fs::read_to_string(&path).ctx(ErrorClass::Internal, || {
        format!("failed to read boot id {}", path.display())
    })?;
    Ok(stored.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_finish_fail_round_trip_through_the_file() {
        let d = tempfile::tempdir().unwrap();
        let jf = JournalFile::new(d.path().join("state.json"));
        assert!(jf.load().unwrap().is_none());
        jf.update(|j| j.begin("b1", "cluster-version")).unwrap();
        jf.update(|j| {
            j.finish(
                "b1",
                "cluster-version",
                serde_json::json!({"version": "v1.9.6+coreos.0"}),
            )
        })
        .unwrap();
        jf.update(|j| j.begin("b1", "os-update")).unwrap();
        jf.update(|j| {
            j.fail(
                "b1",
                "os-update",
                &Error::retryable("update-engine timed out"),
                vec![],
            )
        })
        .unwrap();
        jf.update(|j| j.begin("b2", "os-update")).unwrap();

        let j = jf.load().unwrap().unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(jf.path()).unwrap().mode() & 0o777,
            0o640,
            "not world-readable"
        );
        let cv = j.step("cluster-version").unwrap();
        assert_eq!(cv.status, StepStatus::Done);
        assert_eq!(cv.result.as_ref().unwrap()["version"], "v1.9.6+coreos.0");
        let ou = j.step("os-update").unwrap();
        assert_eq!(ou.status, StepStatus::Running);
        assert_eq!(ou.attempts, 2);
        assert_eq!(ou.boot_id, "b2");
        assert_eq!(j.history.len(), 5);
        assert_eq!(
            j.history[3].detail.as_deref(),
            Some("update-engine timed out")
        );
    }

    #[test]
    fn corrupt_journal_is_an_error_for_readers_and_moved_aside_by_writers() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        std::fs::write(&p, "{\"schema\":1,\"steps\":{\"x\":").unwrap();
        let jf = JournalFile::new(&p);
        let err = jf.load().unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert!(err.to_string().contains("is corrupt"), "{err}");
        jf.update(|j| j.begin("b", "assets")).unwrap();
        assert!(d.path().join("state.json.corrupt").exists());
        assert_eq!(jf.load().unwrap().unwrap().steps.len(), 1);
    }

    #[test]
    fn newer_schema_is_refused() {
        let err = StateJournal::parse(r#"{"schema": 99}"#, Path::new("/s.json")).unwrap_err();
        assert!(err.to_string().contains("schema 99"), "{err}");
    }

    #[test]
    fn history_is_bounded() {
        let mut j = StateJournal::default();
        for i in 0..(HISTORY_LIMIT + 50) {
            j.begin("b", &format!("s{}", i % 3));
        }
        assert_eq!(j.history.len(), HISTORY_LIMIT);
    }

    #[test]
    fn boot_id_is_stable_within_a_boot() {
        let d = tempfile::tempdir().unwrap();
        let a = boot_id(d.path()).unwrap();
        let b = boot_id(d.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 32);
    }
}
