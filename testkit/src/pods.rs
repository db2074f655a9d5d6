//! What pods on the tests' nodes need, offline: images, a container
//! runtime that can start them on this machine kind, a CNI configuration,
//! and a way to watch a pod from the API server's side.
//!
//! - Images ([`pause_image`], [`busybox_image`]): docker-archive tars built
//!   by `scripts/build-pause.sh` (the pod sandbox, from Debian's kubernetes
//!   source, tagged as the kubelet's default sandbox image) and
//!   `scripts/build-busybox-image.sh` (the workload), cached outside the
//!   checkout. A simulated node sees them at their host paths (its root's
//!   lower dir is the host's `/`); [`ctr_import`] and [`docker_load`] load
//!   them into a node's containerd or docker.
//! - The runc shim ([`install_runc_shim`], `testkit/standins/nb-test-runc`):
//!   a TEST PART for simulated nodes only. This machine kind lacks
//!   CAP_SYS_RESOURCE, so no process may lower an `oom_score_adj`; the
//!   kubelet gives pod sandboxes -998, and the real runc fails on it. The
//!   shim sets a negative `process.oomScoreAdj` to 0 before calling the real
//!   runc. VMs have the capability and run the real runc untouched.
//! - containerd on a simulated node ([`containerd_test_parts`]): the shim
//!   first on containerd's `PATH` (runc's default binary name is looked up
//!   there) and a tmpfs for `/var/lib/containerd`, not the node's overlay
//!   root, so containerd's default `overlayfs` snapshotter works (overlayfs
//!   cannot have its upper dir on overlayfs). Both are outside containerd's
//!   configuration, which stays the product's: a conf.d fragment cannot
//!   change one CRI setting. What containerd 1.6.20 does with `imports`
//!   (checked with Debian's, `containerd --config … config dump`, and on a
//!   node): an imported file's non-zero top-level settings override the
//!   main file's (zero, `false` and `""` do not), its lists are appended,
//!   and a plugin's table is taken whole from the import: a fragment that
//!   sets only `plugins."io.containerd.grpc.v1.cri".containerd.snapshotter`
//!   leaves the CRI plugin with defaults for everything else (the main
//!   file's `sandbox_image`, CNI directories, `runtime_type` and
//!   `SystemdCgroup` are gone; the node stays NotReady without its CNI
//!   network).
//! - CNI: on a simulated node the rig's network add-on writes the node's
//!   CNI list once its Node has a pod CIDR ([`crate::podnet`]: a bridge of
//!   the node's own, addresses of its pod CIDR), so pods get addresses of
//!   their own and reach other nodes' pods; a VM's pods get theirs from
//!   [`cni_bridge_conflist`] in the VM's own network namespace.
//!   [`cni_loopback_conflist`] is loopback alone.

use crate::kube::Kubectl;
use crate::simnode::SimNode;
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// An image as a docker-archive tar on the host, and the tag it carries.
#[derive(Debug, Clone)]
pub struct PodImage {
    pub archive: PathBuf,
    /// e.g. `k8s.gcr.io/pause:3.2`.
    pub tag: String,
}

fn built_image(script: &str) -> Result<PodImage> {
    let archive = crate::run_build_script(script)?;
    let tag_file = archive.with_file_name("TAG");
    let tag = std::fs::read_to_string(&tag_file)
        .with_context(|| {
            format!(
                "reading {} (written by scripts/{script})",
                tag_file.display()
            )
        })?
        .trim()
        .to_string();
    Ok(PodImage { archive, tag })
}

/// The pod sandbox image (`scripts/build-pause.sh`), built once per process.
pub fn pause_image() -> Result<PodImage> {
    static FOUND: std::sync::OnceLock<std::result::Result<PodImage, String>> =
        std::sync::OnceLock::new();
    crate::once(&FOUND, || built_image("build-pause.sh"))
}

/// The workload image: busybox, entrypoint `/bin/sh`
/// (`scripts/build-busybox-image.sh`), built once per process.
pub fn busybox_image() -> Result<PodImage> {
    static FOUND: std::sync::OnceLock<std::result::Result<PodImage, String>> =
        std::sync::OnceLock::new();
    crate::once(&FOUND, || built_image("build-busybox-image.sh"))
}

