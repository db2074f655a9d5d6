//! `node-bootstrap helper bootkube|tectonic` in script mode, run as the
//! built binary against temp dirs: what the unit would see (exit code,
//! `.done` marker, state journal, log lines with `step`/`stream` fields).

use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};
use testkit::cli::{helper_output, stderr};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(helpers: Value) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let f = Fixture { dir };
        std::fs::create_dir_all(f.assets()).unwrap();
        let config = serde_json::json!({
            "role": "bootkube-master",
            "paths": {
                "state_dir": f.p("state"),
                "run_dir": f.p("run"),
                "assets_dir": f.assets(),
            },
            "helpers": helpers,
        });
        std::fs::write(f.p("config.json"), config.to_string()).unwrap();
        f
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    fn assets(&self) -> PathBuf {
        self.p("assets")
    }
    fn asset(&self, name: &str, body: &str) {
        // Not executable on purpose: the helper runs it with bash, like the
        // original unit did (`ExecStart=/usr/bin/bash /opt/tectonic/bootkube.sh`).
        std::fs::write(self.assets().join(name), format!("set -e\n{body}\n")).unwrap();
    }
    fn helper(&self, step: &str) -> Output {
        testkit::cli::agent_command()
            .args(["--log-format", "json", "helper", step])
            .env("NODE_BOOTSTRAP_CONFIG", self.p("config.json"))
            .current_dir("/")
            .output()
            .unwrap()
    }
    fn journal(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.p("state/state.json")).unwrap()).unwrap()
    }
    fn done(&self, step: &str) -> bool {
        self.assets().join(format!("init_{step}.done")).exists()
    }
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

#[test]
fn successful_script_runs_in_the_assets_dir_is_logged_and_marked_done() {
    let f = Fixture::new(serde_json::json!({}));
    f.asset(
        "bootkube.sh",
        "echo \"bootkube starting in $PWD\"\necho 'warning: slow etcd' >&2\necho 'bootkube done'\ntouch ran",
    );
    let out = f.helper("bootkube");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(f.done("bootkube"));
    assert!(
        f.assets().join("ran").exists(),
        "script ran in the assets dir"
    );
    assert_eq!(
        helper_output(&out, "helper/bootkube", "stdout"),
        vec![
            format!("bootkube starting in {}", f.assets().display()),
            "bootkube done".to_string()
        ]
    );
    assert_eq!(
        helper_output(&out, "helper/bootkube", "stderr"),
        vec!["warning: slow etcd"]
    );
    let j = f.journal();
    let rec = &j["steps"]["helper/bootkube"];
    assert_eq!(rec["status"], "done");
    assert_eq!(rec["result"]["exit_code"], 0);
    assert_eq!(rec["result"]["mode"], "script");
    assert!(rec["result"]["duration_ms"].as_u64().is_some());
    assert!(rec["ended_at"].is_string());
    let marker = std::fs::read_to_string(f.assets().join("init_bootkube.done")).unwrap();
    assert!(marker.trim_end().ends_with("helper/bootkube"), "{marker}");
}

#[test]
fn failing_script_leaves_no_marker_and_records_the_last_lines() {
    let f = Fixture::new(serde_json::json!({"bootkube": {"log_tail_lines": 3}}));
    f.asset(
        "bootkube.sh",
        "for i in 1 2 3 4 5; do echo \"step $i\"; done\necho 'error: etcd unreachable' >&2\nexit 1",
    );
    let out = f.helper("bootkube");
    assert_eq!(code(&out), 3, "retryable: {}", stderr(&out));
    assert!(!f.done("bootkube"));
    assert!(
        stderr(&out).contains(
            "bootkube step (bootkube.sh) exited with code 1; last output: error: etcd unreachable"
        ),
        "{}",
        stderr(&out)
    );
    let rec = &f.journal()["steps"]["helper/bootkube"];
    assert_eq!(rec["status"], "failed");
    assert_eq!(rec["error_class"], "retryable");
    assert_eq!(
        rec["log_tail"],
        serde_json::json!(["step 4", "step 5", "error: etcd unreachable"])
    );

    // The next trigger retries; a fixed script then succeeds.
    f.asset("bootkube.sh", "echo fixed");
    assert_eq!(code(&f.helper("bootkube")), 0);
    assert!(f.done("bootkube"));
    let rec = &f.journal()["steps"]["helper/bootkube"];
    assert_eq!(rec["status"], "done");
    assert_eq!(rec["attempts"], 2);
}

