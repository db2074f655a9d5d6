//! The Prometheus textfile every publishing command leaves for
//! node_exporter's textfile collector: rendered ([`render`], pure) from the
//! state journal and the counters kept across runs ([`state`]), published
//! under a lock ([`publish`]). What a process counts is recorded below, in
//! [`crate::metrics`].
//!
//! With `metrics.textfile_dir` set ([`crate::metrics::config`]; the Ignition module sets
//! it), `run`, `status --wait`, `helper`, `upgrade` and `assets pull`
//! publish `<metrics.textfile_dir>/node_bootstrap.prom` when they end (and a long
//! one also while it runs: [`publish::Periodic`]); `run` also just before
//! it asks for a reboot and before it hands over to a new agent. The file
//! is rendered whole from the state journal and `<state_dir>/metrics.json`
//! (the counters, kept across restarts and reboots: [`state`]), so
//! whichever command wrote it last, it shows the node as it is. The
//! textfile is always written without fsync (it is derived from the two);
//! the counters are synced only by a command's last publish. So what a
//! first bootstrap publishes on its way to kubelet.env's `READY=1` (the
//! periodic publish of a long run, from its own thread; the publish
//! before a reboot) costs renames, never a sync; the end-of-run publish
//! comes after `READY=1`.
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `node_bootstrap_info` | gauge (1) | `version`, `role` |
//! | `node_bootstrap_first_start_timestamp_seconds` | gauge | |
//! | `node_bootstrap_kubelet_env_timestamp_seconds` | gauge | |
//! | `node_bootstrap_time_to_kubelet_env_seconds` | gauge | |
//! | `node_bootstrap_join_state` | gauge (0/1) | `state` (a join state, `src/join/assess.rs`, or `unknown`) |
//! | `node_bootstrap_join_last_check_timestamp_seconds` | gauge | |
//! | `node_bootstrap_node_ready_timestamp_seconds` | gauge | |
//! | `node_bootstrap_time_to_node_ready_seconds` | gauge | |
//! | `node_bootstrap_step_state` | gauge (0/1) | `step`, `state` (running, done, failed) |
//! | `node_bootstrap_step_attempts_total` | counter | `step` |
//! | `node_bootstrap_step_last_start_timestamp_seconds` | gauge | `step` |
//! | `node_bootstrap_step_last_end_timestamp_seconds` | gauge | `step` |
//! | `node_bootstrap_step_last_duration_seconds` | gauge | `step` |
//! | `node_bootstrap_step_failure_info` | gauge (1) | `step`, `class` |
//! | `node_bootstrap_runs_total` | counter | `command`, `result` |
//! | `node_bootstrap_last_result` | gauge (1) | `command`, `result` |
//! | `node_bootstrap_last_exit_code` | gauge | `command` |
//! | `node_bootstrap_last_end_timestamp_seconds` | gauge | `command` |
//! | `node_bootstrap_last_duration_seconds` | gauge | `command` |
//! | `node_bootstrap_reboots_requested_total` | counter | |
//! | `node_bootstrap_retries_total` | counter | `cause` ([`Remote`](crate::metrics::Remote)) |
//! | `node_bootstrap_fetched_bytes_total` | counter | `source` ([`Remote`](crate::metrics::Remote)) |
//!
//! Label values are bounded: step names (the journal's), states (of steps
//! and of the join), error
//! classes, [`Command`](crate::metrics::Command) and [`Remote`](crate::metrics::Remote) names, results; never a URL, a path
//! or an error text. Subsystems record through [`crate::metrics::record`] (retries in
//! [`crate::retry::retry`], bytes where downloads read their bodies); the
//! flow through its `Progress` seam.

pub mod publish;
pub mod render;
pub mod state;

pub use publish::{Periodic, Target};

use crate::error::Error;
use crate::fsutil::Durability;
use crate::metrics::record;

/// The `result` label of a command that ended with `outcome`: `success`,
/// the error's class, or what a `status` exit code means.
pub fn result_of(outcome: &Result<u8, Error>) -> &'static str {
    use crate::error::exit;
    match outcome {
        Ok(exit::SUCCESS) => "success",
        Ok(exit::STATUS_IN_PROGRESS) => "in-progress",
        Ok(exit::STATUS_FAILED) => "failed",
        Ok(exit::STATUS_UNKNOWN) => "unknown",
        Ok(_) => "other",
        Err(e) => e.class().name(),
    }
}

/// The command ends with `outcome`: record it and publish.
pub fn finish(target: &Target, outcome: &Result<u8, Error>) {
    let code = match outcome {
        Ok(c) => *c,
        Err(e) => e.exit_code(),
    };
    record::finish(result_of(outcome), Some(code));
    publish::publish_or_warn(target, Durability::Durable);
}

/// `run` is about to end by other means than returning (`result`: `reboot`,
/// the shutdown stops it; `handover`, exec replaces it): record that and
/// publish now. Without fsync: this is on the node's way to kubelet (the
/// reboot waits for it), and a clean shutdown or an exec keeps the page
/// cache; only a power cut in the next moments loses these counts.
pub fn publish_before_exit(config: &crate::config::Config, result: &'static str) {
    record::finish(result, None);
    publish::publish_or_warn(&Target::from_config(config), Durability::AtomicOnly);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn results_are_bounded_names() {
        assert_eq!(result_of(&Ok(0)), "success");
        assert_eq!(result_of(&Ok(10)), "in-progress");
        assert_eq!(result_of(&Ok(11)), "failed");
        assert_eq!(result_of(&Ok(12)), "unknown");
        assert_eq!(
            result_of(&Err(Error::new(ErrorClass::BadInput, "https://x/y"))),
            "bad-input"
        );
    }
}
