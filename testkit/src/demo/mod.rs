//! The main job, shown step by step (`./scripts/demo.sh`, binary
//! `cluster-demo`): a real Kubernetes cluster on simulated nodes, a worker
//! joining it through the agent, a pod running on that worker.
//!
//! The nodes are [`crate::cluster`]'s: each provisioned from the Ignition
//! config terraform renders with `terraform/modules/ignition`, each with an
//! address of its own ([`crate::cluster::NodeSpec::own_address`]). Two
//! flows ([`Flow`]):
//!
//! - [`Flow::Today`] (the default): today's Flatcar. Both nodes' os-release
//!   is Flatcar's ([`FLATCAR_OS`]), with no torcx and no kubelet-wrapper;
//!   their agent configs name no kubelet backend, so the agent's default
//!   (`auto`) takes the kubelet as a system extension from the rig's signed
//!   mirror. [`run`] shows the bootkube master's first boot (the version
//!   from its seed, containerd configured and asked over CRI, the kubelet
//!   sysext merged, then bootkube's control plane: the real etcd,
//!   kube-apiserver, kube-controller-manager and kube-scheduler as systemd
//!   units); the worker's first boot (the version from that API server, an
//!   OS update to [`NEXT_FLATCAR`] through the update_engine stand-in, one
//!   reboot), its second (containerd, the kubelet sysext, kubelet.env); the
//!   real kubelet of the cluster's version joining with a bootstrap token;
//! - [`Flow::Tectonic`] (`--tectonic`): the seed's flow on Container Linux
//!   [`crate::cluster::OS_VERSION`]: docker put in place through the addon
//!   and the real torcx, kubelet-wrapper, the worker updated to [`NEXT_OS`].
//!
//! Then, for both: `kubectl get nodes -o wide` (each node its own
//! INTERNAL-IP), a pod Running on the worker with its own IP and its log,
//! `node-bootstrap status` on the worker (which kubelet it runs and why),
//! and the time from the worker's first boot to its Node Ready with the
//! agent's share of it ([`crate::cluster::agent_seconds`], as the benchmark
//! measures it). The worker's runtime and what pods need of it here are
//! [`runtime`]'s. The node tier runs [`run`] itself
//! (`tests/node/cluster_demo.rs`), so the README's first command cannot
//! rot unseen.

pub mod runtime;
pub mod show;

use crate::cluster::{self, Auth, ClusterRig, NodeSpec};
use crate::kube::NodeInfo;
use crate::pods::{self, PodStatus};
use crate::simnode::{BootEnd, SimNode};
use anyhow::{Context as _, Result, bail};
use runtime::WorkerRuntime;
use std::io::Write;
use std::time::{Duration, Instant};

pub const MASTER: &str = "master-1";
pub const WORKER: &str = "worker-1";
/// The Flatcar release today's nodes run at first (a stable release).
pub const FLATCAR_OS: &str = "4459.2.0";
/// The Flatcar release the update_engine stand-in offers today's worker
/// (the stable release whose containerd, 2.1.4, the rig also builds).
pub const NEXT_FLATCAR: &str = "4593.2.0";
/// The OS the update_engine stand-in offers the Tectonic flow's worker (it
/// runs [`cluster::OS_VERSION`]).
pub const NEXT_OS: &str = "1688.5.3";
/// The pod the demo runs on the worker, and what it prints first.
pub const POD: &str = "hello";
pub const GREETING: &str = "hello-from-a-pod";
/// A node's boot through its reboot to a running kubelet, at most.
const BOOT: Duration = Duration::from_secs(240);
/// The pod's start on a Ready node, at most.
const POD_START: Duration = Duration::from_secs(90);

/// Which node flow the demo shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Today's Flatcar: containerd, the kubelet sysext (module docs).
    Today,
    /// The seed's Tectonic flow on Container Linux: docker through torcx,
    /// kubelet-wrapper; its worker on `runtime` when given (else the one the
    /// agent chooses for the cluster's version).
    Tectonic(Option<WorkerRuntime>),
}

impl Flow {
    /// The worker's runtime.
    pub fn runtime(self) -> Result<WorkerRuntime> {
        match self {
            Flow::Today => Ok(WorkerRuntime::Containerd),
            Flow::Tectonic(Some(r)) => Ok(r),
            Flow::Tectonic(None) => WorkerRuntime::for_cluster(&crate::kube::parts()?.version),
        }
    }

