//! A private containerd for tests on the host: its own root, state dir and
//! socket under a temp dir, from a config the test writes, so nothing
//! touches a containerd of the host or of a simulated node. Dropping it
//! stops the daemon (its whole process group) and removes the dir.
//!
//! Two real containerds ([`Kind`]): Debian's 1.6.20 (`/usr/bin`, CRI
//! plugin built in) and 2.1.4, the one today's Flatcar ships, with crictl
//! and critest 1.32, built from their sources by
//! `scripts/build-containerd2.sh` into `$NB_TEST_CACHE/containerd2/bin`
//! ([`v2_bin`]).

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

/// Which real containerd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Debian 12's containerd 1.6.20 (`/usr/bin/containerd`).
    Debian,
    /// containerd 2.1.4 built from its source ([`v2_bin`]).
    V2,
}

impl Kind {
    /// The containerd program.
    pub fn program(self) -> PathBuf {
        match self {
            Kind::Debian => PathBuf::from("containerd"),
            Kind::V2 => v2_bin().join("containerd"),
        }
    }
}

/// Where `scripts/build-containerd2.sh` links containerd 2.1.4's programs
/// (`containerd`, `ctr`, `containerd-shim-runc-v2`) and cri-tools 1.32's
/// (`crictl`, `critest`).
pub fn v2_bin() -> PathBuf {
    let cache = std::env::var_os("NB_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/node-bootstrap-tests"));
    cache.join("containerd2/bin")
}

/// Why containerd 2.1.4 and cri-tools 1.32 cannot run here, if they cannot.
pub fn can_run_v2() -> Result<()> {
    can_run()?;
    for p in [
        "containerd",
        "ctr",
        "containerd-shim-runc-v2",
        "crictl",
        "critest",
    ] {
        let path = v2_bin().join(p);
        if !path.is_file() {
            bail!(
                "{} is missing (scripts/setup.sh builds containerd 2.1.4 and cri-tools 1.32: scripts/build-containerd2.sh)",
                path.display()
            );
        }
    }
    Ok(())
}

/// Skips the running test (returns `true`) unless containerd 2.1.4 and
/// cri-tools 1.32 are built; under `CI=true` it panics instead.
pub fn skip_unless_v2() -> bool {
    crate::skip_unless(can_run_v2(), "containerd 2.1.4 is not built here")
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
        Self::start_as(Kind::Debian, 2, extra)
    }

    /// As [`PrivateContainerd::start`], with containerd `kind` and a config
    /// file of `version` (3 is 2.x's own).
    pub fn start_as(kind: Kind, version: u8, extra: &str) -> Result<PrivateContainerd> {
        if kind == Kind::V2 {
            can_run_v2()?;
        }
        can_run()?;
        // Short path: a unix socket path has a 108-byte limit.
        let dir = tempfile::Builder::new()
            .prefix("nbc-")
            .tempdir_in("/tmp")
            .context("creating the containerd dir")?;
        let d = dir.path();
        let config = format!(
            "version = {version}\nroot = \"{root}\"\nstate = \"{state}\"\n{extra}\n\n[grpc]\n  address = \"{sock}\"\n\n[ttrpc]\n  address = \"{sock}.ttrpc\"\n",
            root = d.join("root").display(),
            state = d.join("state").display(),
            sock = d.join("containerd.sock").display(),
        );
        fs::write(d.join("config.toml"), config)?;
        let log = fs::File::create(d.join("containerd.log"))?;
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![v2_bin()];
        dirs.extend(std::env::split_paths(&path));
        let child = Command::new(kind.program())
            // 2.x's shim first (it starts shims found on PATH).
            .env(
                "PATH",
                if kind == Kind::V2 {
                    std::env::join_paths(dirs)?
                } else {
                    path
                },
            )
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

    /// The config file it was started with.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.toml")
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
    version_of(Kind::Debian)
}

/// What `containerd --version` of `kind` says (its third word).
pub fn version_of(kind: Kind) -> Result<String> {
    let out = Command::new(kind.program()).arg("--version").output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(2)
        .map(str::to_string)
        .with_context(|| format!("containerd --version said {text:?}"))
}
