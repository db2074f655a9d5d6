//! `node-bootstrap status` where systemd cannot be reached (no D-Bus) and
//! the state journal is missing, corrupt or telling: partial reports, the
//! documented exit codes, `--wait` and `--watch`. Runs as any user.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let f = Fixture { dir };
        let config = serde_json::json!({
            "role": "worker",
            "paths": {
                "state_dir": f.p("state"),
                "run_dir": f.p("run"),
                "assets_dir": f.p("assets"),
                "kubelet_env": f.p("kubelet.env"),
                "kubelet_config": f.p("kubelet-config.yaml"),
                "torcx_config_dir": f.p("torcx"),
                "docker_socket": f.p("docker.sock"),
            },
        });
        std::fs::write(f.p("config.json"), config.to_string()).unwrap();
        f
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = testkit::cli::agent_command();
        c.arg("status")
            .args(args)
            .env("NODE_BOOTSTRAP_CONFIG", self.p("config.json"))
            // No system bus: a socket path that does not exist.
            .env(
                "DBUS_SYSTEM_BUS_ADDRESS",
                format!("unix:path={}", self.p("no-bus").display()),
            );
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    fn json(&self) -> (i32, Value) {
        let out = self.run(&["--json"]);
        (out.status.code().unwrap(), testkit::cli::json_stdout(&out))
    }
    fn journal(&self, text: &str) {
        std::fs::create_dir_all(self.p("state")).unwrap();
        std::fs::write(self.p("state/state.json"), text).unwrap();
    }
}

