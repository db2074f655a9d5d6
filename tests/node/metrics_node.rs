//! The fleet view on simulated nodes with the real agent: Debian's
//! node_exporter, run as a service inside the node (an unprivileged user,
//! its textfile collector on the agent's default directory), serves over
//! HTTP what a first boot with API server retries and an OS update reboot
//! left, and `promtool check metrics` passes on the scrape; the agent's
//! journal catalog, installed from the rendered Ignition config, is taken
//! by `journalctl --update-catalog` and `journalctl -x` shows it beside a
//! real failure's log line.

use node_bootstrap::message_ids as ids;
use serde_json::Value;
use std::io::{Read as _, Write as _};
use std::time::{Duration, SystemTime};
use testkit::agentnode::{AgentNode, Cluster};
use testkit::apiserver::{ApiServerOptions, Fault};
use testkit::simnode::{BootEnd, SimNode, skip_unless_possible};

const T: Duration = Duration::from_secs(90);
/// The steps a worker's first boot with an OS update goes through.
const FLOW_STEPS: [&str; 5] = [
    "assets",
    "cluster-version",
    "os-update",
    "reboot",
    "kubelet-env",
];
const KNB: &str = "k8s-node-bootstrap.service";
/// Where the Ignition module points the agent and node_exporter.
const TEXTFILE_DIR: &str = "/var/lib/node_exporter/textfile_collector";
const TEXTFILE: &str = "/var/lib/node_exporter/textfile_collector/node_bootstrap.prom";

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// GET http://127.0.0.1:port/metrics, the body.
fn scrape(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.to_string())
        .or_else(|| panic!("scrape answered: {head}"))
}

/// The value of the sample `name` whose labels include `labels` (any order:
/// node_exporter sorts them).
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, v) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
        if n != name {
            return None;
        }
        let all = labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        all.then(|| v.parse().ok()).flatten()
    })
}

