//! A worker of today's Flatcar on containerd 2.1.4, in a real machine: the
//! API server (the stand-in) says v1.32, the runtime mappings list 2.1 for
//! it, so the agent does not take the image's containerd (Debian's 1.6.20)
//! but the sysext-bakery's containerd 2.1.4 image (built from its source)
//! from its signed mirror, which the guest's real systemd-sysext merges;
//! the agent's `containerd` step proves it over CRI with no test part in
//! the way (the real runc, the guest's own cgroup version: v2 here). Then
//! crictl 1.32, the CRI v1 client a 1.32 kubelet is, runs a pod sandbox of
//! the sandbox image the agent configured and a container in it, reads its
//! log and execs into it, in the container's own root. One boot.

use crate::checks::*;
use crate::rig::*;
use crate::*;
use serde_json::{Value, json};
use std::fs;
use std::time::{Duration, Instant};
use testkit::containerd_sysext::{PRODUCT, flatcar_release};
use testkit::containerd2::{POD_MARKER, POD_MARKER_TEXT};
use testkit::kubelet_sysext::{ExtensionMirror, flatcar_os_release};
use testkit::vm::VmNode;

const KEYRING: &str = "/etc/kubernetes/installer/keyring.asc";
const CRICTL: &str = "/opt/bin/crictl";
const ENDPOINT: &str = "unix:///run/containerd/containerd.sock";

fn crictl(vm: &VmNode, args: &[&str]) -> String {
    // crictl's own deadline per request is 2 s; under emulation, with a
    // second machine beside this one, RunPodSandbox took longer (seen:
    // DeadlineExceeded after the pause container's start began).
    let mut argv = vec![
        CRICTL,
        "--timeout",
        "120s",
        "--runtime-endpoint",
        ENDPOINT,
        "--image-endpoint",
        ENDPOINT,
    ];
    argv.extend_from_slice(args);
    let out = vm.exec(&argv).unwrap();
    assert!(
        out.success(),
        "crictl {}: {}{}",
        args.join(" "),
        out.stdout_str(),
        out.stderr_str()
    );
    out.stdout_str().trim().to_string()
}