    /// The OS the worker boots after its update.
    pub fn next_os(self) -> &'static str {
        match self {
            Flow::Today => NEXT_FLATCAR,
            Flow::Tectonic(_) => NEXT_OS,
        }
    }

    /// The two nodes of the rig.
    fn specs(self, runtime: WorkerRuntime) -> [NodeSpec; 2] {
        match self {
            Flow::Today => [
                NodeSpec::master(MASTER).on_flatcar(FLATCAR_OS),
                NodeSpec::worker(WORKER, Auth::BootstrapToken).on_flatcar(FLATCAR_OS),
            ],
            Flow::Tectonic(_) => [NodeSpec::master(MASTER), runtime.worker(WORKER)],
        }
        .map(|s| s.with_own_address())
    }
}

/// What the demo showed, for its test.
#[derive(Debug, Clone)]
pub struct Report {
    pub flow: Flow,
    /// The cluster's version (`v1.20.2`), as its API server says.
    pub version: String,
    pub runtime: WorkerRuntime,
    /// What the worker's runtime reports as its version.
    pub runtime_version: String,
    /// The Nodes once both were Ready.
    pub nodes: Vec<NodeInfo>,
    /// The worker's OS after its reboot (os-release `VERSION_ID`, `NAME`).
    pub worker_os: String,
    pub worker_os_name: String,
    pub kubelet_env: String,
    pub pod: PodStatus,
    /// `kubectl logs` of the pod.
    pub pod_log: String,
    /// `node-bootstrap status` on the worker: exit code and output.
    pub status: (i32, String),
    /// Seconds from the worker's first boot to its Node seen Ready, and
    /// the agent's run time in them.
    pub first_boot_to_ready: f64,
    pub agent: f64,
}

/// Runs the demo of `flow`, writing what it shows to `out`.
pub fn run(out: &mut dyn Write, flow: Flow) -> Result<Report> {
    let t0 = Instant::now();
    // Dropped last: the nodes (dropped before it) are stopped by then.
    let _registry = Registry;
    let runtime = flow.runtime()?;
    let [master_spec, worker_spec] = flow.specs(runtime);
    let rig = ClusterRig::new(&[master_spec, worker_spec.with_os_update(flow.next_os())])?;
    header(out, &rig, flow, runtime)?;
    let mut nodes = rig.nodes()?;
    let [master, worker] = &mut nodes[..] else {
        bail!("the rig made {} nodes, not 2", nodes.len());
    };
    writeln!(
        out,
        "Provisioned {MASTER} (bootkube-master) and {WORKER} (worker) from the Ignition configs \
         that terraform/modules/ignition rendered.\n"
    )?;
    master_boots(out, &rig, master, flow)
        .with_context(|| format!("{MASTER}'s first boots (the control plane)"))?;
    wait_for_token_secret(&rig)?;
    let (first_boot_to_ready, agent) = worker_boots(out, &rig, worker, flow, runtime)
        .with_context(|| format!("{WORKER}'s first boot to its Node Ready"))?;
    let runtime_version = runtime
        .load_images(worker, BOOT)
        .with_context(|| format!("loading the pods' images into {WORKER}'s runtime"))?;
    writeln!(
        out,
        "[{WORKER}] pause and busybox images loaded into its {} (offline: no registry here)\n",
        runtime.scheme()
    )?;
    let nodes_info = rig
        .kubectl
        .wait_ready(&[MASTER, WORKER], BOOT)
        .context("both Nodes Ready")?;
    command(out, &rig, &["get", "nodes", "-o", "wide"])?;
    let (pod, pod_log) =
        run_pod(out, &rig, worker).with_context(|| format!("a pod on {WORKER}"))?;
    let status = show::status(worker)?;
    writeln!(
        out,
        "\n[{WORKER}] $ node-bootstrap status   (exit {})",
        status.0
    )?;
    show::cut(out, "    ", &status.1)?;
    writeln!(
        out,
        "\n== {WORKER}: first boot to Node Ready {first_boot_to_ready:.1} s, of which the agent ran \
         {agent:.1} s ({:.0}%); the whole demo {:.0} s ==",
        100.0 * agent / first_boot_to_ready,
        t0.elapsed().as_secs_f64()
    )?;
    let version = rig.parts.version.clone();
    Ok(Report {
        flow,
        version,
        runtime,
        runtime_version,
        nodes: nodes_info,
        worker_os: os_release_field(worker, "VERSION_ID"),
        worker_os_name: os_release_field(worker, "NAME"),
        kubelet_env: worker
            .read("/etc/kubernetes/kubelet.env")
            .unwrap_or_default(),
        pod,
        pod_log,
        status,
        first_boot_to_ready,
        agent,
    })
}

