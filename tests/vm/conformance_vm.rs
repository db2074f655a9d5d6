//! Kubernetes' node conformance suite on the worker VM (a real kernel,
//! the real runc with no shim, containerd as the agent configured it):
//! run by `worker_joins_a_control_plane` once its worker is Ready, on the
//! same machine. CI runs the named sample [`SAMPLE`] (the whole suite
//! does not fit its budget under emulation); `NB_VM_CONFORMANCE=all` runs
//! every [NodeConformance] spec (the run of record, docs/conformance.md).
//!
//! The VM pulls the suite's images as the simulated nodes do, from the
//! registries on the host's loopback under the names the suite gives
//! (`127.0.0.1:PORT/...`, which containerd pulls from over plain HTTP):
//! [`registries_for`] starts them before boot and puts on the VM's disk a
//! socket on the guest's `127.0.0.1:PORT` for each, whose
//! `systemd-socket-proxyd` passes every connection to `HOST_ALIAS:PORT`,
//! which QEMU forwards to the host's `127.0.0.1:PORT`. A TEST PART, like
//! the pods' network: what a real cluster has as a registry its nodes can
//! reach.

use crate::rig::VM_HOSTNAME;
use testkit::conformance::{self, Plan, Suite, WorkerKind, registry::Registries, skips};
use testkit::vm::{HOST_ALIAS, VmNode};

/// The specs CI runs on the VM: those a simulated node cannot host (a
/// privileged pod that makes a dummy network device) or hosts only through
/// the rig's runc shim (HostPath with a privileged writer), and image
/// pulls through the registries' forward, public and private. The rest of
/// the suite runs on the simulated workers in the `conformance` tier every
/// run, and on the VM in the run of record (`NB_VM_CONFORMANCE=all`): a
/// wider sample here cost the VM tier about 20 minutes under emulation.
pub(crate) const SAMPLE: &[&str] = &[
    "[k8s.io] Container Runtime blackbox test when running a container with a new image should be able to pull image [NodeConformance]",
    "[k8s.io] Container Runtime blackbox test when running a container with a new image should be able to pull from private registry with secret [NodeConformance]",
    "[k8s.io] PrivilegedPod [NodeConformance] should enable privileged commands [LinuxOnly]",
    "[sig-storage] HostPath should support r/w [NodeConformance]",
    "[sig-storage] HostPath should support subPath [NodeConformance]",
];

/// Starts the suite's registries and lets the VM reach them at the
/// names the suite gives (`127.0.0.1:PORT` in the guest too), from its
/// next boot on: a socket unit per registry on the VM's disk, enabled, and
/// QEMU's forward of `HOST_ALIAS:PORT` to the host. Before boot.
pub(crate) fn registries_for(vm: &mut VmNode) -> Registries {
    let registries = Registries::start(&conformance::images().unwrap()).unwrap();
    for port in [registries.public_port, registries.private_port] {
        vm.forward_to_host(port);
        let unit = format!("nb-test-registry-{port}");
        let disk = vm.disk();
        disk.write(
            &format!("/etc/systemd/system/{unit}.socket"),
            format!(
                "# TEST PART (VM tier): the host's image registry at the name the\n\
                 # conformance suite gives it (tests/vm/conformance_vm.rs).\n\
                 [Socket]\nListenStream=127.0.0.1:{port}\n\n[Install]\nWantedBy=sockets.target\n"
            ),
            0o644,
        )
        .unwrap();
        disk.write(
            &format!("/etc/systemd/system/{unit}.service"),
            format!(
                "# TEST PART (VM tier): see {unit}.socket.\n\
                 [Service]\nExecStart=/usr/lib/systemd/systemd-socket-proxyd {HOST_ALIAS}:{port}\n"
            ),
            0o644,
        )
        .unwrap();
        disk.symlink(
            &format!("/etc/systemd/system/sockets.target.wants/{unit}.socket"),
            &format!("/etc/systemd/system/{unit}.socket"),
        )
        .unwrap();
    }
    registries
}

/// Runs the sample (or, with `NB_VM_CONFORMANCE=all`, the whole suite)
/// on the VM, the cluster's only worker; every spec passes or is skipped
/// for `vm` by the repository's list.
pub(crate) fn the_node_conformance_suite_passes_on_the_vm(
    kubectl: &testkit::kube::Kubectl,
    vm: &VmNode,
    registries: &Registries,
) {
    let parts = conformance::parts().unwrap();
    let all = conformance::list_specs(&parts).unwrap();
    let whole = std::env::var("NB_VM_CONFORMANCE").is_ok_and(|v| v == "all");
    let given: Vec<String> = if whole {
        all.clone()
    } else {
        for s in SAMPLE {
            assert!(all.iter().any(|a| a == s), "the sample names no spec: {s}");
        }
        SAMPLE.iter().map(|s| s.to_string()).collect()
    };
    let list = skips::load().unwrap();
    let out = tempfile::Builder::new()
        .prefix("nb-conformance-vm-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let suite = Suite {
        parts: &parts,
        kubectl,
        registries,
        parallel: 6,
        out_dir: out.path().to_path_buf(),
    };
    let run = suite
        .run_on_worker(Plan::new(WorkerKind::Vm, VM_HOSTNAME, given, &list), &[])
        .unwrap();
    eprintln!(
        "vm {}: node conformance ({}):\n{}",
        vm.name(),
        if whole {
            "the whole suite"
        } else {
            "CI's sample"
        },
        conformance::table(std::slice::from_ref(&run))
    );
    if !run.ok() {
        let kept = out.keep();
        panic!(
            "{}\n(ginkgo log and JUnit files kept in {})\n{}",
            conformance::failures(std::slice::from_ref(&run)),
            kept.display(),
            vm.diagnostics()
        );
    }
}
