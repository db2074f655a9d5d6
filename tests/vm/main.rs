//! Tier `vm`: whole QEMU machines (testkit::vm) booting the OS image
//! built from Debian packages by scripts/vm-image.sh.
//!
//! What it proves, what the simulated node cannot show:
//!
//! - the Ignition configs rendered by terraform (the metal example, through
//!   terraform/modules/ignition) applied by the real Ignition on a first
//!   boot: the agent binary fetched over HTTP and checked against its
//!   SHA-512, the units enabled by Ignition alone, the agent runs, kubelet
//!   runs, `node-bootstrap status --wait` exits 0;
//! - on the bootkube master, `terraform apply` of the metal example pushes
//!   the assets over SSH to the VM's real sshd as Ignition's `core` user;
//!   a power cut in the middle of bootkube leaves no `.done`, and the next
//!   boot runs bootkube to its end, then tectonic;
//! - a worker's full first boot with an OS update (update_engine stand-in)
//!   and the docker addon (the real torcx-generator): the agent's own
//!   reboot is a kernel reboot, kubelet.env comes in the second boot;
//! - power cuts (SIGKILL of QEMU: the guest's page cache is lost) at points
//!   of that flow, right after the agent's unsynced journal writes, right
//!   after its durable record before the reboot, right after kubelet.env:
//!   nothing on disk is partial, and the next boots complete the node.
//!
//! What it needs: root, `qemu-system-x86`, the image (scripts/setup.sh
//! builds it with `mmdebstrap`, cached outside the checkout), `terraform`.
//! Elsewhere each test says `SKIPPED <test>: …`; under `CI=true` it fails
//! instead.
//!
//! Every test holds `vm::exclusive()`: one machine at a time. Run it:
//! `sudo -E cargo test --test vm -- --nocapture` (timings of each boot go to
//! stderr).

// Running terraform in a private dir (the delivery tier's; this tier uses
// part of it).
#[path = "../delivery/support.rs"]
mod delivery_support;

use delivery_support::{Terraform, root};
use serde_json::{Value, json};
use sha2::{Digest, Sha512};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testkit::agentnode::{Cluster, SEED_URL, image_dir};
use testkit::apiserver::{ApiServerOptions, FakeApiServer, KubeAuth, Pki};
use testkit::kube::ControlPlane;
use testkit::pkgserver::PkgServer;
use testkit::torcx_fixtures::{AddonRig, PkgEntry, docker_archive};
use testkit::vm::{BootEnd, HOST_ALIAS, VmNode};

/// A boot under TCG takes about a minute; a loaded CI host, more.
const BOOT: Duration = Duration::from_secs(600);
/// The agent's work once the machine is up.
const WORK: Duration = Duration::from_secs(600);
const AGENT_PATH: &str = "/node-bootstrap/v0.1.0/node-bootstrap";
const SEED_TAG: &str = "v1.8.4_coreos.0";
const CLUSTER_VERSION: &str = "v1.9.6+coreos.0";
const OS_VERSION: &str = "1632.3.0";

/// The agent as a mirror serves it: the test build, stripped (Ignition
/// fetches it through QEMU's user-mode network, under emulation).
struct ServedAgent {
    bytes: Vec<u8>,
    sha512: String,
}

