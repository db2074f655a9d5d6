//! A stand-in for update_engine: serves `com.coreos.update1` at
//! `/com/coreos/update1`, interface `com.coreos.update1.Manager`, exactly as
//! docs/formats.md §7 describes the real one (Flatcar
//! `update_attempter.cc`):
//!
//! - `AttemptUpdate()` does nothing unless the status is IDLE; otherwise the
//!   status is CHECKING_FOR_UPDATE (with its signal) before the call returns,
//!   and the rest of the scripted sequence follows, one step every `step_ms`.
//! - `GetStatus() -> (x last_checked_time, d progress, s current_operation,
//!   s new_version, x new_size)`; signal `StatusUpdate` with the same values.
//! - A successful check sets `last_checked_time`; an error goes through
//!   REPORTING_ERROR_EVENT to IDLE and resets `new_version` to "0.0.0".
//! - `ResetStatus()`: IDLE stays IDLE, UPDATED_NEED_REBOOT goes to IDLE
//!   (removing the reboot marker), any other state is an error.
//!
//! Scenarios ([`Scenario`], one per AttemptUpdate, the last repeating):
//! `no-update` (CHECKING -> IDLE), `update` (CHECKING -> UPDATE_AVAILABLE ->
//! DOWNLOADING 0..100% -> VERIFYING -> FINALIZING -> UPDATED_NEED_REBOOT),
//! `error` (... DOWNLOADING -> REPORTING_ERROR_EVENT -> IDLE), `check-error`
//! (CHECKING -> REPORTING_ERROR_EVENT -> IDLE, check time unchanged), `hang`
//! (stays DOWNLOADING at 10% forever), `drop-signals` (the `update` sequence
//! without a single signal). `startup` runs a scenario at start-up, as
//! update_engine's own periodic check would, so a client finds it busy.
//!
//! Reboot simulation: on UPDATED_NEED_REBOOT the stand-in writes the new
//! version to `<state_dir>/pending` and a marker `<run_dir>/need-reboot`
//! (like the real `/var/run/update_engine_autoupdate_completed`; `/run` is a
//! fresh tmpfs on each boot of a simulated node). At start-up:
//! - marker present (restarted within the same boot): status
//!   UPDATED_NEED_REBOOT with `new_version` "0.0.0", as the real daemon;
//! - marker absent, `pending` present and `--apply-pending-os-release PATH`
//!   given (the node rebooted): `VERSION_ID=` (and `VERSION=`) in PATH are
//!   rewritten to the pending version (the A/B switch), `pending` is
//!   removed, status IDLE.
//!
//! The binary `fake-update-engine` (testkit/src/bin) runs [`FakeUpdateEngine`]
//! on the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, or `--address`) until
//! SIGTERM/SIGINT. Options (all optional; a `--script` JSON file holds the
//! same fields as [`Script`], and flags given after it override it):
//!
//! ```text
//! --scenario S[,S...]   scenarios for successive AttemptUpdate calls (default no-update)
//! --startup S           run S at start-up
//! --step-ms N           delay between status changes (default 200)
//! --new-version V       version offered (default 9999.0.0)
//! --new-size N          payload size (default 123456789)
//! --no-signals          never emit StatusUpdate
//! --state-dir DIR       default /var/lib/fake-update-engine
//! --run-dir DIR         default /run/fake-update-engine
//! --apply-pending-os-release PATH
//! --os-release PATH     the booted OS (an update to its VERSION_ID is not offered)
//! --script FILE.json
//! --address ADDR        D-Bus address instead of the system bus
//! ```
//!
//! The system bus needs a policy that lets root own the name:
//! `testkit/standins/com.coreos.update1.conf` (install it as
//! `/etc/dbus-1/system.d/com.coreos.update1.conf`). [`PrivateBus`] starts a
//! private `dbus-daemon` with the system bus's default policy plus that file.

use anyhow::{Context as _, Result, bail};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zbus::object_server::SignalEmitter;

/// Where the stand-in keeps what survives a reboot (`--state-dir`).
pub const DEFAULT_STATE_DIR: &str = "/var/lib/fake-update-engine";

pub const BUS_NAME: &str = "com.coreos.update1";
pub const OBJECT_PATH: &str = "/com/coreos/update1";
pub const INTERFACE: &str = "com.coreos.update1.Manager";

