//! `status` probes against real servers started by the test: update_engine's
//! `GetStatus` served on a private dbus-daemon (the stand-in follows
//! docs/formats.md §7 exactly), and Docker's version from a private dockerd.

use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The update_engine stand-in: owns `com.coreos.update1` and answers
/// `com.coreos.update1.Manager.GetStatus` on `/com/coreos/update1` with
/// `(x last_checked_time, d progress, s current_operation, s new_version,
/// x new_size)`. Built from raw messages (the crate's zbus has no
/// server-side feature).
async fn serve_update_engine(
    address: &str,
    operation: &'static str,
    progress: f64,
    new_version: &'static str,
) -> zbus::Connection {
    use futures_util::StreamExt;
    let conn = zbus::connection::Builder::address(address)
        .build()
        .await
        .unwrap();
    conn.request_name("com.coreos.update1").await.unwrap();
    let server = conn.clone();
    tokio::spawn(async move {
        let mut stream = zbus::MessageStream::from(&server);
        while let Some(Ok(msg)) = stream.next().await {
            let h = msg.header();
            if h.message_type() == zbus::message::Type::MethodCall
                && h.path()
                    .is_some_and(|p| p.as_str() == "/com/coreos/update1")
                && h.interface()
                    .is_some_and(|i| i.as_str() == "com.coreos.update1.Manager")
                && h.member().is_some_and(|m| m.as_str() == "GetStatus")
            {
                let body: (i64, f64, &str, &str, i64) =
                    (1_700_000_000, progress, operation, new_version, 312_000_000);
                let _ = server.reply(&h, &body).await;
            }
        }
    });
    conn
}

/// A private bus daemon; killed on drop.
struct Bus {
    child: std::process::Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Bus {
    fn start() -> Option<Bus> {
        let dbus = Path::new("/usr/bin/dbus-daemon");
        if testkit::skip_without(&["/usr/bin/dbus-daemon"]) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let address = format!("unix:path={}", dir.path().join("bus").display());
        let child = std::process::Command::new(dbus)
            .args(["--session", "--nofork", "--nopidfile"])
            .arg(format!("--address={address}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let sock = dir.path().join("bus");
        for _ in 0..100 {
            if sock.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(sock.exists(), "dbus-daemon did not create its socket");
        Some(Bus {
            child,
            address,
            _dir: dir,
        })
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dir: &Path, docker_socket: &Path) -> std::path::PathBuf {
    let p = dir.join("config.json");
    let cfg = serde_json::json!({
        "paths": {
            "state_dir": dir.join("state"),
            "run_dir": dir.join("run"),
            "assets_dir": dir.join("assets"),
            "kubelet_env": dir.join("kubelet.env"),
            "kubelet_config": dir.join("kubelet-config.yaml"),
            "torcx_config_dir": dir.join("torcx"),
            "docker_socket": docker_socket,
        }
    });
    std::fs::write(&p, cfg.to_string()).unwrap();
    p
}

async fn status_json(config: &Path, bus: &str) -> (i32, Value) {
    let mut c = testkit::cli::agent_command();
    c.args(["status", "--json"])
        .env("NODE_BOOTSTRAP_CONFIG", config)
        .env("DBUS_SYSTEM_BUS_ADDRESS", bus);
    let out = tokio::process::Command::from(c).output().await.unwrap();
    (out.status.code().unwrap(), testkit::cli::json_stdout(&out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_engine_progress_is_read_and_said_in_words() {
    let Some(bus) = Bus::start() else { return };
    let _server =
        serve_update_engine(&bus.address, "UPDATE_STATUS_DOWNLOADING", 0.42, "1576.4.0").await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &dir.path().join("no-docker.sock"));
    // The flow is in its os-update step (this boot).
    std::fs::create_dir_all(dir.path().join("run")).unwrap();
    std::fs::write(dir.path().join("run/boot-id"), "b1\n").unwrap();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    std::fs::write(
        dir.path().join("state/state.json"),
        serde_json::json!({"schema": 1, "steps": {"os-update": {
            "status": "running", "boot_id": "b1", "started_at": "2024-01-01T00:00:00Z",
            "ended_at": null, "attempts": 1}}, "history": []})
        .to_string(),
    )
    .unwrap();

    let (code, v) = status_json(&cfg, &bus.address).await;
    // This bus has no systemd: units unreadable, the journal says in progress.
    assert_eq!(code, 10, "{v}");
    assert!(v["units"].is_null());
    assert_eq!(
        v["update_engine"]["current_operation"],
        "UPDATE_STATUS_DOWNLOADING"
    );
    assert_eq!(v["update_engine"]["progress"], 0.42);
    assert_eq!(v["update_engine"]["new_version"], "1576.4.0");
    assert_eq!(v["update_engine"]["new_size"], 312_000_000);
    let waits: Vec<&str> = v["waiting_for"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        waits.contains(&"update_engine downloading 42% of 1576.4.0"),
        "{waits:?}"
    );
    let systemd_err = v["unreachable"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["source"] == "systemd")
        .unwrap()["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        systemd_err.contains("org.freedesktop.systemd1"),
        "{systemd_err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_engine_absent_from_the_bus_is_reported_not_fatal() {
    let Some(bus) = Bus::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &dir.path().join("no-docker.sock"));
    let (_, v) = status_json(&cfg, &bus.address).await;
    assert!(v["update_engine"].is_null());
    let ue = v["unreachable"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["source"] == "update-engine")
        .expect("update-engine listed as unreachable");
    assert!(
        ue["error"].as_str().unwrap().contains("com.coreos.update1"),
        "{ue}"
    );
}

#[test]
fn docker_version_comes_from_the_running_engine() {
    if testkit::docker::skip_unless_possible() {
        return;
    }
    let d = testkit::docker::PrivateDockerd::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &d.socket());
    let out = testkit::cli::agent_command()
        .args(["status", "--json"])
        .env("NODE_BOOTSTRAP_CONFIG", &cfg)
        .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (_, body) = d.http("GET", "/version").unwrap();
    let real: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["docker"]["version"], real["Version"], "{v}");
    assert_eq!(v["docker"]["api_version"], real["ApiVersion"]);
    let text = testkit::cli::agent_command()
        .arg("status")
        .env("NODE_BOOTSTRAP_CONFIG", &cfg)
        .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "docker: {} (API {})",
            real["Version"].as_str().unwrap(),
            real["ApiVersion"].as_str().unwrap()
        )),
        "{text}"
    );
}
