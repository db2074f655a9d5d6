//! A pod runs on containerd through CRI: on a simulated node, Debian's
//! containerd 1.6 (its own containerd.service, started by the node's
//! systemd) with a configuration laid out as Flatcar's and as the agent
//! writes it, the real kubelet of the cluster's release run by the
//! project's kubelet.service on it (`--container-runtime=remote`), joining
//! a real control plane. The Node is Ready on `containerd://<version>`, a
//! `hostNetwork` pod of the offline busybox image (its sandbox the offline
//! pause image) reaches Running, and `kubectl logs` and `kubectl exec`
//! reach it through the API server, which dials the kubelet by its
//! InternalIP.
//!
//! The test parts of this machine kind (testkit::pods): the runc shim
//! that clamps `oomScoreAdj` (no CAP_SYS_RESOURCE here), a tmpfs for
//! `/var/lib/containerd` (the node's root is an overlay), a loopback-only
//! CNI network (the node shares the host's network namespace).

use std::time::{Duration, Instant};
use testkit::agentnode::{self as an, KubeletImage, SEED_URL};
use testkit::kube::{ControlPlane, free_port};
use testkit::pods::{self, CONTAINERD_SOCKET};
use testkit::simnode::SimNode;

const NODE: &str = "containerd-worker";
/// Where the configuration below has containerd look for CNI networks.
const CNI_CONF_DIR: &str = "/etc/kubernetes/cni/net.d";
const T: Duration = Duration::from_secs(180);
/// A pod on a Ready node runs in about a second here.
const POD: Duration = Duration::from_secs(60);

