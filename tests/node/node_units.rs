//! The units of `units/` on a simulated node (a real systemd 252 as PID 1),
//! with the agent replaced by `testkit/standins/agent-stub`: these tests
//! check the unit semantics of seed 002, not the agent. The agent's `run`
//! is the `ExecStart=` of the oneshot k8s-node-bootstrap.service (seed 002
//! had it as `ExecStartPre=`; README "Units" says why it moved).
//!
//! (a) kubelet does not start before kubelet.env is written;
//! (b) a failing `run` crash-loops and then succeeds, and a config error
//!     (exit 4) does not crash-loop;
//! (c) a reboot from `run` leads to a boot that skips the bootstrap;
//! (d) bootkube.service starts only once bootkube.sh appears, after kubelet
//!     started, and marks its .done;
//! (e) tectonic.service starts only after bootkube.service completed, never
//!     when it failed;
//! (f) on the next boot neither runs again.

use std::time::Duration;
use testkit::agentnode::{
    AGENT_PATH, STANDIN_CLUSTER_TAG, UNITS, install_kubelet_wrapper, install_units, kubelet_starts,
    wait_kubelet_starts,
};
use testkit::simnode::{BootEnd, SimNode, skip_unless_possible};

const T: Duration = Duration::from_secs(60);
/// How many times the stub's `run` started (its state is in the agent's
/// state dir, which the unit's sandbox lets it write).
const STUB_RUN_COUNT: &str = "/var/lib/node-bootstrap/stub/run-count";

/// A node with the project's units, the agent stub and kubelet-wrapper
/// stand-in; `master` also enables the bootkube/tectonic path units.
fn node(name: &str, master: bool) -> SimNode {
    let n = SimNode::new(name).unwrap();
    install_units(&n, UNITS).unwrap();
    n.install_file(&testkit::standin("agent-stub"), AGENT_PATH, 0o755)
        .unwrap();
    install_kubelet_wrapper(&n, &[STANDIN_CLUSTER_TAG]).unwrap();
    let mut enable = vec!["k8s-node-bootstrap.service", "kubelet.service"];
    if master {
        enable.extend(["bootkube.path", "tectonic.path"]);
    }
    n.enable(&enable).unwrap();
    n
}

fn stub(n: &SimNode, name: &str, value: &str) {
    n.write(&format!("/etc/stub/{name}"), value, 0o644).unwrap();
}

/// Writes an asset script the way the assets arrive: complete, by rename.
fn asset(n: &SimNode, name: &str, body: &str) {
    n.write(
        &format!("/opt/tectonic/{name}"),
        format!("#!/bin/bash\nset -e\n{body}\n"),
        0o755,
    )
    .unwrap();
}

fn ts(n: &SimNode, unit: &str, prop: &str) -> u64 {
    n.timestamp_us(unit, prop).unwrap()
}

#[test]
fn all_units_pass_systemd_analyze_verify_on_a_node() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("verify", true);
    n.boot().unwrap();
    let mut argv = vec!["systemd-analyze", "verify"];
    let paths: Vec<String> = UNITS
        .iter()
        .map(|u| format!("/etc/systemd/system/{u}"))
        .collect();
    argv.extend(paths.iter().map(String::as_str));
    let out = n.exec(&argv).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Any complaint about our own units (unknown keys are only warnings).
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| UNITS.iter().any(|u| l.contains(u)))
        .collect();
    assert!(
        out.status.success() && ours.is_empty(),
        "systemd-analyze verify: {}\n{stderr}",
        out.status
    );
    n.shutdown().unwrap();
}