impl ServedAgent {
    fn new(work: &Path) -> ServedAgent {
        let built = testkit::built_binary("node-bootstrap");
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
fn cluster() -> Cluster {
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

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

/// An SSH key pair for terraform (ed25519, no passphrase).
fn client_key(dir: &Path) -> (PathBuf, String) {
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
struct Metal {
    tf: Terraform,
    var_file: String,
}

impl Metal {
    fn new(work: &Path, vars: Value) -> Metal {
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
    fn ignition_configs(&self, work: &Path) -> BTreeMap<String, String> {
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

    fn apply(&self) -> String {
        self.tf.apply_ok(&[&self.var_file])
    }
}

/// What an operator brings to the metal example, with stand-ins where the
/// real thing cannot run here: the agent on a mirror (an HTTP server on
/// the host), the API server (the stand-in), an SSH key, the cluster's
/// assets, the agent's config and keyring.
struct Delivery {
    work: tempfile::TempDir,
    cluster: Cluster,
    /// The nodes' kubeconfig (default: the stand-in's, with the node client
    /// certificate, as the VM reaches it).
    kubeconfig: String,
    /// The runtime mappings the nodes get.
    runtime_mappings: PathBuf,
    mirror: PkgServer,
    agent: ServedAgent,
    client: (PathBuf, String),
    assets: PathBuf,
}

impl Delivery {
    fn new() -> Delivery {
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
        }
    }

    fn path(&self) -> &Path {
        self.work.path()
    }

    /// The metal example with the agent config `agent_config`, the keyring
    /// `keyring` (armored) if any, and the bootkube master's SSH address.
    fn metal(&self, agent_config: &Value, keyring: Option<&str>, master_ssh: (u16, &str)) -> Metal {
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
        if let Some(k) = keyring {
            let p = w.join("keyring.asc");
            fs::write(&p, k).unwrap();
            vars["keyring_path"] = json!(p);
        }
        Metal::new(w, vars)
    }

    /// A worker VM with its rendered config and the OS image's parts, which
    /// reaches the mirror and the API server.
    fn worker(&self, metal: &Metal) -> VmNode {
        let configs = metal.ignition_configs(self.path());
        let mut vm = VmNode::new("worker-0").unwrap();
        vm.set_ignition(&configs["worker-0"]).unwrap();
        vm.forward_to_host(self.mirror.addr().port());
        vm.forward_to_host(port_of(&self.cluster.api.url()));
        install_os_parts(&vm);
        vm
    }

    /// The bootkube master's rendered config; no VM yet.
    fn master_config(&self, metal: &Metal) -> String {
        metal.ignition_configs(self.path())["master-0"].clone()
    }
}

/// The cluster's assets, as an installer generates them: bootkube.sh and
/// tectonic-wrapper.sh record each run (bootkube's start durably, and it
/// waits while /run/e2e-hold-bootkube exists), plus a manifest and a key.
fn cluster_assets(work: &Path) -> PathBuf {
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
fn install_os_parts(vm: &VmNode) {
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

/// For `bench/run.sh` (section `ready`), with `NB_BENCH_REPORT` set: the
/// worker VM's first boot to Node Ready (the first boot's start, on the
/// host's clock, to the Ready condition's transition, on the API server's,
/// the same clock) and the agent's share of it, as benchmark rows appended
/// to that file. Nothing is asserted on them.
fn bench_rows(vm: &VmNode, booted_at: std::time::SystemTime, ready_since: f64) {
    let Some(report) = std::env::var_os("NB_BENCH_REPORT") else {
        return;
    };
    let start = booted_at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let to_ready = ready_since - start;
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
    let agent = testkit::cluster::agent_seconds(&records).unwrap();
    let rows = format!(
        "ROW\tworker first boot to Node Ready, VM under {} (s; OS update and docker, one reboot)\t{to_ready:.0}\t- (one run)\t-\t(context)\t-\n\
         ROW\tthe agent's share of that first boot, VM (s)\t{agent:.1}\t{to_ready:.0} (first boot to Ready)\t{:.0}%\t<= 25%\t{}\n",
        format!("{:?}", vm.accel()).to_uppercase(),
        100.0 * agent / to_ready,
        if agent / to_ready <= 0.25 {
            "yes"
        } else {
            "NO"
        },
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
const VM_HOSTNAME: &str = "nbvm";

/// The real kubelet of `parts` as the image `quay.io/coreos/hyperkube:<version>`
/// of the worker's local store, and what the test machine needs on top:
/// no network add-on runs (no CNI), no iptables in the image (docker's
/// own rules off, no bridge).
fn install_real_kubelet(vm: &VmNode, parts: &testkit::kube::KubeParts) {
    let disk = vm.disk();
    disk.install_file(
        &parts.kubelet(),
        &format!("{}/kubelet", image_dir(SEED_URL, &parts.version)),
        0o755,
    )
    .unwrap();
    disk.write(
        "/etc/systemd/system/kubelet.service.d/20-test-node.conf",
        "[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--network-plugin= --fail-swap-on=false\"\n",
        0o644,
    )
    .unwrap();
    disk.write(
        "/etc/systemd/system/docker.service.d/20-test-node.conf",
        "[Service]\nEnvironment=\"DOCKER_OPTS=--iptables=false --ip-masq=false --bridge=none\"\n",
        0o644,
    )
    .unwrap();
}

/// The OS version update_engine (the stand-in) offers.
const NEXT_OS: &str = "1688.5.3";

/// A signed torcx package mirror (the rig's HTTP server and key) serving,
/// for the next OS version, docker 1.12 and the docker the cluster's
/// runtime mappings want ([`TorcxMirror::next`]), with package URLs as the
/// VM reaches them.
struct TorcxMirror {
    rig: AddonRig,
    /// The wanted docker's torcx reference (`17.03`, `20.10`).
    next: &'static str,
    /// What its `docker --version` says of its version.
    next_build: String,
    /// Its package, and where the rig serves it.
    next_pkg: Vec<u8>,
    next_path: String,
}

impl TorcxMirror {
    /// The stand-in images: docker 1.12 and 17.03 (what Kubernetes 1.9
    /// wants, in the inputs' runtime mappings).
    fn new() -> TorcxMirror {
        TorcxMirror::serving("17.03", "17.03.2".into(), docker_archive("17.03.2"))
    }

    /// Docker 1.12 (stand-in) and the real docker 20.10 (Debian's, as a
    /// torcx image: what Kubernetes 1.20 wants).
    fn real_docker() -> TorcxMirror {
        let docker = testkit::docker_image::real_docker().unwrap();
        TorcxMirror::serving(
            testkit::docker_image::REFERENCE,
            docker.version.clone(),
            docker.bytes().unwrap(),
        )
    }

    fn serving(next: &'static str, next_build: String, next_pkg: Vec<u8>) -> TorcxMirror {
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
    fn stored(&self) -> String {
        format!(
            "/var/lib/torcx/store/{NEXT_OS}/docker:{}.torcx.tgz",
            self.next
        )
    }

    /// The agent config an operator writes for OS updates and the docker
    /// addon from this mirror (everything else: the shipped defaults).
    fn agent_config(&self) -> Value {
        json!({
            "os_update": {"enabled": true},
            "addon": {
                "enabled": true,
                "manifest_url": VmNode::guest_url(&self.rig.manifest_url_template()),
                "keyring": "/etc/kubernetes/installer/keyring.asc"
            }
        })
    }

    fn keyring(&self) -> String {
        self.rig.key.public_armored()
    }
}

/// What a Flatcar image with update_engine and torcx brings besides
/// [`install_os_parts`]: update_engine (the stand-in: it offers
/// [`NEXT_OS`] and, once installed, leaves it for the boot loader; its
/// D-Bus policy; enabled, as Flatcar ships it), the vendor docker 1.12
/// with its profile, and docker's data from earlier boots.
fn install_update_engine_and_vendor_docker(vm: &VmNode) {
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
fn updating_worker(d: &Delivery, m: &TorcxMirror) -> VmNode {
    let host_key = testkit::vm::Image::get().unwrap().ssh_host_key;
    let metal = d.metal(&m.agent_config(), Some(&m.keyring()), (22, &host_key));
    let mut vm = d.worker(&metal);
    vm.forward_to_host(m.rig.server.addr().port());
    install_update_engine_and_vendor_docker(&vm);
    vm
}

/// The agent's state journal.
const JOURNAL: &str = "/var/lib/node-bootstrap/state.json";
/// Where the agent moves a journal it cannot read (empty or corrupt).
const JOURNAL_ASIDE: &str = "/var/lib/node-bootstrap/state.json.corrupt";
const BOOTSTRAP_UNIT: &str = "k8s-node-bootstrap.service";

/// The agent's state journal, parsed (from the guest, or the disk while
/// the VM is down).
fn state_journal(vm: &VmNode) -> Option<Value> {
    vm.read(JOURNAL).and_then(|t| serde_json::from_str(&t).ok())
}

/// What `/run/torcx/bin/docker --version` says: the docker torcx applied.
fn torcx_docker(vm: &VmNode) -> String {
    vm.exec(&["/run/torcx/bin/docker", "--version"])
        .map(|o| o.stdout_str().trim().to_string())
        .unwrap_or_default()
}

fn os_version(vm: &VmNode) -> String {
    vm.read("/usr/lib/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_ID=").map(str::to_string))
        .unwrap_or_default()
}

/// After a boot that ended in the agent's reboot (the VM is down): what
/// the disk holds before the next boot.
fn assert_rebooted_for_the_update(vm: &VmNode, m: &TorcxMirror) {
    assert!(
        vm.read("/etc/kubernetes/kubelet.env").is_none(),
        "kubelet.env must wait for the boot that runs the new OS and docker"
    );
    assert!(
        !vm.exists("/var/lib/docker/image/marker"),
        "docker's old datadir is wiped on the way down"
    );
    assert_eq!(vm.read("/etc/torcx/next-profile").unwrap(), "tectonic\n");
    assert!(vm.exists(&m.stored()));
    assert_eq!(
        vm.read(testkit::vm::PENDING_UPDATE).unwrap().trim(),
        NEXT_OS,
        "update_engine staged the new OS"
    );
}

/// After the boot that runs the new OS: the node is complete, with the new
/// OS, the wanted docker applied by torcx, kubelet.env for
/// `cluster_version` and kubelet.
fn assert_updated_and_complete(vm: &VmNode, m: &TorcxMirror, cluster_version: &str) {
    let (code, out) = status_wait(vm);
    assert_eq!(code, Some(0), "status --wait:\n{out}\n{}", vm.diagnostics());
    assert_eq!(os_version(vm), NEXT_OS);
    assert!(
        torcx_docker(vm).contains(&m.next_build),
        "torcx applied docker {}: {}",
        m.next,
        torcx_docker(vm)
    );
    let sealed = vm.read("/run/metadata/torcx").unwrap_or_default();
    assert!(
        sealed.contains("TORCX_UPPER_PROFILE=\"tectonic\""),
        "{sealed}"
    );
    testkit::agentnode::check_kubelet_env(
        &vm.read("/etc/kubernetes/kubelet.env").unwrap(),
        cluster_version,
        // The test VMs run cgroup v2.
        "systemd",
    )
    .unwrap();
    assert_eq!(vm.prop("kubelet.service", "ActiveState").unwrap(), "active");
    assert!(
        vm.read_bytes(&m.stored()) == Some(m.next_pkg.clone()),
        "the store holds the verified package, whole"
    );
    // What status reads: every step of the flow done, none left running.
    let j = state_journal(vm).expect("a state journal");
    for step in [
        "cluster-version",
        "os-update",
        "docker-addon",
        "kubelet-env",
    ] {
        assert_eq!(step_status(&j, step), "done", "{step}: {j:#}");
    }
}

/// The statuses of the journal's steps (`step=status` in order), or
/// `"none"` when there is no (readable) journal.
fn journal_summary(j: Option<&Value>) -> String {
    match j.and_then(|j| j["steps"].as_object()) {
        Some(steps) => steps
            .iter()
            .map(|(k, v)| format!("{k}={}", v["status"].as_str().unwrap_or("?")))
            .collect::<Vec<_>>()
            .join(" "),
        None => "none".into(),
    }
}

/// Cuts the power the moment the agent's state journal, as the guest sees
/// it (polled through the guest agent), satisfies `at`: right after the
/// write that made it so. With `canary`, a file written without fsync just
/// before shows the cut really loses the guest's page cache (not while the
/// guest shuts down: its guest agent may be gone). Returns the journal the
/// guest had.
fn cut_when(vm: &mut VmNode, point: &str, canary: bool, at: impl Fn(&Value) -> bool) -> Value {
    let seen = vm
        .wait_for(point, WORK, |vm| {
            let text = vm.try_read_bytes(JOURNAL).ok()??;
            let j: Value = serde_json::from_slice(&text).ok()?;
            at(&j).then_some(j)
        })
        .unwrap();
    if canary {
        let out = vm
            .sh("echo unsynced > /var/tmp/canary && cat /var/tmp/canary")
            .unwrap();
        assert_eq!(out.stdout_str(), "unsynced\n");
    }
    vm.power_cut().unwrap();
    let kept = match vm.read_bytes(JOURNAL) {
        None => "no journal".to_string(),
        Some(b) if b.is_empty() => "an empty journal".to_string(),
        Some(b) => journal_summary(serde_json::from_slice(&b).ok().as_ref()),
    };
    eprintln!(
        "cut {point}: the guest's journal: {}; the disk kept: {kept}",
        journal_summary(Some(&seen)),
    );
    if canary {
        assert!(
            vm.read("/var/tmp/canary").unwrap_or_default().is_empty(),
            "a file written without fsync just before the cut survived it: the cut kept the page cache"
        );
    }
    seen
}

fn step_status(j: &Value, step: &str) -> String {
    j["steps"][step]["status"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// After a power cut (the VM is down), what the next boot will find: every
/// file the agent replaces atomically is the old one or the new one, whole.
///
/// One exception, by design: the state journal may be empty. `run` writes
/// its records without fsync (`fsutil::Durability::AtomicOnly`, see
/// `flow::driver`), and ext4 can commit the rename that gives a new file
/// its name before the file's data (the first journal of a node has no
/// old file the rename replaces, which would make ext4 write the data
/// first); the agent moves such a journal aside and starts afresh. Returns
/// whether the journal is empty: the caller then checks, in the next boot,
/// that the agent did so ([`assert_empty_journal_moved_aside`]).
#[must_use = "an empty journal must be followed by assert_empty_journal_moved_aside"]
fn assert_nothing_partial(vm: &VmNode, m: &TorcxMirror) -> bool {
    let journal = vm.read_bytes(JOURNAL);
    if let Some(text) = &journal {
        assert!(
            text.is_empty() || serde_json::from_slice::<Value>(text).is_ok(),
            "a torn state journal: {:?}",
            String::from_utf8_lossy(text)
        );
    }
    if let Some(env) = vm.read("/etc/kubernetes/kubelet.env") {
        assert_eq!(
            env,
            "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\nKUBELET_CGROUP_DRIVER=\"systemd\"\n",
            "kubelet.env is whole or absent"
        );
    }
    if let Some(pkg) = vm.read_bytes(&m.stored()) {
        assert!(
            pkg == m.next_pkg,
            "a package under its final name is the verified one, whole"
        );
    }
    if let Some(p) = vm.read("/etc/torcx/next-profile") {
        assert_eq!(p, "tectonic\n");
    }
    journal.is_some_and(|t| t.is_empty())
}

/// In the boot after a cut that left the state journal empty: the agent
/// neither fails on it nor stops; it moves it aside
/// ([`JOURNAL_ASIDE`], empty) and writes a new journal. (That the node
/// then converges, the caller's later boots show.)
fn assert_empty_journal_moved_aside(vm: &mut VmNode) {
    let replaced = vm
        .wait_for("the agent to replace the empty state journal", WORK, |vm| {
            let result = vm.prop(BOOTSTRAP_UNIT, "Result").ok()?;
            if result != "success" {
                return Some(Err(format!(
                    "{BOOTSTRAP_UNIT} failed (result {result}) on the empty journal instead of moving it aside:\n{}",
                    vm.journal(BOOTSTRAP_UNIT)
                )));
            }
            let text = vm.try_read_bytes(JOURNAL).ok()??;
            serde_json::from_slice::<Value>(&text).ok().map(Ok)
        })
        .unwrap();
    let replaced = replaced.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        vm.read_bytes(JOURNAL_ASIDE),
        Some(Vec::new()),
        "the empty journal, moved aside; the new one: {replaced:#}"
    );
}

/// How long after the docker addon step starts its package download must
/// be under way: fetching and checking the signed manifest before it takes
/// seconds.
const DOWNLOAD_START: Duration = Duration::from_secs(120);

/// Waits until the agent downloads the wanted docker package in the
/// running guest, and returns how much of it the guest holds: once the
/// docker addon step runs (after the OS update, in its journal), the
/// mirror must have answered the guest's GET of the package within
/// [`DOWNLOAD_START`], and the guest must hold part of it, neither nothing
/// nor all of it, in the store's partial file (`.<name>.part-<hash>`, see
/// `addon::fetch`), with nothing under the package's final name yet. A
/// cut after this lands mid-download.
fn wait_download_under_way(vm: &mut VmNode, m: &TorcxMirror) -> u64 {
    vm.wait_for("the docker addon step (after the OS update)", WORK, |vm| {
        let j: Value = serde_json::from_slice(&vm.try_read_bytes(JOURNAL).ok()??).ok()?;
        (step_status(&j, "docker-addon") == "running" && step_status(&j, "os-update") == "done")
            .then_some(())
    })
    .unwrap();
    let whole = m.next_pkg.len() as u64;
    let partial = format!(
        "/var/lib/torcx/store/{NEXT_OS}/.docker:{}.torcx.tgz.part-*",
        m.next
    );
    let held = vm
        .wait_for("the package download", DOWNLOAD_START, |vm| {
            if vm.try_exists(&m.stored()).ok()? {
                return Some(Err(format!(
                    "{} is under its final name before the test saw it downloading",
                    m.stored()
                )));
            }
            let served = m
                .rig
                .server
                .requests_for(&m.next_path)
                .iter()
                .any(|r| matches!(r.status, 200 | 206));
            if !served {
                return None;
            }
            let out = vm
                .sh(&format!("stat -c %s {partial} 2>/dev/null"))
                .ok()?;
            let held: u64 = out.stdout_str().lines().next()?.trim().parse().ok()?;
            match held {
                0 => None,
                n if n < whole => Some(Ok(n)),
                n => Some(Err(format!(
                    "the guest held the whole package ({n} bytes) before the test saw it downloading"
                ))),
            }
        })
        .unwrap_or_else(|e| {
            panic!(
                "the docker addon step ran {DOWNLOAD_START:?} without the package download under way \
                 (the mirror's log of it: {:?}): {e:#}",
                m.rig.server.requests_for(&m.next_path)
            )
        });
    let held = held.unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "vm {}: the guest holds {held} of {whole} bytes of the package",
        vm.name()
    );
    held
}

fn lines(vm: &VmNode, path: &str) -> Vec<String> {
    vm.read(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `node-bootstrap status --wait` on the node: what terraform's
/// remote-exec or an operator waits on. Returns its exit code and output.
fn status_wait(vm: &VmNode) -> (Option<i32>, String) {
    let out = vm
        .exec_timeout(
            &[
                "/opt/bin/node-bootstrap",
                "status",
                "--wait",
                "--timeout",
                &WORK.as_secs().to_string(),
            ],
            WORK + Duration::from_secs(60),
        )
        .unwrap();
    (out.code, out.stdout_str() + &out.stderr_str())
}

fn report(vm: &VmNode, t0: Instant) {
    eprintln!(
        "vm {}: test done in {:.1}s; boots: {:?}",
        vm.name(),
        t0.elapsed().as_secs_f64(),
        vm.boot_records()
    );
}

fn skip(tools: &[&str]) -> bool {
    testkit::vm::skip_unless_possible() || delivery_support::skip_without(tools)
}

#[test]
fn worker_first_boot_from_the_rendered_config_runs_the_agent_to_a_running_kubelet() {
    if skip(&["terraform", "ssh-keygen", "strip"]) {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
    let t0 = Instant::now();
    let d = Delivery::new();
    // The shipped defaults (real node paths; OS updates and the addon off).
    // The bootkube master is not booted here, only rendered.
    let host_key = testkit::vm::Image::get().unwrap().ssh_host_key;
    let metal = d.metal(&json!({}), None, (22, &host_key));
    let mut vm = d.worker(&metal);
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();

    let (code, out) = status_wait(&vm);
    assert_eq!(code, Some(0), "status --wait:\n{out}\n{}", vm.diagnostics());

    // Ignition alone enabled the units (no hand step), from its preset.
    let enabled = vm
        .exec(&[
            "systemctl",
            "is-enabled",
            "k8s-node-bootstrap.service",
            "kubelet.service",
        ])
        .unwrap();
    assert_eq!(enabled.stdout_str(), "enabled\nenabled\n");
    assert_eq!(vm.prop("kubelet.service", "ActiveState").unwrap(), "active");
    assert_eq!(
        vm.prop("k8s-node-bootstrap.service", "NRestarts").unwrap(),
        "0"
    );
    // The binary Ignition fetched over HTTP is the one the mirror serves
    // (Ignition checked the SHA-512 the config gave; so does the test).
    let sum = vm.exec(&["sha512sum", "/opt/bin/node-bootstrap"]).unwrap();
    assert!(
        sum.stdout_str().starts_with(&d.agent.sha512),
        "{}",
        sum.stdout_str()
    );
    assert_eq!(
        d.mirror.requests_for(AGENT_PATH).len(),
        1,
        "fetched once, by Ignition"
    );
    // The cluster version came from the API server (client certificate),
    // not from the seed.
    assert_eq!(
        vm.read("/etc/kubernetes/kubelet.env").unwrap(),
        "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\nKUBELET_CGROUP_DRIVER=\"systemd\"\n"
    );
    assert!(
        d.cluster
            .api
            .log()
            .requests
            .iter()
            .any(|r| r.path == "/version" && r.client_cert)
    );
    assert_eq!(
        lines(&vm, "/var/lib/kubelet-wrapper/starts"),
        [testkit::agentnode::kubelet_start_record(
            "v1.9.6_coreos.0",
            "systemd"
        )]
    );
    // The first boot is over: the next one will not run Ignition again.
    assert!(!vm.exists(testkit::vm::FIRSTBOOT_FLAG));
    vm.shutdown().unwrap();
    report(&vm, t0);
}

#[test]
fn bootkube_master_push_over_ssh_and_a_power_cut_during_bootkube_leave_no_done_for_unfinished_work()
{
    if skip(&["terraform", "ssh-keygen", "ssh", "strip"]) {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
    let t0 = Instant::now();
    let d = Delivery::new();
    let mut vm = VmNode::new("master-0").unwrap();
    let ssh_port = vm.forward_ssh().unwrap();
    let host_key = vm.image().ssh_host_key.clone();
    let metal = d.metal(&json!({}), None, (ssh_port, &host_key));
    vm.set_ignition(&d.master_config(&metal)).unwrap();
    // No API server: the bootkube master's version comes from its seed
    // (there is no cluster before it).
    vm.forward_to_host(d.mirror.addr().port());
    install_os_parts(&vm);
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();

    // Before the push: kubelet runs, bootkube waits for its assets, and
    // status says the node is not complete.
    vm.wait_active_state("kubelet.service", "active", WORK)
        .unwrap();
    let enabled = vm
        .exec(&[
            "systemctl",
            "is-enabled",
            "k8s-node-bootstrap.service",
            "kubelet.service",
            "bootkube.path",
            "tectonic.path",
        ])
        .unwrap();
    assert_eq!(enabled.stdout_str(), "enabled\nenabled\nenabled\nenabled\n");
    assert_eq!(vm.prop("bootkube.path", "ActiveState").unwrap(), "active");
    assert_eq!(
        vm.prop("bootkube.service", "ActiveState").unwrap(),
        "inactive"
    );
    assert!(!vm.exists("/opt/tectonic"));
    let early = vm
        .exec(&["/opt/bin/node-bootstrap", "status", "--json"])
        .unwrap();
    assert_eq!(
        early.code,
        Some(10),
        "in progress until the assets arrive: {}",
        early.stdout_str()
    );
    assert_eq!(
        vm.read("/etc/kubernetes/kubelet.env").unwrap(),
        format!(
            "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"{SEED_TAG}\"\nKUBELET_CGROUP_DRIVER=\"systemd\"\n"
        )
    );

    // The push: terraform apply over SSH, as core through sudo. bootkube
    // starts at once (bootkube.path); the test holds it and cuts the power
    // in the middle of its run.
    vm.sh("touch /run/e2e-hold-bootkube").unwrap();
    let out = metal.apply();
    assert!(
        out.contains("Apply complete! Resources: 1 added, 0 changed, 0 destroyed."),
        "{out}"
    );
    vm.wait_for("bootkube.sh to run", WORK, |vm| {
        (lines(vm, "/var/lib/e2e/bootkube-runs").len() == 1).then_some(())
    })
    .unwrap();
    assert_eq!(
        vm.prop("bootkube.service", "ActiveState").unwrap(),
        "activating"
    );
    vm.power_cut().unwrap();
    assert!(
        vm.exists("/opt/tectonic/bootkube.sh"),
        "the pushed assets are durable"
    );
    assert!(
        !vm.exists("/opt/tectonic/init_bootkube.done")
            && !vm.exists("/opt/tectonic/init_tectonic.done"),
        "no .done for unfinished work"
    );

    // The next boot: bootkube runs again to its end, then tectonic.
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    let (code, status) = status_wait(&vm);
    assert_eq!(
        code,
        Some(0),
        "status --wait:\n{status}\n{}",
        vm.diagnostics()
    );
    assert!(vm.exists("/opt/tectonic/init_bootkube.done"));
    assert!(vm.exists("/opt/tectonic/init_tectonic.done"));
    assert_eq!(
        lines(&vm, "/var/lib/e2e/bootkube-runs"),
        [
            "bootkube ran in /opt/tectonic as uid 0",
            "bootkube ran in /opt/tectonic as uid 0"
        ],
        "the run the cut ended, then a whole one"
    );
    assert_eq!(
        lines(&vm, "/var/lib/e2e/tectonic-runs"),
        ["tectonic ran in /opt/tectonic"]
    );
    assert_eq!(
        vm.read("/opt/tectonic/tls/apiserver.key").unwrap(),
        "-----BEGIN PRIVATE KEY-----\nnot really\n"
    );
    let perms = vm.exec(&["stat", "-c", "%u %a", "/opt/tectonic"]).unwrap();
    assert_eq!(
        perms.stdout_str().trim(),
        "0 700",
        "assets: root-owned, private"
    );

    // Apply again: nothing to do, nothing happens on the node.
    let out = metal.apply();
    assert!(
        out.contains("Apply complete! Resources: 0 added, 0 changed, 0 destroyed."),
        "{out}"
    );
    assert_eq!(lines(&vm, "/var/lib/e2e/bootkube-runs").len(), 2);
    assert_eq!(lines(&vm, "/var/lib/e2e/tectonic-runs").len(), 1);
    vm.shutdown().unwrap();
    report(&vm, t0);
}

#[test]
fn worker_first_boot_with_an_os_update_and_the_real_docker_joins_a_control_plane_on_the_host() {
    if skip(&["terraform", "ssh-keygen", "strip"]) || testkit::kube::skip_unless_available() {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
    let t0 = Instant::now();
    // The control plane on the host, its certificate valid for the address
    // the VM reaches the host at; the worker's kubeconfig with the client
    // certificate of its node name (the image's host name).
    let parts = testkit::kube::parts().unwrap();
    let cp = ControlPlane::new(&[HOST_ALIAS]);
    let running = cp.start(&parts).unwrap();
    let mut d = Delivery::new();
    d.kubeconfig = cp.node_kubeconfig(VM_HOSTNAME, Some(&VmNode::guest_url(&cp.url())));
    d.runtime_mappings = d.path().join("runtime-mappings.yaml");
    fs::write(&d.runtime_mappings, testkit::cluster::runtime_mappings()).unwrap();
    let m = TorcxMirror::real_docker();
    let mut vm = updating_worker(&d, &m);
    vm.forward_to_host(cp.apiserver_port);
    install_real_kubelet(&vm, &parts);
    let booted_at = std::time::SystemTime::now();
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    // The real torcx-generator applied the OS image's docker 1.12.
    assert!(
        torcx_docker(&vm).contains("1.12.6"),
        "{}",
        torcx_docker(&vm)
    );

    // Boot 1 ends in the agent's own reboot (logind), a kernel reboot.
    assert_eq!(vm.wait_down(WORK).unwrap(), BootEnd::Reboot);
    assert_rebooted_for_the_update(&vm, &m);
    let j = state_journal(&vm).unwrap();
    assert_eq!(
        j["steps"]["reboot"]["result"]["reason"],
        format!("os {OS_VERSION} -> {NEXT_OS}; docker 1.12 -> {}", m.next),
        "{j:#}"
    );

    // Boot 2: the boot loader boots the new OS; torcx applies the real
    // docker; the agent confirms both and writes kubelet.env with the
    // cluster's version; the real kubelet of that version registers.
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_updated_and_complete(&vm, &m, &parts.version);
    let hostname = vm.read("/proc/sys/kernel/hostname").unwrap_or_default();
    assert_eq!(hostname.trim(), VM_HOSTNAME);
    let ready = running
        .kubectl
        .wait_ready(&[VM_HOSTNAME], WORK)
        .unwrap_or_else(|e| panic!("{e:#}\n{}", vm.diagnostics()));
    let node = ready.iter().find(|n| n.name == VM_HOSTNAME).unwrap();
    assert_eq!(node.kubelet_version, parts.version);
    assert_eq!(
        node.container_runtime_version,
        format!("docker://{}", m.next_build)
    );
    assert_eq!(node.labels["node.kubernetes.io/role"], "worker");
    bench_rows(&vm, booted_at, node.ready_since.expect("a Ready condition"));
    assert_eq!(
        lines(&vm, "/var/lib/kubelet-wrapper/starts").len(),
        1,
        "kubelet started once, in the second boot"
    );
    assert_eq!(
        vm.prop("k8s-node-bootstrap.service", "NRestarts").unwrap(),
        "0"
    );
    let j = state_journal(&vm).unwrap();
    for step in ["os-update", "docker-addon"] {
        assert!(
            j["steps"][step]["result"]["confirmed_in_boot"].is_string(),
            "{step} confirmed after the reboot: {j:#}"
        );
    }
    assert_eq!(
        m.rig.server.requests_for(&m.next_path).len(),
        1,
        "the docker package downloaded once"
    );
    assert!(
        m.rig
            .server
            .requests_for(&m.rig.manifest_path(NEXT_OS))
            .iter()
            .any(|r| r.status == 200),
        "the manifest of the OS the node boots next"
    );
    vm.shutdown().unwrap();
    report(&vm, t0);
}

/// Power cuts in the first boots, each in the boot that recovers from the
/// one before: (1) while update_engine installs the OS update, right after
/// the agent's unsynced journal write that starts the os-update step; the
/// journal that cut leaves is made empty if the cut did not make it so (a
/// state the agent is built for, see [`assert_nothing_partial`]), and the
/// next boot moves it aside; (2) in the docker addon step that follows the
/// OS update, once the mirror (slowed down) has started sending the
/// package and the guest holds part of it; (3) right after the durable
/// record before the agent's reboot, before the shutdown could wipe
/// docker's old datadir. Each next boot picks up the work and the last one
/// completes the node.
#[test]
fn power_cuts_before_the_reboot_converge() {
    if skip(&["terraform", "ssh-keygen", "strip"]) {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
    let t0 = Instant::now();
    let d = Delivery::new();
    let m = TorcxMirror::new();
    let mut vm = updating_worker(&d, &m);

    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    cut_when(&mut vm, "1: the OS update running", true, |j| {
        step_status(j, "os-update") == "running"
    });
    if !assert_nothing_partial(&vm, &m) {
        vm.disk().write(JOURNAL, "", 0o640).unwrap();
        eprintln!("vm {}: the state journal made empty", vm.name());
    }
    assert!(
        vm.read(testkit::vm::PENDING_UPDATE).is_none(),
        "the cut came before update_engine finished"
    );

    // The next boot moves the empty journal aside and runs the update
    // again; the docker download crawls.
    m.rig.server.set_rate(&m.next_path, Some(16 * 1024));
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_empty_journal_moved_aside(&mut vm);
    wait_download_under_way(&mut vm, &m);
    cut_when(&mut vm, "2: the docker addon downloading", true, |j| {
        step_status(j, "docker-addon") == "running"
    });
    let empty = assert_nothing_partial(&vm, &m);
    if empty {
        // What boot 2 moved aside must not stand in for what boot 3 does.
        vm.disk().remove(JOURNAL_ASIDE).unwrap();
    }
    assert!(
        !vm.exists(&m.stored()),
        "the cut came mid-download: no package under its final name"
    );
    assert_eq!(
        vm.read(testkit::vm::PENDING_UPDATE).unwrap().trim(),
        NEXT_OS,
        "update_engine's staged update survives"
    );

    // The next boot runs the new OS (the boot loader took the staged
    // update); the agent installs docker 17.03 for it and asks for the
    // reboot: cut right after that durable record.
    m.rig.server.set_rate(&m.next_path, None);
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    if empty {
        assert_empty_journal_moved_aside(&mut vm);
    }
    let seen = cut_when(&mut vm, "3: the reboot requested", false, |j| {
        step_status(j, "reboot") == "running"
    });
    assert!(
        !assert_nothing_partial(&vm, &m),
        "the record before a reboot is durable, never empty"
    );
    let kept = state_journal(&vm).expect("the record before a reboot is durable");
    assert_eq!(kept["steps"]["reboot"], seen["steps"]["reboot"]);
    assert!(
        vm.exists("/var/lib/docker/image/marker"),
        "the cut came before the shutdown wiped docker's datadir"
    );
    assert!(
        vm.exists("/var/lib/node-bootstrap/docker-datadir-wipe-pending"),
        "the journal records a reboot that wipes docker's datadir: the owed wipe must be on disk with it"
    );

    // The next boot: the owed wipe happens, the changes are confirmed,
    // kubelet.env is written.
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_updated_and_complete(&vm, &m, CLUSTER_VERSION);
    assert!(
        !vm.exists("/var/lib/docker/image/marker"),
        "docker's old datadir survived into the new docker: the wipe the cut shutdown owed was not done"
    );
    assert_eq!(lines(&vm, "/var/lib/kubelet-wrapper/starts").len(), 1);
    assert_eq!(vm.boots(), 4);
    vm.shutdown().unwrap();
    report(&vm, t0);
}

/// Power cut in the boot after the agent's reboot, right after kubelet.env
/// and the agent's last journal write after it (the records of the
/// confirmations and of kubelet.env): that record is on disk after the
/// cut (nothing would ever redo it: later boots skip the agent), and the
/// next boot starts kubelet on a complete node.
#[test]
fn power_cut_right_after_kubelet_env_converges() {
    if skip(&["terraform", "ssh-keygen", "strip"]) {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
    let t0 = Instant::now();
    let d = Delivery::new();
    let m = TorcxMirror::new();
    let mut vm = updating_worker(&d, &m);
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_eq!(vm.wait_down(WORK).unwrap(), BootEnd::Reboot);
    assert_rebooted_for_the_update(&vm, &m);

    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    let seen = cut_when(&mut vm, "4: kubelet.env written", true, |j| {
        step_status(j, "kubelet-env") == "done"
    });
    assert!(
        !assert_nothing_partial(&vm, &m),
        "the agent's last record is durable, never empty"
    );
    assert!(
        vm.exists("/etc/kubernetes/kubelet.env"),
        "kubelet.env is durable"
    );
    let kept = state_journal(&vm).expect("a state journal");
    assert_eq!(
        journal_summary(Some(&kept)),
        journal_summary(Some(&seen)),
        "the agent's last record, after kubelet.env, survives the cut"
    );

    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_updated_and_complete(&vm, &m, CLUSTER_VERSION);
    assert_eq!(
        vm.prop("k8s-node-bootstrap.service", "ConditionResult")
            .unwrap(),
        "no",
        "kubelet.env is there: the agent is skipped"
    );
    vm.shutdown().unwrap();
    report(&vm, t0);
}
