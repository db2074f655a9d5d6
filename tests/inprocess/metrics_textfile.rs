//! The textfile the agent binary leaves (`node_bootstrap.prom`), as a
//! child process against temp dirs: a long step shows up while it runs, a
//! crash-looping unit's runs keep counting from one process to the next
//! (the bootstrap's start stays the first run's), every published command
//! leaves its outcome and exit code, an upgrade's mirror retry and bytes
//! are counted, and without `metrics.textfile_dir` nothing is written.

use serde_json::json;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};
use testkit::agent_mirror;
use testkit::cli::stderr;

struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new(extra: serde_json::Value) -> Node {
        let n = Node {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(n.p("assets")).unwrap();
        let mut config = json!({
            "role": "bootkube-master",
            "paths": {
                "kubelet_env": n.p("kubelet.env"),
                "kubelet_config": n.p("kubelet-config.yaml"),
                "seed_dir": n.p("installer"),
                "state_dir": n.p("state"),
                "run_dir": n.p("run"),
                "assets_dir": n.p("assets"),
            },
            "metrics": {"textfile_dir": n.p("textfile")},
        });
        testkit::agentnode::merge(&mut config, extra);
        std::fs::write(n.p("config.json"), config.to_string()).unwrap();
        n
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn agent(&self, args: &[&str]) -> std::process::Command {
        let mut c = testkit::cli::agent_command();
        c.args(["--log-format", "text"])
            .args(args)
            .env("NODE_BOOTSTRAP_CONFIG", self.p("config.json"))
            // No system bus: `run` fails its preflight, retryably.
            .env(
                "DBUS_SYSTEM_BUS_ADDRESS",
                "unix:path=/nonexistent/system_bus_socket",
            )
            .current_dir("/");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.agent(args).output().unwrap()
    }

    fn textfile(&self) -> Option<String> {
        std::fs::read_to_string(self.p("textfile/node_bootstrap.prom")).ok()
    }
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_long_step_shows_as_running_while_it_runs() {
    let n = Node::new(json!({}));
    std::fs::write(n.p("assets/bootkube.sh"), "sleep 6\n").unwrap();
    let mut child = n
        .agent(&["helper", "bootkube"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let running = loop {
        if let Some(t) = n.textfile()
            && sample(
                &t,
                r#"node_bootstrap_step_state{step="helper/bootkube",state="running"}"#,
            ) == Some(1.0)
        {
            break t;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no textfile showing the running step after {:?}: {:?}",
            t0.elapsed(),
            n.textfile()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Not yet ended: no outcome of this command so far.
    assert!(
        !running.contains("command=\"helper-bootkube\""),
        "{running}"
    );
    assert!(child.wait().unwrap().success());
    let done = n.textfile().unwrap();
    assert_eq!(
        sample(
            &done,
            r#"node_bootstrap_step_state{step="helper/bootkube",state="done"}"#
        ),
        Some(1.0),
        "{done}"
    );
    assert_eq!(
        sample(
            &done,
            r#"node_bootstrap_runs_total{command="helper-bootkube",result="success"}"#
        ),
        Some(1.0),
        "{done}"
    );
    let took = sample(
        &done,
        r#"node_bootstrap_last_duration_seconds{command="helper-bootkube"}"#,
    )
    .unwrap();
    assert!((5.5..30.0).contains(&took), "{took}\n{done}");
}

#[test]
fn a_crash_looping_run_keeps_counting_from_its_first_start() {
    let n = Node::new(json!({}));
    std::fs::create_dir_all(n.p("installer")).unwrap();
    std::fs::write(
        n.p("installer/kubelet.env"),
        "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n",
    )
    .unwrap();
    let mut first_start = None;
    for i in 1..=3u32 {
        let out = n.run(&["run"]);
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        let t = n.textfile().expect("a textfile after each run");
        assert_eq!(
            sample(
                &t,
                r#"node_bootstrap_runs_total{command="run",result="retryable"}"#
            ),
            Some(f64::from(i)),
            "{t}"
        );
        assert_eq!(
            sample(&t, r#"node_bootstrap_last_exit_code{command="run"}"#),
            Some(3.0)
        );
        let start = sample(&t, "node_bootstrap_first_start_timestamp_seconds").unwrap();
        assert_eq!(*first_start.get_or_insert(start), start, "{t}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The file is whole after every write, and only it is there.
    let names: Vec<String> = std::fs::read_dir(n.p("textfile"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["node_bootstrap.prom"]);
}

#[test]
fn without_a_textfile_dir_nothing_is_written() {
    let n = Node::new(json!({"metrics": {"textfile_dir": null}}));
    std::fs::write(n.p("assets/bootkube.sh"), "true\n").unwrap();
    let out = n.run(&["helper", "bootkube"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!n.p("textfile").exists());
    assert!(!n.p("state/metrics.json").exists());
}

/// The `node_bootstrap_runs_total` series of `command`: result label and
/// count of each.
fn runs_of(text: &str, command: &str) -> Vec<(String, f64)> {
    let prefix = format!("node_bootstrap_runs_total{{command=\"{command}\",result=\"");
    text.lines()
        .filter_map(|l| {
            let (result, count) = l.strip_prefix(&prefix)?.split_once("\"} ")?;
            Some((result.to_string(), count.parse().ok()?))
        })
        .collect()
}

/// Every command the metrics follow (README "Watching a fleet") leaves its
/// outcome in the textfile: counted once, with its exit code, whatever
/// that outcome is.
#[test]
fn every_published_command_leaves_its_outcome_and_exit_code() {
    let n = Node::new(json!({}));
    // tectonic follows a completed bootkube only.
    std::fs::write(n.p("assets/bootkube.sh"), "true\n").unwrap();
    std::fs::write(n.p("assets/tectonic-wrapper.sh"), "true\n").unwrap();
    let out = n.run(&["helper", "bootkube"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for (args, command) in [
        (&["helper", "tectonic"][..], "helper-tectonic"),
        (&["status", "--wait", "--timeout", "1"][..], "status-wait"),
        (&["upgrade"][..], "upgrade"),
        (&["assets", "pull"][..], "assets-pull"),
    ] {
        let out = n.run(args);
        let code = out.status.code().expect("an exit code");
        let t = n
            .textfile()
            .unwrap_or_else(|| panic!("{args:?} left no textfile: {}", stderr(&out)));
        let runs = runs_of(&t, command);
        assert_eq!(runs.len(), 1, "{args:?} (exit {code}): {runs:?}\n{t}");
        assert_eq!(runs[0].1, 1.0, "{args:?}: {t}");
        assert_eq!(
            sample(
                &t,
                &format!("node_bootstrap_last_exit_code{{command=\"{command}\"}}")
            ),
            Some(f64::from(code)),
            "{args:?}: {}\n{t}",
            stderr(&out)
        );
        assert_eq!(
            runs[0].0 == "success",
            code == 0,
            "{args:?} exited {code}: {t}"
        );
    }
    // The tectonic helper ran its script: a success.
    let t = n.textfile().unwrap();
    assert_eq!(runs_of(&t, "helper-tectonic")[0].0, "success", "{t}");

    // `status --wait` on a node whose config does not load still shows up,
    // where the file's metrics section says.
    let broken = Node::new(json!({"role": "no-such-role"}));
    let out = broken.run(&["status", "--wait", "--timeout", "1"]);
    let t = broken
        .textfile()
        .unwrap_or_else(|| panic!("no textfile: {}", stderr(&out)));
    assert!(t.contains("node_bootstrap_info{"), "{t}");
    assert!(t.contains("role=\"unknown\""), "{t}");
    assert_eq!(runs_of(&t, "status-wait").len(), 1, "{t}");
}

/// The fleet view of an upgrade that met a failing mirror: the retry is
/// counted against the mirror, and the bytes fetched from it are at least
/// the agent's.
#[test]
fn a_mirror_retry_and_the_bytes_fetched_show_in_the_textfile() {
    let r = agent_mirror::Rig::new("0.1.0");
    r.write_config(json!({"attempts": 3}));
    let config_path = r.path("config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config_path).unwrap()).unwrap();
    config["metrics"] = json!({"textfile_dir": r.path("textfile")});
    std::fs::write(&config_path, config.to_string()).unwrap();
    r.publish_agents(&["0.2.0"]);
    let artifact_path = format!("/mirror/agents/{}", agent_mirror::artifact("0.2.0"));
    let size = r.server.get(&artifact_path).unwrap().len() as f64;
    r.server
        .fail_next(&artifact_path, testkit::pkgserver::Fault::Status(503));
    agent_mirror::ok(&r.upgrade(&[]));
    assert_eq!(r.version_of(&r.binary()), "0.2.0");
    let text = std::fs::read_to_string(r.path("textfile/node_bootstrap.prom")).unwrap();
    let sample =
        |series: &str| sample(&text, series).unwrap_or_else(|| panic!("no {series} in\n{text}"));
    assert_eq!(
        sample(r#"node_bootstrap_retries_total{cause="mirror"}"#),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(r#"node_bootstrap_retries_total{cause="api_server"}"#),
        0.0
    );
    let fetched = sample(r#"node_bootstrap_fetched_bytes_total{source="mirror"}"#);
    assert!(
        fetched >= size,
        "{fetched} bytes fetched, the agent alone is {size}"
    );
    assert_eq!(
        sample(r#"node_bootstrap_runs_total{command="upgrade",result="success"}"#),
        1.0
    );
}
