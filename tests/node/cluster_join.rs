//! Nodes join a real Kubernetes cluster (testkit::cluster): the bootkube
//! master's first boot brings up etcd and kube-apiserver (bootkube), then
//! applies the first manifests (tectonic); the workers' agents learn the
//! cluster's version from that API server, put the docker the runtime
//! mappings want in place through the addon (the real torcx), reboot once,
//! write kubelet.env; the real kubelet of that version, run by
//! kubelet-wrapper from the image kubelet.env names, registers its Node on
//! that docker, and every Node is Ready.
//!
//! The master and the workers with client credentials boot at once, so
//! those workers' agents start while the master has no API server yet
//! (they retry until it answers); the bootstrap-token workers boot once
//! the master's first manifests brought their token's Secret (see
//! `wait_for_the_token_secret`); the master loses
//! power in the middle of bootkube and completes on its next boot; a worker
//! whose token the API server does not know fails once with a clear error
//! and is not retried. One worker runs containerd (the OS's, configured
//! and started by its agent, reached through CRI) instead of docker; one
//! is today's Flatcar: its OS has no kubelet, its agent installs the
//! kubelet of the cluster's version as a system extension (merged by the
//! real systemd-sysext) from a signed mirror of kubelet images, and it
//! runs containerd too. A pod runs on every worker, on the runtime its
//! agent chose, with an address of the node's pod CIDR (the controller
//! manager's; the rig plays the network add-on, testkit::podnet), and
//! `kubectl logs` and `exec` reach it, the exec in the container's own
//! root; each worker's pod reaches another worker's by its address.
//!
//! Node credentials (docs/operators.md, "Node credentials"): the control
//! plane runs in bootstrap-token mode, from the master's assets (the token
//! Secret and the RBAC rendered by `terraform/modules/bootstrap-token`
//! among its first manifests; the API server with bootstrap-token
//! authentication, Node authorization and NodeRestriction; the controller
//! manager signing with the cluster CA for 10 minutes and running
//! tokencleaner). The docker worker `worker-1`, the containerd worker and
//! the sysext worker start with the module's bootstrap kubeconfig only (no
//! client certificate, key or static token in their Ignition configs);
//! each kubelet earns a `CN=system:node:<name>`, `O=system:nodes`
//! certificate of the cluster CA, renews it with itself before it expires
//! while its Node stays Ready, and cannot change another node's Node
//! (NodeRestriction). The master's own kubelet keeps the credential its
//! operator chose, a client certificate of the cluster CA (its kubelet
//! starts before there is an API server to ask), and so does the docker
//! worker `worker-2`: client certificates stay supported. A worker whose
//! kubelet cannot start (a flag it does not know) never joins: its agent
//! shows it (`status --json`, the metrics textfile) and the repository's
//! alert fires on its metrics (promtool).

use std::time::{Duration, Instant};
use testkit::cluster::{
    Auth, CLUSTER_DNS_IP, CLUSTER_DOMAIN, ClusterRig, NodeSpec, Runtime, SIGNING_DURATION,
    node_docker,
};
use testkit::pods;
use testkit::simnode::{BootEnd, SimNode};
use testkit::tls_bootstrap::{
    CertInfo, KUBELET_CLIENT_CERT, cert_info, check_holds_bootstrap_token_only,
    check_node_client_cert,
};

const KNB: &str = "k8s-node-bootstrap.service";
/// A node's first boot through its reboot to a running kubelet.
const BOOT: Duration = Duration::from_secs(240);

fn skip() -> bool {
    testkit::kube::skip_unless_available()
        || testkit::torcx::skip_unless_available()
        || testkit::skip_without(&["terraform", "promtool", "curl"])
}

/// The worker whose kubelet is kept from registering.
const STUCK: &str = "worker-stuck";
/// Where the ignition module has the agent publish its metrics.
const TEXTFILE: &str = "/var/lib/node_exporter/textfile_collector/node_bootstrap.prom";

/// Boots `n` and expects the agent's reboot for the docker change.
fn boot_to_docker_reboot(n: &mut SimNode) {
    n.boot().unwrap();
    docker_reboot(n);
}