#[test]
fn missing_script_is_bad_input_naming_the_path() {
    let f = Fixture::new(serde_json::json!({}));
    let out = f.helper("bootkube");
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let script = f.assets().join("bootkube.sh");
    assert!(
        stderr(&out).contains(&format!("asset script {} does not exist", script.display())),
        "{}",
        stderr(&out)
    );
    assert!(!f.done("bootkube"));
}

#[test]
fn tectonic_refuses_to_run_before_bootkube_is_done() {
    let f = Fixture::new(serde_json::json!({}));
    f.asset("tectonic-wrapper.sh", "touch tectonic-ran");
    let out = f.helper("tectonic");
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("refusing to run tectonic"));
    assert!(!f.assets().join("tectonic-ran").exists());
    assert!(!f.done("tectonic"));
    let rec = &f.journal()["steps"]["helper/tectonic"];
    assert_eq!(rec["status"], "failed");
    assert_eq!(rec["error_class"], "refused");

    f.asset("bootkube.sh", "true");
    assert_eq!(code(&f.helper("bootkube")), 0);
    let out = f.helper("tectonic");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(f.assets().join("tectonic-ran").exists());
    assert!(f.done("tectonic"));
}

#[test]
fn a_done_step_does_not_run_again() {
    let f = Fixture::new(serde_json::json!({}));
    f.asset("bootkube.sh", "echo run >> runs");
    assert_eq!(code(&f.helper("bootkube")), 0);
    assert_eq!(code(&f.helper("bootkube")), 0);
    assert_eq!(
        std::fs::read_to_string(f.assets().join("runs")).unwrap(),
        "run\n"
    );
    assert_eq!(f.journal()["steps"]["helper/bootkube"]["attempts"], 1);
}

#[test]
fn a_hung_script_is_killed_at_the_timeout_with_its_children() {
    let f = Fixture::new(serde_json::json!({"bootkube": {"timeout_secs": 1}}));
    f.asset(
        "bootkube.sh",
        "sleep 600 &\necho $! > child.pid\necho 'waiting for the API'\nwait",
    );
    let t0 = Instant::now();
    let out = f.helper("bootkube");
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("timed out after 1s; last output: waiting for the API"),
        "{}",
        stderr(&out)
    );
    assert!(!f.done("bootkube"));
    let pid = std::fs::read_to_string(f.assets().join("child.pid")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    assert!(
        stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z"),
        "the script's child survived: {stat}"
    );
}

#[test]
fn sigterm_stops_the_script_and_records_why() {
    let f = Fixture::new(serde_json::json!({}));
    f.asset("bootkube.sh", "echo started\nsleep 600");
    let child = testkit::cli::agent_command()
        .args(["--log-format", "json", "helper", "bootkube"])
        .env("NODE_BOOTSTRAP_CONFIG", f.p("config.json"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the script runs (its line is in the journal only at the end,
    // so watch for the running record).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(f.p("state/state.json")).is_ok_and(|t| t.contains("\"running\""))
    {
        assert!(Instant::now() < deadline, "helper never started the step");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let rec = &f.journal()["steps"]["helper/bootkube"];
    assert_eq!(rec["status"], "failed");
    assert!(
        rec["error"]
            .as_str()
            .unwrap()
            .contains("stopped by SIGTERM"),
        "{rec}"
    );
    assert!(!f.done("bootkube"));
}