/// (a), (d) with assets present at boot, (e) on success, then (f).
#[test]
fn master_first_boot_orders_bootstrap_kubelet_bootkube_tectonic_and_next_boot_skips_them() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("master", true);
    stub(&n, "run-delay", "3");
    asset(
        &n,
        "bootkube.sh",
        "sleep 2\necho bootkube ran >> /var/lib/stub/bootkube-runs",
    );
    asset(
        &n,
        "tectonic-wrapper.sh",
        "echo tectonic ran >> /var/lib/stub/tectonic-runs",
    );
    n.boot().unwrap();

    n.wait_active_state("tectonic.service", "active", T)
        .unwrap();
    // (a) kubelet's only start came after the bootstrap unit was started
    // (its `run` had written kubelet.env), with the env it wrote.
    let knb_active = ts(&n, "k8s-node-bootstrap.service", "ActiveEnterTimestamp");
    assert!(knb_active > 0);
    assert_eq!(
        n.prop("kubelet.service", "NRestarts").unwrap(),
        "0",
        "kubelet must not have failed for a missing kubelet.env"
    );
    assert!(
        ts(&n, "kubelet.service", "InactiveExitTimestamp") >= knb_active,
        "kubelet started before k8s-node-bootstrap finished\n{}",
        n.diagnostics()
    );
    assert_eq!(
        wait_kubelet_starts(&n, 1),
        vec![testkit::agentnode::kubelet_start_record(
            STANDIN_CLUSTER_TAG,
            ""
        )]
    );
    // (d) bootkube waited for kubelet to be started although its assets were
    // there from the start, and marked its .done.
    let kubelet_active = ts(&n, "kubelet.service", "ActiveEnterTimestamp");
    let bootkube_start = ts(&n, "bootkube.service", "ExecMainStartTimestamp");
    assert!(
        bootkube_start >= kubelet_active,
        "bootkube started before kubelet\n{}",
        n.diagnostics()
    );
    assert!(n.exists("/opt/tectonic/init_bootkube.done"));
    // (e) tectonic started only once bootkube had completed.
    let bootkube_done = ts(&n, "bootkube.service", "ActiveEnterTimestamp");
    assert!(
        ts(&n, "tectonic.service", "ExecMainStartTimestamp") >= bootkube_done,
        "tectonic started before bootkube completed"
    );
    assert!(n.exists("/opt/tectonic/init_tectonic.done"));
    assert_eq!(
        n.read("/var/lib/stub/bootkube-runs").unwrap(),
        "bootkube ran\n"
    );
    assert_eq!(
        n.read("/var/lib/stub/tectonic-runs").unwrap(),
        "tectonic ran\n"
    );

    // (f) the next boot: kubelet starts, nothing of the bootstrap runs again.
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
    for unit in [
        "k8s-node-bootstrap.service",
        "bootkube.path",
        "tectonic.path",
    ] {
        assert_eq!(
            n.prop(unit, "ConditionResult").unwrap(),
            "no",
            "{unit} should be skipped on boot 2"
        );
        assert_eq!(n.prop(unit, "ActiveState").unwrap(), "inactive", "{unit}");
    }
    for unit in ["bootkube.service", "tectonic.service"] {
        assert_eq!(
            ts(&n, unit, "ExecMainStartTimestamp"),
            0,
            "{unit} ran on boot 2"
        );
    }
    assert_eq!(
        n.read(STUB_RUN_COUNT).unwrap().trim(),
        "1",
        "the bootstrap ran again"
    );
    assert_eq!(
        n.read("/var/lib/stub/bootkube-runs").unwrap(),
        "bootkube ran\n"
    );
    assert_eq!(
        n.read("/var/lib/stub/tectonic-runs").unwrap(),
        "tectonic ran\n"
    );
    assert_eq!(
        wait_kubelet_starts(&n, 2).len(),
        2,
        "kubelet starts on every boot"
    );
    n.shutdown().unwrap();
}