const IDLE: &str = "UPDATE_STATUS_IDLE";
const CHECKING: &str = "UPDATE_STATUS_CHECKING_FOR_UPDATE";
const AVAILABLE: &str = "UPDATE_STATUS_UPDATE_AVAILABLE";
const DOWNLOADING: &str = "UPDATE_STATUS_DOWNLOADING";
const VERIFYING: &str = "UPDATE_STATUS_VERIFYING";
const FINALIZING: &str = "UPDATE_STATUS_FINALIZING";
const NEED_REBOOT: &str = "UPDATE_STATUS_UPDATED_NEED_REBOOT";
const REPORTING_ERROR: &str = "UPDATE_STATUS_REPORTING_ERROR_EVENT";
const VERSION_ZERO: &str = "0.0.0";

/// What one update attempt does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    NoUpdate,
    Update,
    Error,
    CheckError,
    Hang,
    DropSignals,
}

impl FromStr for Scenario {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "no-update" => Scenario::NoUpdate,
            "update" => Scenario::Update,
            "error" => Scenario::Error,
            "check-error" => Scenario::CheckError,
            "hang" => Scenario::Hang,
            "drop-signals" => Scenario::DropSignals,
            _ => bail!(
                "unknown scenario {s:?} (no-update, update, error, check-error, hang, drop-signals)"
            ),
        })
    }
}

/// The stand-in's behaviour (also the `--script` JSON format).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Script {
    /// Scenario of each AttemptUpdate in turn; the last one repeats.
    pub attempts: Vec<Scenario>,
    /// Scenario started at start-up (update_engine's own check).
    pub startup: Option<Scenario>,
    pub step_ms: u64,
    pub new_version: String,
    pub new_size: i64,
    /// `false`: never emit StatusUpdate.
    pub emit_signals: bool,
    pub state_dir: PathBuf,
    pub run_dir: PathBuf,
    pub apply_pending_os_release: Option<PathBuf>,
    /// The booted OS's os-release: an update whose `new_version` is the
    /// running `VERSION_ID` already is not offered (the attempt finds
    /// nothing, as the update server answers a client that is current).
    pub os_release: Option<PathBuf>,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            attempts: vec![Scenario::NoUpdate],
            startup: None,
            step_ms: 200,
            new_version: "9999.0.0".into(),
            new_size: 123_456_789,
            emit_signals: true,
            state_dir: DEFAULT_STATE_DIR.into(),
            run_dir: "/run/fake-update-engine".into(),
            apply_pending_os_release: None,
            os_release: None,
        }
    }
}

impl Script {
    /// A script with these attempts and a short step, state kept in `dir`.
    pub fn in_dir(dir: &Path, attempts: &[Scenario], step_ms: u64) -> Script {
        Script {
            attempts: attempts.to_vec(),
            step_ms,
            state_dir: dir.join("state"),
            run_dir: dir.join("run"),
            ..Script::default()
        }
    }
}

/// The engine's state, as GetStatus reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineStatus {
    pub last_checked_time: i64,
    pub progress: f64,
    pub current_operation: String,
    pub new_version: String,
    pub new_size: i64,
}

impl EngineStatus {
    fn wire(&self) -> (i64, f64, String, String, i64) {
        (
            self.last_checked_time,
            self.progress,
            self.current_operation.clone(),
            self.new_version.clone(),
            self.new_size,
        )
    }
}

/// How often each method was called.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calls {
    pub attempt_update: usize,
    /// AttemptUpdate calls that started an attempt (status was IDLE).
    pub attempts_started: usize,
    pub get_status: usize,
    pub reset_status: usize,
    pub signals_emitted: usize,
}

