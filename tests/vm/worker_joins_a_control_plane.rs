//! A worker with an OS update and the real docker joins a control plane
//! on the host.

use crate::checks::*;
use crate::rig::*;
use crate::*;
use std::fs;
use std::time::Instant;
use testkit::kube::ControlPlane;
use testkit::vm::{BootEnd, HOST_ALIAS, VmNode};

#[test]
fn worker_first_boot_with_an_os_update_and_the_real_docker_joins_a_control_plane_on_the_host() {
    if skip(&["terraform", "ssh-keygen", "strip"]) || testkit::kube::skip_unless_available() {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
    let t0 = Instant::now();
    // The control plane on the host, its certificate valid for the address
    // the VM reaches the host at; the worker's kubeconfig with the client
    // certificate of its node name (the image's host name).
    let parts = testkit::kube::parts().unwrap();
    let cp = ControlPlane::new(&[HOST_ALIAS]);
    let running = cp.start(&parts).unwrap();
    let mut d = Delivery::new();
    d.kubeconfig = cp.node_kubeconfig(VM_HOSTNAME, Some(&VmNode::guest_url(&cp.url())));
    d.runtime_mappings = d.path().join("runtime-mappings.yaml");
    fs::write(&d.runtime_mappings, testkit::cluster::runtime_mappings()).unwrap();
    let m = TorcxMirror::real_docker();
    let mut vm = updating_worker(&d, &m);
    vm.forward_to_host(cp.apiserver_port);
    install_real_kubelet(&vm, &parts);
    let booted_at = std::time::SystemTime::now();
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    // The real torcx-generator applied the OS image's docker 1.12.
    assert!(
        torcx_docker(&vm).contains("1.12.6"),
        "{}",
        torcx_docker(&vm)
    );

    // Boot 1 ends in the agent's own reboot (logind), a kernel reboot.
    assert_eq!(vm.wait_down(WORK).unwrap(), BootEnd::Reboot);
    assert_rebooted_for_the_update(&vm, &m);
    let j = state_journal(&vm).unwrap();
    assert_eq!(
        j["steps"]["reboot"]["result"]["reason"],
        format!("os {OS_VERSION} -> {NEXT_OS}; docker 1.12 -> {}", m.next),
        "{j:#}"
    );

    // Boot 2: the boot loader boots the new OS; torcx applies the real
    // docker; the agent confirms both and writes kubelet.env with the
    // cluster's version; the real kubelet of that version registers.
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_updated_and_complete(&vm, &m, &parts.version);
    let hostname = vm.read("/proc/sys/kernel/hostname").unwrap_or_default();
    assert_eq!(hostname.trim(), VM_HOSTNAME);
    let ready = running
        .kubectl
        .wait_ready(&[VM_HOSTNAME], WORK)
        .unwrap_or_else(|e| panic!("{e:#}\n{}", vm.diagnostics()));
    let node = ready.iter().find(|n| n.name == VM_HOSTNAME).unwrap();
    assert_eq!(node.kubelet_version, parts.version);
    assert_eq!(
        node.container_runtime_version,
        format!("docker://{}", m.next_build)
    );
    assert_eq!(node.labels["node.kubernetes.io/role"], "worker");
    bench_rows(&vm, booted_at, node.ready_since.expect("a Ready condition"));
    assert_eq!(
        lines(&vm, "/var/lib/kubelet-wrapper/starts").len(),
        1,
        "kubelet started once, in the second boot"
    );
    assert_eq!(
        vm.prop("k8s-node-bootstrap.service", "NRestarts").unwrap(),
        "0"
    );
    let j = state_journal(&vm).unwrap();
    for step in ["os-update", "docker-addon"] {
        assert!(
            j["steps"][step]["result"]["confirmed_in_boot"].is_string(),
            "{step} confirmed after the reboot: {j:#}"
        );
    }
    assert_eq!(
        m.rig.server.requests_for(&m.next_path).len(),
        1,
        "the docker package downloaded once"
    );
    assert!(
        m.rig
            .server
            .requests_for(&m.rig.manifest_path(NEXT_OS))
            .iter()
            .any(|r| r.status == 200),
        "the manifest of the OS the node boots next"
    );
    vm.shutdown().unwrap();
    report(&vm, t0);
}
