//! What `follow` keeps on the node, under `<state_dir>/follow/`:
//!
//! - `change.json`: the change under way ([`super::plan::Change`]), written
//!   durably before each phase's work; there only while a change is under
//!   way (or was interrupted), which is what the boot-time converge unit's
//!   `ConditionPathExists=` looks at;
//! - `previous/` and `next/`: the kubelet's files as they were before the
//!   change and as they are after it (`kubelet.env`, and the
//!   KubeletConfiguration when the node has one), saved before the first
//!   file changes, so either kubelet's whole set can be put in place at
//!   any time. Each set names the change it is of (its `change` file,
//!   written last): a set of another change (a crash between two changes
//!   left it) is never put in place, and is saved again;
//! - `state.json`: how following stands ([`FollowState`]): the API
//!   server's last answers (the stability check), what this node waits
//!   for, the last change and its outcome, a halt, counts. `status` and
//!   the metrics read it.

use super::plan::Change;
use super::target::Kind;
use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil::{self, Durability, fsync_dir};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The follow directory's files.
#[derive(Debug, Clone)]
pub struct Files {
    pub dir: PathBuf,
}

impl Files {
    pub fn new(state_dir: &Path) -> Files {
        Files {
            dir: state_dir.join("follow"),
        }
    }
    pub fn change(&self) -> PathBuf {
        self.dir.join("change.json")
    }
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    /// `previous/` or `next/`.
    pub fn set(&self, which: Set) -> PathBuf {
        self.dir.join(which.name())
    }

    fn ensure_dir(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir).ctx(ErrorClass::Internal, || {
            format!("cannot create {}", self.dir.display())
        })
    }

    /// The change under way, if any.
    pub fn load_change(&self) -> Result<Option<Change>> {
        load_json(&self.change(), "the follow change record")
    }

    /// Writes the change record durably.
    pub fn save_change(&self, c: &Change) -> Result<()> {
        self.ensure_dir()?;
        let text = serde_json::to_vec_pretty(c).expect("the change serializes");
        fsutil::write_file(
            "the follow change record",
            &self.change(),
            &text,
            fsutil::MODE_PUBLIC,
        )
    }

    /// The change is over: its sets go, then its record, each durably (a
    /// crash between the two leaves a record that ends again).
    pub fn end_change(&self) -> Result<()> {
        let gone = |p: &Path, r: std::io::Result<()>| match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::internal(format!(
                "cannot remove {}: {e}",
                p.display()
            ))),
        };
        for s in [Set::Previous, Set::Next] {
            let dir = self.set(s);
            gone(&dir, std::fs::remove_dir_all(&dir))?;
        }
        self.sync(&self.dir)?;
        gone(&self.change(), std::fs::remove_file(self.change()))?;
        self.sync(&self.dir)
    }

    fn sync(&self, dir: &Path) -> Result<()> {
        fsync_dir(dir).ctx(ErrorClass::Internal, || {
            format!("cannot sync {}", dir.display())
        })
    }

    pub fn load_state(&self) -> Result<FollowState> {
        Ok(load_json(&self.state(), "the follow state")?.unwrap_or_default())
    }

    /// Writes the state (atomically; durably when `durable`: a change's
    /// outcome, a halt).
    pub fn save_state(&self, s: &FollowState, durable: bool) -> Result<()> {
        self.ensure_dir()?;
        let text = serde_json::to_vec_pretty(s).expect("the state serializes");
        let d = if durable {
            Durability::Durable
        } else {
            Durability::AtomicOnly
        };
        fsutil::write_file_with(
            "the follow state",
            &self.state(),
            &text,
            fsutil::MODE_PUBLIC,
            d,
        )
    }

    /// Saves `files` (name, contents) as set `which` of the change
    /// `stamp` names ([`stamp`]), durably, replacing what was there; the
    /// stamp goes last.
    pub fn save_set(&self, which: Set, stamp: &str, files: &[(&str, Option<&[u8]>)]) -> Result<()> {
        let dir = self.set(which);
        std::fs::create_dir_all(&dir).ctx(ErrorClass::Internal, || {
            format!("cannot create {}", dir.display())
        })?;
        let _ = std::fs::remove_file(dir.join(STAMP));
        for (name, contents) in files {
            let p = dir.join(name);
            match contents {
                Some(c) => fsutil::write_file("a saved kubelet file", &p, c, fsutil::MODE_PUBLIC)?,
                None => {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
        self.sync(&dir)?;
        fsutil::write_file(
            "a saved set's change",
            &dir.join(STAMP),
            stamp.as_bytes(),
            fsutil::MODE_PUBLIC,
        )
    }

    /// A saved file of set `which` (`None`: the set has no such file).
    pub fn saved(&self, which: Set, name: &str) -> Result<Option<Vec<u8>>> {
        let p = self.set(which).join(name);
        match std::fs::read(&p) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::internal(format!("cannot read {}: {e}", p.display()))),
        }
    }

    /// Whether set `which` of the change `stamp` names was saved whole
    /// (its stamp, written last, is that change's).
    pub fn has_set(&self, which: Set, stamp: &str) -> bool {
        let dir = self.set(which);
        dir.join(ENV).is_file()
            && std::fs::read(dir.join(STAMP)).is_ok_and(|s| s == stamp.as_bytes())
    }
}

