//! The rigs of the VM tier: what an operator brings to the metal example
//! ([`Delivery`], [`Metal`]), the agent on a mirror, the stand-ins and real
//! parts installed on the image's disk before a first boot, the signed
//! torcx mirror of an OS update ([`TorcxMirror`]).

use crate::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha512};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use testkit::agentnode::{Cluster, SEED_URL, image_dir};
use testkit::apiserver::{ApiServerOptions, FakeApiServer, KubeAuth, Pki};
use testkit::pkgserver::PkgServer;
use testkit::project_root as root;
use testkit::terraform::Terraform;
use testkit::torcx_fixtures::{AddonRig, PkgEntry, docker_archive};
use testkit::vm::{HOST_ALIAS, VmNode};

/// The agent as a mirror serves it: the static build nodes run
/// (`scripts/build-static.sh`, README "Does it fit your cluster?"),
/// stripped (Ignition fetches it through QEMU's user-mode network, under
/// emulation).
pub(crate) struct ServedAgent {
    pub(crate) bytes: Vec<u8>,
    pub(crate) sha512: String,
}

impl ServedAgent {
    pub(crate) fn new(work: &Path) -> ServedAgent {
        let built = testkit::cli::static_agent_binary().unwrap_or_else(|| {
            panic!(
                "no {}: the VM tier boots the static build; run scripts/build-static.sh",
                testkit::cli::agent_binary()
                    .with_file_name("node-bootstrap-static")
                    .display()
            )
        });
        let out = work.join("node-bootstrap");
        let st = std::process::Command::new("strip")
            .arg("-o")
            .arg(&out)
            .arg(&built)
            .status()
            .expect("running strip (binutils)");
        assert!(st.success(), "strip {} failed", built.display());
        let bytes = fs::read(&out).unwrap();
        let sha512 = hex::encode(Sha512::digest(&bytes));
        ServedAgent { bytes, sha512 }
    }
}

/// The API server stand-in, with a certificate also valid for the address
/// at which the VM reaches the host.
pub(crate) fn cluster() -> Cluster {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let pki = Pki::generate_for(&[HOST_ALIAS]);
    let api = rt
        .block_on(FakeApiServer::start(
            &pki,
            ApiServerOptions {
                git_version: CLUSTER_VERSION.into(),
                ..Default::default()
            },
        ))
        .unwrap();
    Cluster { pki, api, rt }
}

pub(crate) fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

/// An SSH key pair for terraform (ed25519, no passphrase).
pub(crate) fn client_key(dir: &Path) -> (PathBuf, String) {
    let key = dir.join("client_key");
    let st = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "vm-tier terraform",
            "-f",
        ])
        .arg(&key)
        .status()
        .expect("running ssh-keygen");
    assert!(st.success());
    let public = fs::read_to_string(dir.join("client_key.pub")).unwrap();
    (key, public.trim().to_string())
}

/// The terraform/examples/metal configuration with this test's inputs.
pub(crate) struct Metal {
    pub(crate) tf: Terraform,
    pub(crate) var_file: String,
}

impl Metal {
    pub(crate) fn new(work: &Path, vars: Value) -> Metal {
        let path = work.join("metal.tfvars.json");
        fs::write(&path, vars.to_string()).unwrap();
        let tf = Terraform::new(root().join("terraform/examples/metal"));
        tf.init();
        Metal {
            tf,
            var_file: format!("-var-file={}", path.display()),
        }
    }

    /// The Ignition configs of every node (the planned output; no resource
    /// is needed to render them), by node name.
    pub(crate) fn ignition_configs(&self, work: &Path) -> BTreeMap<String, String> {
        let plan = work.join("render.tfplan");
        self.tf.ok(&[
            "plan",
            "-input=false",
            "-no-color",
            "-lock=false",
            &self.var_file,
            &format!("-out={}", plan.display()),
        ]);
        let shown: Value = serde_json::from_str(&self.tf.ok(&[
            "show",
            "-json",
            "-no-color",
            &plan.display().to_string(),
        ]))
        .unwrap();
        let configs = &shown["planned_values"]["outputs"]["ignition_configs"]["value"];
        configs
            .as_object()
            .unwrap_or_else(|| panic!("no ignition_configs in the plan: {shown}"))
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    }

