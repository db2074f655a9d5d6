//! A worker of today's Flatcar on a real machine, with the hardened
//! k8s-node-bootstrap.service: its OS has no containerd and no kubelet,
//! so the agent merges both as system extensions from one signed mirror
//! (containerd 1.6.20, Debian's, for the runtime; the kubelet of the
//! cluster's version, a stand-in that records its starts). The agent runs
//! in its own mount namespace, so it asks systemd (the VM's real PID 1,
//! whose root is shared as on every machine) for each `systemd-sysext
//! refresh` and for the merged program's `--version`; the test shows the
//! merges where the node's units see them: containerd.service runs the
//! merged containerd and answers CRI, kubelet.service runs the merged
//! kubelet, before kubelet.env and without a reboot.

use crate::checks::*;
use crate::rig::*;
use crate::*;
use serde_json::json;
use std::time::Instant;
use testkit::containerd_sysext::{self, debian_image, flatcar_release, os_containerd_files};
use testkit::kubelet_sysext::{
    self as ks, ExtensionMirror, KEYRING_PATH, Kubelet, fake_kubelet, flatcar_os_release,
    kubelet_image,
};
use testkit::vm::VmNode;

/// The cluster's version (a Kubernetes that runs on containerd, whose
/// mappings below list containerd 1.6 first).
const CLUSTER: &str = "v1.26.3";
const MAPPINGS: &str = "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.26\":\n      containerd: [\"1.6\", \"1.7\"]\n";
const KNB: &str = "k8s-node-bootstrap.service";

#[test]
fn a_sysext_worker_gets_containerd_and_the_kubelet_merged_by_pid1_for_its_sandboxed_agent() {
    if skip(&["terraform", "ssh-keygen", "strip", "mkfs.ext4"]) {
        return;
    }
    let _turn = testkit::vm::slot();
    let t0 = Instant::now();
    let mut d = Delivery::of_cluster_version(CLUSTER);
    let mappings = d.path().join("runtime-mappings.yaml");
    std::fs::write(&mappings, MAPPINGS).unwrap();
    d.runtime_mappings = mappings;

    // One mirror for both products, as an operator serves them.
    let mirror = ExtensionMirror::start().unwrap();
    let release = flatcar_release();
    let containerd = debian_image(&release).unwrap();
    let kubelet = kubelet_image(Kubelet::Bytes(&fake_kubelet(CLUSTER)), &release).unwrap();
    mirror
        .publish_products(&[
            (containerd_sysext::PRODUCT, "1.6.20", &containerd),
            (ks::EXTENSION, CLUSTER, &kubelet),
        ])
        .unwrap();
    let mut sources = mirror.config_patch();
    sources["sources"]["url"] = json!(VmNode::guest_url(&mirror.url()));
    let host_key = testkit::vm::Image::get().unwrap().ssh_host_key;
    let metal = d.metal(&sources, None, (22, &host_key));
    let mut vm = d.worker(&metal);
    vm.forward_to_host(mirror.server.addr().port());
    // Today's Flatcar (SYSEXT_LEVEL 1.0, which the images' release names),
    // without the OS's containerd; the mirror's key where the config says.
    let disk = vm.disk();
    disk.write("/usr/lib/os-release", flatcar_os_release("3815.2.0"), 0o644)
        .unwrap();
    for path in os_containerd_files() {
        disk.remove(path).unwrap();
    }
    disk.write(KEYRING_PATH, mirror.key.public_armored(), 0o644)
        .unwrap();

    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    let (code, out) = status_wait(&vm);
    assert_eq!(code, Some(0), "status --wait:\n{out}\n{}", vm.diagnostics());
    assert_eq!(vm.boots(), 1, "no reboot");
    assert_eq!(vm.prop(KNB, "NRestarts").unwrap(), "0");
    // The agent ran in the shipped unit's sandbox.
    assert_eq!(vm.prop(KNB, "ProtectSystem").unwrap(), "strict");

    // containerd: the image linked and merged, and systemd runs it from the
    // unit the image brought; it answers CRI (the agent's proof).
    assert_eq!(
        vm.exec(&["readlink", containerd_sysext::LINK])
            .unwrap()
            .stdout_str()
            .trim(),
        format!("{}/containerd-1.6.20-x86-64.raw", containerd_sysext::IMAGES)
    );
    let says = vm.exec(&["/usr/bin/containerd", "--version"]).unwrap();
    assert!(
        says.stdout_str().contains(" 1.6.20"),
        "{}",
        says.stdout_str()
    );
    assert_eq!(
        vm.prop("containerd.service", "ActiveState").unwrap(),
        "active",
        "{}",
        vm.journal("containerd.service")
    );
    let j = state_journal(&vm).expect("a state journal");
    let rec = &j["steps"]["containerd"]["result"];
    assert!(
        rec["runtime"]
            .as_str()
            .is_some_and(|r| r.starts_with("containerd://1.6.20")),
        "{rec:#}"
    );
    assert_eq!(rec["package"]["version"], "1.6.20", "{rec:#}");
    assert_eq!(rec["package"]["refreshed"], true, "{rec:#}");

    // The kubelet: the cluster's version merged, and kubelet.service runs it.
    assert_eq!(
        vm.exec(&["readlink", "/etc/extensions/kubernetes.raw"])
            .unwrap()
            .stdout_str()
            .trim(),
        format!("/opt/extensions/kubernetes/kubernetes-{CLUSTER}-x86-64.raw")
    );
    assert_eq!(
        vm.exec(&["/usr/bin/kubelet", "--version"])
            .unwrap()
            .stdout_str()
            .trim(),
        format!("Kubernetes {CLUSTER}")
    );
    assert_eq!(vm.prop("kubelet.service", "ActiveState").unwrap(), "active");
    let starts = vm
        .wait_for("the kubelet's start", WORK, |vm| {
            let s = lines(vm, ks::FAKE_STARTS);
            (!s.is_empty()).then_some(s)
        })
        .unwrap();
    assert!(
        starts.len() == 1 && starts[0].starts_with(&format!("start version={CLUSTER} ")),
        "{starts:?}"
    );
    let env = vm.read("/etc/kubernetes/kubelet.env").unwrap();
    assert!(
        env.contains("unix:///run/containerd/containerd.sock"),
        "{env}"
    );

    // Both merges were asked of systemd, outside the agent's sandbox.
    let journal = vm.journal(KNB);
    assert_eq!(
        journal
            .matches("systemd-sysext refresh merged the extensions")
            .count(),
        2,
        "{journal}"
    );
    vm.shutdown().unwrap();
    report(&vm, t0);
}
