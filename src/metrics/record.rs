//! What this process did that the published file does not show yet: the
//! command and when it started, retries and bytes by remote service,
//! reboots asked, kubelet.env written, the join's latest look. Subsystems record here (cheap:
//! an atomic add, or a short lock, never I/O); [`crate::textfile::publish`] takes
//! ([`take`]) and persists it, and puts it back if it could not.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// The outside services the agent retries against and fetches from: the
/// `cause` label of `node_bootstrap_retries_total`, the `source` label of
/// `node_bootstrap_fetched_bytes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remote {
    /// The cluster's API server (`cluster-version`).
    ApiServer,
    /// Artifact mirrors: metadata, docker packages, agent binaries.
    Mirror,
    /// The S3 bucket of the cluster's assets (`assets pull`).
    AssetBucket,
    /// update_engine (`os-update`): its retryable failures are tried again
    /// by the unit's restart.
    UpdateEngine,
}

impl Remote {
    pub const ALL: [Remote; 4] = [
        Remote::ApiServer,
        Remote::Mirror,
        Remote::AssetBucket,
        Remote::UpdateEngine,
    ];

    /// The label value.
    pub const fn name(self) -> &'static str {
        match self {
            Remote::ApiServer => "api_server",
            Remote::Mirror => "mirror",
            Remote::AssetBucket => "asset_bucket",
            Remote::UpdateEngine => "update_engine",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// The commands that publish (the `command` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Run,
    StatusWait,
    HelperBootkube,
    HelperTectonic,
    Upgrade,
    AssetsPull,
    Follow,
}

impl Command {
    pub const fn name(self) -> &'static str {
        match self {
            Command::Run => "run",
            Command::StatusWait => "status-wait",
            Command::HelperBootkube => "helper-bootkube",
            Command::HelperTectonic => "helper-tectonic",
            Command::Upgrade => "upgrade",
            Command::AssetsPull => "assets-pull",
            Command::Follow => "follow",
        }
    }
}

const N: usize = Remote::ALL.len();
static RETRIES: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
static FETCHED: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
static PROCESS: Mutex<Process> = Mutex::new(Process::new());

/// Counts one failed attempt against `remote` that the agent tries again.
pub fn retried(remote: Remote) {
    RETRIES[remote.index()].fetch_add(1, Ordering::Relaxed);
}

/// Counts `bytes` received from `remote`.
pub fn fetched(remote: Remote, bytes: u64) {
    FETCHED[remote.index()].fetch_add(bytes, Ordering::Relaxed);
}

/// The command this process runs starts now. `kubelet_env_present`: for
/// `run`, whether kubelet.env existed at its start (a run without it is
/// part of a bootstrap).
pub fn begin(command: Command, kubelet_env_present: bool) {
    let mut p = lock();
    p.command = Some(command);
    p.started_at = Some(unix(SystemTime::now()));
    p.run_start_pending = command == Command::Run;
    p.kubelet_env_present_at_start = kubelet_env_present;
}

/// kubelet.env is in place (the moment `READY=1` goes out).
pub fn kubelet_env_written() {
    lock().kubelet_env_at = Some(unix(SystemTime::now()));
}

/// The agent asks for a reboot now.
pub fn reboot_requested() {
    lock().reboots += 1;
}

/// What the join's view saw of this node now: `state` is a join state's
/// name (`src/join/assess.rs`, or `unknown` without an answer), `ready`
/// whether the Node is Ready in the cluster.
pub fn join_observed(state: &'static str, ready: bool) {
    lock().join = Some(JoinSeen {
        state,
        at: unix(SystemTime::now()),
        ready,
    });
}

/// One look at the join (see [`join_observed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JoinSeen {
    pub state: &'static str,
    /// Unix seconds.
    pub at: f64,
    pub ready: bool,
}

/// How the command ended, for the next publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub command: Command,
    /// `success`, an error class (`retryable`, `config`, …), a `status`
    /// verdict (`in-progress`, `failed`, `unknown`), `reboot` or `handover`.
    pub result: &'static str,
    /// `None` when the process does not exit (a reboot stops it; a new agent
    /// takes it over).
    pub exit_code: Option<u8>,
    pub started_at: f64,
    pub ended_at: f64,
    /// Whether this is the process's first outcome, the one
    /// `node_bootstrap_runs_total` counts. A later one (a reboot or a
    /// handover that failed after it was published) only replaces the
    /// last result: one process, one run.
    pub counted: bool,
}