struct Shared {
    script: Script,
    status: Mutex<EngineStatus>,
    calls: Mutex<Calls>,
    conn: Mutex<Option<zbus::Connection>>,
    runner: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

struct Manager {
    shared: Arc<Shared>,
}

#[zbus::interface(name = "com.coreos.update1.Manager")]
impl Manager {
    async fn attempt_update(&self, #[zbus(signal_emitter)] emitter: SignalEmitter<'_>) {
        let shared = &self.shared;
        let scenario = {
            let mut calls = shared.calls.lock().unwrap();
            calls.attempt_update += 1;
            let st = shared.status.lock().unwrap();
            if st.current_operation != IDLE {
                eprintln!(
                    "fake-update-engine: AttemptUpdate ignored: status is {}",
                    st.current_operation
                );
                return;
            }
            let n = calls.attempts_started;
            calls.attempts_started += 1;
            let a = &shared.script.attempts;
            let scenario = a.get(n).or(a.last()).copied().unwrap_or(Scenario::NoUpdate);
            if matches!(scenario, Scenario::Update | Scenario::DropSignals)
                && running_version(&shared.script).as_deref()
                    == Some(shared.script.new_version.as_str())
            {
                eprintln!(
                    "fake-update-engine: the node already runs {}: no update",
                    shared.script.new_version
                );
                Scenario::NoUpdate
            } else {
                scenario
            }
        };
        eprintln!("fake-update-engine: AttemptUpdate: running {scenario:?}");
        start_scenario(shared.clone(), scenario, Some(&emitter)).await;
    }

    async fn reset_status(&self) -> zbus::fdo::Result<()> {
        let shared = &self.shared;
        shared.calls.lock().unwrap().reset_status += 1;
        let mut st = shared.status.lock().unwrap();
        match st.current_operation.as_str() {
            IDLE => Ok(()),
            NEED_REBOOT => {
                st.current_operation = IDLE.into();
                st.new_version = VERSION_ZERO.into();
                st.new_size = 0;
                let _ = std::fs::remove_file(shared.script.run_dir.join("need-reboot"));
                Ok(())
            }
            other => Err(zbus::fdo::Error::Failed(format!(
                "Reset not allowed in this state ({other})"
            ))),
        }
    }

    #[zbus(out_args(
        "last_checked_time",
        "progress",
        "current_operation",
        "new_version",
        "new_size"
    ))]
    async fn get_status(&self) -> (i64, f64, String, String, i64) {
        self.shared.calls.lock().unwrap().get_status += 1;
        self.shared.status.lock().unwrap().wire()
    }

    #[zbus(signal)]
    async fn status_update(
        emitter: &SignalEmitter<'_>,
        last_checked_time: i64,
        progress: f64,
        current_operation: &str,
        new_version: &str,
        new_size: i64,
    ) -> zbus::Result<()>;
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// One change of state within a scenario.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Set the status (and progress).
    To(&'static str, f64),
    /// The check succeeded and found an update: check time, version, size.
    Found,
    /// The check succeeded and found nothing: check time, IDLE.
    NothingFound,
    /// Error path: REPORTING_ERROR_EVENT with version and size reset.
    Error,
}

fn steps(s: Scenario) -> Vec<Step> {
    use Step::*;
    match s {
        Scenario::NoUpdate => vec![NothingFound],
        Scenario::Update | Scenario::DropSignals => vec![
            Found,
            To(DOWNLOADING, 0.0),
            To(DOWNLOADING, 0.25),
            To(DOWNLOADING, 0.5),
            To(DOWNLOADING, 0.75),
            To(DOWNLOADING, 1.0),
            To(VERIFYING, 0.0),
            To(FINALIZING, 0.0),
            To(NEED_REBOOT, 0.0),
        ],
        Scenario::Error => vec![
            Found,
            To(DOWNLOADING, 0.0),
            To(DOWNLOADING, 0.3),
            Error,
            To(IDLE, 0.0),
        ],
        Scenario::CheckError => vec![Error, To(IDLE, 0.0)],
        Scenario::Hang => vec![Found, To(DOWNLOADING, 0.1)],
    }
}