#[test]
fn worker_on_the_bakerys_containerd_2_1_sysext_runs_a_crictl_1_32_pod() {
    if skip(&["terraform", "ssh-keygen", "strip"]) || testkit::containerd::skip_unless_v2() {
        return;
    }
    let _turn = testkit::vm::slot();
    let t0 = Instant::now();
    let mirror = ExtensionMirror::of(PRODUCT).unwrap();
    mirror
        .publish(&[(
            "2.1.4",
            &testkit::containerd2::image(&flatcar_release()).unwrap(),
        )])
        .unwrap();
    let mut d = Delivery::of_cluster_version("v1.32.4");
    d.runtime_mappings = d.path().join("runtime-mappings.yaml");
    fs::write(
        &d.runtime_mappings,
        "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.32\":\n      containerd: [\"2.1\"]\n",
    )
    .unwrap();
    let pause = testkit::pods::pause_image().unwrap();
    let mut config = json!({
        "os_update": {"enabled": false},
        "runtime": {"sandbox_image": pause.tag, "containerd": {"start_timeout_secs": 120}},
    });
    let mut sources = mirror.sources_patch(KEYRING);
    sources["sources"]["url"] = json!(VmNode::guest_url(&mirror.url()));
    sources["sources"]["timeout_secs"] = json!(60);
    testkit::agentnode::merge(&mut config, sources);
    let host_key = testkit::vm::Image::get().unwrap().ssh_host_key;
    let metal = d.metal(&config, Some(&mirror.key.public_armored()), (22, &host_key));
    let mut vm = d.worker(&metal);
    vm.forward_to_host(mirror.server.addr().port());
    // Today's Flatcar's os-release (SYSEXT_LEVEL 1.0, as the image's
    // extension-release asks), crictl, the pods' images.
    let disk = vm.disk();
    disk.write("/usr/lib/os-release", flatcar_os_release("4593.2.0"), 0o644)
        .unwrap();
    disk.install_file(&testkit::containerd::v2_bin().join("crictl"), CRICTL, 0o755)
        .unwrap();
    install_pod_parts(&vm);

    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    let j: Value = vm
        .wait_for("kubelet.env", WORK, |vm| {
            vm.read("/etc/kubernetes/kubelet.env")?;
            state_journal(vm)
        })
        .unwrap();
    let rec = &j["steps"]["containerd"]["result"];
    assert_eq!(rec["runtime"], "containerd://v2.1.4", "{j:#}");
    assert_eq!(rec["cri_api"], "v1", "{rec:#}");
    assert_eq!(rec["package"]["version"], "2.1.4", "{rec:#}");
    assert_eq!(rec["package"]["signed"], true, "{rec:#}");
    assert_eq!(
        rec["package"]["refreshed"], true,
        "merged by systemd-sysext: {rec:#}"
    );
    assert_eq!(
        rec["verified"]["not_reported"],
        json!(["sandbox image"]),
        "{rec:#}"
    );
    assert!(
        rec["verified"]["checked"]
            .as_array()
            .is_some_and(|c| c.contains(&json!("config file (its command line)"))),
        "{rec:#}"
    );
    // The guest's own cgroup version (v2): the systemd driver, from the
    // agent's file and containerd's RuntimeConfig alike; the real runc.
    let cgroupfs = vm
        .exec(&["stat", "-fc", "%T", "/sys/fs/cgroup"])
        .unwrap()
        .stdout_str();
    assert_eq!(cgroupfs.trim(), "cgroup2fs");
    assert_eq!(rec["cgroup_driver"], "systemd", "{rec:#}");
    assert!(!vm.exists(testkit::pods::RUNC_SHIM), "no runc shim in a VM");
    let merged = vm.exec(&["systemd-sysext", "status"]).unwrap().stdout_str();
    assert!(merged.contains("containerd"), "{merged}");
    let version = vm
        .exec(&["/usr/bin/containerd", "--version"])
        .unwrap()
        .stdout_str();
    assert!(version.contains(" v2.1.4"), "{version}");
    let kubelet_config = vm.read("/etc/kubernetes/kubelet-config.yaml").unwrap();
    assert!(
        kubelet_config.contains("cgroupDriver: systemd"),
        "{kubelet_config}"
    );
    assert!(
        kubelet_config.contains(&format!("containerRuntimeEndpoint: \"{ENDPOINT}\""))
            || kubelet_config.contains(&format!("containerRuntimeEndpoint: {ENDPOINT}")),
        "{kubelet_config}"
    );

    // crictl 1.32 runs a pod on the real runc and kernel.
    import_pod_images(&vm);
    let busybox = testkit::pods::busybox_image().unwrap();
    let pod = json!({
        "metadata": {"name": "nb-vm-crictl", "namespace": "default", "uid": "nb-vm-crictl-uid", "attempt": 0},
        "log_directory": "/var/log/pods/nb-vm-crictl",
        "linux": {"cgroup_parent": "nbtest.slice", "security_context": {"namespace_options": {"network": 2}}}
    });
    let ctr = json!({
        "metadata": {"name": "main"},
        "image": {"image": busybox.tag},
        "command": ["/bin/sh", "-c", format!("echo hello-from-the-vm; echo {POD_MARKER_TEXT} > {POD_MARKER}; exec sleep 3600")],
        "log_path": "main.log",
        "linux": {}
    });
    let guest = |p: &str, v: &Value| {
        let out = vm.sh(&format!("cat > {p} <<'EOF'\n{v}\nEOF")).unwrap();
        assert!(out.success(), "{}", out.stderr_str());
    };
    guest("/tmp/pod.json", &pod);
    guest("/tmp/ctr.json", &ctr);
    let ran = Instant::now();
    let pod_id = crictl(&vm, &["runp", "/tmp/pod.json"]);
    let cid = crictl(&vm, &["create", &pod_id, "/tmp/ctr.json", "/tmp/pod.json"]);
    crictl(&vm, &["start", &cid]);
    let inspect: Value = vm
        .wait_for("the container running", Duration::from_secs(120), |vm| {
            let out = vm
                .exec(&[
                    CRICTL,
                    "--runtime-endpoint",
                    ENDPOINT,
                    "inspect",
                    "-o",
                    "json",
                    &cid,
                ])
                .ok()?;
            let v: Value = serde_json::from_str(&out.stdout_str()).ok()?;
            (v["status"]["state"] == "CONTAINER_RUNNING").then_some(v)
        })
        .unwrap();
    let cgroups_path = inspect["info"]["runtimeSpec"]["linux"]["cgroupsPath"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        cgroups_path.starts_with("nbtest.slice:cri-containerd:"),
        "{cgroups_path}"
    );
    let info = vm
        .exec(&[
            "/usr/bin/ctr",
            "--namespace",
            "k8s.io",
            "containers",
            "info",
            &pod_id,
        ])
        .unwrap()
        .stdout_str();
    let info: Value = serde_json::from_str(&info).unwrap_or_else(|e| panic!("{e}: {info}"));
    assert_eq!(
        info["Image"],
        pause.tag.as_str(),
        "the sandbox of the configured image"
    );
    assert_eq!(crictl(&vm, &["logs", &cid]), "hello-from-the-vm");
    // The exec sees the container's own root: the file it wrote there,
    // which the machine's root has not.
    assert!(!vm.exists(POD_MARKER), "the guest's own {POD_MARKER}");
    assert_eq!(
        crictl(&vm, &["exec", "-s", &cid, "cat", POD_MARKER]),
        POD_MARKER_TEXT
    );
    eprintln!(
        "vm {}: crictl's pod ran, its log and exec read, {:.1}s after runp",
        vm.name(),
        ran.elapsed().as_secs_f64()
    );
    vm.shutdown().unwrap();
    report(&vm, t0);
}
