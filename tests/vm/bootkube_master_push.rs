//! The bootkube master: assets pushed over SSH by terraform, a power cut
//! during bootkube.

use crate::checks::*;
use crate::rig::*;
use crate::*;
use serde_json::json;
use std::time::Instant;
use testkit::vm::VmNode;

#[test]
fn bootkube_master_push_over_ssh_and_a_power_cut_during_bootkube_leave_no_done_for_unfinished_work()
{
    if skip(&["terraform", "ssh-keygen", "ssh", "strip"]) {
        return;
    }
    let _turn = testkit::vm::slot();
    let t0 = Instant::now();
    let d = Delivery::new();
    let mut vm = VmNode::new("master-0").unwrap();
    let ssh_port = vm.forward_ssh().unwrap();
    let host_key = vm.image().ssh_host_key.clone();
    let metal = d.metal(&json!({}), None, (ssh_port, &host_key));
    vm.set_ignition(&d.master_config(&metal)).unwrap();
    // No API server: the bootkube master's version comes from its seed
    // (there is no cluster before it).
    vm.forward_to_host(d.mirror.addr().port());
    install_os_parts(&vm);
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();

    // Before the push: kubelet runs, bootkube waits for its assets, and
    // status says the node is not complete.
    vm.wait_active_state("kubelet.service", "active", WORK)
        .unwrap();
    let enabled = vm
        .exec(&[
            "systemctl",
            "is-enabled",
            "k8s-node-bootstrap.service",
            "kubelet.service",
            "bootkube.path",
            "tectonic.path",
        ])
        .unwrap();
    assert_eq!(enabled.stdout_str(), "enabled\nenabled\nenabled\nenabled\n");
    assert_eq!(vm.prop("bootkube.path", "ActiveState").unwrap(), "active");
    assert_eq!(
        vm.prop("bootkube.service", "ActiveState").unwrap(),
        "inactive"
    );
    assert!(!vm.exists("/opt/tectonic"));
    let early = vm
        .exec(&["/opt/bin/node-bootstrap", "status", "--json"])
        .unwrap();
    assert_eq!(
        early.code,
        Some(10),
        "in progress until the assets arrive: {}",
        early.stdout_str()
    );
    assert_eq!(
        vm.read("/etc/kubernetes/kubelet.env").unwrap(),
        format!(
            "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"{SEED_TAG}\"\n\
             KUBELET_CGROUP_DRIVER=\"systemd\"\nKUBELET_RUNTIME=\"docker\"\nKUBELET_ARGS=\"{}\"\n",
            testkit::agentnode::flags_only_master_kubelet_args("systemd")
        )
    );

    // The push: `terraform apply -var push_assets=true` over SSH, as core
    // through sudo. bootkube
    // starts at once (bootkube.path); the test holds it and cuts the power
    // in the middle of its run.
    vm.sh("touch /run/e2e-hold-bootkube").unwrap();
    let out = metal.push();
    assert!(
        out.contains("Apply complete! Resources: 1 added, 0 changed, 0 destroyed."),
        "{out}"
    );
    vm.wait_for("bootkube.sh to run", WORK, |vm| {
        (lines(vm, "/var/lib/e2e/bootkube-runs").len() == 1).then_some(())
    })
    .unwrap();
    assert_eq!(
        vm.prop("bootkube.service", "ActiveState").unwrap(),
        "activating"
    );
    vm.power_cut().unwrap();
    assert!(
        vm.exists("/opt/tectonic/bootkube.sh"),
        "the pushed assets are durable"
    );
    assert!(
        !vm.exists("/opt/tectonic/init_bootkube.done")
            && !vm.exists("/opt/tectonic/init_tectonic.done"),
        "no .done for unfinished work"
    );

    // The next boot: bootkube runs again to its end, then tectonic.
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    let (code, status) = status_wait(&vm);
    assert_eq!(
        code,
        Some(0),
        "status --wait:\n{status}\n{}",
        vm.diagnostics()
    );
    assert!(vm.exists("/opt/tectonic/init_bootkube.done"));
    assert!(vm.exists("/opt/tectonic/init_tectonic.done"));
    assert_eq!(
        lines(&vm, "/var/lib/e2e/bootkube-runs"),
        [
            "bootkube ran in /opt/tectonic as uid 0",
            "bootkube ran in /opt/tectonic as uid 0"
        ],
        "the run the cut ended, then a whole one"
    );
    assert_eq!(
        lines(&vm, "/var/lib/e2e/tectonic-runs"),
        ["tectonic ran in /opt/tectonic"]
    );
    assert_eq!(
        vm.read("/opt/tectonic/tls/apiserver.key").unwrap(),
        "-----BEGIN PRIVATE KEY-----\nnot really\n"
    );
    let perms = vm.exec(&["stat", "-c", "%u %a", "/opt/tectonic"]).unwrap();
    assert_eq!(
        perms.stdout_str().trim(),
        "0 700",
        "assets: root-owned, private"
    );

    // Apply again: nothing to do, nothing happens on the node.
    let out = metal.push();
    assert!(
        out.contains("Apply complete! Resources: 0 added, 0 changed, 0 destroyed."),
        "{out}"
    );
    assert_eq!(lines(&vm, "/var/lib/e2e/bootkube-runs").len(), 2);
    assert_eq!(lines(&vm, "/var/lib/e2e/tectonic-runs").len(), 1);
    vm.shutdown().unwrap();
    report(&vm, t0);
}
