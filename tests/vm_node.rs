//! The VM tier: whole QEMU machines (testkit::vm) booting the OS image
//! built from Debian packages by scripts/vm-image.sh. What the simulated
//! node cannot show, shown for real:
//!
//! - the Ignition configs rendered by terraform (the metal example, through
//!   terraform/modules/ignition) applied by the real Ignition on a first
//!   boot: the agent binary fetched over HTTP and checked against its
//!   SHA-512, the units enabled by Ignition alone, the agent runs, kubelet
//!   runs, `node-bootstrap status --wait` exits 0;
//! - on the bootkube master, `terraform apply` of the metal example pushes
//!   the assets over SSH to the VM's real sshd as Ignition's `core` user,
//!   and bootkube and tectonic run once;
//!
//! Every test holds `vm::exclusive()`: one machine at a time. Timings of
//! each boot go to stderr (`cargo test --test vm_node -- --nocapture`).

mod delivery_support;

use delivery_support::{Terraform, root};
use serde_json::{Value, json};
use sha2::{Digest, Sha512};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testkit::agentnode::Cluster;
use testkit::apiserver::{ApiServerOptions, FakeApiServer, KubeAuth, Pki};
use testkit::pkgserver::PkgServer;
use testkit::vm::{HOST_ALIAS, VmNode};

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

/// The metal example's variables for one cluster whose agent the test
/// serves, whose API server is the stand-in.
fn metal_vars(
    work: &Path,
    agent_url: &str,
    agent: &ServedAgent,
    kubeconfig: &str,
    master_ssh: (u16, &str),
    client: &(PathBuf, String),
    assets: &Path,
) -> Value {
    let kubeconfig_path = work.join("kubeconfig");
    fs::write(&kubeconfig_path, kubeconfig).unwrap();
    let config_path = work.join("config.json");
    // The shipped defaults (real node paths, OS updates and the addon off).
    fs::write(&config_path, "{}\n").unwrap();
    json!({
        "bootkube_master": {"name": "master-0", "host": "127.0.0.1", "port": master_ssh.0, "host_key": master_ssh.1},
        "workers": ["worker-0"],
        "assets_dir": assets,
        "ssh_user": "core",
        "ssh_private_key_path": client.0,
        "ssh_authorized_keys": [client.1],
        "ssh_timeout": "2m",
        "agent_url": agent_url,
        "agent_sha512": agent.sha512,
        "agent_config_path": config_path,
        "kubelet_image_tag": SEED_TAG,
        "runtime_mappings_path": root().join("ignition/render/inputs/runtime-mappings.yaml"),
        "kubeconfig_path": kubeconfig_path,
    })
}