/// The name of a set's stamp file.
const STAMP: &str = "change";

/// What names `change` in its sets: its versions and when it started.
pub fn stamp(change: &Change) -> String {
    format!(
        "{} -> {} started at {}\n",
        change.from, change.to, change.started_at
    )
}

/// The saved kubelet.env's name in a set.
pub const ENV: &str = "kubelet.env";
/// The saved KubeletConfiguration's name in a set.
pub const KUBELET_CONFIG: &str = "kubelet-config.yaml";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    Previous,
    Next,
}

impl Set {
    pub fn name(self) -> &'static str {
        match self {
            Set::Previous => "previous",
            Set::Next => "next",
        }
    }
}

fn load_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<Option<T>> {
    let Some(text) = fsutil::read_optional(path).ctx(ErrorClass::Internal, || {
        format!("cannot read {what} {}", path.display())
    })?
    else {
        return Ok(None);
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        Error::internal(format!(
            "{what} {} does not read ({e}); move it aside to start afresh",
            path.display()
        ))
    })
}

/// Where following stands, one word (`status`, the metric's `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// Not looked yet.
    #[default]
    Unknown,
    /// The kubelet is the cluster's target.
    UpToDate,
    /// The API server's answers do not agree yet.
    Settling,
    /// A newer minor runs; the operator has named none.
    AwaitingOperator,
    /// A change is due and waits for the lease, Ready nodes, the mirror.
    Waiting,
    /// The target breaks a rule; nothing changes until it does not.
    Refused,
    /// This node is changing its kubelet.
    Changing,
    /// This node's change was rolled back; the rollout halts here.
    Halted,
}

impl Standing {
    pub const ALL: [Standing; 8] = [
        Standing::Unknown,
        Standing::UpToDate,
        Standing::Settling,
        Standing::AwaitingOperator,
        Standing::Waiting,
        Standing::Refused,
        Standing::Changing,
        Standing::Halted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Standing::Unknown => "unknown",
            Standing::UpToDate => "up-to-date",
            Standing::Settling => "settling",
            Standing::AwaitingOperator => "awaiting-operator",
            Standing::Waiting => "waiting",
            Standing::Refused => "refused",
            Standing::Changing => "changing",
            Standing::Halted => "halted",
        }
    }
}

/// How a change ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeResult {
    /// The Node came back Ready with the new version.
    Succeeded,
    /// It did not; the previous kubelet was put back.
    RolledBack,
    /// Stopped before anything changed on the node (a drain that could
    /// not finish).
    Aborted,
}

impl ChangeResult {
    pub const ALL: [ChangeResult; 3] = [
        ChangeResult::Succeeded,
        ChangeResult::RolledBack,
        ChangeResult::Aborted,
    ];
    pub fn name(self) -> &'static str {
        match self {
            ChangeResult::Succeeded => "succeeded",
            ChangeResult::RolledBack => "rolled-back",
            ChangeResult::Aborted => "aborted",
        }
    }
}

/// A finished change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub from: String,
    pub to: String,
    pub kind: Kind,
    pub result: ChangeResult,
    /// Why it was rolled back or aborted.
    #[serde(default)]
    pub why: Option<String>,
    /// Unix seconds.
    pub started_at: u64,
    pub ended_at: u64,
    /// From the kubelet's restart to the Node Ready again with the new
    /// version, seconds (succeeded changes).
    #[serde(default)]
    pub back_after_secs: Option<u64>,
}