    pub(crate) fn apply(&self) -> String {
        self.tf.apply_ok(&[&self.var_file])
    }
}

/// What an operator brings to the metal example, with stand-ins where the
/// real thing cannot run here: the agent on a mirror (an HTTP server on
/// the host), the API server (the stand-in), an SSH key, the cluster's
/// assets, the agent's config and keyring.
pub(crate) struct Delivery {
    pub(crate) work: tempfile::TempDir,
    pub(crate) cluster: Cluster,
    /// The nodes' kubeconfig (default: the stand-in's, with the node client
    /// certificate, as the VM reaches it).
    pub(crate) kubeconfig: String,
    /// The runtime mappings the nodes get.
    pub(crate) runtime_mappings: PathBuf,
    pub(crate) mirror: PkgServer,
    pub(crate) agent: ServedAgent,
    pub(crate) client: (PathBuf, String),
    pub(crate) assets: PathBuf,
    /// The metal example's `bootstrap_token` (`{id, secret, expiration}`):
    /// its workers then start with the bootstrap kubeconfig it renders,
    /// and only the masters get `kubeconfig`.
    pub(crate) bootstrap_token: Option<Value>,
}

impl Delivery {
    pub(crate) fn new() -> Delivery {
        let work = tempfile::tempdir().unwrap();
        let cluster = cluster();
        let agent = ServedAgent::new(work.path());
        let mirror = PkgServer::start().unwrap();
        mirror.put(AGENT_PATH, agent.bytes.clone());
        let client = client_key(work.path());
        let assets = cluster_assets(work.path());
        let kubeconfig = cluster.pki.kubeconfig(
            &VmNode::guest_url(&cluster.api.url()),
            &KubeAuth::ClientCert,
        );
        Delivery {
            work,
            kubeconfig,
            runtime_mappings: root().join("ignition/render/inputs/runtime-mappings.yaml"),
            cluster,
            mirror,
            agent,
            client,
            assets,
            bootstrap_token: None,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.work.path()
    }

    /// The metal example with the agent config `agent_config`, the keyring
    /// `keyring` (armored) if any, and the bootkube master's SSH address.
    pub(crate) fn metal(
        &self,
        agent_config: &Value,
        keyring: Option<&str>,
        master_ssh: (u16, &str),
    ) -> Metal {
        let w = self.path();
        let kubeconfig = w.join("kubeconfig");
        // The API server as the VM reaches it; its certificate names that.
        fs::write(&kubeconfig, &self.kubeconfig).unwrap();
        let config = w.join("config.json");
        fs::write(&config, agent_config.to_string()).unwrap();
        let mut vars = json!({
            "bootkube_master": {"name": "master-0", "host": "127.0.0.1", "port": master_ssh.0, "host_key": master_ssh.1},
            "workers": ["worker-0"],
            "assets_dir": self.assets,
            "ssh_user": "core",
            "ssh_private_key_path": self.client.0,
            "ssh_authorized_keys": [self.client.1],
            "ssh_timeout": "2m",
            "agent_url": VmNode::guest_url(&self.mirror.url(AGENT_PATH)),
            "agent_sha512": self.agent.sha512,
            "agent_config_path": config,
            "kubelet_image_tag": SEED_TAG,
            "runtime_mappings_path": self.runtime_mappings,
            "kubeconfig_path": kubeconfig,
        });
        if let Some(t) = &self.bootstrap_token {
            vars["bootstrap_token"] = t.clone();
        }
        if let Some(k) = keyring {
            let p = w.join("keyring.asc");
            fs::write(&p, k).unwrap();
            vars["keyring_path"] = json!(p);
        }
        Metal::new(w, vars)
    }

    /// A worker VM with its rendered config and the OS image's parts, which
    /// reaches the mirror and the API server.
    pub(crate) fn worker(&self, metal: &Metal) -> VmNode {
        self.worker_with(&metal.ignition_configs(self.path())["worker-0"])
    }

    /// [`worker`](Self::worker) with its config rendered already.
    pub(crate) fn worker_with(&self, ignition: &str) -> VmNode {
        let mut vm = VmNode::new("worker-0").unwrap();
        vm.set_ignition(ignition).unwrap();
        vm.forward_to_host(self.mirror.addr().port());
        vm.forward_to_host(port_of(&self.cluster.api.url()));
        install_os_parts(&vm);
        vm
    }

    /// The bootkube master's rendered config; no VM yet.
    pub(crate) fn master_config(&self, metal: &Metal) -> String {
        metal.ignition_configs(self.path())["master-0"].clone()
    }
}

/// The cluster's assets, as an installer generates them: bootkube.sh and
/// tectonic-wrapper.sh record each run (bootkube's start durably, and it
/// waits while /run/e2e-hold-bootkube exists), plus a manifest and a key.
pub(crate) fn cluster_assets(work: &Path) -> PathBuf {
    let assets = work.join("generated");
    let asset = |name: &str, body: &str| {
        let p = assets.join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    };
    // A test holds bootkube's run (the file is in /run: gone next boot).
    asset(
        "bootkube.sh",
        "#!/bin/bash\nset -e\nmkdir -p /var/lib/e2e\necho \"bootkube ran in $PWD as uid $(id -u)\" >> /var/lib/e2e/bootkube-runs\n\
         sync /var/lib/e2e/bootkube-runs\nwhile [ -e /run/e2e-hold-bootkube ]; do sleep 0.2; done\n",
    );
    asset(
        "tectonic-wrapper.sh",
        "#!/bin/bash\nset -e\nmkdir -p /var/lib/e2e\necho \"tectonic ran in $PWD\" >> /var/lib/e2e/tectonic-runs\n",
    );
    asset("manifests/kube-apiserver.yaml", "kind: Pod\n");
    asset(
        "tls/apiserver.key",
        "-----BEGIN PRIVATE KEY-----\nnot really\n",
    );
    assets
}

/// What the Flatcar image has and the Debian one lacks, on the node's disk
/// before its first boot: the OS identity and the kubelet-wrapper (a
/// stand-in that runs the kubelet of the image kubelet.env names from its
/// local store), with stand-in kubelet images of the stand-in cluster's
/// version and of the seed's.
pub(crate) fn install_os_parts(vm: &VmNode) {
    let disk = vm.disk();
    disk.write(
        "/usr/lib/os-release",
        format!(
            "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nID_LIKE=coreos\n\
             VERSION={OS_VERSION}\nVERSION_ID={OS_VERSION}\nCOREOS_BOARD=\"amd64-usr\"\n"
        ),
        0o644,
    )
    .unwrap();
    disk.install_file(
        &testkit::standin("kubelet-wrapper"),
        "/usr/lib/coreos/kubelet-wrapper",
        0o755,
    )
    .unwrap();
    for tag in [CLUSTER_VERSION.replace('+', "_"), SEED_TAG.to_string()] {
        disk.install_file(
            &testkit::standin("kubelet"),
            &format!("{}/kubelet", image_dir(SEED_URL, &tag)),
            0o755,
        )
        .unwrap();
    }
}

/// For `bench/run.sh` (section `ready`), with `NB_BENCH_REPORT` set: when
/// (host clock, seconds since the epoch) the Node, already Ready, was
/// first seen without the `node.kubernetes.io/not-ready` taint, polled
/// every 100 ms (the node lifecycle controller lifts it within seconds).
/// Without the variable: `None`, at once.
pub(crate) fn bench_untainted(kubectl: &testkit::kube::Kubectl, node: &str) -> Option<f64> {
    std::env::var_os("NB_BENCH_REPORT")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let taints = kubectl
            .run(&["get", "node", node, "-o", "jsonpath={.spec.taints[*].key}"])
            .unwrap_or_else(|_| "node.kubernetes.io/not-ready".into());
        if !taints.contains("node.kubernetes.io/not-ready") {
            let now = std::time::SystemTime::now();
            return Some(
                now.duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs_f64(),
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    None
}

/// For `bench/run.sh` (section `ready`), with `NB_BENCH_REPORT` set: the
/// worker VM's first boot to Node Ready and untainted (the first boot's
/// start, on the host's clock, to `untainted`, [`bench_untainted`]; the
/// Ready condition's transition, on the API server's clock, the same
/// clock, as context) and the agent's share of it, as benchmark rows
/// appended to that file (with `NB_BENCH_DUMP`, the agent's journal
/// records in `vm-agent.json` there). Nothing is asserted on them.
pub(crate) fn bench_rows(
    vm: &VmNode,
    booted_at: std::time::SystemTime,
    ready_since: f64,
    untainted: Option<f64>,
) {
    let Some(report) = std::env::var_os("NB_BENCH_REPORT") else {
        return;
    };
    let start = booted_at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let to_condition = ready_since - start;
    let to_ready = untainted.map_or(f64::NAN, |u| u - start);
    let out = vm
        .exec(&[
            "journalctl",
            "--no-pager",
            "-o",
            "json",
            testkit::cluster::AGENT_JOURNAL_MATCH,
        ])
        .unwrap();
    let records: Vec<Value> = out
        .stdout_str()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if let Some(dir) = std::env::var_os("NB_BENCH_DUMP") {
        // The agent's records, to see where its time goes.
        let dump = std::path::Path::new(&dir).join("vm-agent.json");
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&dump, out.stdout_str()))
            .unwrap();
    }
    let agent = testkit::cluster::agent_seconds(&records).unwrap();
    let share = agent / to_ready;
    let rows = format!(
        "ROW\tworker first boot to Node Ready and untainted, VM under {} (s; OS update and containerd, one reboot)\t{to_ready:.0}\t- (one run)\t-\t(context)\t-\n\
         ROW\t  the same, to the Ready condition alone (VM, s)\t{to_condition:.0}\t- (context)\t-\t(context)\t-\n\
         ROW\tthe agent's share of that first boot, VM (s)\t{agent:.1}\t{to_ready:.0} (first boot to Ready)\t{:.1}%\t< 10%\t{}\n",
        format!("{:?}", vm.accel()).to_uppercase(),
        100.0 * share,
        if share < 0.10 { "yes" } else { "NO" },
    );
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(report)
        .and_then(|mut f| f.write_all(rows.as_bytes()))
        .unwrap();
    eprint!("{rows}");
}

/// The image's host name: a worker's Node name.
pub(crate) const VM_HOSTNAME: &str = "nbvm";

/// The real kubelet of `parts` as the image `quay.io/coreos/hyperkube:<version>`
/// of the worker's local store.
pub(crate) fn install_real_kubelet(vm: &VmNode, parts: &testkit::kube::KubeParts) {
    vm.disk()
        .install_file(
            &parts.kubelet(),
            &format!("{}/kubelet", image_dir(SEED_URL, &parts.version)),
            0o755,
        )
        .unwrap();
}

/// How the control plane on the host reaches the worker VM's kubelet:
/// `kubectl logs` and `exec` go through the API server, which dials the
/// kubelet at its Node's InternalIP (`--kubelet-preferred-address-types=
/// InternalIP`; the Node's host name resolves nowhere) and the port the
/// kubelet reports (its `--port`).
///
/// QEMU's user networking hides the guest's address (`10.0.2.15` exists
/// only inside QEMU; the host has no route to it), and kubelet 1.20 takes
/// no `--node-ip` the host could dial unless the guest has it: it refuses
/// a loopback, link-local, multicast or unspecified address and one on
/// none of the machine's interfaces (`validateNodeIP` in
/// pkg/kubelet/kubelet_node_status.go, run by the NodeAddress setter of
/// pkg/kubelet/nodestatus/setters.go: the Node gets no address). So:
///
/// - `node_ip` is the host's own address ([`testkit::vm::host_address`],
///   what a kubelet on the host would report), and the host's
///   `node_ip:port` is forwarded to the guest's `port`
///   ([`VmNode::forward_to_guest`]: a relay to QEMU's `hostfwd`, so that
///   the guest sees the connections come from QEMU's gateway, not from
///   `node_ip`, its own address): the same port on both sides, since the
///   API server dials the port the kubelet reports;
/// - the guest carries `node_ip` on a dummy interface of its own
///   ([`install_node_ip`]), so the kubelet's check passes; the guest still
///   reaches the host at [`HOST_ALIAS`], never at `node_ip`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KubeletReach {
    pub(crate) node_ip: std::net::Ipv4Addr,
    pub(crate) port: u16,
}

