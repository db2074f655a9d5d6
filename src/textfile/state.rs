//! The counters and times behind the textfile, kept across runs, restarts
//! and reboots in `<state_dir>/metrics.json` (schema below), so a unit that
//! crash-loops keeps counting and the bootstrap's start survives its
//! reboots. [`MetricsState::apply`] is the pure merge of one process's
//! [`Deltas`]; the file is read and replaced (atomically, durably) under
//! `<state_dir>/metrics.lock` by [`super::publish`].

use crate::journal::StateJournal;
use crate::metrics::record::{Deltas, Remote};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The file's name in the state dir.
pub const FILE: &str = "metrics.json";
/// Version of the file's schema; a newer one is not read (and replaced).
pub const SCHEMA: u32 = 1;

fn schema() -> u32 {
    SCHEMA
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsState {
    #[serde(default = "schema")]
    pub schema: u32,
    /// When the current bootstrap started (unix seconds): the first `run`
    /// on this node, or the first after kubelet.env was removed from a
    /// bootstrapped node.
    #[serde(default)]
    pub bootstrap_started_at: Option<f64>,
    /// When that bootstrap wrote kubelet.env.
    #[serde(default)]
    pub kubelet_env_at: Option<f64>,
    #[serde(default)]
    pub reboots_requested: u64,
    /// By [`Remote::name`].
    #[serde(default)]
    pub retries: BTreeMap<String, u64>,
    /// By [`Remote::name`].
    #[serde(default)]
    pub fetched_bytes: BTreeMap<String, u64>,
    /// Command -> result -> count.
    #[serde(default)]
    pub runs: BTreeMap<String, BTreeMap<String, u64>>,
    /// Command -> its last run.
    #[serde(default)]
    pub last: BTreeMap<String, LastRun>,
    /// The join's state when last looked at (after kubelet.env, by `run`'s
    /// watch or `status --wait`): a join state's name or `unknown`.
    #[serde(default)]
    pub join_state: Option<String>,
    /// When it was looked at.
    #[serde(default)]
    pub join_observed_at: Option<f64>,
    /// When the node was first seen Ready in the cluster in this bootstrap.
    #[serde(default)]
    pub node_ready_at: Option<f64>,
}

impl Default for MetricsState {
    fn default() -> Self {
        MetricsState {
            schema: SCHEMA,
            bootstrap_started_at: None,
            kubelet_env_at: None,
            reboots_requested: 0,
            retries: BTreeMap::new(),
            fetched_bytes: BTreeMap::new(),
            runs: BTreeMap::new(),
            last: BTreeMap::new(),
            join_state: None,
            join_observed_at: None,
            node_ready_at: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    pub result: String,
    #[serde(default)]
    pub exit_code: Option<u8>,
    pub started_at: f64,
    pub ended_at: f64,
}

impl MetricsState {
    /// Merges what one process recorded. `journal_earliest`: the earliest
    /// time the state journal holds, which dates the bootstrap when the
    /// first runs ended before they could publish (killed, power cut).
    pub fn apply(&mut self, d: &Deltas, journal_earliest: Option<f64>) {
        for r in Remote::ALL {
            *self.retries.entry(r.name().into()).or_default() += d.retries_of(r);
            *self.fetched_bytes.entry(r.name().into()).or_default() += d.fetched_of(r);
        }
        self.reboots_requested += d.reboots;
        if let Some((at, kubelet_env_present)) = d.run_started
            && !kubelet_env_present
        {
            if self.kubelet_env_at.is_some() {
                // kubelet.env was removed from a bootstrapped node: a new
                // bootstrap starts (the old journal is from the last one),
                // and a new join after it.
                self.kubelet_env_at = None;
                self.bootstrap_started_at = Some(at);
                self.join_state = None;
                self.join_observed_at = None;
                self.node_ready_at = None;
            }
            let start = match journal_earliest {
                Some(j) if self.bootstrap_started_at.is_none() => j.min(at),
                _ => at,
            };
            self.bootstrap_started_at = Some(self.bootstrap_started_at.unwrap_or(start));
        }
        if let Some(at) = d.kubelet_env_at
            && self.kubelet_env_at.is_none()
        {
            self.kubelet_env_at = Some(at);
        }
        if let Some(j) = &d.join {
            self.join_state = Some(j.state.to_string());
            self.join_observed_at = Some(j.at);
            if j.ready && self.node_ready_at.is_none() {
                self.node_ready_at = Some(j.at);
            }
        }
        if let Some(f) = &d.finished {
            let command = f.command.name().to_string();
            if f.counted {
                *self
                    .runs
                    .entry(command.clone())
                    .or_default()
                    .entry(f.result.to_string())
                    .or_default() += 1;
            }
            self.last.insert(
                command,
                LastRun {
                    result: f.result.to_string(),
                    exit_code: f.exit_code,
                    started_at: f.started_at,
                    ended_at: f.ended_at,
                },
            );
        }
    }

    /// Seconds from the bootstrap's start to kubelet.env, once written.
    pub fn time_to_kubelet_env(&self) -> Option<f64> {
        let (start, env) = (self.bootstrap_started_at?, self.kubelet_env_at?);
        (env >= start).then_some(env - start)
    }

    /// Seconds from the bootstrap's start to the node Ready in the
    /// cluster, once seen.
    pub fn time_to_node_ready(&self) -> Option<f64> {
        let (start, ready) = (self.bootstrap_started_at?, self.node_ready_at?);
        (ready >= start).then_some(ready - start)
    }
}

/// The earliest time (unix seconds) the state journal records: its oldest
/// event or step start.
pub fn journal_earliest(j: &StateJournal) -> Option<f64> {
    j.history
        .iter()
        .map(|e| e.at.as_str())
        .chain(j.steps.values().map(|r| r.started_at.as_str()))
        .filter_map(parse_rfc3339)
        .reduce(f64::min)
}

/// An RFC 3339 time as the state journal writes it, in unix seconds.
pub fn parse_rfc3339(s: &str) -> Option<f64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::{Command, Finished};

    fn run_start(at: f64, env_present: bool) -> Deltas {
        Deltas {
            run_started: Some((at, env_present)),
            ..Default::default()
        }
    }

    #[test]
    fn counters_add_up_across_processes() {
        let mut s = MetricsState::default();
        let mut d = Deltas::default();
        d.retries[0] = 2; // api_server
        d.fetched[1] = 1000; // mirror
        d.reboots = 1;
        d.finished = Some(Finished {
            command: Command::Run,
            result: "retryable",
            exit_code: Some(3),
            started_at: 10.0,
            ended_at: 12.5,
            counted: true,
        });
        s.apply(&d, None);
        s.apply(&d, None);
        assert_eq!(s.retries["api_server"], 4);
        assert_eq!(s.retries["update_engine"], 0, "every cause is present");
        assert_eq!(s.fetched_bytes["mirror"], 2000);
        assert_eq!(s.reboots_requested, 2);
        assert_eq!(s.runs["run"]["retryable"], 2);
        assert_eq!(s.last["run"].exit_code, Some(3));
    }

    #[test]
    fn an_outcome_that_is_not_counted_only_replaces_the_last_result() {
        let mut s = MetricsState::default();
        let finished = |result, exit_code, counted| Deltas {
            finished: Some(Finished {
                command: Command::Run,
                result,
                exit_code,
                started_at: 10.0,
                ended_at: 12.5,
                counted,
            }),
            ..Default::default()
        };
        s.apply(&finished("reboot", None, true), None);
        s.apply(&finished("retryable", Some(3), false), None);
        assert_eq!(s.runs["run"].values().sum::<u64>(), 1, "{:?}", s.runs);
        assert_eq!(s.runs["run"]["reboot"], 1);
        assert_eq!(s.last["run"].result, "retryable");
        assert_eq!(s.last["run"].exit_code, Some(3));
    }

    #[test]
    fn the_join_keeps_its_last_state_and_its_first_ready_until_a_new_bootstrap() {
        use crate::metrics::record::JoinSeen;
        let join = |state, at, ready| Deltas {
            join: Some(JoinSeen { state, at, ready }),
            ..Default::default()
        };
        let mut s = MetricsState::default();
        s.apply(&run_start(100.0, false), None);
        s.apply(
            &Deltas {
                kubelet_env_at: Some(110.0),
                ..Default::default()
            },
            None,
        );
        s.apply(&join("certificate-pending", 112.0, false), None);
        assert_eq!(
            (s.join_state.as_deref(), s.node_ready_at),
            (Some("certificate-pending"), None)
        );
        s.apply(&join("ready", 130.0, true), None);
        s.apply(&join("not-ready", 150.0, false), None);
        assert_eq!(s.join_state.as_deref(), Some("not-ready"));
        assert_eq!(s.join_observed_at, Some(150.0));
        assert_eq!(s.node_ready_at, Some(130.0), "the first Ready is kept");
        assert_eq!(s.time_to_node_ready(), Some(30.0));
        // kubelet.env removed, a new bootstrap: a new join.
        s.apply(&run_start(1000.0, false), None);
        assert_eq!((s.join_state, s.node_ready_at), (None, None));
    }

    #[test]
    fn the_bootstrap_starts_with_the_first_run_and_ends_with_kubelet_env() {
        let mut s = MetricsState::default();
        s.apply(&run_start(100.0, false), None);
        s.apply(&run_start(200.0, false), None);
        assert_eq!(s.bootstrap_started_at, Some(100.0), "the first run's start");
        s.apply(
            &Deltas {
                kubelet_env_at: Some(250.0),
                ..Default::default()
            },
            None,
        );
        assert_eq!(s.time_to_kubelet_env(), Some(150.0));
        // A later run with kubelet.env in place changes nothing.
        s.apply(&run_start(300.0, true), None);
        assert_eq!(s.time_to_kubelet_env(), Some(150.0));
        // kubelet.env removed: the next run starts a new bootstrap.
        s.apply(&run_start(1000.0, false), Some(50.0));
        assert_eq!(s.bootstrap_started_at, Some(1000.0));
        assert_eq!(s.kubelet_env_at, None);
    }

    #[test]
    fn runs_that_never_published_date_the_bootstrap_by_the_state_journal() {
        let mut s = MetricsState::default();
        s.apply(&run_start(500.0, false), Some(420.0));
        assert_eq!(s.bootstrap_started_at, Some(420.0));
        // An agent that starts publishing on a bootstrapped node does not
        // invent a bootstrap.
        let mut s = MetricsState::default();
        s.apply(&run_start(500.0, true), Some(420.0));
        assert_eq!(s.bootstrap_started_at, None);
    }

    #[test]
    fn journal_times_read_as_the_journal_writes_them() {
        assert_eq!(parse_rfc3339("1970-01-01T00:01:40Z"), Some(100.0));
        let mut j = StateJournal::default();
        assert_eq!(journal_earliest(&j), None);
        j.begin("b", crate::journal::Step::Assets);
        let t = journal_earliest(&j).unwrap();
        let now = crate::metrics::record::unix(std::time::SystemTime::now());
        assert!((now - t).abs() < 5.0, "{t} vs {now}");
    }
}