/// containerd's configuration as the agent will write it (hand-written
/// here until it does): Flatcar's layout (version 2, runc through the v2
/// shim, containerd's own OOM score, the socket the kubelet names), the
/// cgroup driver of the node, the sandbox image, the CNI directories, and
/// a conf.d for additions.
fn containerd_config(cgroup_driver: &str, sandbox_image: &str) -> String {
    format!(
        r#"version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
subreaper = true
oom_score = -999
imports = ["/etc/containerd/conf.d/*.toml"]

[grpc]
address = "{CONTAINERD_SOCKET}"

[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "{sandbox_image}"

[plugins."io.containerd.grpc.v1.cri".cni]
bin_dir = "{bin}"
conf_dir = "{CNI_CONF_DIR}"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
SystemdCgroup = {systemd}
"#,
        bin = pods::CNI_BIN_DIR,
        systemd = cgroup_driver == "systemd",
    )
}

/// The worker: containerd enabled with the configuration above and the
/// test parts, the project's kubelet.service (kubelet-wrapper running the
/// real kubelet of `parts`) on containerd's socket, a client certificate
/// for node `NODE`. Not booted. Returns it and its kubelet's port.
fn containerd_worker(cp: &ControlPlane, parts: &testkit::kube::KubeParts) -> (SimNode, u16) {
    let pause = pods::pause_image().unwrap();
    let driver = an::host_cgroup_driver();
    let n = SimNode::new(NODE).unwrap();
    n.set_hostname(NODE).unwrap();
    n.write(
        "/etc/containerd/config.toml",
        containerd_config(driver, &pause.tag),
        0o644,
    )
    .unwrap();
    n.write(
        &format!("{CNI_CONF_DIR}/10-loopback.conflist"),
        pods::cni_loopback_conflist(),
        0o644,
    )
    .unwrap();
    pods::containerd_test_parts(&n).unwrap();

    an::install_units(&n, &["kubelet.service"]).unwrap();
    an::install_kubelet_wrapper(&n, &[]).unwrap();
    let tag = parts.version.replace('+', "_");
    an::install_kubelet_image(&n, SEED_URL, &tag, KubeletImage::Real(parts)).unwrap();
    n.write(
        "/etc/kubernetes/kubelet.env",
        format!(
            "KUBELET_IMAGE_URL=\"{SEED_URL}\"\nKUBELET_IMAGE_TAG=\"{tag}\"\nKUBELET_CGROUP_DRIVER=\"{driver}\"\n"
        ),
        0o644,
    )
    .unwrap();
    n.write(an::KUBECONFIG_PATH, cp.node_kubeconfig(NODE, None), 0o600)
        .unwrap();
    n.write("/etc/kubernetes/ca.crt", &cp.pki.ca_pem, 0o644)
        .unwrap();
    let port = free_port();
    let healthz = free_port();
    n.drop_in(
        "kubelet.service",
        "20-test-node",
        &format!(
            "# The runtime: containerd through CRI. The test machine: nodes share the\n\
             # host's network (own ports, no iptables chains), the host may have swap.\n\
             [Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--container-runtime=remote \
             --container-runtime-endpoint=unix://{CONTAINERD_SOCKET} --port={port} \
             --healthz-port={healthz} --make-iptables-util-chains=false --fail-swap-on=false\"\n"
        ),
    )
    .unwrap();
    n.enable(&["kubelet.service"]).unwrap();
    pods::enable_os_containerd(&n).unwrap();
    (n, port)
}

#[test]
fn a_kubelet_on_containerd_runs_a_pod_that_kubectl_logs_and_exec_reach() {
    if testkit::kube::skip_unless_available() || pods::skip_unless_containerd_pods() {
        return;
    }
    let parts = testkit::kube::parts().unwrap();
    let mut cp = ControlPlane::new(&[]);
    // Simulated nodes' host names resolve nowhere: the API server dials
    // kubelets (logs, exec) at their InternalIP.
    cp.extra_apiserver_args
        .push("--kubelet-preferred-address-types=InternalIP".into());
    let plane = cp.start(&parts).unwrap();
    let kubectl = &plane.kubectl;
    let (mut n, _port) = containerd_worker(&cp, &parts);

    let t0 = Instant::now();
    n.boot().unwrap();
    let version = pods::wait_containerd(&n, CONTAINERD_SOCKET, T).unwrap();
    let containerd_up = t0.elapsed();
    let pause = pods::pause_image().unwrap();
    let busybox = pods::busybox_image().unwrap();
    pods::ctr_import(&n, &pause, None).unwrap();
    pods::ctr_import(&n, &busybox, None).unwrap();
    let ready = kubectl.wait_ready(&[NODE], T).unwrap();
    let node_ready = t0.elapsed();

    // The Node: the release's kubelet, on the node's containerd.
    let info = ready.iter().find(|i| i.name == NODE).unwrap();
    assert_eq!(info.kubelet_version, parts.version);
    assert_eq!(version, pods::containerd_version().unwrap());
    assert_eq!(
        info.container_runtime_version,
        format!("containerd://{}", pods::kubelet_shown_version(&version)),
        "{info:?}"
    );
    assert_eq!(
        n.prop("containerd.service", "ActiveState").unwrap(),
        "active"
    );

    // A pod: sandbox from the offline pause image, busybox from the node's
    // store (never pulled), Running.
    let t1 = Instant::now();
    pods::create_pod(
        kubectl,
        &pods::busybox_pod("hello", NODE, &busybox.tag, "hello-from-containerd", true),
    )
    .unwrap();
    let pod = pods::wait_pod_running(kubectl, "hello", POD)
        .unwrap_or_else(|e| panic!("{e:#}\n{}", n.journal("containerd.service")));
    let pod_running = t1.elapsed();
    assert_eq!(pod.node, NODE);
    assert!(pod.container_id.starts_with("containerd://"), "{pod:?}");
    // On the node, containerd runs it in the CRI namespace.
    let out = n
        .exec(&[
            pods::CTR,
            "--namespace",
            "k8s.io",
            "containers",
            "list",
            "-q",
        ])
        .unwrap();
    let ids = String::from_utf8_lossy(&out.stdout);
    let id = pod.container_id.trim_start_matches("containerd://");
    assert!(ids.lines().any(|l| l == id), "{id} not in {ids}");

    // The API server reaches the pod through the kubelet.
    let logs = kubectl.run(&["logs", "hello"]).unwrap();
    assert_eq!(logs.lines().next(), Some("hello-from-containerd"), "{logs}");
    // hostNetwork: the pod has the node's UTS namespace, so its host name.
    assert_eq!(logs.lines().nth(1), Some(NODE), "{logs}");
    let exec = kubectl
        .run(&[
            "exec",
            "hello",
            "--",
            "/bin/sh",
            "-c",
            "echo exec-ok; id -u",
        ])
        .unwrap();
    assert_eq!(exec, "exec-ok\n0\n");

    // The runc shim (a test part) is what let the sandbox start here.
    let clamped = n.read(pods::RUNC_SHIM_LOG).unwrap_or_default();
    assert!(
        clamped.contains("clamped oomScoreAdj -998 -> 0"),
        "the sandbox went through the runc shim: {clamped:?}"
    );
    eprintln!(
        "containerd answered {containerd_up:?} after boot; Node Ready {node_ready:?} after boot; \
         pod Running {pod_running:?} after creation"
    );
}