/// What is real, what stands in for what cannot run here, and the test
/// parts this machine kind needs.
fn header(out: &mut dyn Write, rig: &ClusterRig, flow: Flow, runtime: WorkerRuntime) -> Result<()> {
    let (title, real, standins) = match flow {
        Flow::Today => (
            format!("today's Flatcar ({FLATCAR_OS}): containerd and the kubelet as a system extension"),
            format!(
                "systemd as each node's PID 1, and its systemd-sysext; etcd (Debian's); Kubernetes {} \
                 (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, and the kubelet \
                 as a system extension image from a signed mirror); containerd (Debian's 1.6.20 as \
                 the OS's); terraform rendering each node's Ignition config",
                rig.parts.version
            ),
            format!(
                "Flatcar's os-release ({FLATCAR_OS}; the nodes' userland is Debian's); update_engine \
                 (the OS update to {NEXT_FLATCAR}, on the node's D-Bus); bootkube.sh (the control \
                 plane as systemd units, not static pods)"
            ),
        ),
        Flow::Tectonic(_) => (
            "the seed's Tectonic flow (Container Linux: docker through torcx, kubelet-wrapper)"
                .to_string(),
            format!(
                "systemd as each node's PID 1; etcd (Debian's); Kubernetes {} (kube-apiserver, \
                 kube-controller-manager, kube-scheduler, kubelet, kubectl); docker {} as a torcx \
                 image from a signed mirror; torcx;{} terraform rendering each node's Ignition config",
                rig.parts.version,
                rig.docker.version,
                match runtime {
                    WorkerRuntime::Docker => "",
                    WorkerRuntime::Containerd => " containerd (Debian's, as the worker's OS's);",
                }
            ),
            "update_engine (the OS update, on the node's D-Bus); kubelet-wrapper (runs the kubelet \
             of kubelet.env's image from the node's store, not rkt); bootkube.sh (the control plane \
             as systemd units, not static pods)"
                .to_string(),
        ),
    };
    writeln!(
        out,
        "== node-bootstrap: a worker joins a real Kubernetes cluster (simulated nodes), {title} =="
    )?;
    show::labelled(out, "real", &real)?;
    show::labelled(out, "stand-ins", &standins)?;
    show::labelled(
        out,
        "test parts",
        &format!(
            "{}; the nodes share the host's network, each kubelet registering an address of its \
             own (--node-ip, on the host's loopback)",
            runtime.test_parts()
        ),
    )?;
    writeln!(out)?;
    Ok(())
}