/// Debian's containerd, its CLI, and the CNI plugins the configs below use.
pub const CONTAINERD: &str = "/usr/bin/containerd";
pub const CTR: &str = "/usr/bin/ctr";
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// containerd's CRI socket (Flatcar's and the kubelet's endpoint).
pub const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";

/// Whether a node here can run containerd pods: root and simulated nodes,
/// Debian's containerd and CNI plugins, and both images (built if needed).
pub fn can_run_containerd_pods() -> Result<()> {
    crate::simnode::can_run()?;
    for (path, package) in [
        (CONTAINERD, "containerd"),
        (CTR, "containerd"),
        ("/usr/sbin/runc", "runc"),
        ("/usr/lib/cni/loopback", "containernetworking-plugins"),
        ("/usr/lib/cni/bridge", "containernetworking-plugins"),
        ("/usr/lib/cni/host-local", "containernetworking-plugins"),
        ("/usr/bin/python3", "python3 (the runc shim)"),
    ] {
        if !std::path::Path::new(path).exists() {
            bail!("{path} is missing (Debian's {package}; scripts/setup.sh installs it)");
        }
    }
    pause_image()?;
    busybox_image()?;
    Ok(())
}

/// Skips the running test (see [`crate::skip_because`]) unless
/// [`can_run_containerd_pods`].
pub fn skip_unless_containerd_pods() -> bool {
    crate::skip_unless(
        can_run_containerd_pods(),
        "containerd pods cannot run on simulated nodes here",
    )
}

