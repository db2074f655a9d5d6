//! `node-bootstrap helper bootkube|tectonic` in docker mode against a real,
//! private dockerd started by the test (testkit::docker), with images built
//! by `docker import` of a busybox rootfs: one whose `/bootkube` succeeds and
//! prints lines, one that fails, one that hangs.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};
use testkit::cli::{helper_output, stderr};
use testkit::docker::{PrivateDockerd, skip_unless_possible};

const OK_IMAGE: &str = "nbtest/bootkube-ok:1";
const FAIL_IMAGE: &str = "nbtest/bootkube-fail:1";
const HANG_IMAGE: &str = "nbtest/bootkube-hang:1";

fn dockerd_with_images() -> PrivateDockerd {
    let d = PrivateDockerd::start().unwrap();
    d.import_busybox_image(
        OK_IMAGE,
        &[(
            "/bootkube",
            "#!/bin/sh\n\
             echo \"bootkube $*\"\n\
             echo \"assets: $(ls /assets | tr '\\n' ' ')\"\n\
             echo \"GREETING=$GREETING\"\n\
             echo 'Waiting for api-server...' >&2\n\
             echo ran > /assets/container-ran\n\
             printf 'no trailing newline'\n",
            0o755,
        )],
    )
    .unwrap();
    d.import_busybox_image(
        FAIL_IMAGE,
        &[(
            "/bootkube",
            "#!/bin/sh\necho 'Starting temporary bootstrap control plane...'\n\
             echo 'Error: failed to start etcd: connection refused' >&2\nexit 3\n",
            0o755,
        )],
    )
    .unwrap();
    d.import_busybox_image(
        HANG_IMAGE,
        &[(
            "/bootkube",
            "#!/bin/sh\necho 'waiting forever'\nexec sleep 600\n",
            0o755,
        )],
    )
    .unwrap();
    d
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    /// Temp dirs and a config whose `helpers.<step>` is docker mode with
    /// `docker(assets_dir)` as its docker section and `extra` merged in.
    fn new(
        d: &PrivateDockerd,
        step: &str,
        docker: impl Fn(&str) -> Value,
        extra: Value,
    ) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let f = Fixture { dir };
        std::fs::create_dir_all(f.assets()).unwrap();
        std::fs::write(f.assets().join("bootkube.sh"), "unused in docker mode").unwrap();
        let mut step_cfg =
            serde_json::json!({"mode": "docker", "docker": docker(&f.assets().to_string_lossy())});
        if let (Some(s), Some(e)) = (step_cfg.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        let config = serde_json::json!({
            "role": "bootkube-master",
            "paths": {
                "state_dir": f.p("state"),
                "run_dir": f.p("run"),
                "assets_dir": f.assets(),
                "docker_socket": d.socket(),
            },
            "helpers": { step: step_cfg },
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
    fn helper(&self, step: &str) -> Output {
        testkit::cli::agent_command()
            .args(["--log-format", "json", "helper", step])
            .env("NODE_BOOTSTRAP_CONFIG", self.p("config.json"))
            .output()
            .unwrap()
    }
    fn step_record(&self, step: &str) -> Value {
        let j: Value =
            serde_json::from_str(&std::fs::read_to_string(self.p("state/state.json")).unwrap())
                .unwrap();
        j["steps"][format!("helper/{step}")].clone()
    }
    fn done(&self, step: &str) -> bool {
        self.assets().join(format!("init_{step}.done")).exists()
    }
}

#[test]
fn container_that_succeeds_is_logged_removed_and_marked_done() {
    if skip_unless_possible() {
        return;
    }
    let d = dockerd_with_images();
    // Defaults (entrypoint /bootkube, args start --asset-dir=/assets) with
    // the test's assets dir mounted and an env var.
    let f = Fixture::new(
        &d,
        "bootkube",
        |assets| serde_json::json!({"image": OK_IMAGE, "mounts": [format!("{assets}:/assets")], "env": {"GREETING": "hello"}}),
        serde_json::json!({}),
    );
    let out = f.helper("bootkube");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(f.done("bootkube"));
    assert_eq!(
        std::fs::read_to_string(f.assets().join("container-ran")).unwrap(),
        "ran\n",
        "the assets dir is mounted read-write at /assets"
    );
    assert_eq!(
        helper_output(&out, "helper/bootkube", "stdout"),
        vec![
            "bootkube start --asset-dir=/assets",
            "assets: bootkube.sh ",
            "GREETING=hello",
            "no trailing newline",
        ]
    );
    assert_eq!(
        helper_output(&out, "helper/bootkube", "stderr"),
        vec!["Waiting for api-server..."]
    );
    let rec = f.step_record("bootkube");
    assert_eq!(rec["status"], "done");
    assert_eq!(rec["result"]["exit_code"], 0);
    assert_eq!(rec["result"]["mode"], "docker");
    assert_eq!(rec["result"]["image"], OK_IMAGE);
    assert_eq!(
        d.containers().unwrap(),
        Vec::<String>::new(),
        "container removed"
    );
}

#[test]
fn container_that_fails_leaves_no_marker_and_is_removed() {
    if skip_unless_possible() {
        return;
    }
    let d = dockerd_with_images();
    let f = Fixture::new(
        &d,
        "bootkube",
        |assets| serde_json::json!({"image": FAIL_IMAGE, "mounts": [format!("{assets}:/assets")]}),
        serde_json::json!({}),
    );
    let out = f.helper("bootkube");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!f.done("bootkube"));
    let msg = stderr(&out);
    assert!(
        msg.contains(&format!(
            "bootkube step (container {FAIL_IMAGE}) exited with code 3; last output: Error: failed to start etcd: connection refused"
        )),
        "{msg}"
    );
    let rec = f.step_record("bootkube");
    assert_eq!(rec["status"], "failed");
    // Docker keeps each stream's order, not the order between them.
    let mut tail: Vec<&str> = rec["log_tail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    tail.sort();
    assert_eq!(
        tail,
        vec![
            "Error: failed to start etcd: connection refused",
            "Starting temporary bootstrap control plane...",
        ]
    );
    assert_eq!(d.containers().unwrap(), Vec::<String>::new());
}

#[test]
fn hung_container_is_killed_at_the_timeout_and_removed() {
    if skip_unless_possible() {
        return;
    }
    let d = dockerd_with_images();
    let f = Fixture::new(
        &d,
        "bootkube",
        |assets| serde_json::json!({"image": HANG_IMAGE, "mounts": [format!("{assets}:/assets")]}),
        serde_json::json!({"timeout_secs": 2}),
    );
    let t0 = Instant::now();
    let out = f.helper("bootkube");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("timed out after 2s; last output: waiting forever"),
        "{}",
        stderr(&out)
    );
    assert!(!f.done("bootkube"));
    assert_eq!(d.containers().unwrap(), Vec::<String>::new());
}

#[test]
fn leftover_container_of_a_crashed_attempt_is_replaced() {
    if skip_unless_possible() {
        return;
    }
    let d = dockerd_with_images();
    d.docker(&[
        "create",
        "--name",
        "node-bootstrap-tectonic",
        HANG_IMAGE,
        "/bootkube",
    ])
    .unwrap();
    let f = Fixture::new(
        &d,
        "tectonic",
        |assets| serde_json::json!({"image": OK_IMAGE, "entrypoint": ["/bootkube"], "args": ["tectonic"], "mounts": [format!("{assets}:/assets")]}),
        serde_json::json!({}),
    );
    std::fs::write(f.assets().join("init_bootkube.done"), "").unwrap();
    let out = f.helper("tectonic");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        helper_output(&out, "helper/tectonic", "stdout")[0],
        "bootkube tectonic"
    );
    assert!(f.done("tectonic"));
    assert!(
        stderr(&out).contains("removed a container left by an earlier attempt"),
        "{}",
        stderr(&out)
    );
    assert_eq!(d.containers().unwrap(), Vec::<String>::new());
}

#[test]
fn missing_image_that_cannot_be_pulled_is_a_clear_error() {
    if skip_unless_possible() {
        return;
    }
    let d = dockerd_with_images();
    // A registry on a closed loopback port: the pull fails at once.
    let image = "127.0.0.1:9/nbtest/absent:1";
    let f = Fixture::new(
        &d,
        "bootkube",
        |assets| serde_json::json!({"image": image, "mounts": [format!("{assets}:/assets")]}),
        serde_json::json!({}),
    );
    let out = f.helper("bootkube");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("failed to pull image {image}")),
        "{}",
        stderr(&out)
    );
    assert!(!f.done("bootkube"));
    assert_eq!(f.step_record("bootkube")["status"], "failed");
}

#[test]
fn unreachable_docker_is_a_retryable_error_naming_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("no-docker.sock");
    let cfg = serde_json::json!({
        "paths": {"state_dir": dir.path().join("state"), "run_dir": dir.path().join("run"),
                  "assets_dir": dir.path().join("assets"), "docker_socket": sock},
        "helpers": {"bootkube": {"mode": "docker", "docker": {"image": OK_IMAGE}}},
    });
    std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
    let out = testkit::cli::agent_command()
        .args(["helper", "bootkube"])
        .env("NODE_BOOTSTRAP_CONFIG", dir.path().join("config.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("cannot reach Docker at {}", sock.display())),
        "{}",
        stderr(&out)
    );
}