/// The master's first boots: on Container Linux the agent's docker reboot,
/// then bootkube's control plane; on today's Flatcar one boot (containerd
/// and the kubelet sysext need none).
fn master_boots(out: &mut dyn Write, rig: &ClusterRig, m: &mut SimNode, flow: Flow) -> Result<()> {
    rig.push_assets(m)?;
    let t = Instant::now();
    let seen = if let Flow::Tectonic(_) = flow {
        step(
            out,
            &format!(
                "[{MASTER}] boot 1: the agent takes the version from the seed, docker from the addon"
            ),
        )?;
        boot(m)?;
        expect_reboot(m)?;
        writeln!(out, " rebooted after {:.1} s", t.elapsed().as_secs_f64())?;
        let seen = show::print_events(out, &show::agent_records(m)?, 0, "    | ")?;
        step(
            out,
            &format!(
                "[{MASTER}] boot 2: bootkube.sh starts etcd, kube-apiserver, controller manager, scheduler"
            ),
        )?;
        seen
    } else {
        step(
            out,
            &format!(
                "[{MASTER}] boot 1: the agent takes the version from the seed, configures containerd, \
                 merges the kubelet sysext; bootkube.sh starts etcd, kube-apiserver, controller \
                 manager, scheduler"
            ),
        )?;
        0
    };
    let t = Instant::now();
    boot(m)?;
    m.wait_for("bootkube to complete", BOOT, |n| {
        n.exists("/opt/tectonic/init_bootkube.done").then_some(())
    })?;
    writeln!(out, " ready after {:.1} s", t.elapsed().as_secs_f64())?;
    show::print_events(out, &show::agent_records(m)?, seen, "    | ")?;
    let units = [
        "kube-etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ];
    let states: Vec<String> = units
        .iter()
        .map(|u| {
            let s = m.prop(&format!("{u}.service"), "ActiveState");
            format!("{u} {}", s.unwrap_or_else(|e| format!("({e})")))
        })
        .collect();
    writeln!(out, "    {}", states.join(", "))?;
    let server: serde_json::Value =
        serde_json::from_str(&rig.kubectl.run(&["get", "--raw", "/version"])?)?;
    writeln!(
        out,
        "    the API server at {} says gitVersion {}\n",
        rig.control_plane.url(),
        server["gitVersion"]
    )?;
    Ok(())
}

/// The worker's first boot through the agent's reboot to its Node Ready;
/// returns the seconds that took and the agent's run time in them.
fn worker_boots(
    out: &mut dyn Write,
    rig: &ClusterRig,
    w: &mut SimNode,
    flow: Flow,
    runtime: WorkerRuntime,
) -> Result<(f64, f64)> {
    writeln!(
        out,
        "[{WORKER}] boot 1: {}, k8s-node-bootstrap.service runs `node-bootstrap run` (seed kubelet.env: {})",
        os_name(w),
        cluster::STALE_SEED_TAG
    )?;
    let t0 = Instant::now();
    boot(w)?;
    expect_reboot(w)?;
    let boot1 = t0.elapsed().as_secs_f64();
    let seen = show::print_events(out, &show::agent_records(w)?, 0, "    | ")?;
    writeln!(
        out,
        "[{WORKER}] boot 1 ended in the agent's one reboot after {boot1:.1} s"
    )?;
    boot(w)?;
    w.wait_active_state("kubelet.service", "active", BOOT)?;
    let runs = match (flow, runtime) {
        (Flow::Today, _) => format!(
            "containerd {} (the OS's, configured by the agent), {} from the kubernetes system \
             extension",
            pods::wait_containerd(w, pods::CONTAINERD_SOCKET, BOOT)?,
            kubelet_version(w)
        ),
        (_, WorkerRuntime::Docker) => format!("docker {} (torcx)", cluster::node_docker(w)?.0),
        (_, WorkerRuntime::Containerd) => format!(
            "containerd {} (the OS's, configured by the agent)",
            pods::wait_containerd(w, pods::CONTAINERD_SOCKET, BOOT)?
        ),
    };
    writeln!(
        out,
        "[{WORKER}] boot 2: {} (update_engine stand-in), {runs}; the agent:",
        os_name(w)
    )?;
    show::print_events(out, &show::agent_records(w)?, seen, "    | ")?;
    writeln!(
        out,
        "[{WORKER}] /etc/kubernetes/kubelet.env (kubelet.service starts with it):"
    )?;
    show::indented(
        out,
        "    ",
        &w.read("/etc/kubernetes/kubelet.env").unwrap_or_default(),
    )?;
    step(
        out,
        &format!(
            "[{WORKER}] the real kubelet {} registers",
            rig.parts.version
        ),
    )?;
    rig.kubectl.wait_ready(&[WORKER], BOOT)?;
    let ready = t0.elapsed().as_secs_f64();
    writeln!(out, " Node Ready {ready:.1} s after the first boot began")?;
    let agent = cluster::agent_seconds(&w.journal_json(&[cluster::AGENT_JOURNAL_MATCH]))?;
    Ok((ready, agent))
}

/// With a worker of a bootstrap token: until the token's Secret is in the
/// cluster (tectonic applies the master's manifests after bootkube), which
/// the worker's first request needs.
fn wait_for_token_secret(rig: &ClusterRig) -> Result<()> {
    let Some(token) = rig.bootstrap_token() else {
        return Ok(());
    };
    let deadline = Instant::now() + BOOT;
    while !rig
        .kubectl
        .bootstrap_token_exists(&token.id)
        .unwrap_or(false)
    {
        if Instant::now() > deadline {
            bail!("the bootstrap token's Secret never appeared in the cluster");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}

/// `/usr/bin/kubelet --version` in the node (the merged extension's).
fn kubelet_version(n: &SimNode) -> String {
    n.exec(&["/usr/bin/kubelet", "--version"])
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("no /usr/bin/kubelet ({e})"))
}

/// A busybox pod that the scheduler places on the worker: Running, and
/// its log through the API server and the kubelet.
fn run_pod(out: &mut dyn Write, rig: &ClusterRig, w: &SimNode) -> Result<(PodStatus, String)> {
    let image = pods::busybox_image()?;
    let mut pod = pods::busybox_pod(POD, WORKER, &image.tag, GREETING, false);
    // Not bound by name: the real scheduler places it.
    let spec = pod["spec"]
        .as_object_mut()
        .context("the pod manifest has a spec")?;
    spec.remove("nodeName");
    spec.insert(
        "nodeSelector".into(),
        serde_json::json!({"kubernetes.io/hostname": WORKER}),
    );
    writeln!(
        out,
        "\n$ kubectl create -f {POD}.json    # busybox {}, nodeSelector {WORKER}",
        image.tag
    )?;
    pods::create_pod(&rig.kubectl, &pod)?;
    let status = pods::wait_pod_running(&rig.kubectl, POD, POD_START)
        .map_err(|e| anyhow::anyhow!("{e:#}\n--- {WORKER}:\n{}", w.diagnostics()))?;
    command(out, rig, &["get", "pod", POD, "-o", "wide"])?;
    let log = rig.kubectl.run(&["logs", POD])?;
    writeln!(out, "$ kubectl logs {POD}")?;
    show::indented(out, "", &log)?;
    Ok((status, log))
}

/// Prints `$ kubectl ARGS` and its output.
fn command(out: &mut dyn Write, rig: &ClusterRig, args: &[&str]) -> Result<()> {
    writeln!(out, "$ kubectl {}", args.join(" "))?;
    show::indented(out, "", &rig.kubectl.run(args)?)
}

/// Prints a step's start, to be completed on the same line.
fn step(out: &mut dyn Write, what: &str) -> Result<()> {
    write!(out, "{what} ...")?;
    out.flush()?;
    Ok(())
}

fn expect_reboot(n: &mut SimNode) -> Result<()> {
    let end = n.wait_down(BOOT)?;
    forget(n);
    if end != BootEnd::Reboot {
        bail!(
            "{}: the first boot ended as {end:?}, not in the agent's reboot\n{}",
            n.name(),
            n.console()
        );
    }
    Ok(())
}

/// A field of the node's os-release (`VERSION_ID`, `NAME`), unquoted.
fn os_release_field(n: &SimNode, key: &str) -> String {
    n.read(crate::agentnode::OS_RELEASE)
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix(&format!("{key}="))
                    .map(|v| v.trim_matches('"').to_string())
            })
        })
        .unwrap_or_else(|| "?".into())
}