impl KubeletReach {
    /// The host's address and a free port (on loopback, where QEMU listens;
    /// [`install_node_ip`] binds it on the host's address).
    pub(crate) fn new() -> KubeletReach {
        KubeletReach {
            node_ip: testkit::vm::host_address().unwrap(),
            port: testkit::kube::free_port(),
        }
    }
}

/// The guest's dummy interface that carries [`KubeletReach::node_ip`]
/// (systemd-networkd, which the image runs, creates it at boot).
pub(crate) const NODE_IP_LINK: &str = "nbnodeip0";

/// TEST PARTS for the host to reach the guest's kubelet (see
/// [`KubeletReach`]), on the disk before boot: the dummy interface with
/// the node's address, the kubelet's `--port` and `--node-ip` (a drop-in,
/// as an operator of a machine with several addresses would set
/// `--node-ip`), and QEMU's forward.
pub(crate) fn install_node_ip(vm: &mut VmNode, reach: KubeletReach) {
    let disk = vm.disk();
    disk.write(
        &format!("/etc/systemd/network/30-{NODE_IP_LINK}.netdev"),
        format!(
            "# TEST PART (VM tier): the address the API server on the host dials the\n\
             # kubelet at (tests/vm/rig.rs, KubeletReach).\n\
             [NetDev]\nName={NODE_IP_LINK}\nKind=dummy\n"
        ),
        0o644,
    )
    .unwrap();
    disk.write(
        &format!("/etc/systemd/network/30-{NODE_IP_LINK}.network"),
        format!(
            "[Match]\nName={NODE_IP_LINK}\n\n[Link]\nRequiredForOnline=no\n\n\
             [Network]\nAddress={}/32\n",
            reach.node_ip
        ),
        0o644,
    )
    .unwrap();
    disk.write(
        "/etc/systemd/system/kubelet.service.d/20-test-node.conf",
        format!(
            "# TEST PART (VM tier): the kubelet's port and address as the API server on\n\
             # the host dials them (QEMU forwards the port; tests/vm/rig.rs, KubeletReach).\n\
             [Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--port={} --node-ip={}\"\n",
            reach.port, reach.node_ip
        ),
        0o644,
    )
    .unwrap();
    vm.forward_to_guest(reach.node_ip, reach.port).unwrap();
}

