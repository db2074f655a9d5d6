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

/// The specs CI runs on the VM: quick ones across the suite's areas
/// (volumes, the downward API, environment, images' defaults, security
/// contexts, init containers, lifecycle, logs, exec), those a
/// simulated node cannot host (a privileged pod that makes a dummy
/// network device) or hosts only through the rig's runc shim (HostPath
/// with a privileged writer), and image pulls through the registries'
/// forward, public and private.
pub(crate) const SAMPLE: &[&str] = &[
    "[k8s.io] Container Runtime blackbox test when running a container with a new image should be able to pull image [NodeConformance]",
    "[k8s.io] Container Runtime blackbox test when running a container with a new image should be able to pull from private registry with secret [NodeConformance]",
    "[k8s.io] PrivilegedPod [NodeConformance] should enable privileged commands [LinuxOnly]",
    "[sig-storage] HostPath should support r/w [NodeConformance]",
    "[sig-storage] HostPath should support subPath [NodeConformance]",
    "[k8s.io] Docker Containers should use the image defaults if command and args are blank [NodeConformance] [Conformance]",
    "[k8s.io] Docker Containers should be able to override the image's default arguments (docker cmd) [NodeConformance] [Conformance]",
    "[k8s.io] Docker Containers should be able to override the image's default command (docker entrypoint) [NodeConformance] [Conformance]",
    "[k8s.io] Docker Containers should be able to override the image's default command and arguments [NodeConformance] [Conformance]",
    "[k8s.io] Variable Expansion should allow substituting values in a container's args [NodeConformance] [Conformance]",
    "[k8s.io] Variable Expansion should allow substituting values in a container's command [NodeConformance] [Conformance]",
    "[k8s.io] Variable Expansion should allow composing env vars into new env vars [NodeConformance] [Conformance]",
    "[sig-node] Downward API should provide pod name, namespace and IP address as env vars [NodeConformance] [Conformance]",
    "[sig-node] Downward API should provide host IP as an env var [NodeConformance] [Conformance]",
    "[sig-node] Downward API should provide container's limits.cpu/memory and requests.cpu/memory as env vars [NodeConformance] [Conformance]",
    "[sig-storage] Downward API volume should provide podname only [NodeConformance] [Conformance]",
    "[sig-storage] Downward API volume should provide container's cpu limit [NodeConformance] [Conformance]",
    "[sig-storage] ConfigMap should be consumable from pods in volume [NodeConformance] [Conformance]",
    "[sig-storage] ConfigMap should be consumable from pods in volume with mappings as non-root [NodeConformance] [Conformance]",
    "[sig-node] ConfigMap should be consumable via environment variable [NodeConformance] [Conformance]",
    "[sig-storage] Secrets should be consumable from pods in volume [NodeConformance] [Conformance]",
    "[sig-storage] Secrets should be consumable from pods in volume with defaultMode set [LinuxOnly] [NodeConformance] [Conformance]",
    "[sig-api-machinery] Secrets should be consumable from pods in env vars [NodeConformance] [Conformance]",
    "[sig-storage] Projected configMap should be consumable from pods in volume [NodeConformance] [Conformance]",
    "[sig-storage] Projected secret should be consumable from pods in volume [NodeConformance] [Conformance]",
    "[sig-storage] Projected downwardAPI should provide podname only [NodeConformance] [Conformance]",
    "[sig-storage] Projected combined should project all components that make up the projection API [Projection][NodeConformance] [Conformance]",
    "[sig-storage] EmptyDir volumes should support (root,0644,default) [LinuxOnly] [NodeConformance] [Conformance]",
    "[sig-storage] EmptyDir volumes should support (non-root,0666,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]",
    "[sig-storage] EmptyDir volumes volume on tmpfs should have the correct mode [LinuxOnly] [NodeConformance] [Conformance]",
    "[k8s.io] Security Context When creating a container with runAsUser should run the container with uid 65534 [LinuxOnly] [NodeConformance] [Conformance]",
    "[k8s.io] Security Context When creating a pod with readOnlyRootFilesystem should run the container with writable rootfs when readOnlyRootFilesystem=false [NodeConformance] [Conformance]",
    "[k8s.io] Security Context when creating containers with AllowPrivilegeEscalation should not allow privilege escalation when false [LinuxOnly] [NodeConformance] [Conformance]",
    "[k8s.io] InitContainer [NodeConformance] should invoke init containers on a RestartNever pod [Conformance]",
    "[k8s.io] Kubelet when scheduling a busybox command that always fails in a pod should have an terminated reason [NodeConformance] [Conformance]",
    "[k8s.io] Kubelet when scheduling a busybox command in a pod should print the output to logs [NodeConformance] [Conformance]",
    "[k8s.io] KubeletManagedEtcHosts should test kubelet managed /etc/hosts file [LinuxOnly] [NodeConformance] [Conformance]",
    "[k8s.io] Pods should support remote command execution over websockets [NodeConformance] [Conformance]",
    "[k8s.io] Container Runtime blackbox test on terminated container should report termination message [LinuxOnly] from file when pod succeeds and TerminationMessagePolicy FallbackToLogsOnError is set [NodeConformance] [Conformance]",
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