/// The cluster's assets, as an installer generates them: bootkube.sh and
/// tectonic-wrapper.sh record each run, plus a manifest and a key.
fn cluster_assets(work: &Path) -> PathBuf {
    let assets = work.join("generated");
    let asset = |name: &str, body: &str| {
        let p = assets.join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    };
    asset(
        "bootkube.sh",
        "#!/bin/bash\nset -e\nmkdir -p /var/lib/e2e\necho \"bootkube ran in $PWD as uid $(id -u)\" >> /var/lib/e2e/bootkube-runs\n",
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
/// stand-in: it records its starts and sleeps).
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

#[test]
fn worker_first_boot_from_the_rendered_config_runs_the_agent_to_a_running_kubelet() {
    let name = "worker_first_boot";
    if testkit::vm::skip_unless_possible(name)
        || delivery_support::skip_without(name, &["terraform", "ssh-keygen", "strip"])
    {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
    let t0 = Instant::now();
    let work = tempfile::tempdir().unwrap();
    let c = cluster();
    let agent = ServedAgent::new(work.path());
    let mirror = PkgServer::start().unwrap();
    mirror.put(AGENT_PATH, agent.bytes.clone());
    let agent_url = VmNode::guest_url(&mirror.url(AGENT_PATH));
    let kubeconfig = c
        .pki
        .kubeconfig(&VmNode::guest_url(&c.api.url()), &KubeAuth::ClientCert);
    let assets = cluster_assets(work.path());
    let client = client_key(work.path());
    let metal = Metal::new(
        work.path(),
        metal_vars(
            work.path(),
            &agent_url,
            &agent,
            &kubeconfig,
            // The master is not booted here; only its config is rendered.
            (22, &testkit::vm::Image::get().unwrap().ssh_host_key),
            &client,
            &assets,
        ),
    );
    let configs = metal.ignition_configs(work.path());

    let mut vm = VmNode::new("worker-0").unwrap();
    vm.set_ignition(&configs["worker-0"]).unwrap();
    vm.forward_to_host(mirror.addr().port());
    vm.forward_to_host(port_of(&c.api.url()));
    install_os_parts(&vm);
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
        sum.stdout_str().starts_with(&agent.sha512),
        "{}",
        sum.stdout_str()
    );
    assert_eq!(
        mirror.requests_for(AGENT_PATH).len(),
        1,
        "fetched once, by Ignition"
    );
    // The cluster version came from the API server (client certificate),
    // not from the seed.
    assert_eq!(
        vm.read("/etc/kubernetes/kubelet.env").unwrap(),
        "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n"
    );
    assert!(
        c.api
            .log()
            .requests
            .iter()
            .any(|r| r.path == "/version" && r.client_cert)
    );
    assert_eq!(
        lines(&vm, "/var/lib/kubelet-wrapper/starts"),
        [
            "start image=quay.io/coreos/hyperkube:v1.9.6_coreos.0 args=--kubeconfig=/etc/kubernetes/kubeconfig --pod-manifest-path=/etc/kubernetes/manifests"
        ]
    );
    // The first boot is over: the next one will not run Ignition again.
    assert!(!vm.exists(testkit::vm::FIRSTBOOT_FLAG));
    vm.shutdown().unwrap();
    report(&vm, t0);
}

#[test]
fn bootkube_master_first_boot_then_terraform_pushes_assets_over_ssh_and_bootkube_runs_once() {
    let name = "bootkube_master_push";
    if testkit::vm::skip_unless_possible(name)
        || delivery_support::skip_without(name, &["terraform", "ssh-keygen", "ssh", "strip"])
    {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
    let t0 = Instant::now();
    let work = tempfile::tempdir().unwrap();
    // No API server: the bootkube master's version comes from its seed
    // (there is no cluster before it). The kubeconfig still points at one.
    let c = cluster();
    let agent = ServedAgent::new(work.path());
    let mirror = PkgServer::start().unwrap();
    mirror.put(AGENT_PATH, agent.bytes.clone());
    let agent_url = VmNode::guest_url(&mirror.url(AGENT_PATH));
    let kubeconfig = c
        .pki
        .kubeconfig(&VmNode::guest_url(&c.api.url()), &KubeAuth::ClientCert);

    let assets = cluster_assets(work.path());

    let mut vm = VmNode::new("master-0").unwrap();
    let ssh_port = vm.forward_ssh().unwrap();
    let host_key = vm.image().ssh_host_key.clone();
    let client = client_key(work.path());
    let metal = Metal::new(
        work.path(),
        metal_vars(
            work.path(),
            &agent_url,
            &agent,
            &kubeconfig,
            (ssh_port, &host_key),
            &client,
            &assets,
        ),
    );
    let configs = metal.ignition_configs(work.path());
    vm.set_ignition(&configs["master-0"]).unwrap();
    vm.forward_to_host(mirror.addr().port());
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
            "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"{SEED_TAG}\"\n"
        )
    );

    // The push: terraform apply over SSH, as core through sudo.
    let out = metal.apply();
    assert!(
        out.contains("Apply complete! Resources: 1 added, 0 changed, 0 destroyed."),
        "{out}"
    );
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
        ["bootkube ran in /opt/tectonic as uid 0"]
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
    assert_eq!(lines(&vm, "/var/lib/e2e/bootkube-runs").len(), 1);
    assert_eq!(lines(&vm, "/var/lib/e2e/tectonic-runs").len(), 1);
    vm.shutdown().unwrap();
    report(&vm, t0);
}