/// The pods' CNI network on the VM: a bridge with host-local addresses, as
/// a network add-on would have written it to the conf dir that the agent
/// gives containerd (`paths.cni_conf_dir`, the default).
pub(crate) const CNI_CONFLIST: &str = "/etc/kubernetes/cni/net.d/10-nb-test-bridge.conflist";
pub(crate) const POD_BRIDGE: &str = "nbpods0";
pub(crate) const POD_SUBNET: &str = "10.88.0.0/24";
/// Where the pod images wait on the VM's disk until containerd runs.
pub(crate) const IMAGES_DIR: &str = "/var/lib/nb-test/images";

/// The pods' parts on the disk before boot: the CNI network
/// ([`CNI_CONFLIST`]) and the pause and busybox images as docker-archive
/// tars under [`IMAGES_DIR`] (there is no registry; [`import_pod_images`]
/// loads them once containerd runs).
pub(crate) fn install_pod_parts(vm: &VmNode) {
    let disk = vm.disk();
    disk.write(
        CNI_CONFLIST,
        testkit::pods::cni_bridge_conflist(POD_BRIDGE, POD_SUBNET),
        0o644,
    )
    .unwrap();
    for (name, image) in pod_images() {
        disk.install_file(&image.archive, &format!("{IMAGES_DIR}/{name}.tar"), 0o644)
            .unwrap();
    }
}