/// What `containerd --version` says of the host's (and so every simulated
/// node's) containerd: `1.6.20~ds1` of "containerd github.com/containerd/
/// containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3". A kubelet on it reports
/// `containerd://<this>` as the Node's `containerRuntimeVersion`.
pub fn containerd_version() -> Result<String> {
    let out = std::process::Command::new(CONTAINERD)
        .arg("--version")
        .output()
        .with_context(|| format!("running {CONTAINERD} --version"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .nth(2)
        .map(str::to_string)
        .with_context(|| format!("no version in `containerd --version`: {text:?}"))
}

/// How a kubelet shows a runtime's version in the Node's
/// `containerRuntimeVersion` (`containerd://<this>`): the kubelet parses
/// the version the runtime reports as a semantic version
/// (`MAJOR.MINOR.PATCH[-pre][+build]`, shown whole: docker's
/// `20.10.24+dfsg1`) or, failing that, as a generic one, of which it shows
/// the dotted numbers alone (Debian's containerd `1.6.20~ds1` shows as
/// `1.6.20`): k8s.io/apimachinery's `ParseSemantic` / `ParseGeneric`.
pub fn kubelet_shown_version(runtime_version: &str) -> String {
    let v = runtime_version.trim().trim_start_matches('v');
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (numbers, extra) = v.split_at(end);
    let three = numbers.split('.').count() == 3 && numbers.split('.').all(|p| !p.is_empty());
    // `-ident(.ident)*` and/or `+ident(.ident)*`, ident = [0-9A-Za-z-]+.
    let idents = |s: &str| {
        s.split('.')
            .all(|i| !i.is_empty() && i.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
    };
    let (pre, build) = match extra.split_once('+') {
        Some((pre, build)) => (pre, Some(build)),
        None => (extra, None),
    };
    let pre_ok = pre.is_empty() || pre.strip_prefix('-').is_some_and(idents);
    let build_ok = build.is_none_or(idents);
    if three && pre_ok && build_ok {
        v.to_string()
    } else {
        numbers.trim_end_matches('.').to_string()
    }
}

/// Where [`install_runc_shim`] puts the shim on a node: a directory of its
/// own holding it as `runc`, so that putting the directory first on a
/// runtime's `PATH` makes the runtime's `runc` the shim.
pub const RUNC_SHIM_DIR: &str = "/usr/lib/node-bootstrap-test/runc-shim";
/// The shim's path on a node.
pub const RUNC_SHIM: &str = "/usr/lib/node-bootstrap-test/runc-shim/runc";
/// The shim's record of what it clamped (one line each), on a node.
pub const RUNC_SHIM_LOG: &str = "/run/nb-test-runc.log";

/// Installs the runc shim (a test part: see the module doc) at
/// [`RUNC_SHIM`] on a node, before boot.
pub fn install_runc_shim(n: &SimNode) -> Result<()> {
    n.install_file(&crate::standin("nb-test-runc"), RUNC_SHIM, 0o755)
}

/// The unit that gives a simulated node's `/var/lib/containerd` a file
/// system of its own.
pub const CONTAINERD_DISK_UNIT: &str = "var-lib-containerd.mount";

/// The test parts containerd needs on a simulated node, outside its
/// configuration (which is the product's, untouched), before boot:
/// - the runc shim ([`install_runc_shim`]) first on containerd.service's
///   `PATH` (drop-in `20-test-node.conf`): containerd's runc runtime runs
///   the `runc` of its `PATH` unless configured otherwise;
/// - a tmpfs at `/var/lib/containerd` ([`CONTAINERD_DISK_UNIT`], required
///   by containerd.service): the node's root is an overlay, on which
///   containerd's default `overlayfs` snapshotter cannot put its upper
///   dirs. Like `/run`, it starts empty at every boot: load images after
///   containerd is up ([`ctr_import`]).
pub fn containerd_test_parts(n: &SimNode) -> Result<()> {
    install_runc_shim(n)?;
    n.drop_in(
        "containerd.service",
        "20-test-node",
        &format!(
            "# TEST PARTS (simulated node): runc is the test shim that clamps\n\
             # process.oomScoreAdj to 0 (this machine kind lacks CAP_SYS_RESOURCE;\n\
             # VMs run the real runc), and /var/lib/containerd is a file system of\n\
             # its own (the node's root is an overlay: no overlayfs snapshots on it).\n\
             [Unit]\nRequires={CONTAINERD_DISK_UNIT}\nAfter={CONTAINERD_DISK_UNIT}\n\
             [Service]\nEnvironment=PATH={RUNC_SHIM_DIR}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        ),
    )?;
    n.write(
        &format!("/etc/systemd/system/{CONTAINERD_DISK_UNIT}"),
        "# TEST PART (simulated node): containerd's state on a file system of its own,\n\
         # not the node's overlay root, so its overlayfs snapshotter works.\n\
         [Unit]\nDescription=containerd's disk (simulated node)\n\n\
         [Mount]\nWhat=tmpfs\nWhere=/var/lib/containerd\nType=tmpfs\nOptions=mode=0711\n",
        0o644,
    )
}

/// Enables a unit of the OS (`/lib/systemd/system/<unit>`, the host's:
/// `systemctl --root` sees only the node's upper dir, not the lower dir
/// where it lives) for `target` (`multi-user.target`, `sockets.target`),
/// before boot: Debian's containerd.service, docker.service, docker.socket.
pub fn enable_os_unit(n: &SimNode, unit: &str, target: &str) -> Result<()> {
    let path = format!("/lib/systemd/system/{unit}");
    if !std::path::Path::new(&path).exists() {
        bail!("{path} is missing (scripts/setup.sh installs the package that has it)");
    }
    let link = n.path(&format!("/etc/systemd/system/{target}.wants/{unit}"));
    std::fs::create_dir_all(link.parent().unwrap())?;
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&path, &link)
        .with_context(|| format!("linking {} to {path}", link.display()))
}

/// dockerd's options that make the runc shim its default runtime (a test
/// part: see the module doc; with [`install_runc_shim`]). A runtime added
/// this way is run by docker's containerd through the runc v2 shim with the
/// shim as its binary, as `runc` is otherwise.
pub const DOCKER_RUNC_SHIM_OPTS: &str = "--add-runtime=nb-test-runc=/usr/lib/node-bootstrap-test/runc-shim/runc --default-runtime=nb-test-runc";

/// Imports `image` into the containerd of a running node, in the
/// namespace the CRI plugin uses (`k8s.io`), through the socket `socket`
/// (default [`CONTAINERD_SOCKET`]); the archive is read at its host path.
pub fn ctr_import(n: &SimNode, image: &PodImage, socket: Option<&str>) -> Result<()> {
    let archive = image.archive.display().to_string();
    let out = n.exec(&[
        CTR,
        "--address",
        socket.unwrap_or(CONTAINERD_SOCKET),
        "--namespace",
        "k8s.io",
        "images",
        "import",
        &archive,
    ])?;
    if !out.status.success() {
        bail!(
            "ctr images import {archive} on node {} failed: {}",
            n.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Loads `image` into the docker of a running node with its CLI `docker`
/// (e.g. `/run/torcx/bin/docker` on a node of the docker addon).
pub fn docker_load(n: &SimNode, docker: &str, image: &PodImage) -> Result<()> {
    let archive = image.archive.display().to_string();
    let out = n.exec(&[docker, "load", "--input", &archive])?;
    if !out.status.success() {
        bail!(
            "docker load {archive} on node {} failed: {}",
            n.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Waits until the containerd of a running node answers on `socket`
/// (`ctr version`); returns its server version.
pub fn wait_containerd(n: &SimNode, socket: &str, timeout: Duration) -> Result<String> {
    n.wait_for("containerd to answer on its socket", timeout, |n| {
        let out = n
            .exec(&[CTR, "--address", socket, "version"])
            .ok()
            .filter(|o| o.status.success())?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // "Client: …\nServer:\n  Version:  1.6.20~ds1\n  Revision: …"
        let server = text.split("Server:").nth(1)?;
        server
            .lines()
            .find_map(|l| l.trim().strip_prefix("Version:"))
            .map(|v| v.trim().to_string())
    })
}

/// Waits until the docker of a running node answers its CLI `docker`
/// (Debian's `/usr/bin/docker`, or `/run/torcx/bin/docker` on a node of
/// the docker addon), starting it through its socket; returns its version.
pub fn wait_docker(n: &SimNode, docker: &str, timeout: Duration) -> Result<String> {
    n.wait_for("docker to answer on its socket", timeout, |n| {
        let out = n
            .exec(&[docker, "version", "--format", "{{.Server.Version}}"])
            .ok()
            .filter(|o| o.status.success())?;
        Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
    })
}

/// A CNI network of loopback alone: what a simulated node's runtime needs
/// to report NetworkReady for `hostNetwork` pods (the nodes share the
/// host's network namespace; a bridge there would change the host's).
pub fn cni_loopback_conflist() -> String {
    json!({
        "cniVersion": "0.4.0",
        "name": "nb-test-loopback",
        "plugins": [{"type": "loopback"}],
    })
    .to_string()
}

/// A CNI network giving each pod an address of its own: Debian's bridge
/// plugin on bridge `bridge` (created on first use) with host-local IPAM
/// from `subnet` (e.g. `10.88.0.0/24`), the bridge as the pods' gateway.
/// No masquerading and no port maps, so no iptables is needed: pods are
/// reached from their node (and the API server reaches them through the
/// kubelet). For a node with a network namespace of its own (a VM), never
/// a simulated node (a bridge there would be the host's).
pub fn cni_bridge_conflist(bridge: &str, subnet: &str) -> String {
    json!({
        "cniVersion": "0.4.0",
        "name": "nb-test-bridge",
        "plugins": [{
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": subnet}]],
                "routes": [{"dst": "0.0.0.0/0"}],
            },
        }],
    })
    .to_string()
}

/// A pod of one busybox container on node `node` that prints `greeting`
/// and its host name, writes `greeting` to `/greeting` in its own root
/// (see [`a_pod_runs_and_kubectl_reaches_it`]), then sleeps;
/// `host_network` if it is to share its node's network.
/// The image is never pulled (`imagePullPolicy: Never`): it must be in
/// the node's store.
pub fn busybox_pod(
    name: &str,
    node: &str,
    image: &str,
    greeting: &str,
    host_network: bool,
) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "hostNetwork": host_network,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "main",
                "image": image,
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", format!("echo {greeting}; hostname; echo {greeting} > {OWN_FILE}; exec sleep 3600")],
            }],
        },
    })
}

/// Creates a pod from its manifest (`kubectl create -f -`).
pub fn create_pod(kubectl: &Kubectl, manifest: &Value) -> Result<()> {
    let file = tempfile::Builder::new().suffix(".json").tempfile()?;
    std::fs::write(file.path(), manifest.to_string())?;
    kubectl.run(&["create", "-f", &file.path().display().to_string()])?;
    Ok(())
}

/// A pod as `kubectl get pod -o json` shows it.
#[derive(Debug, Clone)]
pub struct PodStatus {
    pub phase: String,
    pub pod_ip: String,
    pub host_ip: String,
    pub node: String,
    /// The first container's runtime ID (`containerd://…`, `docker://…`).
    pub container_id: String,
}

/// Waits until pod `name` (namespace `default`) is Running; on timeout,
/// says what the pod and its events show (the sandbox or image error).
pub fn wait_pod_running(kubectl: &Kubectl, name: &str, timeout: Duration) -> Result<PodStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        let pod: Option<Value> = kubectl
            .run(&["get", "pod", name, "-o", "json"])
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if let Some(p) = &pod
            && p["status"]["phase"] == "Running"
        {
            let s = &p["status"];
            return Ok(PodStatus {
                phase: "Running".into(),
                pod_ip: s["podIP"].as_str().unwrap_or_default().into(),
                host_ip: s["hostIP"].as_str().unwrap_or_default().into(),
                node: p["spec"]["nodeName"].as_str().unwrap_or_default().into(),
                container_id: s["containerStatuses"][0]["containerID"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
            });
        }
        if Instant::now() > deadline {
            let phase = pod
                .as_ref()
                .map(|p| p["status"]["phase"].to_string())
                .unwrap_or_else(|| "(no such pod)".into());
            let events = kubectl
                .run(&[
                    "get",
                    "events",
                    "--field-selector",
                    &format!("involvedObject.name={name}"),
                    "-o",
                    "custom-columns=REASON:.reason,MESSAGE:.message",
                ])
                .unwrap_or_else(|e| format!("{e:#}"));
            bail!(
                "pod {name} not Running within {timeout:?} (phase {phase}); its events:\n{events}"
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The kubelet flags a simulated node's kubelet gets so the host's disk
/// level never evicts its pods nor deletes its images (a test part: the
/// nodes share the host's file system, which builds and other tests fill;
/// the default thresholds, DiskPressure below 10% and 15% free and image
/// GC above 85% used, are easily crossed on a busy test machine: the Node
/// is tainted `disk-pressure`, refuses pods, and the images loaded for them
/// offline are deleted). These act only when the host is nearly full.
pub const NO_DISK_EVICTION: &str = "--eviction-hard=memory.available<100Mi,nodefs.available<1%,imagefs.available<1%,nodefs.inodesFree<1% \
     --image-gc-high-threshold=100 --image-gc-low-threshold=99";

/// How long a pod may take to run once created (it takes about a second).
pub const POD_TIMEOUT: Duration = Duration::from_secs(60);

/// The file a [`busybox_pod`] writes in its own root.
pub const OWN_FILE: &str = "/greeting";

/// The name of the pod [`a_pod_runs_and_kubectl_reaches_it`] runs on `node`.
pub fn hello_pod(node: &str) -> String {
    format!("hello-{node}")
}

/// A pod of the busybox image on node `n` (not `hostNetwork`: as on any
/// node, it has a network of its own) reaches Running on the runtime
/// `scheme` (`containerd`, `docker`) with an address of the node's pod
/// CIDR; `kubectl logs` and `kubectl exec` reach it, and the exec runs in
/// the container's own root: the `/` of its `/proc/self/mountinfo` is the
/// container's root file system in the runtime's store (`storage`, e.g.
/// `/var/lib/docker/`), and it reads the file the container wrote there,
/// which the node's own root does not have. Its sandbox went through the
/// runc shim. Returns how long it took to run and the pod. Panics (it is
/// a test's check) when any of that fails, with the node's diagnostics.
pub fn a_pod_runs_and_kubectl_reaches_it(
    kubectl: &Kubectl,
    n: &SimNode,
    scheme: &str,
) -> (Duration, PodStatus) {
    let busybox = busybox_image().unwrap();
    let pod_name = hello_pod(n.name());
    let greeting = format!("hello-from-{scheme}");
    let t0 = Instant::now();
    create_pod(
        kubectl,
        &busybox_pod(&pod_name, n.name(), &busybox.tag, &greeting, false),
    )
    .unwrap();
    let pod = wait_pod_running(kubectl, &pod_name, POD_TIMEOUT)
        .unwrap_or_else(|e| panic!("{e:#}\n{}", n.diagnostics()));
    let running = t0.elapsed();
    assert_eq!(pod.node, n.name());
    assert!(
        pod.container_id.starts_with(&format!("{scheme}://")),
        "{pod:?}"
    );
    // An address of its own, from its node's pod CIDR.
    let cidr = crate::podnet::pod_cidr(kubectl, n.name())
        .unwrap_or_else(|| panic!("node {} has no pod CIDR", n.name()));
    assert!(
        crate::podnet::in_cidr(&pod.pod_ip, &cidr) && pod.pod_ip != pod.host_ip,
        "the pod's address is not one of its node's pod CIDR {cidr}: {pod:?}"
    );

    // Through the API server and the kubelet: the container's output, and
    // a command run in it.
    let logs = kubectl.run(&["logs", &pod_name]).unwrap();
    assert_eq!(logs.lines().next(), Some(greeting.as_str()), "{logs}");
    // Not hostNetwork: the pod has its own UTS namespace, its name.
    assert_eq!(logs.lines().nth(1), Some(pod_name.as_str()), "{logs}");
    let exec = kubectl
        .run(&[
            "exec",
            &pod_name,
            "--",
            "/bin/sh",
            "-c",
            &format!("echo exec-ok; id -u; cat {OWN_FILE}"),
        ])
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(exec, format!("exec-ok\n0\n{greeting}\n"));
    assert!(
        !n.exists(OWN_FILE),
        "{OWN_FILE} is in the node's own root too: the check above proves nothing"
    );
    let storage = match scheme {
        "docker" => "/var/lib/docker/",
        _ => "/var/lib/containerd/",
    };
    let mountinfo = kubectl
        .run(&["exec", &pod_name, "--", "cat", "/proc/self/mountinfo"])
        .unwrap();
    let root = root_mount(&mountinfo)
        .unwrap_or_else(|| panic!("no mount at / in the exec's mountinfo:\n{mountinfo}"));
    assert!(
        root.contains(storage),
        "the exec's / is not the container's root in {storage}: {root}\n{mountinfo}"
    );

    // The runc shim (a test part) is what let the sandbox start here.
    let clamped = n.read(RUNC_SHIM_LOG).unwrap_or_default();
    assert!(
        clamped.contains("clamped oomScoreAdj -998 -> 0"),
        "the sandbox did not go through the runc shim: {clamped:?}"
    );
    (running, pod)
}

/// The line of `/proc/self/mountinfo` whose mount point is `/` (the last
/// one: a mount over `/` hides those below).
pub fn root_mount(mountinfo: &str) -> Option<&str> {
    mountinfo
        .lines()
        .rev()
        .find(|l| l.split(' ').nth(4) == Some("/"))
}

/// From pod `from` (namespace `default`, with busybox's `ping`), the pod
/// address `to` answers (three tries of one ping, two seconds each).
pub fn pod_reaches(kubectl: &Kubectl, from: &str, to: &str) -> Result<()> {
    let out = kubectl.run(&[
        "exec",
        from,
        "--",
        "/bin/sh",
        "-c",
        &format!(
            "for i in 1 2 3; do ping -c 1 -W 2 {to} >/dev/null 2>&1 && {{ echo reached; exit 0; }}; done; exit 1"
        ),
    ]);
    match out {
        Ok(o) if o.trim() == "reached" => Ok(()),
        Ok(o) => bail!("pod {from} did not reach {to}: {o}"),
        Err(e) => bail!("pod {from} did not reach {to}: {e:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_shows_a_semantic_version_whole_and_else_its_dotted_numbers() {
        assert_eq!(kubelet_shown_version("1.6.20~ds1"), "1.6.20");
        assert_eq!(kubelet_shown_version("v1.7.2"), "1.7.2");
        assert_eq!(kubelet_shown_version("20.10.24+dfsg1"), "20.10.24+dfsg1");
        assert_eq!(kubelet_shown_version("1.7.0-rc.1"), "1.7.0-rc.1");
        assert_eq!(kubelet_shown_version("1.6"), "1.6");
        assert_eq!(kubelet_shown_version("1.6.20-1~deb12"), "1.6.20");
    }
}
