//! Script mode: `bash <script>` as a child process in its own process
//! group, working directory the assets dir (bootkube.sh mounts `$PWD`).
//! Output lines are logged as they come (fields `step`, `stream`) and the
//! last ones kept for the state journal. On timeout or on `stop` the whole
//! process group gets SIGTERM, then SIGKILL after [`super::KILL_GRACE`].

use super::{LogTail, StepRun, clean_line};
use crate::error::{Context as _, ErrorClass, Result};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::future::Future;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;

/// The shell the asset scripts were written for (`ExecStart=/usr/bin/bash …`
/// in the original units). Looked up on PATH so a test host works too.
pub const SHELL: &str = "bash";
/// How long to keep reading output after the script exited (a background
/// child may hold the pipes open).
const DRAIN: Duration = Duration::from_secs(2);

/// Runs `script` to completion, a timeout, or `stop`.
pub async fn run_script(
    step: &'static str,
    script: &Path,
    cwd: &Path,
    timeout: Duration,
    tail_lines: usize,
    stop: impl Future<Output = String>,
) -> Result<StepRun> {
    let mut child = Command::new(SHELL)
        .arg(script)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .ctx(ErrorClass::Internal, || {
            format!(
                "failed to start {SHELL} {} in {}",
                script.display(),
                cwd.display()
            )
        })?;
    let pgid = Pid::from_raw(child.id().expect("a just-spawned child has a pid") as i32);
    tracing::info!(step, path = %script.display(), pid = pgid.as_raw(), "script started");
    let tail = Arc::new(Mutex::new(LogTail::new(tail_lines)));
    let last_stderr = Arc::new(Mutex::new(None));
    let out = tokio::spawn(forward(
        step,
        "stdout",
        child.stdout.take().expect("stdout is piped"),
        tail.clone(),
        None,
    ));
    let err = tokio::spawn(forward(
        step,
        "stderr",
        child.stderr.take().expect("stderr is piped"),
        tail.clone(),
        Some(last_stderr.clone()),
    ));

    let mut stopped = None;
    tokio::pin!(stop);
    let status = tokio::select! {
        st = child.wait() => Some(st),
        _ = tokio::time::sleep(timeout) => {
            stopped = Some(format!("timed out after {}s", timeout.as_secs()));
            None
        }
        why = &mut stop => {
            stopped = Some(why);
            None
        }
    };
    let status = match status {
        Some(st) => st,
        None => {
            tracing::warn!(
                step,
                pid = pgid.as_raw(),
                reason = stopped.as_deref().unwrap_or(""),
                "stopping the script's process group"
            );
            let _ = killpg(pgid, Signal::SIGTERM);
            match tokio::time::timeout(super::KILL_GRACE, child.wait()).await {
                Ok(st) => st,
                Err(_) => {
                    let _ = killpg(pgid, Signal::SIGKILL);
                    child.wait().await
                }
            }
        }
    }
    .ctx(ErrorClass::Internal, || {
        format!("failed to wait for {}", script.display())
    })?;
    // Whatever is left of the group after an early stop goes too.
    if stopped.is_some() {
        let _ = killpg(pgid, Signal::SIGKILL);
    }
    for task in [out, err] {
        let abort = task.abort_handle();
        if tokio::time::timeout(DRAIN, task).await.is_err() {
            abort.abort();
        }
    }
    let tail = tail.lock().expect("tail lock").lines();
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        tracing::warn!(step, signal = sig, "script ended by a signal");
    }
    Ok(StepRun {
        exit_code: status.code().map(i64::from),
        stopped,
        tail,
        last_stderr: last_stderr.lock().expect("lock").clone(),
    })
}

async fn forward(
    step: &'static str,
    stream: &'static str,
    pipe: impl AsyncRead + Unpin,
    tail: Arc<Mutex<LogTail>>,
    last: Option<Arc<Mutex<Option<String>>>>,
) {
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) => return,
            Ok(_) => {
                let line = clean_line(&buf);
                tracing::info!(step, stream, "{line}");
                if let Some(last) = &last
                    && !line.trim().is_empty()
                {
                    *last.lock().expect("lock") = Some(line.clone());
                }
                tail.lock().expect("tail lock").push(line);
            }
            Err(e) => {
                tracing::warn!(step, stream, error = %e, "could not read the script's output");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn script(dir: &Path, body: &str) -> std::path::PathBuf {
        let p = dir.join("step.sh");
        std::fs::write(&p, format!("set -e\n{body}\n")).unwrap();
        p
    }

    #[tokio::test]
    async fn output_and_exit_code_are_reported_in_the_assets_dir() {
        let d = tempfile::tempdir().unwrap();
        let s = script(
            d.path(),
            "echo oops >&2\nsleep 0.3\nfor i in 1 2 3 4 5; do echo line $i; done\nexit 4",
        );
        let run = run_script(
            "t",
            &s,
            d.path(),
            Duration::from_secs(10),
            3,
            std::future::pending(),
        )
        .await
        .unwrap();
        assert_eq!(run.exit_code, Some(4));
        assert!(run.stopped.is_none());
        assert_eq!(run.tail, vec!["line 3", "line 4", "line 5"]);
        assert_eq!(run.last_stderr.as_deref(), Some("oops"));
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("bg.pid");
        let s = script(
            d.path(),
            &format!(
                "sleep 300 &\necho $! > {}\necho started\nwait",
                pidfile.display()
            ),
        );
        let t0 = Instant::now();
        let run = run_script(
            "t",
            &s,
            d.path(),
            Duration::from_secs(1),
            10,
            std::future::pending(),
        )
        .await
        .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(run.stopped.as_deref(), Some("timed out after 1s"));
        assert_eq!(run.tail, vec!["started"]);
        let bg: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The background sleep of the script is gone too (or a zombie of
        // an exited parent being reaped).
        std::thread::sleep(Duration::from_millis(200));
        let state = std::fs::read_to_string(format!("/proc/{bg}/stat")).unwrap_or_default();
        assert!(
            state.is_empty() || state.split_whitespace().nth(2) == Some("Z"),
            "background child {bg} still runs: {state}"
        );
    }

    #[tokio::test]
    async fn stop_signal_ends_the_script_with_its_reason() {
        let d = tempfile::tempdir().unwrap();
        let s = script(d.path(), "echo waiting\nsleep 300");
        let stop = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            "stopped by SIGTERM".to_string()
        };
        let run = run_script("t", &s, d.path(), Duration::from_secs(60), 10, stop)
            .await
            .unwrap();
        assert_eq!(run.stopped.as_deref(), Some("stopped by SIGTERM"));
    }
}
