//! "What runs now" from a real Docker daemon through its API (bollard):
//! a private `dockerd` on a socket in a temp dir. When docker is up its
//! answer wins over `/run/torcx/profile.json`; a dead socket falls back to
//! the profile quickly.
//!
//! Needs root and `dockerd` (Debian's docker.io, installed by
//! scripts/setup.sh): skipped with a reason outside CI, fails under CI=true.

use node_bootstrap::addon::{self, AddonRequest};
use node_bootstrap::config::Config;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::torcx_fixtures::{AddonRig, docker_archive, runtime_mappings_yaml};

const OS: &str = "1632.3.0";

fn skip(test: &str) -> bool {
    let why = if !nix::unistd::geteuid().is_root() {
        Some("needs root".to_string())
    } else if Command::new("dockerd").arg("--version").output().is_err() {
        Some("dockerd is not installed (scripts/setup.sh installs docker.io)".to_string())
    } else {
        None
    };
    match why {
        None => false,
        Some(w) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: must run in CI but cannot: {w}")
        }
        Some(w) => {
            eprintln!("SKIPPED {test}: {w}");
            true
        }
    }
}

/// A private dockerd, stopped (and its containerd with it) on drop.
struct Dockerd {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Dockerd {
    fn start() -> Dockerd {
        let dir = tempfile::Builder::new()
            .prefix("addon-dockerd-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let socket = dir.path().join("docker.sock");
        let log = std::fs::File::create(dir.path().join("dockerd.log")).unwrap();
        let child = Command::new("dockerd")
            .arg(format!("--host=unix://{}", socket.display()))
            .arg(format!("--data-root={}", dir.path().join("data").display()))
            .arg(format!("--exec-root={}", dir.path().join("exec").display()))
            .arg(format!(
                "--pidfile={}",
                dir.path().join("dockerd.pid").display()
            ))
            .args([
                "--iptables=false",
                "--ip6tables=false",
                "--bridge=none",
                "--storage-driver=vfs",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting dockerd");
        let d = Dockerd {
            child,
            socket,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !d.socket.exists() {
            assert!(
                Instant::now() < deadline,
                "dockerd did not create its socket: {}",
                std::fs::read_to_string(d._dir.path().join("dockerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    /// The daemon's version as `docker version` would report it.
    fn version(&self) -> String {
        let out = Command::new("curl")
            .args(["-s", "--unix-socket"])
            .arg(&self.socket)
            .arg("http://localhost/version")
            .output();
        if let Ok(o) = out
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&o.stdout)
            && let Some(s) = v["Version"].as_str()
        {
            return s.to_string();
        }
        // Without curl: dockerd --version says "Docker version 20.10.24+dfsg1, build …".
        let out = Command::new("dockerd").arg("--version").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches(',')
            .to_string()
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn major_minor(v: &str) -> String {
    let mut it = v.split(['.', '-', '+']);
    format!("{}.{}", it.next().unwrap(), it.next().unwrap())
}

fn config(rig: &AddonRig, socket: &Path) -> Config {
    let mut v: serde_json::Value = serde_json::from_str(&rig.config_json(json!({}))).unwrap();
    v["paths"]["docker_socket"] = json!(socket.display().to_string());
    Config::from_json(&v.to_string(), Path::new("/etc/node-bootstrap/config.json")).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn running_docker_comes_from_the_daemon_when_it_is_up() {
    if skip("running_docker_comes_from_the_daemon_when_it_is_up") {
        return;
    }
    let d = Dockerd::start();
    let daemon = d.version();
    let mm = major_minor(&daemon);
    let rig = AddonRig::new(OS);
    rig.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        runtime_mappings_yaml("1.9", &[&mm, "1.12"]),
    );
    let e = rig.publish_package(&mm, &docker_archive(&daemon));
    rig.publish_manifest(OS, &[e]);
    // torcx's record says otherwise; the live daemon is the truth.
    rig.set_running_docker("1.12");

    let t0 = Instant::now();
    let out = addon::ensure(
        &config(&rig, &d.socket),
        &AddonRequest {
            cluster_version: "v1.9.6+coreos.0".into(),
            next_os_version: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(out.docker_running.as_deref(), Some(daemon.as_str()));
    assert_eq!(out.docker_running_source.as_deref(), Some("docker-api"));
    assert_eq!(out.docker_next, mm);
    assert!(
        !out.reboot_needed,
        "the daemon already runs {daemon}: {out:?}"
    );
    eprintln!("ensure with a live daemon took {:?}", t0.elapsed());
}

#[tokio::test]
async fn a_dead_docker_socket_falls_back_to_torcx_quickly() {
    if skip("a_dead_docker_socket_falls_back_to_torcx_quickly") {
        return;
    }
    let rig = AddonRig::new(OS);
    let e = rig.publish_package("17.03", &docker_archive("17.03"));
    rig.publish_manifest(OS, &[e]);
    rig.set_running_docker("1.12");
    // A socket file nobody listens on (docker stopped uncleanly).
    let sock = rig.path("/run/dead-docker.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    drop(l);
    let t0 = Instant::now();
    let out = addon::ensure(
        &config(&rig, &sock),
        &AddonRequest {
            cluster_version: "v1.9.6+coreos.0".into(),
            next_os_version: None,
        },
    )
    .await
    .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(out.docker_running.as_deref(), Some("1.12"));
    assert_eq!(
        out.docker_running_source.as_deref(),
        Some("torcx-run-profile")
    );
    assert!(out.reboot_needed);
}
