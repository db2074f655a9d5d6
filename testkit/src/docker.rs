//! A private Docker engine for tests: its own `dockerd` with its own socket,
//! data root, exec root and pidfile under a temp dir, no iptables, no
//! bridge, vfs storage, so several test runs coexist and nothing touches the
//! host's Docker. Images come from `docker import` of a tiny rootfs made of
//! `/bin/busybox` (Debian's busybox-static), since there is no registry.
//!
//! Dropping a [`PrivateDockerd`] stops the daemon (and its containerd and
//! containers: the whole process group), unmounts what it mounted under its
//! dir and removes the dir.

use anyhow::{Context, Result, anyhow, bail};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BUSYBOX: &str = "/bin/busybox";

pub struct PrivateDockerd {
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// A running dockerd loads the host: the fleet's timing waits for it
    /// to be gone (see `crate::hostload`). Dropped after the daemon.
    _load: crate::hostload::Guard,
}

/// Why a private dockerd cannot run here, if it cannot.
pub fn can_run() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("dockerd needs root");
    }
    for tool in ["dockerd", "docker", "tar"] {
        if which(tool).is_none() {
            bail!("{tool} is not installed (scripts/setup.sh installs docker.io)");
        }
    }
    if !Path::new(BUSYBOX).exists() {
        bail!("{BUSYBOX} is missing (scripts/setup.sh installs busybox-static)");
    }
    Ok(())
}

/// Skips the running test (returns `true`) with a reason when a private
/// dockerd cannot run; under `CI=true` it panics instead (see
/// [`crate::skip_because`]).
pub fn skip_unless_possible() -> bool {
    crate::skip_unless(can_run(), "a private dockerd cannot run here")
}

impl PrivateDockerd {
    /// Starts the daemon and waits (up to 30 s) until it answers `/_ping`.
    pub fn start() -> Result<PrivateDockerd> {
        can_run()?;
        let load = crate::hostload::shared();
        // Short path: containerd's socket lives below it (108-byte limit).
        let dir = tempfile::Builder::new()
            .prefix("nbd-")
            .tempdir_in("/tmp")
            .context("creating the dockerd dir")?;
        let d = dir.path();
        fs::write(d.join("daemon.json"), "{}")?;
        let log = fs::File::create(d.join("dockerd.log"))?;
        let child = Command::new("dockerd")
            .arg("--config-file")
            .arg(d.join("daemon.json"))
            .arg("-H")
            .arg(format!("unix://{}", d.join("docker.sock").display()))
            .arg("--data-root")
            .arg(d.join("data"))
            .arg("--exec-root")
            .arg(d.join("exec"))
            .arg("--pidfile")
            .arg(d.join("docker.pid"))
            .args([
                "--iptables=false",
                "--ip-masq=false",
                "--bridge=none",
                "--storage-driver=vfs",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .context("spawning dockerd")?;
        let mut me = PrivateDockerd {
            dir,
            child: Some(child),
            _load: load,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if me.ping().is_ok() {
                return Ok(me);
            }
            if let Some(st) = me.child.as_mut().unwrap().try_wait()? {
                me.child = None;
                bail!("dockerd exited at start ({st}): {}", me.log());
            }
            if Instant::now() > deadline {
                bail!("dockerd did not answer within 30s: {}", me.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("docker.sock")
    }

    /// A scratch dir of this daemon's own (removed with it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("dockerd.log")).unwrap_or_default()
    }

    /// `GET /_ping` over the socket.
    pub fn ping(&self) -> Result<()> {
        let (status, body) = self.http("GET", "/_ping")?;
        if status == 200 && body.trim() == "OK" {
            Ok(())
        } else {
            bail!("/_ping answered {status}: {body}")
        }
    }

    /// A raw HTTP/1.0 request to the API; returns status and body.
    pub fn http(&self, method: &str, path: &str) -> Result<(u16, String)> {
        let mut s = UnixStream::connect(self.socket())?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(s, "{method} {path} HTTP/1.0\r\nHost: docker\r\n\r\n")?;
        let mut resp = String::new();
        s.read_to_string(&mut resp)?;
        let (head, body) = resp
            .split_once("\r\n\r\n")
            .ok_or_else(|| anyhow!("malformed HTTP response: {resp}"))?;
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| anyhow!("no status in {head}"))?;
        Ok((status, body.to_string()))
    }

    /// Runs the docker CLI against this daemon.
    pub fn docker(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("docker")
            .arg("-H")
            .arg(format!("unix://{}", self.socket().display()))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("running docker")?;
        if !out.status.success() {
            bail!(
                "docker {args:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Imports an image named `name` whose rootfs is busybox (with `sh` and
    /// the usual applets linked) plus `files` (path in the image, content,
    /// mode). E.g. a `/bootkube` script to use as the entrypoint.
    pub fn import_busybox_image(&self, name: &str, files: &[(&str, &str, u32)]) -> Result<()> {
        let root = tempfile::tempdir_in(self.dir.path())?;
        let r = root.path();
        fs::create_dir_all(r.join("bin"))?;
        fs::copy(BUSYBOX, r.join("bin/busybox"))?;
        for applet in [
            "sh", "echo", "cat", "ls", "sleep", "test", "[", "printf", "env", "true", "false",
        ] {
            std::os::unix::fs::symlink("busybox", r.join("bin").join(applet))?;
        }
        for d in ["tmp", "etc", "proc", "sys", "dev"] {
            fs::create_dir_all(r.join(d))?;
        }
        for (path, content, mode) in files {
            let p = r.join(path.trim_start_matches('/'));
            fs::create_dir_all(p.parent().unwrap())?;
            fs::write(&p, content)?;
            fs::set_permissions(&p, fs::Permissions::from_mode(*mode))?;
        }
        let tarball = self
            .dir
            .path()
            .join(format!("{}.tar", name.replace(['/', ':'], "_")));
        let st = Command::new("tar")
            .arg("-C")
            .arg(r)
            .arg("-cf")
            .arg(&tarball)
            .arg(".")
            .status()?;
        if !st.success() {
            bail!("tar of the rootfs failed: {st}");
        }
        self.docker(&["import", &tarball.to_string_lossy(), name])?;
        Ok(())
    }

    /// Names of all containers (running or not).
    pub fn containers(&self) -> Result<Vec<String>> {
        Ok(self
            .docker(&["ps", "-a", "--format", "{{.Names}}"])?
            .lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect())
    }

    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
        // containerd-shims left in the group.
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::SIGKILL);
        unmount_below(self.dir.path());
    }
}

impl Drop for PrivateDockerd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Lazily unmounts every mount point below `dir`, deepest first.
fn unmount_below(dir: &Path) {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = dir.to_string_lossy().into_owned();
    let mut points: Vec<String> = info
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|p| p.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = nix::mount::umount2(p.as_str(), nix::mount::MntFlags::MNT_DETACH);
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.exists())
    })
}