/// (b) crash-loop until success; a config error stops the loop.
#[test]
fn failing_bootstrap_crash_loops_until_it_succeeds() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("crashloop", false);
    stub(&n, "run-fail", "2");
    // Keep the test short: the shipped RestartSec is 10 s.
    n.drop_in(
        "k8s-node-bootstrap.service",
        "test-restart",
        "[Service]\nRestartSec=1\n",
    )
    .unwrap();
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert_eq!(
        n.prop("k8s-node-bootstrap.service", "NRestarts").unwrap(),
        "2"
    );
    assert_eq!(
        n.prop("k8s-node-bootstrap.service", "ActiveState").unwrap(),
        "active"
    );
    let log = n.journal("k8s-node-bootstrap.service");
    assert!(
        log.contains("stub run: failing attempt 1") && log.contains("stub run: failing attempt 2"),
        "{log}"
    );
    assert_eq!(wait_kubelet_starts(&n, 1).len(), 1);
    n.shutdown().unwrap();
}

#[test]
fn configuration_error_does_not_crash_loop() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("configerror", false);
    stub(&n, "run-exit", "4");
    n.drop_in(
        "k8s-node-bootstrap.service",
        "test-restart",
        "[Service]\nRestartSec=1\n",
    )
    .unwrap();
    n.boot().unwrap();
    n.wait_active_state("k8s-node-bootstrap.service", "failed", T)
        .unwrap();
    // kubelet (Restart=always, RestartSec=10) restarts while kubelet.env is
    // missing; a restart of kubelet must not start the bootstrap again.
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while n.prop("kubelet.service", "NRestarts").unwrap() == "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "kubelet never restarted"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        n.prop("k8s-node-bootstrap.service", "ActiveState").unwrap(),
        "failed"
    );
    assert_eq!(
        n.prop("k8s-node-bootstrap.service", "NRestarts").unwrap(),
        "0"
    );
    assert_eq!(n.read(STUB_RUN_COUNT).unwrap().trim(), "1");
    assert!(!n.exists("/etc/kubernetes/kubelet.env"));
    assert_ne!(n.prop("kubelet.service", "ActiveState").unwrap(), "active");
    n.shutdown().unwrap();
}

/// (c) reboot from `run`; the next boot skips the bootstrap.
#[test]
fn reboot_from_bootstrap_leads_to_a_boot_that_skips_it() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("reboot", false);
    stub(&n, "run-reboot", "");
    n.boot().unwrap();
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    assert!(
        kubelet_starts(&n).is_empty(),
        "kubelet must not start in the boot that reboots"
    );
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert_eq!(
        n.prop("k8s-node-bootstrap.service", "ConditionResult")
            .unwrap(),
        "no"
    );
    assert_eq!(n.read(STUB_RUN_COUNT).unwrap().trim(), "1");
    assert_eq!(wait_kubelet_starts(&n, 1).len(), 1);
    n.shutdown().unwrap();
}

/// (d) bootkube waits for its assets; (e) tectonic never runs after a
/// failed bootkube, and a later trigger retries bootkube.
#[test]
fn bootkube_waits_for_assets_and_tectonic_never_follows_a_failed_bootkube() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("bootkube-fails", true);
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    n.wait_active_state("bootkube.path", "active", T).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        ts(&n, "bootkube.service", "ExecMainStartTimestamp"),
        0,
        "bootkube started without assets"
    );

    // The assets arrive with a bootkube.sh that fails.
    asset(
        &n,
        "tectonic-wrapper.sh",
        "echo tectonic ran >> /var/lib/stub/tectonic-runs",
    );
    asset(&n, "bootkube.sh", "echo bootkube failing >&2\nexit 1");
    n.wait_active_state("bootkube.service", "failed", T)
        .unwrap();
    n.wait_for("tectonic.service job to end", T, |n| {
        let st = n.prop("tectonic.service", "ActiveState").ok()?;
        (st == "inactive" || st == "failed").then_some(())
    })
    .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !n.exists("/opt/tectonic/init_bootkube.done"),
        "a failed bootkube must not be marked done"
    );
    assert_eq!(
        ts(&n, "tectonic.service", "ExecMainStartTimestamp"),
        0,
        "tectonic ran after bootkube failed"
    );
    assert!(n.read("/var/lib/stub/tectonic-runs").is_none());
    assert!(!n.exists("/opt/tectonic/init_tectonic.done"));
    n.shutdown().unwrap();
}