fn pod_images() -> [(&'static str, testkit::pods::PodImage); 2] {
    [
        ("pause", testkit::pods::pause_image().unwrap()),
        ("busybox", testkit::pods::busybox_image().unwrap()),
    ]
}

/// Imports the images [`install_pod_parts`] put on the disk into the
/// running guest's containerd, in the CRI plugin's namespace (`k8s.io`).
pub(crate) fn import_pod_images(vm: &VmNode) {
    for (name, _) in pod_images() {
        let tar = format!("{IMAGES_DIR}/{name}.tar");
        let out = vm
            .exec(&[
                testkit::pods::CTR,
                "--namespace",
                "k8s.io",
                "images",
                "import",
                &tar,
            ])
            .unwrap();
        assert!(
            out.success(),
            "ctr images import {tar} in the VM: {}",
            out.stderr_str()
        );
    }
}

/// A worker VM whose agent runs containerd (the OS's: Debian's 1.6.20 in
/// the image, as Flatcar ships one) for the real kubelet of `parts`, with
/// an OS update on its first boot (update_engine stand-in) and the pods'
/// parts: rendered by the metal example, the kubelet reachable from the
/// host as `reach` says. With its rendered Ignition config.
pub(crate) fn containerd_worker(
    d: &Delivery,
    parts: &testkit::kube::KubeParts,
    reach: KubeletReach,
) -> (VmNode, String) {
    let host_key = testkit::vm::Image::get().unwrap().ssh_host_key;
    let config = json!({
        "os_update": {"enabled": true},
        // containerd's sandbox image: the pause image on the disk (there is
        // no registry); the CNI plugins where Debian puts them.
        "runtime": {"name": "containerd", "sandbox_image": testkit::pods::pause_image().unwrap().tag},
        "paths": {"cni_bin_dir": testkit::pods::CNI_BIN_DIR},
    });
    let metal = d.metal(&config, None, (22, &host_key));
    let ignition = metal.ignition_configs(d.path())["worker-0"].clone();
    let mut vm = d.worker_with(&ignition);
    install_update_engine_and_vendor_docker(&vm);
    install_real_kubelet(&vm, parts);
    install_pod_parts(&vm);
    install_node_ip(&mut vm, reach);
    (vm, ignition)
}

/// The OS version update_engine (the stand-in) offers.
pub(crate) const NEXT_OS: &str = "1688.5.3";

/// A signed torcx package mirror (the rig's HTTP server and key) serving,
/// for the next OS version, docker 1.12 and the docker the cluster's
/// runtime mappings want ([`TorcxMirror::next`]), with package URLs as the
/// VM reaches them.
pub(crate) struct TorcxMirror {
    pub(crate) rig: AddonRig,
    /// The wanted docker's torcx reference (`17.03`).
    pub(crate) next: &'static str,
    /// What its `docker --version` says of its version.
    pub(crate) next_build: String,
    /// Its package, and where the rig serves it.
    pub(crate) next_pkg: Vec<u8>,
    pub(crate) next_path: String,
}

impl TorcxMirror {
    /// The stand-in images: docker 1.12 and 17.03 (what Kubernetes 1.9
    /// wants, in the inputs' runtime mappings).
    pub(crate) fn new() -> TorcxMirror {
        TorcxMirror::serving("17.03", "17.03.2".into(), docker_archive("17.03.2"))
    }

    pub(crate) fn serving(
        next: &'static str,
        next_build: String,
        next_pkg: Vec<u8>,
    ) -> TorcxMirror {
        let rig = AddonRig::new(OS_VERSION);
        let mut entries = Vec::new();
        for (version, data) in [("1.12", docker_archive("1.12.6")), (next, next_pkg.clone())] {
            let path = rig.package_path(version, &data);
            rig.server.put(&path, data.clone());
            entries.push(PkgEntry::new(
                version,
                &data,
                &VmNode::guest_url(&rig.server.url(&path)),
            ));
        }
        rig.publish_manifest(NEXT_OS, &entries);
        let next_path = rig.package_path(next, &next_pkg);
        TorcxMirror {
            rig,
            next,
            next_build,
            next_pkg,
            next_path,
        }
    }

    /// Where the agent stores the wanted docker on the node.
    pub(crate) fn stored(&self) -> String {
        format!(
            "/var/lib/torcx/store/{NEXT_OS}/docker:{}.torcx.tgz",
            self.next
        )
    }

    /// The agent config an operator writes for OS updates and the docker
    /// addon from this mirror (everything else: the shipped defaults).
    pub(crate) fn agent_config(&self) -> Value {
        json!({
            "os_update": {"enabled": true},
            "addon": {
                "enabled": true,
                "manifest_url": VmNode::guest_url(&self.rig.manifest_url_template()),
                "keyring": "/etc/kubernetes/installer/keyring.asc"
            }
        })
    }

    pub(crate) fn keyring(&self) -> String {
        self.rig.key.public_armored()
    }
}

/// What a Flatcar image with update_engine and torcx brings besides
/// [`install_os_parts`]: update_engine (the stand-in: it offers
/// [`NEXT_OS`] and, once installed, leaves it for the boot loader; its
/// D-Bus policy; enabled, as Flatcar ships it), the vendor docker 1.12
/// with its profile, and docker's data from earlier boots.
pub(crate) fn install_update_engine_and_vendor_docker(vm: &VmNode) {
    let disk = vm.disk();
    disk.install_file(
        &testkit::built_binary("fake-update-engine"),
        "/usr/local/bin/fake-update-engine",
        0o755,
    )
    .unwrap();
    disk.install_file(
        &testkit::standin("com.coreos.update1.conf"),
        "/usr/share/dbus-1/system.d/com.coreos.update1.conf",
        0o644,
    )
    .unwrap();
    disk.write(
        "/usr/lib/systemd/system/update-engine.service",
        format!(
            "[Unit]\nDescription=update_engine (stand-in: testkit fake-update-engine)\n\n\
             [Service]\nType=dbus\nBusName=com.coreos.update1\n\
             ExecStart=/usr/local/bin/fake-update-engine --scenario update --new-version {NEXT_OS} \
             --step-ms 600 --os-release /usr/lib/os-release\n\n[Install]\nWantedBy=multi-user.target\n"
        ),
        0o644,
    )
    .unwrap();
    disk.symlink(
        "/usr/lib/systemd/system/multi-user.target.wants/update-engine.service",
        "../update-engine.service",
    )
    .unwrap();
    disk.write(
        "/usr/share/torcx/profiles/vendor.json",
        r#"{"kind":"profile-manifest-v0","value":{"images":[{"name":"docker","reference":"1.12"}]}}"#,
        0o644,
    )
    .unwrap();
    disk.write(
        "/usr/share/torcx/store/docker:1.12.torcx.tgz",
        docker_archive("1.12.6"),
        0o644,
    )
    .unwrap();
    disk.write("/var/lib/docker/image/marker", "old docker data\n", 0o644)
        .unwrap();
}

/// A worker that updates its OS and docker on its first boot: rendered by
/// the metal example, with the torcx mirror reachable.
pub(crate) fn updating_worker(d: &Delivery, m: &TorcxMirror) -> VmNode {
    let host_key = testkit::vm::Image::get().unwrap().ssh_host_key;
    let metal = d.metal(&m.agent_config(), Some(&m.keyring()), (22, &host_key));
    let mut vm = d.worker(&metal);
    vm.forward_to_host(m.rig.server.addr().port());
    install_update_engine_and_vendor_docker(&vm);
    vm
}
