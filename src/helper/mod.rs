//! The oneshot control-plane helpers run by `bootkube.service` and
//! `tectonic.service` (`node-bootstrap helper bootkube|tectonic`).
//!
//! Each runs its step once and, only on success, writes its `.done` marker
//! atomically (`init_bootkube.done`, `init_tectonic.done` in the assets dir):
//! a failure leaves no marker, so the next trigger of the path unit retries,
//! and later boots skip the units (`ConditionPathExists=!…done`).
//!
//! The step runs in one of two ways ([`config::HelperMode`]):
//! - `script`: the asset script (`bash /opt/tectonic/bootkube.sh`) as a
//!   child process in its own process group, in the assets dir; on timeout
//!   or SIGTERM the whole group is killed ([`script`]);
//! - `docker`: the container itself through Docker's API (bollard): the
//!   image, entrypoint, args, binds and host network as `bootkube.sh` ran
//!   it; the container is removed afterwards, also on error, timeout or
//!   SIGTERM ([`docker`]).
//!
//! Every output line goes to the log (journald under systemd) with the
//! fields `step=helper/<name>` and `stream=stdout|stderr`, so
//! `journalctl STEP=helper/bootkube` shows exactly what the step printed.
//! The state journal records the attempt under `helper/<name>`: `begin`,
//! then `finish` with `{exit_code, duration_ms, mode}` or `fail` with the
//! error and the last `log_tail_lines` output lines (what `status` shows).
//! A journal that cannot be written is logged as a warning and does not fail
//! the step: the marker, not the journal, is what the units act on.
//!
//! Defence in depth: the tectonic helper refuses to run unless bootkube's
//! marker exists (the units already order tectonic after a *successful*
//! bootkube; a manual run must not undo that). A step whose marker already
//! exists does nothing and succeeds. Two helpers of the same step never run
//! at once (a lock in the state dir).

pub mod config;
pub mod docker;
pub mod script;

use crate::error::{Error, Result};
use crate::fsutil::{self, RunLock};
use crate::journal::{self, HelperRecord, JournalFile, StepResult};
use config::{HelperMode, StepSettings};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Grace between SIGTERM and SIGKILL when a step is stopped.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// Longest line kept in the log tail (longer ones are cut).
pub const MAX_LINE_CHARS: usize = 2000;

/// What the helpers read of the agent's config: their own section
/// (`helpers`) and the node's paths.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a crate::settings::Paths,
    pub helpers: &'a config::HelpersSettings,
}

/// Which control-plane step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Helper {
    Bootkube,
    Tectonic,
}

impl Helper {
    pub fn name(self) -> &'static str {
        match self {
            Helper::Bootkube => "bootkube",
            Helper::Tectonic => "tectonic",
        }
    }

    /// The helper's step in the state journal.
    pub fn journal_step(self) -> crate::journal::Step {
        match self {
            Helper::Bootkube => crate::journal::Step::Bootkube,
            Helper::Tectonic => crate::journal::Step::Tectonic,
        }
    }

    /// The asset script's file name in the assets dir.
    pub fn default_script(self) -> &'static str {
        match self {
            Helper::Bootkube => config::BOOTKUBE_SCRIPT,
            Helper::Tectonic => config::TECTONIC_SCRIPT,
        }
    }

    pub fn done_marker(self, config: &Inputs<'_>) -> PathBuf {
        match self {
            Helper::Bootkube => config.paths.bootkube_done(),
            Helper::Tectonic => config.paths.tectonic_done(),
        }
    }

    pub fn settings<'a>(self, config: &Inputs<'a>) -> &'a StepSettings {
        match self {
            Helper::Bootkube => &config.helpers.bootkube,
            Helper::Tectonic => &config.helpers.tectonic,
        }
    }
}

/// The last lines a step printed (both streams, in arrival order).
#[derive(Debug, Clone)]
pub struct LogTail {
    cap: usize,
    lines: VecDeque<String>,
}

impl LogTail {
    pub fn new(cap: usize) -> Self {
        LogTail {
            cap: cap.max(1),
            lines: VecDeque::new(),
        }
    }

