//! `node-bootstrap status` on a simulated node (a real systemd 252 as PID 1,
//! its own D-Bus and journald), at each stage of a first boot, checked
//! against what systemd itself reports (`systemctl show`).
//!
//! The node runs the project's units. `run` is the agent stub
//! (testkit/standins/agent-stub: the real flow on a node is `run_e2e.rs`'s);
//! `helper` and `status` are the real binary, so bootkube/tectonic go
//! through the real helper and its state journal records.

use serde_json::Value;
use std::time::Duration;
use testkit::agentnode::{STANDIN_CLUSTER_TAG, UNITS, install_kubelet_wrapper, install_units};
use testkit::simnode::{BootEnd, SimNode, skip_unless_possible};

const T: Duration = Duration::from_secs(60);
const REAL: &str = "/opt/bin/node-bootstrap-real";

/// A node whose `/opt/bin/node-bootstrap` dispatches `helper`/`status` to
/// the real binary and everything else to the agent stub.
fn node(name: &str, master: bool) -> SimNode {
    let n = SimNode::new(name).unwrap();
    install_units(&n, UNITS).unwrap();
    n.install_file(
        &testkit::standin("agent-stub"),
        "/opt/bin/agent-stub",
        0o755,
    )
    .unwrap();
    n.install_file(&testkit::cli::agent_binary(), REAL, 0o755)
        .unwrap();
    n.write(
        "/opt/bin/node-bootstrap",
        format!(
            "#!/bin/sh\ncase \"$1\" in\nhelper|status) exec {REAL} \"$@\" ;;\n*) exec /opt/bin/agent-stub \"$@\" ;;\nesac\n"
        ),
        0o755,
    )
    .unwrap();
    install_kubelet_wrapper(&n, &[STANDIN_CLUSTER_TAG]).unwrap();
    let role = if master { "bootkube-master" } else { "worker" };
    n.write(
        "/etc/node-bootstrap/config.json",
        format!("{{\"role\": \"{role}\"}}"),
        0o644,
    )
    .unwrap();
    let mut enable = vec!["k8s-node-bootstrap.service", "kubelet.service"];
    if master {
        enable.extend(["bootkube.path", "tectonic.path"]);
    }
    n.enable(&enable).unwrap();
    n
}

fn asset(n: &SimNode, name: &str, body: &str) {
    n.write(
        &format!("/opt/tectonic/{name}"),
        format!("#!/bin/bash\nset -e\n{body}\n"),
        0o755,
    )
    .unwrap();
}

struct Status {
    code: i32,
    json: Value,
}

fn status_env(n: &SimNode, env: &[(&str, &str)]) -> Status {
    let out = n.exec_env(&[REAL, "status", "--json"], env).unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "status --json printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Status {
        code: out.status.code().expect("status exited"),
        json,
    }
}

fn status(n: &SimNode) -> Status {
    status_env(n, &[])
}

fn text_status(n: &SimNode) -> String {
    let out = n.exec(&[REAL, "status"]).unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn unit<'a>(s: &'a Status, name: &str) -> &'a Value {
    s.json["units"]
        .as_array()
        .expect("units reported")
        .iter()
        .find(|u| u["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing from {}", s.json["units"]))
}

fn phase<'a>(s: &'a Status, name: &str) -> &'a Value {
    s.json["phases"]
        .as_array()
        .expect("phases reported")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing from {}", s.json["phases"]))
}

/// Every unit in the report says what `systemctl show` says. Call only at
/// a settled stage (nothing changing between the two reads).
fn assert_matches_systemd(n: &SimNode, s: &Status) {
    for u in s.json["units"].as_array().expect("units reported") {
        let name = u["name"].as_str().unwrap();
        let sd = n
            .show(
                name,
                &[
                    "LoadState",
                    "ActiveState",
                    "SubState",
                    "UnitFileState",
                    "Result",
                    "NRestarts",
                    "ConditionResult",
                    "StateChangeTimestamp",
                ],
            )
            .unwrap();
        assert_eq!(u["load_state"], sd["LoadState"], "{name}");
        assert_eq!(u["active_state"], sd["ActiveState"], "{name}");
        assert_eq!(u["sub_state"], sd["SubState"], "{name}");
        assert_eq!(u["unit_file_state"], sd["UnitFileState"], "{name}");
        assert_eq!(
            if u["condition_result"].as_bool().unwrap() {
                "yes"
            } else {
                "no"
            },
            sd["ConditionResult"],
            "{name}"
        );
        if name.ends_with(".service") || name.ends_with(".path") {
            assert_eq!(u["result"], sd["Result"], "{name}");
        }
        if name.ends_with(".service") {
            assert_eq!(u["n_restarts"].to_string(), sd["NRestarts"], "{name}");
        }
        assert_eq!(
            u["since"].is_null(),
            sd["StateChangeTimestamp"].is_empty(),
            "{name}"
        );
    }
}

