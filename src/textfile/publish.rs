//! Publishing: under `<state_dir>/metrics.lock`, merge what this process
//! recorded into `<state_dir>/metrics.json`, then render the textfile from
//! it and the state journal; both files replaced atomically (temp file in
//! the same directory, rename: [`crate::fsutil`]). The state is made
//! durable (fsync) where the caller asks for it; the textfile never is,
//! since the next publish derives it whole again. The lock orders
//! publishers (a `run` and a helper at once): each renders what the last
//! one persisted, so the file never goes back to an older state.
//!
//! Publishing never fails a command: errors come back for a warning, and
//! what was not persisted is kept for the next attempt.

use super::render::{Snapshot, render};
use super::state::{self, MetricsState};
use crate::config::Config;
use crate::error::{Context as _, ErrorClass, Result};
use crate::fsutil::{self, Durability, RunLock};
use crate::journal::JournalFile;
use crate::metrics::config::MetricsSettings;
use crate::metrics::record::{self, Deltas};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// The textfile's name in `metrics.textfile_dir` (node_exporter reads
/// `*.prom`; the temp files beside it are `.node_bootstrap.prom.tmp-*`).
pub const TEXTFILE: &str = "node_bootstrap.prom";
/// The lock publishers take, in the state dir.
pub const LOCK_FILE: &str = "metrics.lock";
/// How long a publisher waits for another.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Where a publish reads and writes.
#[derive(Debug, Clone)]
pub struct Target {
    pub settings: MetricsSettings,
    pub state_dir: PathBuf,
    pub journal: PathBuf,
    pub kubelet_env: PathBuf,
    /// The `role` label (`unknown` when the config could not be read).
    pub role: String,
}

impl Target {
    pub fn from_config(c: &Config) -> Target {
        let role = serde_json::to_value(c.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "unknown".into());
        Target {
            settings: c.metrics.clone(),
            state_dir: c.paths.state_dir.clone(),
            journal: c.paths.state_journal(),
            kubelet_env: c.paths.kubelet_env.clone(),
            role,
        }
    }

    /// Where a command publishes: its config's places, or, when the file
    /// at `path` did not load, [`Target::from_unloadable_config`].
    pub fn for_command(config: &Result<Config>, path: &Path) -> Target {
        match config {
            Ok(c) => Target::from_config(c),
            Err(_) => Target::from_unloadable_config(path),
        }
    }

    /// For a command whose config file did not load: the `metrics` section
    /// and the paths it can still read from the file, defaults for the
    /// rest, so a node with a broken config still shows up failing.
    pub fn from_unloadable_config(path: &Path) -> Target {
        let raw: serde_json::Value = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let defaults = Config::defaults();
        let mut t = Target::from_config(&defaults);
        t.role = "unknown".into();
        if let Some(m) = raw
            .get("metrics")
            .and_then(|m| {
                serde_json::from_value::<crate::metrics::config::RawMetrics>(m.clone()).ok()
            })
            .and_then(|m| m.validate().ok())
        {
            t.settings = m;
        }
        let path_of = |key: &str| {
            raw.get("paths")
                .and_then(|p| p.get(key))
                .and_then(|v| v.as_str())
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        if let Some(d) = path_of("state_dir") {
            t.journal = d.join("state.json");
            t.state_dir = d;
        }
        if let Some(k) = path_of("kubelet_env") {
            t.kubelet_env = k;
        }
        t
    }

    /// `<textfile_dir>/node_bootstrap.prom`, when metrics are on.
    pub fn textfile(&self) -> Option<PathBuf> {
        Some(self.settings.textfile_dir.as_ref()?.join(TEXTFILE))
    }
}

/// Publishes what this process recorded so far (see module docs);
/// `durability` is the counters' (the textfile is never synced).
pub fn publish(target: &Target, durability: Durability) -> Result<()> {
    if target.textfile().is_none() {
        return Ok(());
    }
    let deltas = record::take();
    publish_with(target, &deltas, durability).inspect_err(|_| record::restore(deltas))
}

/// [`publish`] with explicit deltas.
pub fn publish_with(target: &Target, deltas: &Deltas, durability: Durability) -> Result<()> {
    let Some(textfile) = target.textfile() else {
        return Ok(());
    };
    let _lock = RunLock::acquire(&target.state_dir.join(LOCK_FILE), LOCK_WAIT)?;
    let state_path = target.state_dir.join(state::FILE);
    let mut st = load_state(&state_path);
    let journal = JournalFile::new(&target.journal).load().ok().flatten();
    st.apply(deltas, journal.as_ref().and_then(state::journal_earliest));
    let mut json = serde_json::to_vec_pretty(&st).expect("metrics state serializes");
    json.push(b'\n');
    fsutil::write_file_with(
        "metrics state",
        &state_path,
        &json,
        fsutil::MODE_PUBLIC,
        durability,
    )?;
    let text = render(&Snapshot {
        version: crate::agent_upgrade::identity::version(),
        role: &target.role,
        state: &st,
        journal: journal.as_ref(),
        kubelet_env_present: target.kubelet_env.exists(),
    });
    let dir = textfile.parent().expect("the textfile is in a directory");
    std::fs::create_dir_all(dir).ctx(ErrorClass::Internal, || {
        format!("failed to create the metrics directory {}", dir.display())
    })?;
    // Derived from the state and the journal: the next publish rewrites
    // it whole, so a power cut may cost it, never the counters.
    fsutil::write_file_with(
        "metrics textfile",
        &textfile,
        text.as_bytes(),
        fsutil::MODE_PUBLIC,
        Durability::AtomicOnly,
    )
}

/// The persisted state; a missing, unreadable or newer one starts afresh
/// (the counters then restart from zero, which Prometheus reads as a reset).
fn load_state(path: &Path) -> MetricsState {
    let text = match fsutil::read_optional(path) {
        Ok(Some(t)) => t,
        Ok(None) => return MetricsState::default(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the metrics state; starting it afresh");
            return MetricsState::default();
        }
    };
    match serde_json::from_str::<MetricsState>(&text) {
        Ok(s) if s.schema <= state::SCHEMA => s,
        Ok(s) => {
            tracing::warn!(path = %path.display(), schema = s.schema, "the metrics state has a newer schema; starting it afresh");
            MetricsState::default()
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "the metrics state is corrupt; starting it afresh");
            MetricsState::default()
        }
    }
}

