//! Pods run on the tests' nodes, through each runtime a kubelet 1.20 can
//! use: a simulated node with the real kubelet of the cluster's release,
//! run by the project's kubelet.service (kubelet-wrapper, the release's
//! image), joins a real control plane; the Node gets a pod CIDR and the
//! rig's network add-on (testkit::podnet) its CNI list, the Node is Ready
//! on its runtime, a pod of the offline busybox image (its sandbox the
//! offline pause image) reaches Running with an address of the node's pod
//! CIDR, and `kubectl logs` and `kubectl exec` reach it through the API
//! server, which dials the kubelet at its InternalIP; the exec runs in the
//! container's own root.
//!
//! - containerd through CRI: Debian's containerd 1.6 (its own
//!   containerd.service, started by the node's systemd) with a
//!   configuration laid out as Flatcar's and as the agent is to write it
//!   (hand-written here until it does), `--container-runtime=remote`.
//! - docker through dockershim: Debian's docker 20.10 (docker.socket,
//!   docker.service), the kubelet's default runtime, with
//!   `--network-plugin=cni` (CNI plugins where Debian puts them).
//!
//! The test parts of this machine kind (testkit::pods): the runc shim that
//! clamps `oomScoreAdj` (no CAP_SYS_RESOURCE here), a tmpfs for
//! `/var/lib/containerd` and docker's `vfs` storage (the node's root is an
//! overlay), the network add-on's part (testkit::podnet: the node shares
//! the host's network namespace, its pods get a bridge of the node's own).

use std::time::{Duration, Instant};
use testkit::agentnode::{self as an, KubeletImage, SEED_URL};
use testkit::kube::{ControlPlane, KubeParts, RunningControlPlane, free_port};
use testkit::pods::{self, CONTAINERD_SOCKET};
use testkit::simnode::SimNode;

/// Where the configuration below has containerd look for CNI networks.
const CNI_CONF_DIR: &str = "/etc/kubernetes/cni/net.d";
/// Debian's docker CLI.
const DOCKER: &str = "/usr/bin/docker";
const T: Duration = Duration::from_secs(180);

/// containerd's configuration as the agent is to write it: Flatcar's
/// layout (version 2, runc through the v2 shim, containerd's own OOM score,
/// the socket the kubelet names), the cgroup driver of the node, the
/// sandbox image, the CNI directories, and a conf.d for additions (which
/// cannot change one CRI setting alone: see testkit::pods).
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

/// A control plane on the host whose API server dials kubelets at their
/// InternalIP (simulated nodes' host names resolve nowhere).
fn control_plane(parts: &KubeParts) -> (ControlPlane, RunningControlPlane) {
    let mut cp = ControlPlane::new(&[]);
    cp.extra_apiserver_args
        .push("--kubelet-preferred-address-types=InternalIP".into());
    let running = cp.start(parts).unwrap();
    (cp, running)
}

/// A worker `name` with the project's kubelet.service running the real
/// kubelet of `parts`, a client certificate for its Node, and
/// `runtime_args` on the kubelet's command line. Not booted.
fn kubelet_worker(cp: &ControlPlane, parts: &KubeParts, name: &str, runtime_args: &str) -> SimNode {
    let driver = an::host_cgroup_driver();
    let n = SimNode::new(name).unwrap();
    n.set_hostname(name).unwrap();
    an::install_units(&n, &["kubelet.service"]).unwrap();
    an::install_kubelet_wrapper(&n, &[]).unwrap();
    let tag = parts.version.replace('+', "_");
    an::install_kubelet_image(&n, SEED_URL, &tag, KubeletImage::Real(parts)).unwrap();
    n.write(
        "/etc/kubernetes/kubelet.env",
        // What an agent writes for a 1.8/1.9-style kubelet (every setting a
        // flag), which a 1.20 kubelet still takes.
        format!(
            "KUBELET_IMAGE_URL=\"{SEED_URL}\"\nKUBELET_IMAGE_TAG=\"{tag}\"\nKUBELET_CGROUP_DRIVER=\"{driver}\"\n\
             KUBELET_ARGS=\"{}\"\n",
            an::flags_only_kubelet_args(driver)
        ),
        0o644,
    )
    .unwrap();
    n.write(an::KUBECONFIG_PATH, cp.node_kubeconfig(name, None), 0o600)
        .unwrap();
    testkit::podnet::install(&n, name, &parts.kubectl()).unwrap();
    n.write("/etc/kubernetes/ca.crt", &cp.pki.ca_pem, 0o644)
        .unwrap();
    let (port, healthz) = (free_port(), free_port());
    n.drop_in(
        "kubelet.service",
        "20-test-node",
        &format!(
            "# The runtime, and the test machine: nodes share the host's network (own\n\
             # ports, no iptables chains), the host may have swap.\n\
             [Service]\nEnvironment=\"KUBELET_EXTRA_ARGS={runtime_args} --port={port} \
             --healthz-port={healthz} --make-iptables-util-chains=false --fail-swap-on=false {}\"\n",
            pods::NO_DISK_EVICTION
        ),
    )
    .unwrap();
    n.enable(&["kubelet.service"]).unwrap();
    n
}

