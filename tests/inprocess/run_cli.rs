//! `node-bootstrap run` / `preflight` as a process, against inputs that are
//! missing or wrong: each gives one clear message and its documented exit
//! code. Paths point into a temp dir; no node or root needed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use testkit::cli::stderr;

struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Host {
        let h = Host {
            dir: tempfile::tempdir().unwrap(),
        };
        h.write("installer/kubelet.env", "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n");
        h.write("os-release", "ID=coreos\nVERSION_ID=1576.4.0\n");
        h
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.p(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn config(&self, role: &str) -> PathBuf {
        let c = serde_json::json!({
            "role": role,
            "paths": {
                "kubelet_env": self.p("kubelet.env"),
                "kubelet_config": self.p("kubelet-config.yaml"),
                "seed_dir": self.p("installer"),
                "kubeconfig": self.p("kubeconfig"),
                "state_dir": self.p("state"),
                "run_dir": self.p("run"),
                "os_release": self.p("os-release"),
            },
            "cluster": {"api_attempts": 1},
        });
        let path = self.p("config.json");
        std::fs::write(&path, serde_json::to_vec(&c).unwrap()).unwrap();
        path
    }

    fn agent(&self, args: &[&str], config: &Path, bus: &str) -> Output {
        testkit::cli::agent_command()
            .args(args)
            .arg("--config")
            .arg(config)
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
            .env("NODE_BOOTSTRAP_LOG_FORMAT", "text")
            .output()
            .unwrap()
    }
}

const NO_BUS: &str = "unix:path=/nonexistent/system_bus_socket";

#[test]
fn no_system_bus_is_retryable_and_says_where_it_looked() {
    let h = Host::new();
    let out = h.agent(&["run"], &h.config("bootkube-master"), NO_BUS);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("preflight check `system bus` failed: cannot connect to the system bus at unix:path=/nonexistent/system_bus_socket"), "{}", stderr(&out));
    assert!(!h.p("kubelet.env").exists());
}

#[test]
fn missing_seed_is_bad_input_naming_the_file() {
    let h = Host::new();
    std::fs::remove_file(h.p("installer/kubelet.env")).unwrap();
    let out = h.agent(&["run"], &h.config("bootkube-master"), NO_BUS);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let expected = format!(
        "preflight check `seed kubelet.env` failed: failed to read seed kubelet.env at {}",
        h.p("installer/kubelet.env").display()
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
}

#[test]
fn bad_kubeconfig_is_bad_input_naming_the_file() {
    let h = Host::new();
    h.write("kubeconfig", "apiVersion: v1\nkind: Config\nclusters: []\n");
    let out = h.agent(&["run"], &h.config("worker"), NO_BUS);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("preflight check `kubeconfig` failed: "),
        "{err}"
    );
    assert!(
        err.contains(&h.p("kubeconfig").display().to_string()),
        "{err}"
    );
}

#[test]
fn missing_kubeconfig_on_a_worker_is_bad_input() {
    let h = Host::new();
    let out = h.agent(&["run"], &h.config("worker"), NO_BUS);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("kubeconfig"), "{}", stderr(&out));
}

#[test]
fn config_error_names_field_and_file_and_exits_4() {
    let h = Host::new();
    let path = h.p("bad.json");
    std::fs::write(
        &path,
        r#"{"os_update": {"enabled": true, "timeout_sec": 10}}"#,
    )
    .unwrap();
    let out = h.agent(&["run"], &path, NO_BUS);
    assert_eq!(out.status.code(), Some(4));
    assert!(
        stderr(&out).contains(&format!(
            "invalid config file {}: field `os_update.timeout_sec`: unknown field `timeout_sec`",
            path.display()
        )),
        "{}",
        stderr(&out)
    );
}

#[test]
fn preflight_lists_every_check_and_fails_with_the_first_failures_code() {
    let h = Host::new();
    let out = h.agent(&["preflight"], &h.config("bootkube-master"), NO_BUS);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for check in [
        "seed kubelet.env",
        "kubeconfig",
        "state dir",
        "disk space",
        "system bus",
    ] {
        assert!(stdout.contains(check), "{check} missing from:\n{stdout}");
    }
    assert!(stdout.contains("FAIL  system bus"), "{stdout}");
    assert!(stdout.contains("ok    seed kubelet.env"), "{stdout}");
    assert_eq!(out.status.code(), Some(3));
    // What it changed, as `--help` says: nothing (the missing state dir
    // is not created; `run` creates it).
    assert!(!h.p("state").exists(), "preflight created the state dir");
    let help = h.agent(&["preflight", "--help"], &h.config("worker"), NO_BUS);
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("writes nothing"),
        "{}",
        String::from_utf8_lossy(&help.stdout)
    );
}

#[test]
fn an_existing_kubelet_env_makes_run_a_no_op() {
    let h = Host::new();
    h.write("kubelet.env", "KUBELET_IMAGE_TAG=\"x\"\n");
    let out = h.agent(&["run"], &h.config("worker"), NO_BUS);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(h.p("kubelet.env")).unwrap(),
        "KUBELET_IMAGE_TAG=\"x\"\n"
    );
}

#[test]
fn a_second_run_waits_for_the_lock_then_refuses() {
    let h = Host::new();
    let config = h.config("worker");
    std::fs::create_dir_all(h.p("state")).unwrap();
    // Hold the lock as a running `run` would.
    let holder = Command::new("flock")
        .arg(h.p("state/run.lock"))
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let t0 = std::time::Instant::now();
    let out = h.agent(&["run"], &config, NO_BUS);
    let waited = t0.elapsed();
    let mut holder = holder;
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("another node-bootstrap holds"),
        "{}",
        stderr(&out)
    );
    assert!(
        waited >= std::time::Duration::from_secs(9),
        "it must wait before refusing ({waited:?})"
    );
}