    pub fn push(&mut self, line: String) {
        if self.lines.len() == self.cap {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }
}

/// Cuts a raw output line to something loggable.
pub(crate) fn clean_line(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    let s = s.trim_end_matches(['\n', '\r']);
    if s.chars().count() > MAX_LINE_CHARS {
        let cut: String = s.chars().take(MAX_LINE_CHARS).collect();
        format!("{cut}…")
    } else {
        s.to_string()
    }
}

/// How a step's run ended (before it is judged).
#[derive(Debug)]
pub struct StepRun {
    /// Exit code of the script or container (`None` if killed by a signal).
    pub exit_code: Option<i64>,
    /// Why it ended early, if it did (timeout, SIGTERM).
    pub stopped: Option<String>,
    pub tail: Vec<String>,
    /// The last non-empty line on stderr (where errors usually are; Docker
    /// does not keep the order between the two streams).
    pub last_stderr: Option<String>,
}

/// Runs the helper for `step` (see module docs). `Ok` means the step
/// succeeded (or was already done) and its marker exists.
pub async fn run(config: &Inputs<'_>, step: Helper) -> Result<()> {
    let marker = step.done_marker(config);
    let jstep = step.journal_step();
    let step_name = jstep.name();
    if fsutil::is_done(&marker) {
        tracing::info!(step = step_name, path = %marker.display(), "already done; nothing to do");
        return Ok(());
    }
    let journal = JournalFile::new(config.paths.state_journal());
    let boot_id = crate::boot::id(&config.paths.run_dir).unwrap_or_else(|e| {
        tracing::warn!(step = step_name, error = %e, "could not read the boot id");
        "unknown".to_string()
    });
    let record = |f: &dyn Fn(&mut journal::StateJournal)| {
        if let Err(e) = journal.update(|j| f(j)) {
            // The journal is for `status`; a step must not fail for it.
            tracing::warn!(step = step_name, error = %e, "could not record the step in the state journal");
        }
    };

    if step == Helper::Tectonic && !fsutil::is_done(&config.paths.bootkube_done()) {
        let err = Error::refused(format!(
            "bootkube has not completed ({} is missing); refusing to run tectonic",
            config.paths.bootkube_done().display()
        ));
        record(&|j| {
            j.begin(&boot_id, jstep);
            j.fail(&boot_id, jstep, &err, vec![]);
        });
        return Err(err);
    }

    let lock_path = config
        .paths
        .state_dir
        .join(format!("helper-{}.lock", step.name()));
    let _lock = RunLock::acquire(&lock_path, Duration::ZERO)?;
    // Re-check under the lock: another helper may have just finished.
    if fsutil::is_done(&marker) {
        tracing::info!(step = step_name, path = %marker.display(), "already done; nothing to do");
        return Ok(());
    }

    let settings = step.settings(config);
    record(&|j| j.begin(&boot_id, jstep));
    let started = Instant::now();
    tracing::info!(
        step = step_name,
        mode = settings.mode.as_str(),
        timeout_secs = settings.timeout.as_secs(),
        "starting"
    );
    let outcome = execute(config, step, settings).await;
    let duration_ms = started.elapsed().as_millis() as u64;
    let result = outcome.and_then(|run| judge(step, settings, run));
    let result = match result {
        Ok(exit_code) => fsutil::mark_done(&marker, step_name)
            .map(|()| exit_code)
            .map_err(|e| (e, vec![])),
        Err(e) => Err(e),
    };
    match result {
        Ok(exit_code) => {
            let res = StepResult::Helper(HelperRecord {
                exit_code,
                duration_ms,
                mode: settings.mode.as_str().to_string(),
                image: match (settings.mode, &settings.docker) {
                    (HelperMode::Docker, Some(d)) => Some(d.image.clone()),
                    _ => None,
                },
            });
            record(&|j| j.finish(&boot_id, jstep, res.clone()));
            tracing::info!(message_id = crate::message_ids::STEP_DONE, step = step_name, duration_ms, path = %marker.display(), "done");
            Ok(())
        }
        Err((err, tail)) => {
            record(&|j| j.fail(&boot_id, jstep, &err, tail.clone()));
            tracing::error!(message_id = crate::message_ids::STEP_FAILED, step = step_name,
                error_class = err.class().name(), duration_ms, error = %err, "failed");
            Err(err)
        }
    }
}

type Failure = (Error, Vec<String>);

async fn execute(
    config: &Inputs<'_>,
    step: Helper,
    settings: &StepSettings,
) -> std::result::Result<StepRun, Failure> {
    let step_name = step.journal_step().name();
    let stop = async {
        stop_signal().await;
        "stopped by SIGTERM".to_string()
    };
    match settings.mode {
        HelperMode::Script => {
            let script = settings.script_path(&config.paths.assets_dir, step.default_script());
            if !script.is_file() {
                let err = Error::bad_input(format!(
                    "{} step: asset script {} does not exist",
                    step.name(),
                    script.display()
                ));
                return Err((err, vec![]));
            }
            script::run_script(
                step_name,
                &script,
                &config.paths.assets_dir,
                settings.timeout,
                settings.log_tail_lines,
                stop,
            )
            .await
            .map_err(|e| (e, vec![]))
        }
        HelperMode::Docker => {
            let d = settings
                .docker
                .as_ref()
                .expect("docker settings are validated present in docker mode");
            docker::run_container(
                step_name,
                &config.paths.docker_socket,
                &docker::ContainerSpec::new(step.name(), d, &config.paths.assets_dir),
                settings.timeout,
                settings.log_tail_lines,
                stop,
            )
            .await
        }
    }
}

/// Success only for exit code 0 without an early stop.
fn judge(step: Helper, settings: &StepSettings, run: StepRun) -> std::result::Result<i64, Failure> {
    let what = match settings.mode {
        HelperMode::Script => format!("{} step ({})", step.name(), step.default_script()),
        HelperMode::Docker => format!(
            "{} step (container {})",
            step.name(),
            settings.docker.as_ref().map_or("", |d| d.image.as_str())
        ),
    };
    let mut msg = match (run.stopped, run.exit_code) {
        (Some(why), _) => format!("{what} {why}"),
        (None, Some(0)) => return Ok(0),
        (None, Some(code)) => format!("{what} exited with code {code}"),
        (None, None) => format!("{what} was killed by a signal"),
    };
    let last = run
        .last_stderr
        .as_ref()
        .or_else(|| run.tail.iter().rev().find(|l| !l.trim().is_empty()));
    if let Some(last) = last {
        msg.push_str(&format!("; last output: {last}"));
    }
    let err = Error::retryable(msg);
    Err((err, run.tail))
}

/// Resolves when the process receives SIGTERM or SIGINT (systemd stopping
/// the unit, or Ctrl-C); never if the handlers cannot be installed.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

/// Entry point for the CLI: runs the step on a runtime of its own and
/// returns the exit code.
pub fn main(config: &Inputs<'_>, step: Helper) -> Result<u8> {
    let rt = crate::async_runtime::current_thread()?;
    rt.block_on(run(config, step))?;
    Ok(crate::error::exit::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn tail_keeps_the_last_lines() {
        let mut t = LogTail::new(3);
        for i in 0..10 {
            t.push(format!("line {i}"));
        }
        assert_eq!(t.lines(), vec!["line 7", "line 8", "line 9"]);
    }

    #[test]
    fn long_and_binary_lines_are_cleaned() {
        let long = vec![b'x'; MAX_LINE_CHARS + 10];
        let l = clean_line(&long);
        assert_eq!(l.chars().count(), MAX_LINE_CHARS + 1);
        assert_eq!(clean_line(b"ok\r\n"), "ok");
        assert_eq!(clean_line(b"\xff\xfe bad\n"), "\u{fffd}\u{fffd} bad");
    }

    #[test]
    fn judge_names_the_step_and_the_last_line() {
        let s = StepSettings::default();
        let run = StepRun {
            exit_code: Some(2),
            stopped: None,
            tail: vec!["starting".into(), "error: no api".into(), "".into()],
            last_stderr: None,
        };
        let (err, tail) = judge(Helper::Bootkube, &s, run).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bootkube step (bootkube.sh) exited with code 2; last output: error: no api"
        );
        assert_eq!(err.class(), ErrorClass::Retryable);
        assert_eq!(tail.len(), 3);
        let ok = StepRun {
            exit_code: Some(0),
            stopped: None,
            tail: vec![],
            last_stderr: None,
        };
        assert_eq!(judge(Helper::Bootkube, &s, ok).unwrap(), 0);
        let stopped = StepRun {
            exit_code: Some(0),
            stopped: Some("timed out after 5s".into()),
            tail: vec!["x".into()],
            last_stderr: Some("error: y".into()),
        };
        let (err, _) = judge(Helper::Tectonic, &s, stopped).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tectonic step (tectonic-wrapper.sh) timed out after 5s; last output: error: y"
        );
    }
}
