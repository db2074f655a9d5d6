//! `node-bootstrap run` end to end on simulated nodes: the real agent under
//! the real systemd, logind and D-Bus, with the API server stand-in on host
//! loopback and the fake update_engine as a D-Bus service in the node.

use serde_json::json;
use std::time::Duration;
use testkit::agentnode::{
    AgentNode, Cluster, OS_RELEASE, hold_shutdown, kubelet_starts, state_journal,
    wait_kubelet_starts,
};
use testkit::apiserver::{ApiServerOptions, Fault};
use testkit::simnode::{BootEnd, SimNode, skip_unless_possible};

const T: Duration = Duration::from_secs(90);
const KNB: &str = "k8s-node-bootstrap.service";

fn cluster() -> Cluster {
    Cluster::start(ApiServerOptions {
        git_version: "v1.9.6+coreos.0".into(),
        ..Default::default()
    })
    .unwrap()
}

fn kubelet_env(n: &SimNode) -> Option<String> {
    n.read("/etc/kubernetes/kubelet.env")
}

/// Waits until the bootstrap unit has failed at least `restarts` times and
/// returns its journal.
fn wait_restarts(n: &SimNode, restarts: u32) -> String {
    n.wait_for(&format!("{KNB} to restart {restarts} times"), T, |n| {
        let r: u32 = n.prop(KNB, "NRestarts").ok()?.parse().ok()?;
        (r >= restarts).then_some(())
    })
    .unwrap();
    n.journal(KNB)
}

#[test]
fn worker_joins_with_the_api_servers_version_without_a_reboot() {
    if skip_unless_possible() {
        return;
    }
    let c = cluster();
    let mut n = AgentNode::new("worker-join")
        .seed("# provisioned\nKUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.8.4_coreos.0\"\nNODE_NOTE=\"--node-labels=role=worker \\\"quoted\\\" \\$HOME\"\n")
        .kubeconfig(c.kubeconfig())
        .build()
        .unwrap();
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert_eq!(
        kubelet_env(&n).unwrap(),
        format!(
            "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\nNODE_NOTE=\"--node-labels=role=worker \\\"quoted\\\" \\$HOME\"\n\
             KUBELET_CGROUP_DRIVER=\"cgroupfs\"\nKUBELET_RUNTIME=\"docker\"\nKUBELET_ARGS=\"{}\"\n",
            testkit::agentnode::flags_only_kubelet_args("cgroupfs")
        ),
        "the seed's keys in order, the cluster's tag, the cgroup driver of docker on this cgroup v1 host, \
         docker for 1.9, and every setting of a 1.9 kubelet as a flag"
    );
    assert!(
        !n.exists("/etc/kubernetes/kubelet-config.yaml"),
        "a 1.9 kubelet has no configuration file"
    );
    assert_eq!(
        wait_kubelet_starts(&n, 1),
        vec![testkit::agentnode::kubelet_start_record(
            "v1.9.6_coreos.0",
            &testkit::agentnode::flags_only_kubelet_args("cgroupfs")
        )]
    );
    // systemd read the quoted value back exactly as the seed meant it.
    let env = n
        .exec(&[
            "sh",
            "-c",
            "tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value kubelet)/environ",
        ])
        .unwrap();
    assert!(
        String::from_utf8_lossy(&env.stdout)
            .contains("NODE_NOTE=--node-labels=role=worker \"quoted\" $HOME\n")
    );
    assert_eq!(n.boots(), 1);
    assert_eq!(n.prop(KNB, "NRestarts").unwrap(), "0");
    // Type=notify: the unit became active on the agent's READY=1 (a run
    // that exits without it fails with result `protocol`), says so in
    // `systemctl status`, and kubelet's start waited for it.
    n.wait_active_state(KNB, "active", T).unwrap();
    assert_eq!(n.prop(KNB, "Type").unwrap(), "notify");
    assert_eq!(n.prop(KNB, "Result").unwrap(), "success");
    assert_eq!(
        n.prop(KNB, "StatusText").unwrap(),
        "kubelet.env is in place"
    );
    assert!(
        n.timestamp_us("kubelet.service", "InactiveExitTimestamp")
            .unwrap()
            >= n.timestamp_us(KNB, "ActiveEnterTimestamp").unwrap(),
        "kubelet started before the agent said READY=1"
    );
    assert!(
        c.api
            .log()
            .requests
            .iter()
            .any(|r| r.path == "/version" && r.client_cert)
    );
    // Structured journald fields for every step.
    for step in ["assets", "cluster-version", "os-update", "kubelet-env"] {
        let lines = n.journal_json(&[&format!("STEP={step}")]);
        assert!(
            lines.iter().any(|l| l["MESSAGE"] == "step done"),
            "no 'step done' for {step}"
        );
        // Each names its unit itself: `journalctl -u` finds a line that
        // journald could not attribute (its sender gone, systemd #2913).
        for l in &lines {
            assert_eq!(l["OBJECT_SYSTEMD_UNIT"], KNB, "{step}: {l}");
        }
    }
    let j = state_journal(&n).unwrap();
    assert_eq!(
        j["steps"]["cluster-version"]["result"]["version"],
        "v1.9.6+coreos.0"
    );
    assert_eq!(
        j["steps"]["cluster-version"]["result"]["source"]["kind"],
        "api-server"
    );
    assert_eq!(j["steps"]["os-update"]["result"]["outcome"], "disabled");
    assert!(j["steps"].get("reboot").is_none());
    n.shutdown().unwrap();
}

