//! A private containerd for tests on the host: its own root, state dir and
//! socket under a temp dir, from a config the test writes (Debian's
//! containerd, CRI plugin built in), so nothing touches a containerd of
//! the host or of a simulated node. Dropping it stops the daemon (its
//! whole process group) and removes the dir.

use anyhow::{Context, Result, bail};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PrivateContainerd {
    dir: tempfile::TempDir,
    child: Option<Child>,
}

/// Why a private containerd cannot run here, if it cannot.
pub fn can_run() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("containerd needs root");
    }
    if !std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("containerd").is_file())
    {
        bail!("containerd is not installed (scripts/setup.sh installs Debian's containerd)");
    }
    Ok(())
}

/// Skips the running test (returns `true`) when a private containerd
/// cannot run; under `CI=true` it panics instead.
pub fn skip_unless_possible() -> bool {
    crate::skip_unless(can_run(), "a private containerd cannot run here")
}

impl PrivateContainerd {
    /// Starts containerd with `extra` (top-level keys first, then any tables)
    /// inside a config that gives it
    /// its own root, state and socket; waits (up to 30 s) until it accepts on its socket.
    pub fn start(extra: &str) -> Result<PrivateContainerd> {
        can_run()?;
        // Short path: a unix socket path has a 108-byte limit.
        let dir = tempfile::Builder::new()
            .prefix("nbc-")
            .tempdir_in("/tmp")
            .context("creating the containerd dir")?;
        let d = dir.path();
        let config = format!(
            "version = 2\nroot = \"{root}\"\nstate = \"{state}\"\n{extra}\n\n[grpc]\n  address = \"{sock}\"\n\n[ttrpc]\n  address = \"{sock}.ttrpc\"\n",
            root = d.join("root").display(),
            state = d.join("state").display(),
            sock = d.join("containerd.sock").display(),
        );
        fs::write(d.join("config.toml"), config)?;
        let log = fs::File::create(d.join("containerd.log"))?;
        let child = Command::new("containerd")
            .arg("--config")
            .arg(d.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .context("spawning containerd")?;
        let mut me = PrivateContainerd {
            dir,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        // The socket file appears before containerd accepts on it.
        while std::os::unix::net::UnixStream::connect(me.socket()).is_err() {
            if let Some(st) = me.child.as_mut().unwrap().try_wait()? {
                me.child = None;
                bail!("containerd exited at start ({st}): {}", me.log());
            }
            if Instant::now() > deadline {
                bail!(
                    "containerd did not accept on its socket within 30s: {}",
                    me.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(me)
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("containerd.sock")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }
}

impl Drop for PrivateContainerd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
        }
    }
}

/// What `containerd --version` says: `containerd <pkg> <version> <rev>`,
/// e.g. `containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3`.
pub fn version() -> Result<String> {
    let out = Command::new("containerd").arg("--version").output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(2)
        .map(str::to_string)
        .with_context(|| format!("containerd --version said {text:?}"))
}