#[test]
fn a_kubelet_on_containerd_runs_a_pod_that_kubectl_logs_and_exec_reach() {
    if testkit::kube::skip_unless_available() || pods::skip_unless_containerd_pods() {
        return;
    }
    let parts = testkit::kube::parts().unwrap();
    let (cp, plane) = control_plane(&parts);
    let pause = pods::pause_image().unwrap();
    let name = "containerd-worker";
    let mut n = kubelet_worker(
        &cp,
        &parts,
        name,
        &format!(
            "--container-runtime=remote --container-runtime-endpoint=unix://{CONTAINERD_SOCKET}"
        ),
    );
    let driver = an::host_cgroup_driver();
    n.write(
        "/etc/containerd/config.toml",
        containerd_config(driver, &pause.tag),
        0o644,
    )
    .unwrap();
    pods::containerd_test_parts(&n).unwrap();
    pods::enable_os_unit(&n, "containerd.service", "multi-user.target").unwrap();

    let t0 = Instant::now();
    n.boot().unwrap();
    let version = pods::wait_containerd(&n, CONTAINERD_SOCKET, T).unwrap();
    let containerd_up = t0.elapsed();
    pods::ctr_import(&n, &pause, None).unwrap();
    pods::ctr_import(&n, &pods::busybox_image().unwrap(), None).unwrap();
    let ready = plane.kubectl.wait_ready(&[name], T).unwrap();
    let node_ready = t0.elapsed();

    // The Node: the release's kubelet, on the node's containerd.
    let info = ready.iter().find(|i| i.name == name).unwrap();
    assert_eq!(info.kubelet_version, parts.version);
    assert_eq!(version, pods::containerd_version().unwrap());
    assert_eq!(
        info.container_runtime_version,
        format!("containerd://{}", pods::kubelet_shown_version(&version)),
        "{info:?}"
    );

    let (running, _) = pods::a_pod_runs_and_kubectl_reaches_it(&plane.kubectl, &n, "containerd");
    // containerd runs it in the CRI namespace.
    let out = n
        .exec(&[pods::CTR, "--namespace", "k8s.io", "tasks", "list"])
        .unwrap();
    let tasks = String::from_utf8_lossy(&out.stdout);
    assert!(
        tasks.lines().filter(|l| l.contains("RUNNING")).count() >= 2,
        "the pod's sandbox and container run in containerd's k8s.io namespace: {tasks}"
    );
    eprintln!(
        "containerd answered {containerd_up:?} after boot; Node Ready {node_ready:?} after boot; \
         pod Running {running:?} after creation"
    );
}

#[test]
fn a_kubelet_on_docker_runs_a_pod_that_kubectl_logs_and_exec_reach() {
    if testkit::kube::skip_unless_available()
        || pods::skip_unless_containerd_pods()
        || testkit::skip_without(&["/usr/sbin/dockerd", DOCKER])
    {
        return;
    }
    let parts = testkit::kube::parts().unwrap();
    let (cp, plane) = control_plane(&parts);
    let name = "docker-worker";
    // dockershim with CNI (kubelet.env's --network-plugin=cni), the plugins
    // where Debian puts them.
    let mut n = kubelet_worker(
        &cp,
        &parts,
        name,
        &format!("--cni-bin-dir={}", pods::CNI_BIN_DIR),
    );
    pods::install_runc_shim(&n).unwrap();
    n.drop_in(
        "docker.service",
        "20-test-node",
        &format!(
            "# The test machine: a root on overlayfs, the host's network shared by nodes,\n\
             # and runc behind the shim that clamps oomScoreAdj (TEST PART: no\n\
             # CAP_SYS_RESOURCE here; VMs run the real runc).\n\
             [Service]\nEnvironment=\"DOCKER_OPTS=--storage-driver=vfs --bridge=none \
             --iptables=false --ip-masq=false {}\"\n",
            pods::DOCKER_RUNC_SHIM_OPTS
        ),
    )
    .unwrap();
    pods::enable_os_unit(&n, "docker.socket", "sockets.target").unwrap();

    let t0 = Instant::now();
    n.boot().unwrap();
    let version = pods::wait_docker(&n, DOCKER, T).unwrap();
    let docker_up = t0.elapsed();
    pods::docker_load(&n, DOCKER, &pods::pause_image().unwrap()).unwrap();
    pods::docker_load(&n, DOCKER, &pods::busybox_image().unwrap()).unwrap();
    let ready = plane.kubectl.wait_ready(&[name], T).unwrap();
    let node_ready = t0.elapsed();
    let info = ready.iter().find(|i| i.name == name).unwrap();
    assert_eq!(info.kubelet_version, parts.version);
    assert_eq!(
        info.container_runtime_version,
        format!("docker://{}", pods::kubelet_shown_version(&version)),
        "{info:?}"
    );

    let (running, _) = pods::a_pod_runs_and_kubectl_reaches_it(&plane.kubectl, &n, "docker");
    eprintln!(
        "docker answered {docker_up:?} after boot; Node Ready {node_ready:?} after boot; \
         pod Running {running:?} after creation"
    );
}