/// Sets CHECKING (and signals it) now, then runs the rest in a task.
async fn start_scenario(
    shared: Arc<Shared>,
    scenario: Scenario,
    emitter: Option<&SignalEmitter<'_>>,
) {
    let signals = shared.script.emit_signals && scenario != Scenario::DropSignals;
    {
        let mut st = shared.status.lock().unwrap();
        st.current_operation = CHECKING.into();
        st.progress = 0.0;
    }
    if signals {
        if let Some(e) = emitter {
            emit(&shared, e).await;
        } else {
            let conn = shared.conn.lock().unwrap().clone();
            if let Some(e) = conn.and_then(|c| {
                SignalEmitter::new(&c, OBJECT_PATH)
                    .ok()
                    .map(|e| e.into_owned())
            }) {
                emit(&shared, &e).await;
            }
        }
    }
    let s2 = shared.clone();
    let task = tokio::spawn(async move {
        let conn = s2.conn.lock().unwrap().clone();
        let emitter = conn
            .as_ref()
            .and_then(|c| SignalEmitter::new(c, OBJECT_PATH).ok());
        for step in steps(scenario) {
            tokio::time::sleep(Duration::from_millis(s2.script.step_ms)).await;
            apply(&s2, step);
            if signals && let Some(e) = &emitter {
                emit(&s2, e).await;
            }
        }
    });
    if let Some(old) = shared.runner.lock().unwrap().replace(task) {
        old.abort();
    }
}

fn apply(shared: &Shared, step: Step) {
    let script = &shared.script;
    let mut st = shared.status.lock().unwrap();
    match step {
        Step::Found => {
            st.last_checked_time = now_unix();
            st.current_operation = AVAILABLE.into();
            st.progress = 0.0;
            st.new_version = script.new_version.clone();
            st.new_size = script.new_size;
        }
        Step::NothingFound => {
            st.last_checked_time = now_unix();
            st.current_operation = IDLE.into();
        }
        Step::Error => {
            st.current_operation = REPORTING_ERROR.into();
            st.progress = 0.0;
            st.new_version = VERSION_ZERO.into();
            st.new_size = 0;
        }
        Step::To(op, progress) => {
            st.current_operation = op.into();
            st.progress = progress;
            if op == NEED_REBOOT
                && let Err(e) = record_pending(script, &st.new_version)
            {
                eprintln!("fake-update-engine: recording the pending update failed: {e:#}");
            }
        }
    }
    eprintln!(
        "fake-update-engine: status {} progress {:.2} version {}",
        st.current_operation, st.progress, st.new_version
    );
}

async fn emit(shared: &Shared, e: &SignalEmitter<'_>) {
    let w = shared.status.lock().unwrap().wire();
    match Manager::status_update(e, w.0, w.1, &w.2, &w.3, w.4).await {
        Ok(()) => shared.calls.lock().unwrap().signals_emitted += 1,
        Err(err) => eprintln!("fake-update-engine: emitting StatusUpdate failed: {err}"),
    }
}

/// `VERSION_ID` of [`Script::os_release`], if given and readable.
fn running_version(script: &Script) -> Option<String> {
    let text = std::fs::read_to_string(script.os_release.as_ref()?).ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix("VERSION_ID=")
            .map(|v| v.trim_matches(['"', '\'']).to_string())
    })
}

/// Replaces `path` durably (file and directory fsynced): the real
/// update_engine's record of an installed update survives a power cut.
fn write_atomic(path: &Path, data: &str) -> Result<()> {
    let dir = path.parent().context("path has no parent")?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("x")
    ));
    std::fs::write(&tmp, data)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

fn record_pending(script: &Script, version: &str) -> Result<()> {
    write_atomic(&script.state_dir.join("pending"), &format!("{version}\n"))?;
    write_atomic(&script.run_dir.join("need-reboot"), "")?;
    Ok(())
}

/// Rewrites `VERSION_ID=` (and `VERSION=`, and the old version in
/// `PRETTY_NAME=`, which kubelets report as the Node's OS image) of an
/// os-release file.
pub fn set_os_release_version(path: &Path, version: &str) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let old = text
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_ID="))
        .map(|v| v.trim_matches('"').to_string())
        .filter(|v| !v.is_empty());
    let mut found = false;
    let mut out: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("VERSION_ID=") {
                found = true;
                format!("VERSION_ID={version}")
            } else if l.starts_with("VERSION=") {
                format!("VERSION={version}")
            } else if let (Some(old), true) = (&old, l.starts_with("PRETTY_NAME=")) {
                l.replace(old.as_str(), version)
            } else {
                l.to_string()
            }
        })
        .collect();
    if !found {
        out.push(format!("VERSION_ID={version}"));
    }
    write_atomic(path, &(out.join("\n") + "\n"))
}