fn waiting(s: &Status) -> Vec<String> {
    s.json["waiting_for"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn master_first_boot_stages_match_systemd() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("status-master", true);
    n.boot().unwrap();

    // Stage: kubelet running, no assets yet.
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    n.wait_active_state("bootkube.path", "active", T).unwrap();
    let s = status(&n);
    assert_eq!(s.code, 10, "{}", s.json);
    assert_eq!(s.json["verdict"], "in-progress");
    assert_eq!(s.json["schema_version"], 1);
    assert_eq!(
        waiting(&s),
        vec!["waiting for assets at /opt/tectonic/bootkube.sh, pushed by terraform"]
    );
    assert_eq!(unit(&s, "bootkube.path")["sub_state"], "waiting");
    assert_eq!(
        s.json["kubelet_env"]["values"],
        serde_json::json!([
            ["KUBELET_IMAGE_URL", "quay.io/coreos/hyperkube"],
            ["KUBELET_IMAGE_TAG", "v1.9.6_coreos.0"]
        ])
    );
    assert_matches_systemd(&n, &s);
    let text = text_status(&n);
    assert!(
        text.starts_with("node-bootstrap status: IN-PROGRESS\n"),
        "{text}"
    );
    assert!(
        text.contains("  - waiting for assets at /opt/tectonic/bootkube.sh, pushed by terraform"),
        "{text}"
    );

    // Stage: assets arrive; bootkube succeeds, tectonic runs (held by a gate).
    asset(
        &n,
        "tectonic-wrapper.sh",
        "echo 'applying manifests'\nwhile [ ! -e /run/gate ]; do sleep 0.2; done\necho 'error: timed out waiting for the API' >&2\nexit 1",
    );
    asset(
        &n,
        "bootkube.sh",
        "echo 'Starting temporary bootstrap control plane...'\necho 'All self-hosted control plane components successfully started'",
    );
    n.wait_active_state("bootkube.service", "active", T)
        .unwrap();
    // The tectonic script runs (so its helper has recorded the attempt).
    n.wait_for("the tectonic script to run", T, |n| {
        n.journal_json(&["STEP=helper/tectonic", "STREAM=stdout"])
            .iter()
            .any(|l| l["MESSAGE"] == "applying manifests")
            .then_some(())
    })
    .unwrap();
    let s = status(&n);
    assert_eq!(s.code, 10, "{}", s.json);
    assert!(n.exists("/opt/tectonic/init_bootkube.done"));
    assert_eq!(phase(&s, "helper/bootkube")["state"], "done");
    assert_eq!(phase(&s, "helper/bootkube")["result"]["mode"], "script");
    assert_eq!(phase(&s, "helper/tectonic")["state"], "running");
    assert_eq!(phase(&s, "helper/tectonic")["this_boot"], true);
    let w = waiting(&s);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("tectonic.service is running since "),
        "{w:?}"
    );
    assert_matches_systemd(&n, &s);
    // The helper's output is in the system journal with its fields.
    let lines = n.journal_json(&["STEP=helper/bootkube", "STREAM=stdout"]);
    let msgs: Vec<&str> = lines.iter().filter_map(|l| l["MESSAGE"].as_str()).collect();
    assert_eq!(
        msgs,
        vec![
            "Starting temporary bootstrap control plane...",
            "All self-hosted control plane components successfully started"
        ]
    );

    // Stage: tectonic fails.
    n.write("/run/gate", "", 0o644).unwrap();
    // Settled: tectonic.path re-triggers the failed service until systemd's
    // start limit stops it (and fails the path unit).
    n.wait_for("tectonic to fail for good", T, |n| {
        (n.prop("tectonic.service", "ActiveState").ok()? == "failed"
            && n.prop("tectonic.path", "ActiveState").ok()? == "failed")
            .then_some(())
    })
    .unwrap();
    let s = status(&n);
    assert_eq!(s.code, 11, "{}", s.json);
    assert_eq!(s.json["verdict"], "failed");
    let reasons = s.json["reasons"].to_string();
    assert!(reasons.contains("tectonic.service failed"), "{reasons}");
    assert!(
        reasons.contains("error: timed out waiting for the API"),
        "{reasons}"
    );
    let p = phase(&s, "helper/tectonic");
    assert_eq!(p["state"], "failed");
    assert_eq!(
        p["log_tail"],
        serde_json::json!(["applying manifests", "error: timed out waiting for the API"])
    );
    assert!(!n.exists("/opt/tectonic/init_tectonic.done"));
    assert_matches_systemd(&n, &s);
    assert_eq!(unit(&s, "tectonic.service")["result"], "exit-code");
    assert!(reasons.contains("tectonic.path failed"), "{reasons}");
    let failed_attempts = phase(&s, "helper/tectonic")["attempts"].as_u64().unwrap();
    assert!(failed_attempts >= 1);

    // Stage: fixed and retried: complete.
    asset(&n, "tectonic-wrapper.sh", "echo 'tectonic installed'");
    n.systemctl(&["reset-failed", "tectonic.service", "tectonic.path"])
        .unwrap();
    n.systemctl(&["start", "tectonic.service"]).unwrap();
    let s = status(&n);
    assert_eq!(s.code, 0, "{}", s.json);
    assert_eq!(s.json["verdict"], "complete");
    assert_eq!(s.json["waiting_for"], serde_json::json!([]));
    assert_eq!(
        phase(&s, "helper/tectonic")["attempts"].as_u64().unwrap(),
        failed_attempts + 1
    );
    assert_matches_systemd(&n, &s);

    // Stage: second boot, kubelet running, everything skipped by conditions.
    n.exec(&["systemctl", "reboot"]).unwrap();
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    n.wait_for("path units to settle", T, |n| {
        (n.prop("bootkube.path", "ConditionResult").ok()? == "no"
            && n.prop("tectonic.path", "ConditionResult").ok()? == "no")
            .then_some(())
    })
    .unwrap();
    let s = status(&n);
    assert_eq!(s.code, 0, "{}", s.json);
    for u in [
        "k8s-node-bootstrap.service",
        "bootkube.path",
        "tectonic.path",
    ] {
        assert_eq!(unit(&s, u)["condition_skipped"], true, "{u}");
    }
    assert_eq!(unit(&s, "kubelet.service")["active_state"], "active");
    // Records of the first boot are shown as such.
    assert_eq!(phase(&s, "helper/bootkube")["this_boot"], false);
    assert_matches_systemd(&n, &s);
    let text = text_status(&n);
    assert!(text.contains("[skipped: condition not met]"), "{text}");
    n.shutdown().unwrap();
}

