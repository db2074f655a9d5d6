//! A worker's first boot from the Ignition config terraform renders.

use crate::checks::*;
use crate::rig::*;
use crate::*;
use serde_json::json;
use std::time::Instant;
use testkit::vm::BootEnd;

#[test]
fn worker_first_boot_from_the_rendered_config_runs_the_agent_to_a_running_kubelet() {
    if skip(&["terraform", "ssh-keygen", "strip"]) {
        return;
    }
    let _turn = testkit::vm::slot();
    let t0 = Instant::now();
    let d = Delivery::new();
    // The shipped defaults (real node paths; OS updates and the addon off).
    // The bootkube master is not booted here, only rendered.
    let host_key = testkit::vm::Image::get().unwrap().ssh_host_key;
    let metal = d.metal(&json!({}), None, (22, &host_key));
    let mut vm = d.worker(&metal);
    vm.boot().unwrap();
    // The rig's recovery from a guest kernel lockup (testkit::vm::lockup),
    // checked where it costs nothing: the line is on the console before
    // the guest's kernel has run, so the cut loses nothing and the next
    // boot is the first boot again.
    vm.append_to_console(
        "[   60.524878] watchdog: BUG: soft lockup - CPU#0 stuck for 45s! [systemd:1]",
    )
    .unwrap();
    vm.wait_ready(BOOT).unwrap();
    // At least the injected one (a real lockup may add another).
    assert!(vm.lockup_restarts() >= 1);
    assert_eq!(vm.boots(), 1, "the rig's restarts are not the test's boots");
    let records = vm.boot_records();
    assert_eq!(
        records.len() as u32,
        1 + vm.lockup_restarts(),
        "{records:?}"
    );
    assert!(records[0].locked_up.is_some(), "{records:?}");
    assert_eq!(records[0].end, Some(BootEnd::PowerLoss));
    assert!(
        records[1].firstboot,
        "Ignition has not run yet: {records:?}"
    );

    let (code, out) = status_wait(&vm);
    assert_eq!(code, Some(0), "status --wait:\n{out}\n{}", vm.diagnostics());

    // Ignition alone enabled the units (no hand step), from its preset.
    let enabled = vm
        .exec(&[
            "systemctl",
            "is-enabled",
            "k8s-node-bootstrap.service",
            "kubelet.service",
        ])
        .unwrap();
    assert_eq!(enabled.stdout_str(), "enabled\nenabled\n");
    assert_eq!(vm.prop("kubelet.service", "ActiveState").unwrap(), "active");
    assert_eq!(
        vm.prop("k8s-node-bootstrap.service", "NRestarts").unwrap(),
        "0"
    );
    // The binary Ignition fetched over HTTP is the one the mirror serves
    // (Ignition checked the SHA-512 the config gave; so does the test).
    let sum = vm.exec(&["sha512sum", "/opt/bin/node-bootstrap"]).unwrap();
    assert!(
        sum.stdout_str().starts_with(&d.agent.sha512),
        "{}",
        sum.stdout_str()
    );
    assert_eq!(
        d.mirror.requests_for(AGENT_PATH).len(),
        1,
        "fetched once, by Ignition"
    );
    // The cluster version came from the API server (client certificate),
    // not from the seed.
    assert_eq!(
        vm.read("/etc/kubernetes/kubelet.env").unwrap(),
        format!(
            "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n\
             KUBELET_CGROUP_DRIVER=\"systemd\"\nKUBELET_RUNTIME=\"docker\"\nKUBELET_ARGS=\"{}\"\n",
            testkit::agentnode::flags_only_kubelet_args("systemd")
        )
    );
    assert!(
        d.cluster
            .api
            .log()
            .requests
            .iter()
            .any(|r| r.path == "/version" && r.client_cert)
    );
    assert_eq!(
        lines(&vm, "/var/lib/kubelet-wrapper/starts"),
        [testkit::agentnode::kubelet_start_record(
            "v1.9.6_coreos.0",
            &testkit::agentnode::flags_only_kubelet_args("systemd")
        )]
    );
    // The first boot is over: the next one will not run Ignition again.
    assert!(!vm.exists(testkit::vm::FIRSTBOOT_FLAG));
    assert_sandbox_applied(&vm);
    vm.shutdown().unwrap();
    report(&vm, t0);
}