/// `Flatcar Container Linux by Kinvolk 4593.2.0`, as os-release says it.
fn os_name(n: &SimNode) -> String {
    format!(
        "{} {}",
        os_release_field(n, "NAME"),
        os_release_field(n, "VERSION_ID")
    )
}

/// The demo's running nodes: (PID 1, the node's directory), so that an
/// interrupted demo can stop them ([`stop_nodes`]).
static RUNNING: std::sync::Mutex<Vec<(String, u32, std::path::PathBuf)>> =
    std::sync::Mutex::new(Vec::new());

fn boot(n: &mut SimNode) -> Result<()> {
    n.boot()?;
    if let (Some(pid), Some(dir)) = (n.pid1(), n.upper().parent()) {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        running.retain(|(name, _, _)| name != n.name());
        running.push((n.name().to_string(), pid, dir.to_path_buf()));
    }
    Ok(())
}

fn forget(n: &SimNode) {
    let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    running.retain(|(name, _, _)| name != n.name());
}

/// Empties [`RUNNING`] when dropped.
struct Registry;

impl Drop for Registry {
    fn drop(&mut self) {
        RUNNING.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Stops every node the demo booted (SIGKILL to its PID 1 ends its PID
/// namespace, and the control plane the master runs with it) and removes
/// their directories: for an interrupted demo, whose nodes are not
/// dropped.
pub fn stop_nodes() {
    let running = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|e| e.into_inner()));
    for (_, pid, _) in &running {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::SIGKILL,
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    for (_, _, dir) in running {
        let _ = std::fs::remove_dir_all(dir);
    }
}