#[test]
fn worker_crash_loop_then_config_error_match_systemd() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("status-crashloop", false);
    n.write("/etc/stub/run-fail", "1000", 0o644).unwrap();
    n.drop_in(
        "k8s-node-bootstrap.service",
        "test-restart",
        "[Service]\nRestartSec=2\n",
    )
    .unwrap();
    n.boot().unwrap();
    // Crash-looping: between two attempts (auto-restart), restarts counted.
    n.wait_for("two restarts", T, |n| {
        let r: u32 = n
            .prop("k8s-node-bootstrap.service", "NRestarts")
            .ok()?
            .parse()
            .ok()?;
        (r >= 2 && n.prop("k8s-node-bootstrap.service", "SubState").ok()? == "auto-restart")
            .then_some(())
    })
    .unwrap();
    let before: u32 = n
        .prop("k8s-node-bootstrap.service", "NRestarts")
        .unwrap()
        .parse()
        .unwrap();
    let s = status(&n);
    let after: u32 = n
        .prop("k8s-node-bootstrap.service", "NRestarts")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(s.code, 10, "{}", s.json);
    let knb = unit(&s, "k8s-node-bootstrap.service");
    let reported = knb["n_restarts"].as_u64().unwrap() as u32;
    assert!(
        before <= reported && reported <= after,
        "{before} <= {reported} <= {after}"
    );
    assert_eq!(knb["active_state"], "activating");
    let w = waiting(&s);
    assert!(
        w[0].starts_with("k8s-node-bootstrap.service is crash-looping (restart "),
        "{w:?}"
    );
    assert_eq!(s.json["kubelet_env"]["present"], false);

    // A configuration error: systemd stops restarting; status says failed.
    n.write("/etc/stub/run-exit", "4", 0o644).unwrap();
    n.wait_active_state("k8s-node-bootstrap.service", "failed", T)
        .unwrap();
    let s = status(&n);
    assert_eq!(s.code, 11, "{}", s.json);
    let reasons = s.json["reasons"].to_string();
    assert!(
        reasons.contains("k8s-node-bootstrap.service failed and is not restarting")
            && reasons.contains("exit status 4"),
        "{reasons}"
    );
    assert_matches_systemd(&n, &s);
    n.shutdown().unwrap();
}