/// Expects the agent of booted `n` to reboot for the docker change.
fn docker_reboot(n: &mut SimNode) {
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
        NodeSpec::worker("worker-1", Auth::BootstrapToken),
        // The operator's own client certificate, as before bootstrap tokens.
        NodeSpec::worker("worker-2", Auth::Cert),
        NodeSpec::containerd_worker("worker-ctr"),
        NodeSpec::sysext_worker("worker-sysext"),
        NodeSpec::worker("worker-bad", Auth::UnknownToken("no-such-token".into())),
        NodeSpec::containerd_worker(STUCK),
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
    workers_hold_the_bootstrap_token_only(&rig);
    // The stuck worker's kubelet exits at once, every time systemd starts
    // it (as with a flag in kubelet_extra_args that its version lacks).
    nodes[6]
        .drop_in(
            "kubelet.service",
            "30-test-stuck",
            "# The test: a kubelet that cannot start.
[Service]
Environment=\"KUBELET_EXTRA_ARGS=--no-such-kubelet-flag\"\n",
        )
        .unwrap();
    std::thread::scope(|s| {
        let (master, rest) = nodes.split_first_mut().unwrap();
        let (workers, rest) = rest.split_at_mut(4);
        let (bad, stuck) = rest.split_at_mut(1);
        let stuck = &mut stuck[0];
        let rig = &rig;
        s.spawn(move || {
            // containerd, no reboot: kubelet.env, then a kubelet that fails.
            wait_for_the_token_secret(rig);
            stuck.boot().unwrap();
            stuck
                .wait_for("kubelet.env", BOOT, |n| {
                    n.exists("/etc/kubernetes/kubelet.env").then_some(())
                })
                .unwrap();
        });
        s.spawn(move || master_with_a_power_cut_in_bootkube(rig, master));
        for (w, runtime) in workers.iter_mut().zip(&specs[1..]) {
            s.spawn(move || {
                if BOOTSTRAP_WORKERS.contains(&w.name()) {
                    wait_for_the_token_secret(rig);
                }
                // docker changes (the addon's), so one reboot; containerd
                // is the OS's: no reboot.
                if *runtime == Runtime::Auto {
                    w.boot().unwrap();
                    // A worker booted with the master retries until the
                    // master's last boot has a stable API server (its
                    // first manifests, the token's Secret, are the sign):
                    // its time to the reboot counts from there, not from
                    // its own boot, which a slow host spends on the
                    // master's three boots (CI, 2026-12-02: 240 s).
                    wait_for_the_token_secret(rig);
                    docker_reboot(w);
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
        wait_for_the_token_secret(rig);
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
    let first_certs = kubelets_earned_their_certificates(&rig, &nodes);
    agents_see_their_nodes_ready(&nodes);
    a_kubelets_certificate_changes_only_its_own_node(&rig, &nodes);

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
        // Its status computed every 2 s, written unchanged only every 5
        // minutes (set alone, the update frequency would be the report
        // frequency too: a write of the whole Node every 2 s).
        assert_eq!(k["nodeStatusUpdateFrequency"], "2s", "{name}: {k}");
        assert_eq!(k["nodeStatusReportFrequency"], "5m0s", "{name}: {k}");
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
    let mut pod_ips = Vec::new();
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
        let (_, pod) = pods::a_pod_runs_and_kubectl_reaches_it(&rig.kubectl, n, scheme);
        pod_ips.push((pods::hello_pod(n.name()), pod.pod_ip));
    }
    // Pods on different workers reach each other by address (a ring:
    // docker to docker, docker to containerd, containerd to the sysext
    // worker's containerd, and back to docker).
    for (i, (from, _)) in pod_ips.iter().enumerate() {
        let (to_pod, to) = &pod_ips[(i + 1) % pod_ips.len()];
        pods::pod_reaches(&rig.kubectl, from, to)
            .unwrap_or_else(|e| panic!("{from} -> {to_pod}: {e:#}"));
    }

    // The client-certificate worker's agent started before the API server
    // existed: it failed, was restarted by systemd, and joined once it
    // answered. (The journal of both boots: systemd's restart counter
    // starts again with each boot.)
    for w in &nodes[2..3] {
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

    the_stuck_workers_join_shows_on_the_node(&rig, &nodes[6]);
    // Last: the renewals come 2-4 minutes after each kubelet's first
    // certificate, while the checks above run.
    let waited = kubelets_renew_their_certificates(&rig, &nodes, &first_certs);
    eprintln!(
        "renewals seen after waiting {waited:?} for them; the test took {:?}",
        t0.elapsed()
    );
}

/// Waits until the master's first manifests put the bootstrap token's
/// Secret into the cluster. The bootstrap-token workers boot only then.
/// An agent whose token the API server does not know yet asks again for
/// `cluster.bootstrap_token_grace_secs` (300 s; the host tier's
/// `bootstrap_agent` proves it against the real API server), but this
/// master applies its manifests only after a power cut in bootkube and a
/// second boot, which on a loaded machine can outlast both that grace and
/// a worker's boot budget here.
fn wait_for_the_token_secret(rig: &ClusterRig) {
    let id = &rig.bootstrap_token().unwrap().id;
    let deadline = Instant::now() + 3 * BOOT;
    while !rig.kubectl.bootstrap_token_exists(id).unwrap_or(false) {
        assert!(
            Instant::now() < deadline,
            "the bootstrap token's Secret never appeared"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The workers that start with the bootstrap token and join.
const BOOTSTRAP_WORKERS: [&str; 3] = ["worker-1", "worker-ctr", "worker-sysext"];
/// The nodes whose kubelets keep the client certificate their operator
/// minted (the ignition module's `kubeconfig`).
const CERT_NODES: [&str; 2] = ["master-1", "worker-2"];

/// A file of a running node as its own processes see it (the kubelet's
/// certificate links are absolute, inside the node's root).
fn node_file(n: &SimNode, path: &str) -> String {
    let out = n.exec(&["cat", path]).unwrap();
    assert!(
        out.status.success(),
        "{}: cat {path}: {}",
        n.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn node<'a>(nodes: &'a [SimNode], name: &str) -> &'a SimNode {
    nodes.iter().find(|n| n.name() == name).unwrap()
}

/// What anyone who reads a worker's Ignition config (its user data) gets:
/// the bootstrap kubeconfig of the token (0600), whose one user holds the
/// token and nothing else; no kubeconfig, client certificate, key or
/// static token anywhere; the agent told to use the token. The master and
/// `worker-2` carry their operator's client certificate instead.
fn workers_hold_the_bootstrap_token_only(rig: &ClusterRig) {
    let token = rig.bootstrap_token().expect("the rig's bootstrap token");
    for name in BOOTSTRAP_WORKERS.iter().chain([&STUCK]) {
        check_holds_bootstrap_token_only(&rig.ignition_config(name).unwrap(), token)
            .unwrap_or_else(|e| panic!("{name}'s Ignition config: {e:#}"));
    }
    for name in CERT_NODES {
        let files = testkit::ignition::inline_files(&rig.ignition_config(name).unwrap());
        assert!(!files.contains_key("/etc/kubernetes/bootstrap-kubeconfig"));
        let kc = String::from_utf8_lossy(&files["/etc/kubernetes/kubeconfig"].1).into_owned();
        assert!(kc.contains("client-certificate-data"), "{name}: {kc}");
    }
}

/// The certificate requests in the cluster: the issued certificate's
/// serial -> (who asked, the approver's message).
fn issued_requests(rig: &ClusterRig) -> Vec<(String, String, String)> {
    use base64::Engine as _;
    // The raw list (kubectl's resource discovery can miss the group for a
    // moment on a young API server).
    let csrs: serde_json::Value = serde_json::from_str(
        &rig.kubectl
            .run(&[
                "get",
                "--raw",
                "/apis/certificates.k8s.io/v1/certificatesigningrequests",
            ])
            .unwrap(),
    )
    .unwrap();
    csrs["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let cert = base64::engine::general_purpose::STANDARD
                .decode(c["status"]["certificate"].as_str()?)
                .ok()?;
            let info = cert_info(&String::from_utf8_lossy(&cert)).ok()?;
            let approved = c["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|x| x["type"] == "Approved")?;
            Some((
                info.serial,
                c["spec"]["username"].as_str()?.to_string(),
                approved["message"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Each bootstrap worker's kubelet earned its own certificate: its
/// kubelet.env hands it the bootstrap kubeconfig, its kubeconfig of its
/// own (0600) and its certificate are under /var/lib/kubelet, the
/// certificate is `CN=system:node:<name>`, `O=system:nodes`, of the cluster
/// CA, valid for the controller manager's signing duration, issued for a
/// request the token's user made and the controller manager approved. The
/// master's and `worker-2`'s kubelets run with their client certificate
/// (none earned). Returns each bootstrap worker's first certificate.
fn kubelets_earned_their_certificates(rig: &ClusterRig, nodes: &[SimNode]) -> Vec<CertInfo> {
    let ca = &rig.control_plane.pki.ca_pem;
    let token = rig.bootstrap_token().unwrap();
    let requests = issued_requests(rig);
    let mut first = Vec::new();
    for name in BOOTSTRAP_WORKERS {
        let n = node(nodes, name);
        let env = n.read("/etc/kubernetes/kubelet.env").unwrap();
        assert!(
            env.contains("--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubeconfig")
                && env.contains("--kubeconfig=/var/lib/kubelet/kubeconfig")
                && env.contains("--cert-dir=/var/lib/kubelet/pki"),
            "{name}: {env}"
        );
        let mode = n
            .exec(&["stat", "-c", "%a", "/var/lib/kubelet/kubeconfig"])
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&mode.stdout).trim(),
            "600",
            "{name}"
        );
        let current = check_node_client_cert(ca, &node_file(n, KUBELET_CLIENT_CERT), name)
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(
            current.not_after - current.not_before,
            SIGNING_DURATION.as_secs() as i64,
            "{name}: signed by the controller manager for its --cluster-signing-duration"
        );
        // Its first certificate (the kubelet keeps each one it got, by date).
        let files = n
            .exec(&[
                "sh",
                "-c",
                "ls /var/lib/kubelet/pki/kubelet-client-2*.pem | sort",
            ])
            .unwrap();
        let oldest = String::from_utf8_lossy(&files.stdout)
            .lines()
            .next()
            .unwrap_or_else(|| panic!("{name}: no kubelet-client-<date>.pem"))
            .to_string();
        let info = check_node_client_cert(ca, &node_file(n, &oldest), name).unwrap();
        let (_, who, how) = requests
            .iter()
            .find(|(serial, _, _)| *serial == info.serial)
            .unwrap_or_else(|| panic!("{name}: no request issued {info:?}: {requests:?}"));
        assert_eq!(*who, token.user(), "{name}: asked with the bootstrap token");
        assert_eq!(
            how, "Auto approving kubelet client certificate after SubjectAccessReview.",
            "{name}"
        );
        first.push(info);
    }
    for name in CERT_NODES {
        let n = node(nodes, name);
        let env = n.read("/etc/kubernetes/kubelet.env").unwrap();
        assert!(
            env.contains("--kubeconfig=/etc/kubernetes/kubeconfig")
                && !env.contains("--bootstrap-kubeconfig"),
            "{name}: {env}"
        );
        assert!(
            !n.exec(&["test", "-e", KUBELET_CLIENT_CERT])
                .unwrap()
                .status
                .success(),
            "{name}: its kubelet asked for a certificate"
        );
    }
    first
}

/// What the agent's `status --json` says of each node's join: Ready, asked
/// with the kubelet's own certificate on the bootstrap workers, with the
/// shared kubeconfig on `worker-2`.
fn agents_see_their_nodes_ready(nodes: &[SimNode]) {
    for (name, asked_as) in BOOTSTRAP_WORKERS
        .iter()
        .map(|n| (*n, "kubelet"))
        .chain([("worker-2", "kubeconfig")])
    {
        let out = node(nodes, name)
            .exec(&["/opt/bin/node-bootstrap", "status", "--json"])
            .unwrap();
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let j = &s["join"];
        assert_eq!(
            (
                j["state"].as_str(),
                j["asked_as"].as_str(),
                j["node_name"].as_str()
            ),
            (Some("ready"), Some(asked_as), Some(name)),
            "{j}"
        );
    }
}

/// `worker-1`'s kubelet, with its own kubeconfig (`/var/lib/kubelet/kubeconfig`,
/// its earned certificate), may label its own Node and not another's:
/// 403 from NodeRestriction (the API server's own words). kubectl of the
/// cluster's release, run on the node.
fn a_kubelets_certificate_changes_only_its_own_node(rig: &ClusterRig, nodes: &[SimNode]) {
    let me = "worker-1";
    let n = node(nodes, me);
    let kubectl = rig.parts.kubectl();
    let label = |target: &str| {
        let out = n
            .exec(&[
                kubectl.to_str().unwrap(),
                "--kubeconfig=/var/lib/kubelet/kubeconfig",
                "--request-timeout=20s",
                "label",
                "--overwrite",
                "node",
                target,
                "example.com/rack=r1",
            ])
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, said) = label(me);
    assert!(ok, "{me} labels its own Node: {said}");
    let (ok, said) = label("worker-ctr");
    assert!(!ok, "{me} labelled another node's Node: {said}");
    assert!(
        said.contains("Forbidden")
            && said.contains("node \"worker-1\" is not allowed to modify node \"worker-ctr\""),
        "not NodeRestriction's refusal: {said}"
    );
    let other = rig
        .kubectl
        .run(&[
            "get",
            "node",
            "worker-ctr",
            "-o",
            "jsonpath={.metadata.labels}",
        ])
        .unwrap();
    assert!(!other.contains("example.com/rack"), "{other}");
}

/// The worker whose kubelet cannot start: its agent wrote kubelet.env and
/// watches; `status --json` says the kubelet never asked for a
/// certificate (asked with the bootstrap token, which shows no secret),
/// its metrics textfile says the same and not Ready, and the repository's
/// alert rule fires on those series (promtool). The cluster has no Node
/// of it.
fn the_stuck_workers_join_shows_on_the_node(rig: &ClusterRig, n: &SimNode) {
    let token = rig.bootstrap_token().unwrap();
    assert_ne!(
        n.prop("kubelet.service", "ActiveState").unwrap(),
        "active",
        "the stuck kubelet runs"
    );
    assert!(
        n.journal("kubelet.service")
            .contains("unknown flag: --no-such-kubelet-flag"),
        "{}",
        n.journal("kubelet.service")
    );
    let out = n
        .exec(&["/opt/bin/node-bootstrap", "status", "--json"])
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let j = &s["join"];
    assert_eq!(j["node_name"], STUCK, "{j}");
    assert_eq!(j["state"], "no-certificate-request", "{j}");
    assert_eq!(j["asked_as"], "bootstrap-token", "{j}");
    assert_eq!(j["bootstrap_token_id"], token.id.as_str(), "{j}");
    assert_eq!(j["ready"], false, "{j}");
    let text = n.exec(&["/opt/bin/node-bootstrap", "status"]).unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&text.stdout),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!said.contains(token.secret()), "status shows the token");
    let prom = n
        .wait_for(
            "the join state in the metrics",
            Duration::from_secs(60),
            |n| {
                n.read(TEXTFILE).filter(|p| {
                    p.contains("node_bootstrap_join_state{state=\"no-certificate-request\"} 1\n")
                })
            },
        )
        .unwrap();
    assert!(!prom.contains("node_ready_timestamp"), "{prom}");
    assert!(!prom.contains(token.secret()), "the metrics show the token");
    testkit::promtool::join_alert_fires_on(&prom, STUCK).unwrap();
    assert!(
        rig.kubectl.nodes().unwrap().iter().all(|x| x.name != STUCK),
        "the stuck worker registered"
    );
}

/// Each bootstrap worker's kubelet renews its certificate before it
/// expires (the controller manager signs for 10 minutes): a new serial,
/// `CN=system:node:<name>` of the cluster CA, asked for with the node's
/// own certificate (approved as a renewal, no token); the Nodes stay Ready
/// and the kubelets keep renewing their leases after it. Returns how long
/// the test waited.
fn kubelets_renew_their_certificates(
    rig: &ClusterRig,
    nodes: &[SimNode],
    first: &[CertInfo],
) -> Duration {
    let ca = &rig.control_plane.pki.ca_pem;
    let started = Instant::now();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    let mut renewed = Vec::new();
    for (name, old) in BOOTSTRAP_WORKERS.iter().zip(first) {
        let n = node(nodes, name);
        let new = loop {
            let current = check_node_client_cert(ca, &node_file(n, KUBELET_CLIENT_CERT), name)
                .unwrap_or_else(|e| panic!("{e:#}"));
            if current.serial != old.serial {
                break current;
            }
            // The kubelet renews at 70-90 % of the lifetime: before expiry.
            assert!(
                now() < old.not_after,
                "{name}: no renewal before its certificate expired: {old:?}\n{}",
                n.journal("kubelet.service")
            );
            std::thread::sleep(Duration::from_secs(2));
        };
        assert!(new.not_before > old.not_before, "{name}: {old:?} {new:?}");
        renewed.push((name, new));
    }
    let requests = issued_requests(rig);
    for (name, new) in &renewed {
        let (_, who, how) = requests
            .iter()
            .find(|(serial, _, _)| *serial == new.serial)
            .unwrap_or_else(|| panic!("{name}: no request issued {new:?}: {requests:?}"));
        assert_eq!(*who, format!("system:node:{name}"), "renewed with itself");
        assert_eq!(
            how,
            "Auto approving self kubelet client certificate after SubjectAccessReview."
        );
    }
    let seen = now() as f64;
    let mut all = BOOTSTRAP_WORKERS.to_vec();
    all.extend(CERT_NODES);
    rig.kubectl.wait_ready(&all, BOOT).unwrap();
    // Each kubelet renews its Node's lease every 10 s: with the new
    // certificate now.
    for name in BOOTSTRAP_WORKERS {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let renew = rig
                .kubectl
                .run(&[
                    "-n",
                    "kube-node-lease",
                    "get",
                    "lease",
                    name,
                    "-o",
                    "jsonpath={.spec.renewTime}",
                ])
                .unwrap();
            if testkit::kube::rfc3339_epoch_secs(renew.trim()).is_some_and(|t| t > seen) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name}: its lease was not renewed after the certificate's renewal ({renew})"
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    started.elapsed()
}