/// The command ended with `result` (see [`Finished`]).
pub fn finish(result: &'static str, exit_code: Option<u8>) {
    lock().finish(result, exit_code, unix(SystemTime::now()));
}

/// What has not been published yet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deltas {
    pub retries: [u64; N],
    pub fetched: [u64; N],
    pub reboots: u64,
    /// A `run` started at this time (unix seconds), with or without
    /// kubelet.env in place.
    pub run_started: Option<(f64, bool)>,
    pub kubelet_env_at: Option<f64>,
    pub finished: Option<Finished>,
    /// The join's latest look, since the last take.
    pub join: Option<JoinSeen>,
}

impl Deltas {
    pub fn retries_of(&self, r: Remote) -> u64 {
        self.retries[r.index()]
    }
    pub fn fetched_of(&self, r: Remote) -> u64 {
        self.fetched[r.index()]
    }
}

/// Takes everything recorded since the last take.
pub fn take() -> Deltas {
    let mut d = Deltas::default();
    for i in 0..N {
        d.retries[i] = RETRIES[i].swap(0, Ordering::Relaxed);
        d.fetched[i] = FETCHED[i].swap(0, Ordering::Relaxed);
    }
    let mut p = lock();
    d.reboots = std::mem::take(&mut p.reboots);
    if std::mem::take(&mut p.run_start_pending) {
        d.run_started = p.started_at.map(|at| (at, p.kubelet_env_present_at_start));
    }
    d.kubelet_env_at = p.kubelet_env_at.take();
    d.finished = p.finished.take();
    d.join = p.join.take();
    d
}

/// Puts back what a failed publish took, so the next one carries it.
pub fn restore(d: Deltas) {
    for i in 0..N {
        RETRIES[i].fetch_add(d.retries[i], Ordering::Relaxed);
        FETCHED[i].fetch_add(d.fetched[i], Ordering::Relaxed);
    }
    let mut p = lock();
    p.reboots += d.reboots;
    if d.run_started.is_some() {
        p.run_start_pending = true;
    }
    if p.kubelet_env_at.is_none() {
        p.kubelet_env_at = d.kubelet_env_at;
    }
    if p.finished.is_none() {
        p.finished = d.finished;
    }
    if p.join.is_none() {
        p.join = d.join;
    }
}

struct Process {
    command: Option<Command>,
    started_at: Option<f64>,
    run_start_pending: bool,
    kubelet_env_present_at_start: bool,
    kubelet_env_at: Option<f64>,
    reboots: u64,
    finished: Option<Finished>,
    /// [`finish`] was called in this process.
    finish_recorded: bool,
    join: Option<JoinSeen>,
}

impl Process {
    const fn new() -> Process {
        Process {
            command: None,
            started_at: None,
            run_start_pending: false,
            kubelet_env_present_at_start: false,
            kubelet_env_at: None,
            reboots: 0,
            finished: None,
            finish_recorded: false,
            join: None,
        }
    }

    fn finish(&mut self, result: &'static str, exit_code: Option<u8>, now: f64) {
        let Some(command) = self.command else { return };
        // Counted unless an earlier outcome of this process was already
        // taken for publishing (and so counted).
        let counted = !std::mem::replace(&mut self.finish_recorded, true)
            || self.finished.as_ref().is_some_and(|f| f.counted);
        self.finished = Some(Finished {
            command,
            result,
            exit_code,
            started_at: self.started_at.unwrap_or(now),
            ended_at: now,
            counted,
        });
    }
}

fn lock() -> std::sync::MutexGuard<'static, Process> {
    PROCESS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Unix time in seconds, to the millisecond.
pub fn unix(t: SystemTime) -> f64 {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    (d.as_millis() as f64) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Process {
        let mut p = Process::new();
        p.command = Some(Command::Run);
        p.started_at = Some(1.0);
        p
    }

    #[test]
    fn a_process_counts_one_run_whatever_ends_it_last() {
        // The reboot was published, then asking for it failed.
        let mut p = run();
        p.finish("reboot", None, 2.0);
        let published = p.finished.take().unwrap();
        assert!(published.counted);
        p.finish("retryable", Some(3), 3.0);
        let last = p.finished.take().unwrap();
        assert_eq!((last.result, last.exit_code), ("retryable", Some(3)));
        assert!(!last.counted, "the run was counted as a reboot already");

        // Two outcomes before any publish: the last one is counted.
        let mut p = run();
        p.finish("handover", None, 2.0);
        p.finish("internal", Some(6), 3.0);
        let last = p.finished.take().unwrap();
        assert_eq!(last.result, "internal");
        assert!(last.counted);
    }
}