#[test]
fn degraded_sources_on_a_node_give_partial_reports() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("status-degraded", false);
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    // A worker with kubelet running: complete, though the stub left no journal.
    let s = status(&n);
    assert_eq!(s.code, 0, "{}", s.json);
    assert_eq!(s.json["state_journal"]["state"], "missing");

    // No D-Bus and no state journal: unknown, but it still reads the files.
    let s = status_env(
        &n,
        &[("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/run/no-such-bus")],
    );
    assert_eq!(s.code, 12, "{}", s.json);
    assert_eq!(s.json["verdict"], "unknown");
    assert!(s.json["units"].is_null());
    assert_eq!(s.json["kubelet_env"]["present"], true);
    let sources: Vec<&str> = s.json["unreachable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["source"].as_str().unwrap())
        .collect();
    assert!(
        sources.contains(&"systemd") && sources.contains(&"state-journal"),
        "{sources:?}"
    );

    // A corrupt journal with systemd reachable: systemd decides, the
    // corruption is reported.
    n.write(
        "/var/lib/node-bootstrap/state.json",
        "{\"schema\": 1, \"steps\": {",
        0o644,
    )
    .unwrap();
    let s = status(&n);
    assert_eq!(s.code, 0, "{}", s.json);
    assert_eq!(s.json["state_journal"]["state"], "corrupt");
    assert!(s.json["phases"].is_null());
    // ... and without systemd: unknown.
    let s = status_env(
        &n,
        &[("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/run/no-such-bus")],
    );
    assert_eq!(s.code, 12, "{}", s.json);
    n.shutdown().unwrap();
}

/// How often systemd has parsed the node's docker.service (each load of a
/// file with an unknown key logs a warning naming it).
fn docker_unit_loads(n: &SimNode) -> usize {
    n.journal_json(&["_PID=1"])
        .iter()
        .filter(|e| {
            e["MESSAGE"]
                .as_str()
                .is_some_and(|m| m.contains("NbStatusProbe"))
        })
        .count()
}

#[test]
fn units_systemd_does_not_hold_are_reported_without_loading_them() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("status-unloaded", false);
    // A docker.service that nothing wants: systemd holds it only while
    // someone loads it, and says so in its log (the unknown key).
    n.write(
        "/etc/systemd/system/docker.service",
        "[Service]\nNbStatusProbe=1\nExecStart=/bin/true\n",
        0o644,
    )
    .unwrap();
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    let before = docker_unit_loads(&n);

    let s = status(&n);
    assert_eq!(s.code, 0, "{}", s.json);
    // Not asked, and no fault: nothing under "Could not reach".
    assert_eq!(s.json["docker"], serde_json::Value::Null, "{}", s.json);
    assert!(
        !s.json["unreachable"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["source"] == "docker"),
        "{}",
        s.json["unreachable"]
    );
    // Push mode: no init-assets.service, and none reported.
    assert!(
        !s.json["units"].to_string().contains("init-assets"),
        "{}",
        s.json["units"]
    );
    assert_matches_systemd(&n, &s);
    let text = text_status(&n);
    assert!(
        text.contains("docker: not asked (docker.service is not active)")
            && !text.contains("  - docker:"),
        "{text}"
    );

    // `systemctl show` loads the unit (and the warning is logged), so the
    // count would have moved had `status` loaded it.
    n.show("docker.service", &["LoadState"]).unwrap();
    n.wait_for("systemd to log its load of docker.service", T, |n| {
        (docker_unit_loads(n) > before).then_some(())
    })
    .unwrap();
    assert_eq!(
        docker_unit_loads(&n),
        before + 1,
        "status made systemd load docker.service"
    );

    // A unit systemd holds is read as before: init-assets.service, started
    // by hand and failed, is reported failed, as systemd says.
    n.write(
        "/etc/systemd/system/init-assets.service",
        "[Service]\nType=oneshot\nExecStart=/bin/false\n",
        0o644,
    )
    .unwrap();
    n.systemctl(&["daemon-reload"]).unwrap();
    let _ = n.systemctl(&["start", "init-assets.service"]);
    n.wait_active_state("init-assets.service", "failed", T)
        .unwrap();
    let s = status(&n);
    assert_eq!(unit(&s, "init-assets.service")["active_state"], "failed");
    assert_matches_systemd(&n, &s);
    n.shutdown().unwrap();
}