#[test]
fn node_exporter_serves_a_first_boot_that_retried_and_rebooted() {
    if skip_unless_possible() || testkit::skip_without(&["prometheus-node-exporter", "promtool"]) {
        return;
    }
    // The API server answers 503 to the first 4 connections: the first
    // run's 3 attempts fail (2 retries), the restarted run retries once.
    let c = Cluster::start(ApiServerOptions {
        faults: vec![Fault::Status(503); 4],
        ..Default::default()
    })
    .unwrap();
    let mut n = AgentNode::new("metrics-fleet")
        .kubeconfig(c.kubeconfig())
        // As the Ignition module configures it.
        .config(serde_json::json!({"metrics": {"textfile_dir": TEXTFILE_DIR}}))
        .update_engine(&[
            "--scenario",
            "update",
            "--step-ms",
            "100",
            "--new-version",
            "1576.4.0",
        ])
        .build()
        .unwrap();
    let before_boot = now();
    n.boot().unwrap();
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    let at_reboot = now();
    // What the agent published just before it asked for the reboot.
    let before = n.read(TEXTFILE).expect("a textfile before the reboot");
    assert!(
        before.contains("node_bootstrap_last_result{command=\"run\",result=\"reboot\"} 1\n"),
        "{before}"
    );
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    // The end-of-run publish comes after READY=1.
    n.wait_for("the run's last publish", T, |n| {
        n.read(TEXTFILE).filter(|t| {
            t.contains("node_bootstrap_runs_total{command=\"run\",result=\"success\"} 1\n")
        })
    })
    .unwrap();

    let port = testkit::kube::free_port();
    let listen = format!("--web.listen-address=127.0.0.1:{port}");
    let out = n
        .exec(&[
            "systemd-run",
            "--unit=node-exporter",
            "--property=User=nobody",
            "/usr/bin/prometheus-node-exporter",
            &listen,
            "--collector.disable-defaults",
            "--collector.textfile",
            &format!("--collector.textfile.directory={TEXTFILE_DIR}"),
        ])
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = n
        .wait_for("node_exporter to answer", T, |_| scrape(port))
        .unwrap_or_else(|e| panic!("{e}\n{}", n.journal("node-exporter.service")));

    let v = |name: &str, labels: &[(&str, &str)]| {
        value(&text, name, labels).unwrap_or_else(|| panic!("no {name}{labels:?} in\n{text}"))
    };
    // node_exporter read the file without error, as user nobody.
    assert_eq!(v("node_textfile_scrape_error", &[]), 0.0);
    assert_eq!(
        v(
            "node_bootstrap_info",
            &[("role", "worker"), ("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    for step in FLOW_STEPS {
        assert_eq!(
            v(
                "node_bootstrap_step_state",
                &[("step", step), ("state", "done")]
            ),
            1.0,
            "{step}"
        );
    }
    assert!(
        v(
            "node_bootstrap_step_attempts_total",
            &[("step", "cluster-version")]
        ) >= 2.0
    );
    assert!(v("node_bootstrap_retries_total", &[("cause", "api_server")]) >= 3.0);
    assert!(
        v(
            "node_bootstrap_fetched_bytes_total",
            &[("source", "api_server")]
        ) > 0.0
    );
    assert!(
        v(
            "node_bootstrap_runs_total",
            &[("command", "run"), ("result", "retryable")]
        ) >= 1.0
    );
    assert_eq!(v("node_bootstrap_reboots_requested_total", &[]), 1.0);
    assert_eq!(
        v("node_bootstrap_last_exit_code", &[("command", "run")]),
        0.0
    );
    // The first start is from the first boot, kubelet.env from the second:
    // the time between them spans the reboot.
    let first = v("node_bootstrap_first_start_timestamp_seconds", &[]);
    let env = v("node_bootstrap_kubelet_env_timestamp_seconds", &[]);
    assert!(
        before_boot - 1.0 <= first && first <= at_reboot,
        "first start {first} not in the first boot [{before_boot}, {at_reboot}]"
    );
    assert!(
        env >= at_reboot,
        "kubelet.env {env} before the reboot {at_reboot}"
    );
    let took = v("node_bootstrap_time_to_kubelet_env_seconds", &[]);
    assert!(
        (took - (env - first)).abs() < 0.01,
        "{took} vs {env} - {first}"
    );

    // The same bootstrap in the journal, found by MESSAGE_ID as an operator
    // finds it (both boots: the node's journal is persistent).
    let by_id = |id: &str| n.journal_json(&[&format!("MESSAGE_ID={id}")]);
    let field = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_string();
    let started = by_id(ids::RUN_STARTED);
    assert!(started.len() >= 3, "a run per start: {started:?}");
    assert!(
        started
            .iter()
            .all(|e| field(e, "VERSION") == env!("CARGO_PKG_VERSION")),
        "{started:?}"
    );
    let failed = by_id(ids::STEP_FAILED);
    assert!(
        failed.iter().any(|e| field(e, "STEP") == "cluster-version"
            && field(e, "ERROR_CLASS") == "retryable"
            && field(e, "ERROR").contains("503")),
        "{failed:?}"
    );
    let done: Vec<String> = by_id(ids::STEP_DONE)
        .iter()
        .map(|e| field(e, "STEP"))
        .collect();
    for step in FLOW_STEPS {
        assert!(done.iter().any(|s| s == step), "{step} not in {done:?}");
    }
    let reboots = by_id(ids::REBOOT_REQUESTED);
    assert_eq!(reboots.len(), 1, "{reboots:?}");
    assert!(
        field(&reboots[0], "REASON").contains("1576.4.0"),
        "{reboots:?}"
    );
    assert_eq!(
        field(&reboots[0], "WIPE_DOCKER_DATADIR"),
        "false",
        "{reboots:?}"
    );
    let bootstrapped = by_id(ids::NODE_BOOTSTRAPPED);
    assert_eq!(bootstrapped.len(), 1, "{bootstrapped:?}");
    assert!(by_id(ids::PACKAGE_REFUSED).is_empty());

    // promtool takes the scrape as a whole (node_exporter's own metrics too).
    let mut p = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "promtool check metrics:\n{said}");
    assert!(
        !said.contains("node_bootstrap"),
        "lint problems in ours:\n{said}"
    );
    n.shutdown().unwrap();
}

#[test]
fn update_engine_failures_count_as_its_retries_and_the_failed_step_shows() {
    if skip_unless_possible() {
        return;
    }
    let c = Cluster::start(ApiServerOptions::default()).unwrap();
    let mut n = AgentNode::new("metrics-ue")
        .kubeconfig(c.kubeconfig())
        .config(serde_json::json!({"metrics": {"textfile_dir": TEXTFILE_DIR}}))
        .update_engine(&["--scenario", "error", "--step-ms", "50"])
        .build()
        .unwrap();
    n.boot().unwrap();
    // Two failed runs (the unit restarts after each) have published, the
    // last one at its end (a run still going shows the step running).
    let failed_step = [("step", "os-update"), ("class", "retryable")];
    let text = n
        .wait_for("two retryable runs in the textfile", T, |n| {
            let t = n.read(TEXTFILE)?;
            let runs = value(
                &t,
                "node_bootstrap_runs_total",
                &[("command", "run"), ("result", "retryable")],
            )?;
            let failed = value(&t, "node_bootstrap_step_failure_info", &failed_step)?;
            (runs >= 2.0 && failed == 1.0).then_some(t)
        })
        .unwrap();
    let retries = value(
        &text,
        "node_bootstrap_retries_total",
        &[("cause", "update_engine")],
    )
    .unwrap();
    assert!(retries >= 2.0, "{text}");
    assert_eq!(
        value(
            &text,
            "node_bootstrap_retries_total",
            &[("cause", "mirror")]
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &text,
            "node_bootstrap_last_exit_code",
            &[("command", "run")]
        ),
        Some(3.0)
    );
    n.shutdown().unwrap();
}

/// The files and units the rendered worker Ignition config installs for
/// the journal catalog, written to the node as Ignition would.
fn install_catalog_from_ignition(n: &SimNode) -> Vec<String> {
    let ign = testkit::project_root().join("ignition/examples/worker.ign");
    let cfg: Value = serde_json::from_slice(&std::fs::read(&ign).unwrap()).unwrap();
    let decode = |src: &str| {
        use base64::Engine as _;
        let data = src
            .strip_prefix("data:;base64,")
            .unwrap_or_else(|| panic!("not an inline file: {src}"));
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap()
    };
    let mut written = Vec::new();
    for f in cfg["storage"]["files"].as_array().unwrap() {
        let path = f["path"].as_str().unwrap();
        if path.starts_with("/etc/extensions/node-bootstrap/") {
            let mode = f["mode"].as_u64().unwrap() as u32;
            n.write(
                path,
                decode(f["contents"]["source"].as_str().unwrap()),
                mode,
            )
            .unwrap();
            written.push(path.to_string());
        }
    }
    let unit = cfg["systemd"]["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "node-bootstrap-catalog.service")
        .expect("the catalog unit in the worker config");
    assert_eq!(unit["enabled"], true);
    n.write(
        "/etc/systemd/system/node-bootstrap-catalog.service",
        unit["contents"].as_str().unwrap(),
        0o644,
    )
    .unwrap();
    written
}

#[test]
fn journalctl_x_explains_a_real_failure_with_the_catalog_ignition_installs() {
    if skip_unless_possible() {
        return;
    }
    // A forced version newer than the API server's: the cluster-version
    // step refuses it (the skew policy), which no restart fixes.
    let c = Cluster::start(ApiServerOptions {
        git_version: "v1.9.6+coreos.0".into(),
        ..Default::default()
    })
    .unwrap();
    let mut n = AgentNode::new("catalog")
        .kubeconfig(c.kubeconfig())
        .config(serde_json::json!({"cluster": {"forced_version": "v1.10.2+coreos.0"}}))
        .build()
        .unwrap();
    let files = install_catalog_from_ignition(&n);
    assert_eq!(files.len(), 2, "{files:?}");
    // The simulated node's root mount is private; a real PID 1's is shared,
    // which systemd-sysext needs to show its merge to the rest of the node.
    n.drop_in(
        "systemd-sysext.service",
        "simnode-shared-root",
        "[Service]\nExecStartPre=/bin/mount --make-rshared /\n",
    )
    .unwrap();
    // Enabled as on Flatcar (the vendor unit: `systemctl --root` cannot
    // see it from the node's upper directory).
    let wants = n.path("/etc/systemd/system/sysinit.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(
        "/usr/lib/systemd/system/systemd-sysext.service",
        wants.join("systemd-sysext.service"),
    )
    .unwrap();
    n.enable(&["node-bootstrap-catalog.service"]).unwrap();
    n.boot().unwrap();
    n.wait_for("the catalog unit to finish", T, |n| {
        let p = n
            .show(
                "node-bootstrap-catalog.service",
                &[
                    "ActiveState",
                    "Result",
                    "ConditionResult",
                    "ExecMainStartTimestampMonotonic",
                ],
            )
            .ok()?;
        (p["ExecMainStartTimestampMonotonic"] != "0" && p["ActiveState"] != "activating")
            .then_some(p)
    })
    .map(|p| {
        assert_eq!(
            (p["Result"].as_str(), p["ConditionResult"].as_str()),
            ("success", "yes"),
            "{p:?}\n{}\n{}",
            n.journal("node-bootstrap-catalog.service"),
            n.journal("systemd-sysext.service")
        )
    })
    .unwrap();
    n.wait_active_state(KNB, "failed", T).unwrap();

    // The catalog database holds every entry of units/node-bootstrap.catalog.
    let catalog =
        std::fs::read_to_string(testkit::project_root().join("units/node-bootstrap.catalog"))
            .unwrap();
    let listed = n.exec(&["journalctl", "--list-catalog"]).unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    let ids: Vec<&str> = catalog
        .lines()
        .filter_map(|l| l.strip_prefix("-- "))
        .collect();
    assert!(ids.len() >= 9, "the catalog's entries: {ids:?}");
    for id in ids {
        assert!(
            listed.contains(id),
            "{id} not in the catalog database:\n{listed}"
        );
    }

    // The failure's line, then the explanation with its fields filled in.
    let out = n
        .exec(&["journalctl", "--no-pager", "-x", "-u", KNB])
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = log.lines().collect();
    let failed = lines
        .iter()
        .position(|l| l.ends_with("]: step failed"))
        .unwrap_or_else(|| panic!("no step failure in\n{log}"));
    let after = lines[failed + 1..].join("\n");
    assert!(
        after.starts_with("░░ Subject: node-bootstrap: step cluster-version failed (refused)"),
        "{log}"
    );
    assert!(
        after.contains("░░ The step cluster-version failed: cluster-version failed: "),
        "{log}"
    );
    assert!(
        after.contains("░░ config, bad-input, refused: retrying cannot help"),
        "{log}"
    );
    // The command's own failure line, explained too.
    assert!(
        log.contains("░░ Subject: node-bootstrap failed (refused, exit code 7)"),
        "{log}"
    );
    n.shutdown().unwrap();
}