/// (e), (f): a failing tectonic is retried at once by its path unit, at
/// most 3 times (StartLimitBurst), then left failed; the next boot retries it,
/// pulling in bootkube.service through Requires=, whose own condition keeps
/// it from running again; a manual start of either done unit is skipped too.
#[test]
fn failed_tectonic_is_retried_boundedly_then_next_boot_without_rerunning_bootkube() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node("tectonic-retry", true);
    asset(
        &n,
        "bootkube.sh",
        "echo bootkube ran >> /var/lib/stub/bootkube-runs",
    );
    // Fails until the operator's fix (/etc/stub/tectonic-ok) is in place.
    asset(
        &n,
        "tectonic-wrapper.sh",
        "echo tectonic ran >> /var/lib/stub/tectonic-runs\n[ -f /etc/stub/tectonic-ok ]",
    );
    n.boot().unwrap();
    n.wait_for("tectonic.path to give up", T, |n| {
        (n.prop("tectonic.path", "Result").ok()? == "unit-start-limit-hit").then_some(())
    })
    .unwrap();
    assert_eq!(
        n.read("/var/lib/stub/tectonic-runs")
            .unwrap()
            .lines()
            .count(),
        3,
        "retries must be bounded"
    );
    assert!(n.exists("/opt/tectonic/init_bootkube.done"));
    assert!(!n.exists("/opt/tectonic/init_tectonic.done"));

    n.write("/etc/stub/tectonic-ok", "", 0o644).unwrap();
    n.exec(&["systemctl", "reboot"]).unwrap();
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    n.boot().unwrap();
    n.wait_active_state("tectonic.service", "active", T)
        .unwrap();
    assert!(n.exists("/opt/tectonic/init_tectonic.done"));
    assert_eq!(
        n.prop("bootkube.service", "ConditionResult").unwrap(),
        "no",
        "bootkube must be skipped, not rerun"
    );
    assert_eq!(
        n.read("/var/lib/stub/bootkube-runs").unwrap(),
        "bootkube ran\n"
    );
    assert_eq!(
        n.read("/var/lib/stub/tectonic-runs")
            .unwrap()
            .lines()
            .count(),
        4
    );

    // An operator starting the done units by hand does not redeploy anything.
    n.systemctl(&["stop", "tectonic.service", "bootkube.service"])
        .unwrap();
    n.systemctl(&["start", "tectonic.service"]).unwrap();
    assert_eq!(n.prop("tectonic.service", "ConditionResult").unwrap(), "no");
    assert_eq!(
        n.read("/var/lib/stub/bootkube-runs").unwrap(),
        "bootkube ran\n"
    );
    assert_eq!(
        n.read("/var/lib/stub/tectonic-runs")
            .unwrap()
            .lines()
            .count(),
        4
    );
    n.shutdown().unwrap();
}

/// The rig itself: host files under /tmp (a checkout there, fixtures) stay
/// visible inside a node after its boot-time tmpfiles cleanup.
#[test]
fn host_files_under_tmp_stay_visible_after_the_nodes_tmpfiles_cleanup() {
    if skip_unless_possible() {
        return;
    }
    let host = tempfile::Builder::new()
        .prefix("simnode-visible-")
        .tempdir_in("/tmp")
        .unwrap();
    let file = host.path().join("fixture");
    std::fs::write(&file, "from the host\n").unwrap();
    let mut n = node("tmpfiles", false);
    n.boot().unwrap();
    n.wait_for("tmpfiles setup", T, |n| {
        (n.prop("systemd-tmpfiles-setup.service", "ActiveState")
            .ok()?
            == "active")
            .then_some(())
    })
    .unwrap();
    let out = n.exec(&["cat", file.to_str().unwrap()]).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "from the host\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    n.shutdown().unwrap();
}