/// What a machine does at the next boot after update_engine staged an
/// update (the bootloader picks the updated partition): with a `pending`
/// version in `state_dir`, `os_release` is switched to it and `pending`
/// removed. Returns the version booted into, if any.
pub fn boot_into_pending_update(state_dir: &Path, os_release: &Path) -> Result<Option<String>> {
    let pending = state_dir.join("pending");
    if !pending.exists() {
        return Ok(None);
    }
    let v = std::fs::read_to_string(&pending)?.trim().to_string();
    set_os_release_version(os_release, &v)?;
    std::fs::remove_file(&pending)?;
    Ok(Some(v))
}

/// Makes a simulated node boot into the update the stand-in staged, before
/// its systemd starts, as a real machine does: every program of that boot,
/// torcx's generator first, sees the new `os_release` (a path inside the
/// node). The stand-in must keep its default `--state-dir`.
pub fn boot_into_pending_updates(n: &mut crate::simnode::SimNode, os_release: &str) {
    let os_release = os_release.to_string();
    n.before_each_boot(move |n| {
        boot_into_pending_update(&n.path(DEFAULT_STATE_DIR), &n.path(&os_release))?;
        Ok(())
    });
}

/// The initial state from the files a previous run or boot left.
fn initial_status(script: &Script) -> Result<EngineStatus> {
    let mut st = EngineStatus {
        last_checked_time: 0,
        progress: 0.0,
        current_operation: IDLE.into(),
        new_version: VERSION_ZERO.into(),
        new_size: 0,
    };
    let marker = script.run_dir.join("need-reboot");
    if marker.exists() {
        st.current_operation = NEED_REBOOT.into();
        eprintln!("fake-update-engine: reboot marker present: UPDATED_NEED_REBOOT");
    } else if let Some(osr) = &script.apply_pending_os_release
        && let Some(v) = boot_into_pending_update(&script.state_dir, osr)?
    {
        eprintln!(
            "fake-update-engine: applied pending update: {} now says VERSION_ID={v}",
            osr.display()
        );
    }
    Ok(st)
}

/// The stand-in, serving on a bus connection until dropped or stopped.
pub struct FakeUpdateEngine {
    conn: zbus::Connection,
    shared: Arc<Shared>,
}

impl FakeUpdateEngine {
    /// Connects to `address` (or the system bus), serves the object and
    /// takes the name.
    pub async fn start(address: Option<&str>, script: Script) -> Result<FakeUpdateEngine> {
        let status = initial_status(&script)?;
        let startup = script.startup;
        let shared = Arc::new(Shared {
            script,
            status: Mutex::new(status),
            calls: Mutex::new(Calls::default()),
            conn: Mutex::new(None),
            runner: Mutex::new(None),
        });
        let builder = match address {
            Some(a) => zbus::connection::Builder::address(a),
            None => zbus::connection::Builder::system(),
        };
        let conn = builder
            .serve_at(
                OBJECT_PATH,
                Manager {
                    shared: shared.clone(),
                },
            )
            .name(BUS_NAME)
            .build()
            .await
            .with_context(|| format!("serving {BUS_NAME} on the bus"))?;
        *shared.conn.lock().unwrap() = Some(conn.clone());
        if let Some(s) = startup
            && shared.status.lock().unwrap().current_operation == IDLE
        {
            eprintln!("fake-update-engine: start-up check: running {s:?}");
            start_scenario(shared.clone(), s, None).await;
        }
        Ok(FakeUpdateEngine { conn, shared })
    }

    pub fn status(&self) -> EngineStatus {
        self.shared.status.lock().unwrap().clone()
    }

    pub fn calls(&self) -> Calls {
        *self.shared.calls.lock().unwrap()
    }

    /// Releases the name and closes the connection.
    pub async fn stop(self) {
        if let Some(t) = self.shared.runner.lock().unwrap().take() {
            t.abort();
        }
        *self.shared.conn.lock().unwrap() = None;
        let conn = self.conn.clone();
        drop(self);
        let _ = conn.release_name(BUS_NAME).await;
        let _ = conn.close().await;
    }
}