/// Publishes, logging (never returning) a failure.
pub fn publish_or_warn(target: &Target, durability: Durability) {
    if let Err(e) = publish(target, durability) {
        let path = target.textfile().unwrap_or_default();
        tracing::warn!(path = %path.display(), error = %e, "could not publish metrics");
    }
}

/// While a long command runs: publishes [`Periodic::FIRST`] after it
/// started, then every [`Periodic::EVERY`], from a thread of its own, so
/// a node stuck in a step shows which one. A command that ends sooner
/// (every `run` that changes nothing: milliseconds) never publishes
/// before its end. A first bootstrap does, beside its flow and before
/// kubelet.env's `READY=1`, so these publishes sync nothing
/// ([`Durability::AtomicOnly`]); the command's last publish syncs the
/// counters. Stops (and joins) when dropped.
pub struct Periodic {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Periodic {
    pub const FIRST: Duration = Duration::from_secs(2);
    pub const EVERY: Duration = Duration::from_secs(15);

    pub fn start(target: Target) -> Periodic {
        if target.textfile().is_none() {
            return Periodic {
                stop: None,
                thread: None,
            };
        }
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                let mut wait = Periodic::FIRST;
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(wait) {
                    publish_or_warn(&target, Durability::AtomicOnly);
                    wait = Periodic::EVERY;
                }
            })
            .ok();
        Periodic {
            stop: Some(tx),
            thread,
        }
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::{Command, Finished};
    use std::os::unix::fs::MetadataExt;

    fn target(d: &Path) -> Target {
        let mut c = Config::defaults();
        c.paths.state_dir = d.join("state");
        c.paths.kubelet_env = d.join("kubelet.env");
        c.metrics.textfile_dir = Some(d.join("textfile"));
        Target::from_config(&c)
    }

    fn finished(result: &'static str, code: u8) -> Deltas {
        Deltas {
            finished: Some(Finished {
                command: Command::Run,
                result,
                exit_code: Some(code),
                started_at: 100.0,
                ended_at: 101.0,
                counted: true,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn each_publish_adds_to_the_persisted_counts_and_replaces_the_file_whole() {
        let d = tempfile::tempdir().unwrap();
        let t = target(d.path());
        let mut with_retries = finished("retryable", 3);
        with_retries.retries[0] = 2;
        publish_with(&t, &with_retries, Durability::Durable).unwrap();
        publish_with(&t, &with_retries, Durability::Durable).unwrap();
        let text = std::fs::read_to_string(t.textfile().unwrap()).unwrap();
        assert!(
            text.contains("node_bootstrap_retries_total{cause=\"api_server\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("node_bootstrap_runs_total{command=\"run\",result=\"retryable\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("node_bootstrap_info{version=\""), "{text}");
        assert!(text.contains("role=\"worker\"} 1\n"), "{text}");
        let names: Vec<String> = std::fs::read_dir(d.path().join("textfile"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [TEXTFILE], "no temp file left beside it");
        assert_eq!(
            std::fs::metadata(t.textfile().unwrap()).unwrap().mode() & 0o777,
            0o644,
            "node_exporter runs as its own user"
        );
    }

    #[test]
    fn a_corrupt_state_starts_afresh_and_unset_metrics_write_nothing() {
        let d = tempfile::tempdir().unwrap();
        let t = target(d.path());
        std::fs::create_dir_all(&t.state_dir).unwrap();
        std::fs::write(t.state_dir.join(state::FILE), "{\"retries\": ").unwrap();
        publish_with(&t, &finished("success", 0), Durability::Durable).unwrap();
        let text = std::fs::read_to_string(t.textfile().unwrap()).unwrap();
        assert!(
            text.contains("node_bootstrap_last_exit_code{command=\"run\"} 0\n"),
            "{text}"
        );
        let d = tempfile::tempdir().unwrap();
        let mut t = target(d.path());
        t.settings.textfile_dir = None;
        publish(&t, Durability::Durable).unwrap();
        assert!(!d.path().join("textfile").exists());
        assert!(!t.state_dir.join(state::FILE).exists());
    }

    #[test]
    fn an_unloadable_config_still_names_its_directories() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("config.json");
        std::fs::write(
            &p,
            r#"{"role": "captain", "paths": {"state_dir": "/x/state"}, "metrics": {"textfile_dir": "/x/prom"}}"#,
        )
        .unwrap();
        let t = Target::from_unloadable_config(&p);
        assert_eq!(t.role, "unknown");
        assert_eq!(t.state_dir, PathBuf::from("/x/state"));
        assert_eq!(t.journal, PathBuf::from("/x/state/state.json"));
        assert_eq!(
            t.textfile(),
            Some(PathBuf::from("/x/prom/node_bootstrap.prom"))
        );
        let t = Target::from_unloadable_config(&d.path().join("missing.json"));
        assert_eq!(t.settings, MetricsSettings::default());
    }
}
