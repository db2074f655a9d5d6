//! Nodes join a real Kubernetes cluster (testkit::cluster): the bootkube
//! master's first boot brings up etcd and kube-apiserver (bootkube), then
//! applies the first manifests (tectonic); the workers' agents learn the
//! cluster's version from that API server, put the docker the runtime
//! mappings want in place through the addon (the real torcx), reboot once,
//! write kubelet.env; the real kubelet of that version, run by
//! kubelet-wrapper from the image kubelet.env names, registers its Node on
//! that docker, and every Node is Ready.
//!
//! All nodes boot at once, so the workers' agents start while the master
//! has no API server yet (they retry until it answers); the master loses
//! power in the middle of bootkube and completes on its next boot; a worker
//! whose token the API server does not know fails once with a clear error
//! and is not retried. One worker runs containerd (the OS's, configured
//! and started by its agent, reached through CRI) instead of docker; one
//! is today's Flatcar: its OS has no kubelet, its agent installs the
//! kubelet of the cluster's version as a system extension (merged by the
//! real systemd-sysext) from a signed mirror of kubelet images, and it
//! runs containerd too. A pod runs on every worker, on the runtime its
//! agent chose, and `kubectl logs` and `exec` reach it.

use std::time::{Duration, Instant};
use testkit::cluster::{
    Auth, CLUSTER_DNS_IP, CLUSTER_DOMAIN, ClusterRig, NodeSpec, Runtime, node_docker,
};
use testkit::pods;
use testkit::simnode::{BootEnd, SimNode};

const KNB: &str = "k8s-node-bootstrap.service";
/// A node's first boot through its reboot to a running kubelet.
const BOOT: Duration = Duration::from_secs(240);

fn skip() -> bool {
    testkit::kube::skip_unless_available()
        || testkit::torcx::skip_unless_available()
        || testkit::skip_without(&["terraform"])
}

/// Boots `n` and expects the agent's reboot for the docker change.
fn boot_to_docker_reboot(n: &mut SimNode) {
    n.boot().unwrap();
    assert_eq!(
        n.wait_down(BOOT).unwrap(),
        BootEnd::Reboot,
        "{}: the agent reboots once for the docker change",
        n.name()
    );
}

/// The master: its first boot ends in the docker reboot; in the second,
/// bootkube starts the control plane and the power goes while it waits
/// for the API server; the third completes bootkube, then tectonic.
fn master_with_a_power_cut_in_bootkube(rig: &ClusterRig, m: &mut SimNode) {
    rig.push_assets(m).unwrap();
    boot_to_docker_reboot(m);
    m.boot().unwrap();
    m.wait_for("bootkube.sh to have started kube-apiserver", BOOT, |n| {
        (n.prop("bootkube.service", "ActiveState").ok()? == "activating"
            && n.prop("kube-apiserver.service", "ActiveState").ok()? == "active")
            .then_some(())
    })
    .unwrap();
    m.power_cut().unwrap();
    assert!(
        !m.exists("/opt/tectonic/init_bootkube.done"),
        "the cut came before bootkube completed"
    );
    m.boot().unwrap();
    m.wait_for("bootkube and tectonic to complete", BOOT, |n| {
        (n.exists("/opt/tectonic/init_bootkube.done")
            && n.exists("/opt/tectonic/init_tectonic.done"))
        .then_some(())
    })
    .unwrap();
}

