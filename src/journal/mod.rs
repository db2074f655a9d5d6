//! The state journal: what each step of the flow did, when, and how it
//! ended. `run` and the helpers write it; `status` reads it. The steps and
//! their typed results are in [`steps`].
//!
//! One JSON file (`<state_dir>/state.json`, schema below) replaced atomically
//! on every change, under an `flock` so `run` and a helper writing at the
//! same moment never lose each other's update. It lives on disk, so it
//! outlives reboots; how durable each write is, the writer chooses
//! ([`JournalFile::update_with`]): the helpers and the record before a
//! reboot request are fsynced; `run`'s per-step records are not (see
//! `flow::driver`), since the flow re-derives a lost record from the node. A
//! step is one of `run`'s (`cluster-version`, `os-update`, …) or a helper
//! (`helper/bootkube`).
//!
//! Each record carries the id of the boot it was written in
//! ([`crate::boot`]), so the flow can tell "done before the reboot" from
//! "done in this boot".

mod steps;

pub use steps::{
    AssetsRecord, Confirmable, HelperRecord, KubeletEnvRecord, RebootRecord, Step, StepResult,
};

use crate::clock::now_rfc3339;
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

impl StepStatus {
    /// Every status, in order (the metrics' `state` label values).
    pub const ALL: [StepStatus; 3] = [StepStatus::Running, StepStatus::Done, StepStatus::Failed];

    /// The name the file holds.
    pub const fn name(self) -> &'static str {
        match self {
            StepStatus::Running => "running",
            StepStatus::Done => "done",
            StepStatus::Failed => "failed",
        }
    }
}

/// The latest attempt of one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRecord {
    pub status: StepStatus,
    /// Boot id (see module docs) of the boot this attempt ran in.
    pub boot_id: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// Attempts so far, across restarts and boots.
    pub attempts: u32,
    /// What the step found ([`StepResult`], typed by the step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<StepResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
    /// Last lines of a helper's output, for `status`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_tail: Vec<String>,
}

/// A step record as the file holds it, before its result is typed by the
/// step's name.
#[derive(Deserialize)]
struct RawStepRecord {
    status: StepStatus,
    boot_id: String,
    started_at: String,
    ended_at: Option<String>,
    attempts: u32,
    #[serde(default)]
    result: Option<serde_json::Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_class: Option<ErrorClass>,
    #[serde(default)]
    log_tail: Vec<String>,
}

fn typed_steps<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<BTreeMap<String, StepRecord>, D::Error> {
    let raw = BTreeMap::<String, RawStepRecord>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .map(|(name, r)| {
            let result = r.result.map(|v| StepResult::read(&name, v));
            let rec = StepRecord {
                status: r.status,
                boot_id: r.boot_id,
                started_at: r.started_at,
                ended_at: r.ended_at,
                attempts: r.attempts,
                result,
                error: r.error,
                error_class: r.error_class,
                log_tail: r.log_tail,
            };
            (name, rec)
        })
        .collect())
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
    /// By step name (a step this agent does not know is kept as read).
    #[serde(default, deserialize_with = "typed_steps")]
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
    pub fn step(&self, step: Step) -> Option<&StepRecord> {
        self.steps.get(step.name())
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

    fn push_event(&mut self, boot_id: &str, step: Step, event: StepStatus, detail: Option<String>) {
        self.history.push(Event {
            at: now_rfc3339(),
            boot_id: boot_id.into(),
            step: step.name().into(),
            event,
            detail,
        });
        if self.history.len() > HISTORY_LIMIT {
            let excess = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..excess);
        }
    }

    /// Records that `step` started in `boot_id`.
    pub fn begin(&mut self, boot_id: &str, step: Step) {
        let attempts = self.step(step).map_or(0, |r| r.attempts) + 1;
        self.steps.insert(
            step.name().to_string(),
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
    pub fn finish(&mut self, boot_id: &str, step: Step, result: StepResult) {
        let rec = self.entry(boot_id, step);
        rec.status = StepStatus::Done;
        rec.ended_at = Some(now_rfc3339());
        rec.result = Some(result);
        rec.error = None;
        rec.error_class = None;
        self.push_event(boot_id, step, StepStatus::Done, None);
    }

    /// Records what a running `step` is about, before it ends (the reboot's
    /// reason, so `status` can say it while the node goes down).
    pub fn note(&mut self, step: Step, result: StepResult) {
        if let Some(r) = self.steps.get_mut(step.name()) {
            r.result = Some(result);
        }
    }

    /// Records that `step` failed.
    pub fn fail(&mut self, boot_id: &str, step: Step, err: &Error, log_tail: Vec<String>) {
        let rec = self.entry(boot_id, step);
        rec.status = StepStatus::Failed;
        rec.ended_at = Some(now_rfc3339());
        rec.error = Some(err.to_string());
        rec.error_class = Some(err.class());
        rec.log_tail = log_tail;
        self.push_event(boot_id, step, StepStatus::Failed, Some(err.to_string()));
    }

    /// Forgets a step (its result is gone and it must run again).
    pub fn forget(&mut self, step: Step) {
        self.steps.remove(step.name());
    }

    fn entry(&mut self, boot_id: &str, step: Step) -> &mut StepRecord {
        self.steps
            .entry(step.name().to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_finish_fail_round_trip_through_the_file() {
        let d = tempfile::tempdir().unwrap();
        let jf = JournalFile::new(d.path().join("state.json"));
        assert!(jf.load().unwrap().is_none());
        jf.update(|j| j.begin("b1", Step::ClusterVersion)).unwrap();
        let found = crate::cluster::ClusterVersion {
            version: "v1.9.6+coreos.0".into(),
            source: crate::cluster::VersionSource::Forced,
            apiserver_version: None,
        };
        jf.update(|j| {
            j.finish(
                "b1",
                Step::ClusterVersion,
                StepResult::ClusterVersion(found.clone()),
            )
        })
        .unwrap();
        jf.update(|j| j.begin("b1", Step::OsUpdate)).unwrap();
        jf.update(|j| {
            j.fail(
                "b1",
                Step::OsUpdate,
                &Error::retryable("update_engine timed out"),
                vec![],
            )
        })
        .unwrap();
        jf.update(|j| j.begin("b2", Step::OsUpdate)).unwrap();

        let j = jf.load().unwrap().unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(jf.path()).unwrap().mode() & 0o777,
            0o640,
            "not world-readable"
        );
        let cv = j.step(Step::ClusterVersion).unwrap();
        assert_eq!(cv.status, StepStatus::Done);
        assert_eq!(cv.result, Some(StepResult::ClusterVersion(found)));
        let ou = j.step(Step::OsUpdate).unwrap();
        assert_eq!(ou.status, StepStatus::Running);
        assert_eq!(ou.attempts, 2);
        assert_eq!(ou.boot_id, "b2");
        assert_eq!(j.history.len(), 5);
        assert_eq!(
            j.history[3].detail.as_deref(),
            Some("update_engine timed out")
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
        jf.update(|j| j.begin("b", Step::Assets)).unwrap();
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
            j.begin("b", Step::FLOW[i % Step::FLOW.len()]);
        }
        assert_eq!(j.history.len(), HISTORY_LIMIT);
    }
}