/// `state.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowState {
    /// The API server's last answers, newest last.
    #[serde(default)]
    pub seen: Vec<String>,
    /// When the API server was last asked (unix seconds).
    #[serde(default)]
    pub last_check: Option<u64>,
    /// The node's kubelet as last read.
    #[serde(default)]
    pub current: Option<String>,
    /// The version it moves, or would move, to.
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub standing: Standing,
    /// Why it waits, refuses or halted, in words.
    #[serde(default)]
    pub why: Option<String>,
    #[serde(default)]
    pub last_change: Option<Outcome>,
    /// The rolled-back change that halts the rollout at this node, until
    /// the operator clears the lease.
    #[serde(default)]
    pub halted: Option<Outcome>,
    /// The API server's release the waiting change (`target`) was decided
    /// for: a waiting run asks only the operator's ConfigMap and the lease.
    #[serde(default)]
    pub waiting_for: Option<String>,
    /// The version whose check ([`super::seams::NodeSeam::check`]) passed.
    #[serde(default)]
    pub checked: Option<String>,
    /// This node said in the lease that its Node is not Ready.
    #[serde(default)]
    pub reported_not_ready: bool,
    /// Changes aborted in a row; none starts again before `retry_at`.
    #[serde(default)]
    pub abort_streak: u32,
    #[serde(default)]
    pub retry_at: Option<u64>,
    #[serde(default)]
    pub succeeded: u64,
    #[serde(default)]
    pub rolled_back: u64,
    #[serde(default)]
    pub aborted: u64,
}

/// How many answers of the API server `state.json` keeps.
pub const SEEN_KEPT: usize = 20;

impl FollowState {
    /// One more answer of the API server.
    pub fn saw(&mut self, version: &str, now: u64) {
        self.seen.push(version.to_string());
        let excess = self.seen.len().saturating_sub(SEEN_KEPT);
        self.seen.drain(..excess);
        self.last_check = Some(now);
    }

    /// Counts and keeps a finished change.
    pub fn ended(&mut self, outcome: Outcome) {
        match outcome.result {
            ChangeResult::Succeeded => self.succeeded += 1,
            ChangeResult::RolledBack => self.rolled_back += 1,
            ChangeResult::Aborted => self.aborted += 1,
        }
        self.last_change = Some(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::follow::plan::{Backend, Phase};

    #[test]
    fn the_change_record_comes_and_goes_with_its_sets() {
        let d = tempfile::tempdir().unwrap();
        let f = Files::new(d.path());
        assert_eq!(f.load_change().unwrap(), None);
        let c = Change {
            node: "w1".into(),
            from: "v1.20.2".into(),
            to: "v1.20.3".into(),
            kind: Kind::Patch,
            backend: Backend::Wrapper,
            phase: Phase::Prepared,
            started_at: 1,
            restarted_at: None,
            cordoned: false,
            previous_image: None,
            why: None,
            delete_emptydir_data: false,
        };
        let mine = stamp(&c);
        f.save_set(
            Set::Previous,
            &mine,
            &[(ENV, Some(b"A=1\n")), (KUBELET_CONFIG, None)],
        )
        .unwrap();
        assert!(f.has_set(Set::Previous, &mine) && !f.has_set(Set::Next, &mine));
        // A set of another change (a crash between two changes left it)
        // is not this change's.
        let other = stamp(&Change {
            started_at: 0,
            ..c.clone()
        });
        assert!(!f.has_set(Set::Previous, &other));
        f.save_change(&c).unwrap();
        assert_eq!(f.load_change().unwrap(), Some(c));
        assert_eq!(
            f.saved(Set::Previous, ENV).unwrap().as_deref(),
            Some(&b"A=1\n"[..])
        );
        assert_eq!(f.saved(Set::Previous, KUBELET_CONFIG).unwrap(), None);
        f.end_change().unwrap();
        assert_eq!(f.load_change().unwrap(), None);
        assert!(!f.set(Set::Previous).exists());
        // Ended twice (a crash after the sets went): nothing to remove.
        f.end_change().unwrap();
        // A record that does not read is an error naming it.
        std::fs::write(f.change(), "{").unwrap();
        let e = f.load_change().unwrap_err();
        assert!(e.to_string().contains("change.json does not read"), "{e}");
    }

    #[test]
    fn the_state_keeps_the_last_answers_and_counts_outcomes() {
        let mut s = FollowState::default();
        for i in 0..25 {
            s.saw(&format!("v1.20.{i}"), i);
        }
        assert_eq!(s.seen.len(), SEEN_KEPT);
        assert_eq!(s.seen.last().unwrap(), "v1.20.24");
        assert_eq!(s.last_check, Some(24));
        let o = Outcome {
            from: "a".into(),
            to: "b".into(),
            kind: Kind::Patch,
            result: ChangeResult::RolledBack,
            why: Some("x".into()),
            started_at: 1,
            ended_at: 2,
            back_after_secs: None,
        };
        s.ended(o.clone());
        assert_eq!((s.succeeded, s.rolled_back), (0, 1));
        let d = tempfile::tempdir().unwrap();
        let f = Files::new(d.path());
        assert_eq!(f.load_state().unwrap(), FollowState::default());
        f.save_state(&s, true).unwrap();
        assert_eq!(f.load_state().unwrap(), s);
        let j: serde_json::Value =
            serde_json::from_slice(&std::fs::read(f.state()).unwrap()).unwrap();
        assert_eq!(j["last_change"]["result"], "rolled-back");
    }
}