fn sources(v: &Value) -> Vec<String> {
    v["unreachable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["source"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn no_dbus_and_no_journal_is_unknown_with_a_partial_report() {
    let f = Fixture::new();
    std::fs::write(
        f.p("kubelet.env"),
        "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\nBOOTSTRAP_TOKEN=\"abc.def\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(f.p("torcx/profiles")).unwrap();
    std::fs::write(f.p("torcx/next-profile"), "docker-1703\n").unwrap();
    std::fs::write(
        f.p("torcx/profiles/docker-1703.json"),
        r#"{"kind":"profile-manifest-v0","value":{"images":[{"name":"docker","reference":"17.03"}]}}"#,
    )
    .unwrap();
    let (code, v) = f.json();
    assert_eq!(code, 12, "{v}");
    assert_eq!(v["verdict"], "unknown");
    assert_eq!(v["exit_code"], 12);
    assert!(v["units"].is_null());
    assert!(v["phases"].is_null());
    assert_eq!(v["state_journal"]["state"], "missing");
    let s = sources(&v);
    for want in ["systemd", "state-journal", "update-engine", "docker"] {
        assert!(s.iter().any(|x| x == want), "{want} not in {s:?}");
    }
    // What could be read is there; the secret is not.
    assert_eq!(
        v["kubelet_env"]["values"],
        serde_json::json!([
            ["KUBELET_IMAGE_URL", "quay.io/coreos/hyperkube"],
            ["KUBELET_IMAGE_TAG", "v1.9.6_coreos.0"],
            ["BOOTSTRAP_TOKEN", "<redacted>"]
        ])
    );
    assert_eq!(v["torcx"]["next_profile"], "docker-1703");
    assert_eq!(
        v["torcx"]["next_images"],
        serde_json::json!(["docker:17.03"])
    );
    let all = v.to_string();
    assert!(!all.contains("abc.def"), "secret leaked");

    let out = f.run(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(12));
    assert!(
        text.starts_with("node-bootstrap status: UNKNOWN\n"),
        "{text}"
    );
    assert!(
        text.contains("Could not reach:\n  - systemd: cannot connect to the system bus"),
        "{text}"
    );
    assert!(text.contains("  BOOTSTRAP_TOKEN=<redacted>"), "{text}");
    assert!(
        text.contains("torcx: next profile docker-1703 (docker:17.03)"),
        "{text}"
    );
    assert!(!text.contains("abc.def"));
}

#[test]
fn corrupt_journal_without_dbus_is_unknown_and_says_why() {
    let f = Fixture::new();
    f.journal("{\"schema\": 1, \"steps\": {\"assets\": ");
    let (code, v) = f.json();
    assert_eq!(code, 12, "{v}");
    assert_eq!(v["state_journal"]["state"], "corrupt");
    assert!(
        v["state_journal"]["error"]
            .as_str()
            .unwrap()
            .contains("is corrupt"),
        "{v}"
    );
    // A journal from a newer agent: also unreadable, also said.
    f.journal("{\"schema\": 99}");
    let (code, v) = f.json();
    assert_eq!(code, 12);
    assert!(
        v["state_journal"]["error"]
            .as_str()
            .unwrap()
            .contains("schema 99")
    );
}

#[test]
fn missing_config_falls_back_to_defaults_and_says_so() {
    let f = Fixture::new();
    let out = testkit::cli::agent_command()
        .args(["status", "--json"])
        .env("NODE_BOOTSTRAP_CONFIG", f.p("nope.json"))
        .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(sources(&v).contains(&"config".to_string()));
    assert_eq!(v["node"]["role_source"], "default");
    assert!(matches!(out.status.code(), Some(10..=12)), "{v}");
}

fn journal_with(step: &str, class: &str, error: &str) -> String {
    serde_json::json!({
        "schema": 1,
        "steps": {
            "cluster-version": {"status": "done", "boot_id": "b1", "started_at": "2024-01-01T00:00:00Z",
                "ended_at": "2024-01-01T00:00:01Z", "attempts": 1, "result": {"version": "v1.9.6+coreos.0", "source": "seed"}},
            step: {"status": "failed", "boot_id": "b1", "started_at": "2024-01-01T00:00:02Z",
                "ended_at": "2024-01-01T00:00:03Z", "attempts": 3, "error": error, "error_class": class}
        },
        "history": []
    })
    .to_string()
}

#[test]
fn journal_alone_tells_in_progress_from_failed() {
    let f = Fixture::new();
    f.journal(&journal_with(
        "docker-addon",
        "retryable",
        "download timed out",
    ));
    let (code, v) = f.json();
    assert_eq!(code, 10, "{v}");
    assert_eq!(v["verdict"], "in-progress");
    let p = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "docker-addon")
        .unwrap()
        .clone();
    assert_eq!(p["state"], "failed");
    assert_eq!(p["retryable"], true);
    assert_eq!(p["attempts"], 3);

    f.journal(&journal_with(
        "docker-addon",
        "bad-input",
        "runtime mappings have no entry for 1.9",
    ));
    let (code, v) = f.json();
    assert_eq!(code, 11, "{v}");
    assert_eq!(
        v["reasons"][0],
        "step docker-addon failed and a retry cannot help: runtime mappings have no entry for 1.9"
    );
    assert_eq!(
        v["summary"],
        "failed: step docker-addon failed and a retry cannot help: runtime mappings have no entry for 1.9"
    );
}

#[test]
fn wait_times_out_with_the_current_verdict_and_prints_progress() {
    let f = Fixture::new();
    let t0 = Instant::now();
    let out = f.run(&["--wait", "--timeout", "3"]);
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(12));
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "{took:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("s] unknown: could not read systemd"), "{err}");
    assert!(
        err.contains("gave up waiting after 3s; the node is still unknown"),
        "{err}"
    );
}

#[test]
fn wait_returns_as_soon_as_the_node_fails() {
    let f = Fixture::new();
    f.journal(&journal_with(
        "docker-addon",
        "retryable",
        "download timed out",
    ));
    let child = f
        .cmd(&["--wait", "--timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    f.journal(&journal_with(
        "docker-addon",
        "refused",
        "kubelet would be newer than the API server",
    ));
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(11));
    let err = String::from_utf8_lossy(&out.stderr);
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(progress.len(), 2, "one line per change: {err}");
    assert!(progress[0].contains("in-progress"), "{err}");
    assert!(
        progress[1].contains("failed: step docker-addon failed"),
        "{err}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("node-bootstrap status: FAILED"), "{text}");
}

#[test]
fn watch_redraws_until_the_verdict_changes() {
    let f = Fixture::new();
    let child = f
        .cmd(&["--watch", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    f.journal(&journal_with(
        "docker-addon",
        "retryable",
        "download timed out",
    ));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(10));
    let docs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(docs.len() >= 2, "{docs:?}");
    assert!(
        docs[..docs.len() - 1]
            .iter()
            .all(|d| d["verdict"] == "unknown")
    );
    assert_eq!(docs.last().unwrap()["verdict"], "in-progress");
}