#[test]
fn os_update_reboots_once_then_kubelet_env_then_later_boots_skip_the_agent() {
    if skip_unless_possible() {
        return;
    }
    let c = cluster();
    let mut n = AgentNode::new("os-update")
        .kubeconfig(c.kubeconfig())
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
    n.boot().unwrap();
    assert_eq!(
        n.wait_down(T).unwrap(),
        BootEnd::Reboot,
        "the update must reboot the node"
    );
    assert!(
        kubelet_env(&n).is_none(),
        "kubelet.env must wait until the node runs the new OS"
    );
    assert!(
        kubelet_starts(&n).is_empty(),
        "kubelet must not start before the reboot"
    );
    let j = state_journal(&n).unwrap();
    assert_eq!(
        j["steps"]["os-update"]["result"]["outcome"],
        "reboot-pending"
    );
    assert_eq!(
        j["steps"]["reboot"]["result"]["reason"],
        "os 1520.3.0 -> 1576.4.0"
    );

    // Second boot: the fake update_engine switched the OS; run confirms it
    // and writes kubelet.env.
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert!(n.read(OS_RELEASE).unwrap().contains("VERSION_ID=1576.4.0"));
    assert!(
        kubelet_env(&n)
            .unwrap()
            .contains("KUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"")
    );
    let j = state_journal(&n).unwrap();
    assert!(j["steps"]["os-update"]["result"]["confirmed_in_boot"].is_string());
    assert_eq!(j["steps"]["reboot"]["result"]["rebooted"], true);
    assert_eq!(n.prop(KNB, "NRestarts").unwrap(), "0");

    // Third boot: the agent is skipped, kubelet starts.
    n.exec(&["systemctl", "reboot"]).unwrap();
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert_eq!(n.prop(KNB, "ConditionResult").unwrap(), "no");
    assert_eq!(wait_kubelet_starts(&n, 2).len(), 2);
    n.shutdown().unwrap();
}

#[test]
fn a_reboot_that_never_happens_does_not_let_kubelet_start() {
    if skip_unless_possible() {
        return;
    }
    let c = cluster();
    let mut n = AgentNode::new("stuck-reboot")
        .kubeconfig(c.kubeconfig())
        .update_engine(&["--scenario", "update", "--step-ms", "50"])
        .config(json!({"reboot": {"wait_secs": 3}}))
        .build()
        .unwrap();
    // Something holds a shutdown delay lock: logind accepts the reboot, the
    // node stays up.
    hold_shutdown(&n).unwrap();
    n.boot().unwrap();
    let log = wait_restarts(&n, 2);
    assert!(
        log.contains(
            "reboot requested (os 1520.3.0 -> 9999.0.0) but the node is still up after 3s"
        ),
        "{log}"
    );
    assert!(n.is_running());
    assert!(kubelet_env(&n).is_none());
    assert!(kubelet_starts(&n).is_empty());
    assert_ne!(n.prop("kubelet.service", "ActiveState").unwrap(), "active");
    n.power_cut().unwrap();
}

#[test]
fn a_config_error_fails_the_unit_once_with_the_reason_in_its_status() {
    if skip_unless_possible() {
        return;
    }
    let mut n = AgentNode::new("config-error")
        .config(json!({"os_update": {"timeout_secs": 0}}))
        .build()
        .unwrap();
    n.boot().unwrap();
    n.wait_active_state(KNB, "failed", T).unwrap();
    // Exit 4 is in RestartPreventExitStatus=: no restart, no READY=1, and
    // `systemctl status` shows what is wrong.
    assert_eq!(n.prop(KNB, "ExecMainStatus").unwrap(), "4");
    assert_eq!(n.prop(KNB, "Result").unwrap(), "exit-code");
    let status = n.prop(KNB, "StatusText").unwrap();
    assert!(
        status.starts_with("failed: ") && status.contains("timeout_secs"),
        "{status}"
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(n.prop(KNB, "NRestarts").unwrap(), "0");
    assert!(kubelet_env(&n).is_none());
    n.shutdown().unwrap();
}

#[test]
fn update_engine_error_ends_in_a_clear_message_and_a_retry() {
    if skip_unless_possible() {
        return;
    }
    let c = cluster();
    let mut n = AgentNode::new("ue-error")
        .kubeconfig(c.kubeconfig())
        .update_engine(&["--scenario", "error", "--step-ms", "50"])
        .build()
        .unwrap();
    n.boot().unwrap();
    let log = wait_restarts(&n, 1);
    assert!(log.contains("os-update failed: "), "{log}");
    assert!(log.to_lowercase().contains("error"), "{log}");
    // Retryable: exit 3, so systemd restarted it (the restarted run may
    // already be at it again, so the failure is read from the history).
    assert!(log.contains("status=3/"), "{log}");
    let j = state_journal(&n).unwrap();
    let failed = j["history"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["step"] == "os-update" && e["event"] == "failed");
    assert!(failed, "{j:#}");
    assert!(kubelet_env(&n).is_none());
    n.shutdown().unwrap();
}

#[test]
fn update_engine_hang_times_out_and_retries() {
    if skip_unless_possible() {
        return;
    }
    let c = cluster();
    let mut n = AgentNode::new("ue-hang")
        .kubeconfig(c.kubeconfig())
        .update_engine(&["--scenario", "hang", "--step-ms", "50"])
        .config(json!({"os_update": {"timeout_secs": 3}}))
        .build()
        .unwrap();
    n.boot().unwrap();
    let log = wait_restarts(&n, 1);
    assert!(log.contains("os-update failed: "), "{log}");
    // The restarted run may already be retrying: read the failure from the
    // journal's history.
    let j = state_journal(&n).unwrap();
    let err = j["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["step"] == "os-update" && e["event"] == "failed")
        .and_then(|e| e["detail"].as_str())
        .unwrap_or_else(|| panic!("no os-update failure in {j:#}"))
        .to_string();
    assert!(
        err.contains("3s") || err.contains("timed out") || err.contains("no progress"),
        "{err}"
    );
    assert!(kubelet_env(&n).is_none());
    n.shutdown().unwrap();
}

#[test]
fn unreachable_api_server_ends_in_a_clear_message_and_a_retry_then_recovers() {
    if skip_unless_possible() {
        return;
    }
    // The API server answers 503 to the first 4 connections: one run's 3
    // attempts fail, the restarted run gets through.
    let c = Cluster::start(ApiServerOptions {
        faults: vec![Fault::Status(503); 4],
        ..Default::default()
    })
    .unwrap();
    let mut n = AgentNode::new("api-down")
        .kubeconfig(c.kubeconfig())
        .build()
        .unwrap();
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    let log = n.journal(KNB);
    assert!(log.contains("cluster-version failed: "), "{log}");
    assert!(log.contains("failed after 3 attempts"), "{log}");
    // At least the one restart the faults force; a loaded host can add a
    // restart of its own (a run that failed for a transient reason before
    // it reached the API server, also retried), which is no failure here.
    let restarts: u32 = n.prop(KNB, "NRestarts").unwrap().parse().unwrap();
    assert!(restarts >= 1, "NRestarts {restarts}");
    assert!(kubelet_env(&n).unwrap().contains("v1.9.6_coreos.0"));
    n.shutdown().unwrap();
}

#[test]
fn power_cut_in_the_middle_of_the_update_still_converges() {
    if skip_unless_possible() {
        return;
    }
    let c = cluster();
    let mut n = AgentNode::new("power-cut")
        .kubeconfig(c.kubeconfig())
        .update_engine(&["--scenario", "update", "--step-ms", "400"])
        .build()
        .unwrap();
    n.boot().unwrap();
    n.wait_for("the update to be downloading", T, |n| {
        let j = state_journal(n)?;
        (j["steps"]["os-update"]["status"] == "running").then_some(())
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    n.power_cut().unwrap();
    assert!(kubelet_env(&n).is_none());
    n.boot().unwrap();
    // The interrupted update runs again, ends in a reboot, then kubelet.env.
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert!(kubelet_env(&n).unwrap().contains("v1.9.6_coreos.0"));
    let j = state_journal(&n).unwrap();
    assert!(j["steps"]["os-update"]["attempts"].as_u64().unwrap() >= 2);
    n.shutdown().unwrap();
}

#[test]
fn bootkube_master_uses_the_seed_version_without_an_api_server() {
    if skip_unless_possible() {
        return;
    }
    let mut n = AgentNode::new("bootkube-master")
        .bootkube_master()
        .kubelet_images(&[testkit::agentnode::SEED_TAG])
        .build()
        .unwrap();
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert!(
        kubelet_env(&n)
            .unwrap()
            .contains("KUBELET_IMAGE_TAG=\"v1.8.4_coreos.0\"")
    );
    let j = state_journal(&n).unwrap();
    assert_eq!(
        j["steps"]["cluster-version"]["result"]["source"]["kind"],
        "seed"
    );
    n.shutdown().unwrap();
}

/// `status` on a real first boot with the real agent: while a reboot is
/// pending (held by a logind delay lock) it says so and exits 10; once the
/// lock goes the node reboots, and on the second boot `status` says
/// complete and exits 0, each matching what systemd reports.
#[test]
fn status_follows_a_real_first_boot_through_reboot_pending_to_complete() {
    if skip_unless_possible() {
        return;
    }
    let c = cluster();
    let mut n = AgentNode::new("status-reboot")
        .kubeconfig(c.kubeconfig())
        .update_engine(&[
            "--scenario",
            "update",
            "--step-ms",
            "50",
            "--new-version",
            "1576.4.0",
        ])
        .config(json!({"reboot": {"wait_secs": 120}}))
        .build()
        .unwrap();
    hold_shutdown(&n).unwrap();
    n.boot().unwrap();
    n.wait_for("the reboot to be requested", T, |n| {
        (state_journal(n)?["steps"]["reboot"]["status"] == "running").then_some(())
    })
    .unwrap();
    let status = |n: &SimNode| {
        let out = n
            .exec(&["/opt/bin/node-bootstrap", "status", "--json"])
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), v)
    };
    let (code, v) = status(&n);
    assert_eq!(code, Some(10), "{v:#}");
    assert_eq!(v["verdict"], "in-progress");
    let waiting: Vec<String> = v["waiting_for"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert!(
        waiting
            .iter()
            .any(|w| w == "reboot pending: os 1520.3.0 -> 1576.4.0"),
        "{waiting:?}"
    );
    let knb = v["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == KNB)
        .unwrap()
        .clone();
    assert_eq!(knb["active_state"], n.prop(KNB, "ActiveState").unwrap());
    assert_eq!(knb["sub_state"], n.prop(KNB, "SubState").unwrap());
    assert_eq!(v["kubelet_env"]["present"], false);

    // The lock goes away: logind carries out the reboot it was asked for.
    n.exec(&["systemctl", "stop", "hold-shutdown.service"])
        .unwrap();
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    let (code, v) = status(&n);
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["verdict"], "complete");
    let kubelet = v["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "kubelet.service")
        .unwrap()
        .clone();
    assert_eq!(kubelet["active_state"], "active");
    assert_eq!(v["kubelet_env"]["present"], true);
    n.shutdown().unwrap();
}