impl Drop for FakeUpdateEngine {
    fn drop(&mut self) {
        if let Some(t) = self.shared.runner.lock().unwrap().take() {
            t.abort();
        }
        // Break the cycle connection -> object server -> Manager -> Shared
        // -> connection, so the connection closes once the caller's clones go.
        self.shared.conn.lock().unwrap().take();
    }
}

/// The policy file that lets root own `com.coreos.update1` on a system bus.
pub fn policy_file() -> PathBuf {
    crate::standin("com.coreos.update1.conf")
}

/// A private `dbus-daemon` configured like the system bus (default deny,
/// plus [`policy_file`]), listening on a socket in a temporary directory.
/// Killed when dropped.
pub struct PrivateBus {
    child: std::process::Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl PrivateBus {
    pub fn start() -> Result<PrivateBus> {
        use std::io::BufRead;
        let dir = tempfile::tempdir()?;
        let sock = dir.path().join("system_bus_socket");
        let conf = dir.path().join("bus.conf");
        std::fs::write(&conf, bus_config(&sock, &policy_file()))?;
        let mut child = std::process::Command::new("dbus-daemon")
            .arg(format!("--config-file={}", conf.display()))
            .arg("--nofork")
            .arg("--nopidfile")
            .arg("--print-address=1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .context("starting dbus-daemon (package dbus)")?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("dbus-daemon stdout")?;
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        let address = line.trim().to_string();
        if address.is_empty() {
            let _ = child.kill();
            let status = child.wait()?;
            bail!("dbus-daemon did not start ({status})");
        }
        Ok(PrivateBus {
            child,
            address,
            _dir: dir,
        })
    }

    /// The bus address (`unix:path=…,guid=…`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// A client connection to this bus.
    pub async fn connect(&self) -> Result<zbus::Connection> {
        Ok(zbus::connection::Builder::address(self.address.as_str())
            .build()
            .await?)
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a private bus can be started here (`dbus-daemon` installed, and
/// root: the policy lets only root own the name).
pub fn can_run_bus() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("the com.coreos.update1 policy lets only root own the name; run as root");
    }
    let ok = std::process::Command::new("dbus-daemon")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        bail!("dbus-daemon is not installed (Debian package dbus)");
    }
    Ok(())
}

/// Skips the running test (returns `true`) when no private bus can run
/// here; panics under `CI=true` instead (see [`crate::skip_because`]).
pub fn skip_unless_bus() -> bool {
    crate::skip_unless(can_run_bus(), "a private system bus cannot run here")
}

fn bus_config(sock: &Path, policy: &Path) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <auth>EXTERNAL</auth>
  <listen>unix:path={sock}</listen>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus" send_member="UpdateActivationEnvironment"/>
  </policy>
  <include>{policy}</include>
</busconfig>
"#,
        sock = sock.display(),
        policy = policy.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_names_parse() {
        for (s, v) in [
            ("no-update", Scenario::NoUpdate),
            ("update", Scenario::Update),
            ("error", Scenario::Error),
            ("check-error", Scenario::CheckError),
            ("hang", Scenario::Hang),
            ("drop-signals", Scenario::DropSignals),
        ] {
            assert_eq!(s.parse::<Scenario>().unwrap(), v);
        }
        assert!("reboot".parse::<Scenario>().is_err());
        let s: Script =
            serde_json::from_str(r#"{"attempts":["error","update"],"step_ms":5}"#).unwrap();
        assert_eq!(s.attempts, vec![Scenario::Error, Scenario::Update]);
        assert!(serde_json::from_str::<Script>(r#"{"atempts":[]}"#).is_err());
    }

    #[test]
    fn os_release_version_is_rewritten_in_place() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("os-release");
        std::fs::write(
            &p,
            "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION=1632.3.0\nVERSION_ID=1632.3.0\nBUILD_ID=2018-02-14-0338\nPRETTY_NAME=\"Flatcar Container Linux by Kinvolk 1632.3.0 (Ladybug)\"\n",
        )
        .unwrap();
        set_os_release_version(&p, "1745.7.0").unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION=1745.7.0\nVERSION_ID=1745.7.0\nBUILD_ID=2018-02-14-0338\nPRETTY_NAME=\"Flatcar Container Linux by Kinvolk 1745.7.0 (Ladybug)\"\n"
        );
    }
}
