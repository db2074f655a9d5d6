//! Kubernetes' node conformance suite on the worker VM (a real kernel,
//! the real runc with no shim, containerd as the agent configured it):
//! run by `worker_joins_a_control_plane` once its worker is Ready, on the
//! same machine. CI runs the named sample [`SAMPLE`] (the whole suite
//! does not fit its budget under emulation); `NB_VM_CONFORMANCE=all` runs
//! every [NodeConformance] spec (the run of record, docs/conformance.md;
//! `scripts/conformance.sh --vm`).
//!
//! The VM reaches no registry on the host's loopback: the suite's images
//! go onto its disk before boot ([`install_e2e_images`]) and into its
//! containerd under the names the suite asks for ([`import_e2e_images`]),
//! so a pod whose image is present starts from it. The specs that must
//! pull (the image pull specs) are left out of the sample; in the whole
//! run the list skips them for `vm`.

use crate::rig::VM_HOSTNAME;
use testkit::conformance::{self, Plan, Suite, WorkerKind, registry::Registries, skips};
use testkit::vm::VmNode;

/// Where the suite's images wait on the VM's disk.
const E2E_IMAGES_DIR: &str = "/var/lib/nb-test/e2e-images";

/// The specs CI runs on the VM: quick ones across the suite's areas
/// (volumes, the downward API, environment, images' defaults, security
/// contexts, init containers, lifecycle, logs, exec), and those a
/// simulated node cannot host (a privileged pod that makes a dummy
/// network device, HostPath with a privileged writer).
pub(crate) const SAMPLE: &[&str] = &[
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

/// Puts the suite's images (`scripts/build-e2e-images.sh`'s tars) on the
/// VM's disk, before boot.
pub(crate) fn install_e2e_images(vm: &VmNode) {
    let images = conformance::images().unwrap();
    let disk = vm.disk();
    for (_, _, tar) in image_list(&images) {
        disk.install_file(
            &images.join(&tar),
            &format!("{E2E_IMAGES_DIR}/{}", file_name(&tar)),
            0o644,
        )
        .unwrap();
    }
}

/// `STORAGE PATH:TAG TAR` of each image.
fn image_list(images: &std::path::Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(images.join("images.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.into(), f.next()?.into(), f.next()?.into()))
        })
        .collect()
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Imports the images into the running VM's containerd (namespace
/// `k8s.io`) under the names the suite asks for with `registries`' ports.
fn import_e2e_images(vm: &VmNode, registries: &Registries) {
    let images = conformance::images().unwrap();
    for (storage, reference, tar) in image_list(&images) {
        let port = if storage == "private" {
            registries.private_port
        } else {
            registries.public_port
        };
        let path = format!("{E2E_IMAGES_DIR}/{}", file_name(&tar));
        let ctr = |args: &[&str]| {
            let mut argv = vec![testkit::pods::CTR, "--namespace", "k8s.io", "images"];
            argv.extend_from_slice(args);
            let out = vm.exec(&argv).unwrap();
            assert!(
                out.success(),
                "ctr {args:?} in the VM: {}",
                out.stderr_str()
            );
            out.stdout_str()
        };
        // The archive's own name (docker-archive.sh's tag), then the
        // suite's.
        let imported = ctr(&["import", &path]);
        let name = imported
            .split_whitespace()
            .find(|w| w.contains(':') && !w.starts_with("sha256"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("ctr import {path} named no image: {imported}"));
        ctr(&[
            "tag",
            "--force",
            &name,
            &format!("127.0.0.1:{port}/{reference}"),
        ]);
    }
}

/// Runs the sample (or, with `NB_VM_CONFORMANCE=all`, the whole suite)
/// on the VM, the cluster's only worker; every spec passes or is skipped
/// for `vm` by the repository's list.
pub(crate) fn the_node_conformance_suite_passes_on_the_vm(
    kubectl: &testkit::kube::Kubectl,
    vm: &VmNode,
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
    let registries = Registries::start(&conformance::images().unwrap()).unwrap();
    import_e2e_images(vm, &registries);
    let out = tempfile::Builder::new()
        .prefix("nb-conformance-vm-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let suite = Suite {
        parts: &parts,
        kubectl,
        registries: &registries,
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