#[test]
fn a_bootkube_master_and_its_workers_form_a_cluster_on_the_addons_docker() {
    if skip() {
        return;
    }
    let t0 = Instant::now();
    let rig = ClusterRig::new(&[
        NodeSpec::master("master-1"),
        NodeSpec::worker("worker-1", Auth::Cert),
        NodeSpec::worker("worker-2", Auth::Token("worker-2-token".into())),
        NodeSpec::containerd_worker("worker-ctr"),
        NodeSpec::sysext_worker("worker-sysext"),
        NodeSpec::worker("worker-bad", Auth::UnknownToken("no-such-token".into())),
    ])
    .unwrap();
    let specs = [
        Runtime::Auto,
        Runtime::Auto,
        Runtime::Auto,
        Runtime::Containerd,
        Runtime::Containerd,
    ];
    let mut nodes = rig.nodes().unwrap();
    let version = rig.parts.version.clone();
    std::thread::scope(|s| {
        let (master, rest) = nodes.split_first_mut().unwrap();
        let (workers, bad) = rest.split_at_mut(4);
        let rig = &rig;
        s.spawn(move || master_with_a_power_cut_in_bootkube(rig, master));
        for (w, runtime) in workers.iter_mut().zip(&specs[1..]) {
            s.spawn(move || {
                // docker changes (the addon's), so one reboot; containerd
                // is the OS's: no reboot.
                if *runtime == Runtime::Auto {
                    boot_to_docker_reboot(w);
                }
                w.boot().unwrap();
                w.wait_active_state("kubelet.service", "active", BOOT)
                    .unwrap();
            });
        }
        // The unknown token: rejected (401) once the API server answers;
        // exit 5 stops the unit for good, before docker or kubelet.env.
        let bad = &mut bad[0];
        bad.boot().unwrap();
        bad.wait_active_state(KNB, "failed", BOOT).unwrap();
    });
    eprintln!("all nodes booted after {:?}", t0.elapsed());
    let all = [
        "master-1",
        "worker-1",
        "worker-2",
        "worker-ctr",
        "worker-sysext",
    ];
    let ready = rig.kubectl.wait_ready(&all, BOOT).unwrap();
    eprintln!("all nodes Ready after {:?}", t0.elapsed());

    // The cluster's version is what its API server says it is.
    let server: serde_json::Value =
        serde_json::from_str(&rig.kubectl.run(&["get", "--raw", "/version"]).unwrap()).unwrap();
    assert_eq!(server["gitVersion"], version.as_str(), "{server}");
    // Every node: the kubelet of the cluster's version, on the runtime its
    // agent chose: the docker the addon installed (the torcx image's
    // daemon, started through its socket; the mirror's other docker was
    // not chosen), or the OS's containerd, whose config the agent wrote.
    let names: Vec<&str> = ready.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, all);
    let containerd_shown = pods::kubelet_shown_version(&pods::containerd_version().unwrap());
    for (n, runtime) in nodes[..5].iter().zip(specs) {
        let info = ready.iter().find(|i| i.name == n.name()).unwrap();
        assert_eq!(info.kubelet_version, version, "{}", n.name());
        let env = n.read("/etc/kubernetes/kubelet.env").unwrap();
        if runtime == Runtime::Containerd {
            assert_eq!(
                info.container_runtime_version,
                format!("containerd://{containerd_shown}"),
                "{}",
                n.name()
            );
            assert!(
                env.contains("KUBELET_RUNTIME=\"containerd\"\n"),
                "{}: {env}",
                n.name()
            );
            let config = n.read("/etc/containerd/config.toml").unwrap();
            assert!(
                config.starts_with("# Written by node-bootstrap"),
                "{}: containerd runs the agent's config: {config}",
                n.name()
            );
            assert!(
                config.contains("sandbox_image = \"k8s.gcr.io/pause:3.2\""),
                "{config}"
            );
            assert_eq!(
                n.prop("containerd.service", "ActiveState").unwrap(),
                "active"
            );
            assert!(
                !n.exists("/etc/torcx/next-profile"),
                "{}: no docker addon",
                n.name()
            );
        } else {
            let (docker_version, docker_exe) = node_docker(n).unwrap();
            assert_eq!(
                info.container_runtime_version,
                format!("docker://{docker_version}"),
                "{}",
                n.name()
            );
            assert_eq!(docker_version, rig.docker.version, "{}", n.name());
            assert_eq!(
                docker_exe,
                "/run/torcx/unpack/docker/bin/dockerd",
                "{}",
                n.name()
            );
            assert!(
                env.contains("KUBELET_RUNTIME=\"docker\"\n"),
                "{}: {env}",
                n.name()
            );
        }
        assert_eq!(n.prop(KNB, "Result").unwrap(), "success", "{}", n.name());
        let role = if n.name() == "master-1" {
            "master"
        } else {
            "worker"
        };
        assert_eq!(
            info.labels["node.kubernetes.io/role"],
            role,
            "{}: {:?}",
            n.name(),
            info.labels
        );
        let taints: &[&str] = if role == "master" {
            &["node-role.kubernetes.io/master=:NoSchedule"]
        } else {
            &[]
        };
        assert_eq!(info.taints, taints, "{}", n.name());
    }

    // The kubelet's own API (what the API server calls for logs, exec,
    // metrics): anonymous requests are refused, the API server's client
    // certificate (cluster CA) is let in after the API server authorized
    // it (Webhook).
    let port = rig.kubelet_port("worker-1").unwrap();
    let url = format!("https://127.0.0.1:{port}/pods");
    let curl = |extra: &[&str]| {
        let out = std::process::Command::new("curl")
            .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(curl(&[]), "401", "anonymous requests to the kubelet");
    let client = &rig.control_plane.kubelet_client;
    let (cert, key) = (rig.dir().join("kc.crt"), rig.dir().join("kc.key"));
    std::fs::write(&cert, &client.cert_pem).unwrap();
    std::fs::write(&key, &client.key_pem).unwrap();
    assert_eq!(
        curl(&[
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap()
        ]),
        "200",
        "the API server's client certificate at the kubelet"
    );

    // What each kubelet runs with, from its own /configz (asked as the API
    // server asks a kubelet, with its client certificate): the unit's
    // authentication and authorization, no read-only port, the cgroup
    // driver kubelet.env names, and the cluster DNS and domain the
    // Ignition config was rendered with.
    for n in &nodes[..5] {
        let port = rig.kubelet_port(n.name()).unwrap();
        let out = std::process::Command::new("curl")
            .args(["-sSfk", "--cert", cert.to_str().unwrap()])
            .args(["--key", key.to_str().unwrap()])
            .arg(format!("https://127.0.0.1:{port}/configz"))
            .output()
            .unwrap();
        let raw = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: /configz: {}",
            n.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        let c: serde_json::Value = serde_json::from_str(&raw).unwrap();
        let k = &c["kubeletconfig"];
        let name = n.name();
        assert_eq!(
            k["clusterDNS"],
            serde_json::json!([CLUSTER_DNS_IP]),
            "{name}: {k}"
        );
        assert_eq!(k["clusterDomain"], CLUSTER_DOMAIN, "{name}: {k}");
        // 0 is left out of the answer; kubelet's default is 10255.
        assert_eq!(k.get("readOnlyPort"), None, "{name}: {k}");
        assert_eq!(
            k["authentication"]["anonymous"]["enabled"], false,
            "{name}: {k}"
        );
        assert_eq!(
            k["authentication"]["webhook"]["enabled"], true,
            "{name}: {k}"
        );
        assert_eq!(
            k["authentication"]["x509"]["clientCAFile"], "/etc/kubernetes/ca.crt",
            "{name}: {k}"
        );
        assert_eq!(k["authorization"]["mode"], "Webhook", "{name}: {k}");
        let env = n.read("/etc/kubernetes/kubelet.env").unwrap();
        let driver = env
            .lines()
            .find_map(|l| l.strip_prefix("KUBELET_CGROUP_DRIVER="))
            .expect("kubelet.env names the cgroup driver")
            .trim_matches('"');
        assert_eq!(k["cgroupDriver"], driver, "{name}: {k}");
        assert_eq!(
            k["staticPodPath"], "/etc/kubernetes/manifests",
            "{name}: {k}"
        );
        // The kubelet read its settings from the file the agent wrote for
        // its version (1.20: a KubeletConfiguration), not from flags.
        let pid = n.prop("kubelet.service", "MainPID").unwrap();
        let cmdline = n
            .read(&format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .replace('\0', " ");
        assert!(
            cmdline.contains("--config=/etc/kubernetes/kubelet-config.yaml")
                && !cmdline.contains("--cluster-dns")
                && !cmdline.contains("--anonymous-auth"),
            "{name}: {cmdline}"
        );
        // The lock file that keeps a second kubelet from starting (on the
        // node's own /run).
        let lock = n
            .exec(&["test", "-f", "/var/run/lock/kubelet.lock"])
            .unwrap();
        assert!(lock.status.success(), "{name}: no kubelet lock file");
    }

    // A pod runs on every worker, on the runtime its agent chose, and the
    // API server reaches it (logs, exec). The images are loaded into each
    // runtime's store (there is no registry here).
    let pause = pods::pause_image().unwrap();
    let busybox = pods::busybox_image().unwrap();
    for (n, runtime) in nodes[1..5].iter().zip(&specs[1..]) {
        let scheme = match runtime {
            Runtime::Containerd => {
                pods::ctr_import(n, &pause, None).unwrap();
                pods::ctr_import(n, &busybox, None).unwrap();
                "containerd"
            }
            Runtime::Auto => {
                pods::docker_load(n, "/run/torcx/bin/docker", &pause).unwrap();
                pods::docker_load(n, "/run/torcx/bin/docker", &busybox).unwrap();
                "docker"
            }
        };
        pods::a_pod_runs_and_kubectl_reaches_it(&rig.kubectl, n, scheme);
    }

    // The workers' agents started before the API server existed: they
    // failed, were restarted by systemd, and joined once it answered.
    // (The journal of both boots: systemd's restart counter starts again
    // with each boot.)
    for w in &nodes[1..3] {
        let log = w.journal(KNB);
        assert!(
            log.contains("cannot learn the cluster version from the API server")
                && log.contains("Connection refused")
                && log.contains("Scheduled restart job, restart counter is at 1."),
            "{}: {log}",
            w.name()
        );
    }
    // Today's Flatcar: the kubelet is the merged extension's, chosen for
    // the cluster's version; there is no kubelet-wrapper.
    let sysext = &nodes[4];
    assert!(!sysext.exists("/usr/lib/coreos/kubelet-wrapper"));
    let pid = sysext.prop("kubelet.service", "MainPID").unwrap();
    let exe = sysext
        .exec(&["readlink", &format!("/proc/{pid}/exe")])
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&exe.stdout).trim(),
        "/usr/bin/kubelet"
    );
    // The image merged is the cluster's version, chosen exactly, although
    // the mirror also offers an older patch and the next minor.
    let out = sysext
        .exec(&["/opt/bin/node-bootstrap", "status", "--json"])
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["kubelet_sysext"]["merged"], true, "{s}");
    assert_eq!(s["kubelet_sysext"]["version"], version.as_str(), "{s}");
    let j = testkit::agentnode::state_journal(sysext).expect("the state journal");
    let chosen = &j["steps"]["kubelet-sysext"]["result"];
    assert_eq!(chosen["version"], version.as_str(), "{chosen}");
    assert_eq!(chosen["rule"], "exact", "{chosen}");

    // The master's power cut: bootkube ran again and completed, once.
    let master = &nodes[0];
    assert_eq!(master.boots(), 3);
    let configmap = rig
        .kubectl
        .run(&[
            "-n",
            "tectonic-system",
            "get",
            "configmap",
            "tectonic-torcx-runtime-mappings",
            "-o",
            "jsonpath={.data.runtime-mappings\\.yaml}",
        ])
        .unwrap();
    assert_eq!(configmap, testkit::cluster::runtime_mappings());

    // The unknown token: one failure naming the cause, no retry, nothing
    // installed, no kubelet, no Node.
    let bad = &nodes[5];
    assert_eq!(bad.prop(KNB, "ExecMainStatus").unwrap(), "5");
    let restarts = bad.prop(KNB, "NRestarts").unwrap();
    let status = bad.prop(KNB, "StatusText").unwrap();
    assert!(
        status.contains("the API server rejected the kubeconfig's credentials (HTTP 401)"),
        "{status}"
    );
    assert!(!bad.exists("/etc/kubernetes/kubelet.env"));
    assert!(!bad.exists("/etc/torcx/next-profile"));
    // Its drop-in restarts a failed run after 1 s: none came.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        bad.prop(KNB, "ActiveState").unwrap(),
        "failed",
        "not retried"
    );
    assert_eq!(bad.prop(KNB, "NRestarts").unwrap(), restarts, "not retried");
    assert!(
        rig.kubectl
            .nodes()
            .unwrap()
            .iter()
            .all(|n| n.name != "worker-bad"),
        "a node without valid credentials registered"
    );
    // The nodes share the host's network namespace: their kubelets and
    // dockers must have left the host's firewall alone.
    let out = std::process::Command::new("iptables-save")
        .output()
        .expect("running iptables-save (Debian iptables)");
    assert!(
        out.status.success(),
        "iptables-save: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rules = String::from_utf8_lossy(&out.stdout);
    assert!(
        !rules.contains("KUBE-"),
        "a node changed the host's iptables:\n{rules}"
    );
}
