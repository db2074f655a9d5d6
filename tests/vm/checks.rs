//! What the VM tier reads and asserts on a machine: the agent's state
//! journal, what torcx applied, partial files after a power cut, and the
//! waits that time a power cut (at a journal write, mid-download).

use crate::rig::*;
use crate::*;
use serde_json::Value;
use std::time::{Duration, Instant};
use testkit::vm::VmNode;

/// The agent's state journal.
pub(crate) const JOURNAL: &str = "/var/lib/node-bootstrap/state.json";
/// Where the agent moves a journal it cannot read (empty or corrupt).
pub(crate) const JOURNAL_ASIDE: &str = "/var/lib/node-bootstrap/state.json.corrupt";
pub(crate) const BOOTSTRAP_UNIT: &str = "k8s-node-bootstrap.service";

/// The agent's state journal, parsed (from the guest, or the disk while
/// the VM is down).
pub(crate) fn state_journal(vm: &VmNode) -> Option<Value> {
    vm.read(JOURNAL).and_then(|t| serde_json::from_str(&t).ok())
}

/// What `/run/torcx/bin/docker --version` says: the docker torcx applied.
pub(crate) fn torcx_docker(vm: &VmNode) -> String {
    vm.exec(&["/run/torcx/bin/docker", "--version"])
        .map(|o| o.stdout_str().trim().to_string())
        .unwrap_or_default()
}

pub(crate) fn os_version(vm: &VmNode) -> String {
    vm.read("/usr/lib/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_ID=").map(str::to_string))
        .unwrap_or_default()
}

/// After the boot that runs the new OS: the node is complete, with the new
/// OS, the wanted docker applied by torcx, kubelet.env for
/// `cluster_version` and kubelet.
pub(crate) fn assert_updated_and_complete(vm: &VmNode, m: &TorcxMirror, cluster_version: &str) {
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
        "runtime",
        "os-update",
        "docker-addon",
        "kubelet-env",
    ] {
        assert_eq!(step_status(&j, step), "done", "{step}: {j:#}");
    }
}

/// The statuses of the journal's steps (`step=status` in order), or
/// `"none"` when there is no (readable) journal.
pub(crate) fn journal_summary(j: Option<&Value>) -> String {
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
pub(crate) fn cut_when(
    vm: &mut VmNode,
    point: &str,
    canary: bool,
    at: impl Fn(&Value) -> bool,
) -> Value {
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

pub(crate) fn step_status(j: &Value, step: &str) -> String {
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
pub(crate) fn assert_nothing_partial(vm: &VmNode, m: &TorcxMirror) -> bool {
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
            format!(
                "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n\
                 KUBELET_CGROUP_DRIVER=\"systemd\"\nKUBELET_RUNTIME=\"docker\"\nKUBELET_ARGS=\"{}\"\n",
                testkit::agentnode::flags_only_kubelet_args("systemd")
            ),
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
pub(crate) fn assert_empty_journal_moved_aside(vm: &mut VmNode) {
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
pub(crate) const DOWNLOAD_START: Duration = Duration::from_secs(120);

/// Waits until the agent downloads the wanted docker package in the
/// running guest, and returns how much of it the guest holds: once the
/// docker addon step runs (after the OS update, in its journal), the
/// mirror must have answered the guest's GET of the package within
/// [`DOWNLOAD_START`], and the guest must hold part of it, neither nothing
/// nor all of it, in the store's partial file (`.<name>.part-<hash>`, see
/// `addon::fetch`), with nothing under the package's final name yet. A
/// cut after this lands mid-download.
pub(crate) fn wait_download_under_way(vm: &mut VmNode, m: &TorcxMirror) -> u64 {
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

pub(crate) fn lines(vm: &VmNode, path: &str) -> Vec<String> {
    vm.read(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `node-bootstrap status --wait` on the node: what terraform's
/// remote-exec or an operator waits on. Returns its exit code and output.
pub(crate) fn status_wait(vm: &VmNode) -> (Option<i32>, String) {
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

pub(crate) fn report(vm: &VmNode, t0: Instant) {
    eprintln!(
        "vm {}: test done in {:.1}s; boots: {:?}",
        vm.name(),
        t0.elapsed().as_secs_f64(),
        vm.boot_records()
    );
}

pub(crate) fn skip(tools: &[&str]) -> bool {
    testkit::vm::skip_unless_possible() || testkit::skip_without(tools)
}

/// What the guest's containerd says of itself.
pub(crate) struct ContainerdSeen {
    /// Its version, as `containerd --version` and its socket say it
    /// (`1.6.20~ds1`).
    pub(crate) version: String,
}

/// After the boot that runs the new OS on a containerd worker: the node
/// is complete, with the new OS, containerd running the config the agent
/// wrote (and proved before kubelet.env), kubelet.env for `cluster_version`
/// naming containerd's socket, and kubelet.
pub(crate) fn assert_updated_and_complete_on_containerd(
    vm: &VmNode,
    cluster_version: &str,
) -> ContainerdSeen {
    let (code, out) = status_wait(vm);
    assert_eq!(code, Some(0), "status --wait:\n{out}\n{}", vm.diagnostics());
    assert_eq!(os_version(vm), NEXT_OS);
    let env = vm.read("/etc/kubernetes/kubelet.env").unwrap();
    // The test VMs run cgroup v2.
    testkit::agentnode::check_kubelet_env(&env, cluster_version, "systemd").unwrap();
    assert!(env.contains("KUBELET_RUNTIME=\"containerd\"\n"), "{env}");
    assert!(
        env.contains(
            "--container-runtime=remote --container-runtime-endpoint=unix:///run/containerd/containerd.sock"
        ),
        "{env}"
    );
    assert_eq!(vm.prop("kubelet.service", "ActiveState").unwrap(), "active");

    // containerd runs the agent's config: the cgroup driver of the node,
    // the sandbox image configured, the CNI directories (the default conf
    // dir, Debian's plugins).
    let config = vm.read("/etc/containerd/config.toml").unwrap_or_default();
    assert!(
        config.starts_with("# Written by node-bootstrap"),
        "containerd's config is the agent's: {config}"
    );
    let pause = testkit::pods::pause_image().unwrap().tag;
    for line in [
        "SystemdCgroup = true".to_string(),
        format!("sandbox_image = \"{pause}\""),
        "conf_dir = \"/etc/kubernetes/cni/net.d\"".into(),
        format!("bin_dir = \"{}\"", testkit::pods::CNI_BIN_DIR),
        "snapshotter = \"overlayfs\"".into(),
    ] {
        assert!(config.contains(&line), "{line} in {config}");
    }
    assert_eq!(
        vm.prop("containerd.service", "ActiveState").unwrap(),
        "active"
    );
    let out = vm.exec(&["containerd", "--version"]).unwrap();
    let version = out
        .stdout_str()
        .split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_string();
    assert!(version.starts_with("1.6."), "{}", out.stdout_str());

    // What status reads: every step of the flow done, none left running;
    // containerd's proof recorded; no docker addon.
    let j = state_journal(vm).expect("a state journal");
    for step in [
        "cluster-version",
        "runtime",
        "os-update",
        "containerd",
        "kubelet-env",
    ] {
        assert_eq!(step_status(&j, step), "done", "{step}: {j:#}");
    }
    let proof = &j["steps"]["containerd"]["result"];
    assert_eq!(proof["runtime"], format!("containerd://{version}"), "{j:#}");
    assert_eq!(proof["config_source"], "written", "{j:#}");
    assert!(
        !vm.exists("/etc/torcx/next-profile"),
        "no docker addon on a containerd node"
    );
    ContainerdSeen { version }
}

/// The Node's InternalIP, as the API server dials it.
pub(crate) fn node_internal_ip(kubectl: &testkit::kube::Kubectl, node: &str) -> String {
    kubectl
        .run(&[
            "get",
            "node",
            node,
            "-o",
            "jsonpath={.status.addresses[?(@.type==\"InternalIP\")].address}",
        ])
        .unwrap()
}

/// How long a pod may take to run in the VM once created (seconds under
/// KVM; a sandbox, its network and a container under TCG take longer).
pub(crate) const POD_TIMEOUT: Duration = Duration::from_secs(180);

/// A busybox pod (not `hostNetwork`) on the worker VM reaches Running on
/// containerd with an address of its own from the bridge CNI plugin
/// ([`POD_SUBNET`]); `kubectl logs` and `kubectl exec` reach it through the
/// API server on the host; the real runc ran its sandbox (no shim here).
/// Panics (a test's check) with the VM's diagnostics when any of that fails.
pub(crate) fn a_pod_with_its_own_address_runs_and_kubectl_reaches_it(
    kubectl: &testkit::kube::Kubectl,
    vm: &VmNode,
    reach: KubeletReach,
) {
    use testkit::pods;
    let busybox = pods::busybox_image().unwrap();
    let name = "hello-vm";
    let greeting = "hello-from-containerd-in-a-vm";
    pods::create_pod(
        kubectl,
        &pods::busybox_pod(name, VM_HOSTNAME, &busybox.tag, greeting, false),
    )
    .unwrap();
    let pod = pods::wait_pod_running(kubectl, name, POD_TIMEOUT)
        .unwrap_or_else(|e| panic!("{e:#}\n{}", vm.diagnostics()));
    assert_eq!(pod.node, VM_HOSTNAME);
    assert!(pod.container_id.starts_with("containerd://"), "{pod:?}");
    assert_eq!(pod.host_ip, reach.node_ip.to_string(), "{pod:?}");
    // Its own address, from the bridge plugin's range (the bridge, the
    // gateway, holds the first).
    let ip: std::net::Ipv4Addr = pod
        .pod_ip
        .parse()
        .unwrap_or_else(|_| panic!("the pod has no IPv4 address of its own: {pod:?}"));
    let (net, bits) = POD_SUBNET.split_once('/').unwrap();
    let net: std::net::Ipv4Addr = net.parse().unwrap();
    let mask = u32::MAX << (32 - bits.parse::<u32>().unwrap());
    assert!(
        u32::from(ip) & mask == u32::from(net) & mask && u32::from(ip) > u32::from(net) + 1,
        "the pod's address {ip} is one the bridge plugin gives ({POD_SUBNET}): {pod:?}"
    );

    // Through the API server and the kubelet: the container's output, and
    // a command run in it.
    let logs = kubectl.run(&["logs", name]).unwrap();
    assert_eq!(logs.lines().next(), Some(greeting), "{logs}");
    // Not hostNetwork: the pod has its own UTS namespace, its name.
    assert_eq!(logs.lines().nth(1), Some(name), "{logs}");
    let exec = kubectl
        .run(&[
            "exec",
            name,
            "--",
            "/bin/sh",
            "-c",
            "echo exec-ok; cat /proc/net/fib_trie",
        ])
        .unwrap();
    // The addresses of the pod's own network namespace: its own, not the
    // VM's (QEMU's 10.0.2.15) nor the node's.
    assert!(exec.starts_with("exec-ok\n"), "{exec}");
    assert!(exec.contains(&pod.pod_ip), "{exec}");
    for other in ["10.0.2.15".to_string(), reach.node_ip.to_string()] {
        assert!(!exec.contains(&other), "{other} in the pod: {exec}");
    }

    // In the VM: the bridge is the pods' gateway, and the real runc gave
    // the sandbox the kubelet's oom_score_adj (what this machine kind
    // forbids outside a VM).
    let bridge = vm
        .exec(&["ip", "-4", "-o", "addr", "show", "dev", POD_BRIDGE])
        .unwrap()
        .stdout_str();
    let gateway = std::net::Ipv4Addr::from(u32::from(net) + 1);
    assert!(
        bridge.contains(&format!("inet {gateway}/{bits}")),
        "{bridge}"
    );
    assert!(!vm.exists(testkit::pods::RUNC_SHIM), "no runc shim in a VM");
    let adj = vm
        .sh("for p in $(pgrep -x pause); do cat /proc/$p/oom_score_adj; done")
        .unwrap()
        .stdout_str();
    assert_eq!(adj.trim(), "-998", "the pod sandbox's oom_score_adj");
}

/// k8s-node-bootstrap.service's sandbox as a real kernel and PID 1 apply it
/// (tests/node/sandbox_node.rs checks every option on a simulated node): a
/// copy of the unit the Ignition config installed, its program replaced by
/// `sleep` and its condition dropped, started; then its process's bounding set,
/// no-new-privileges and seccomp filter, and what it may write, read from
/// outside (`test -w` in its mount namespace: EROFS on a read-only mount).
pub(crate) fn assert_sandbox_applied(vm: &VmNode) {
    let out = vm
        .sh(r#"set -e
u=/run/systemd/system/nb-sandbox-probe.service
sed -e '/^ConditionPathExists=/d' -e 's/^Type=notify$/Type=simple/' -e '/^ExecStart=/d' \
    -e '/^\[Service\]$/a ExecStart=/bin/sleep 300' /etc/systemd/system/k8s-node-bootstrap.service > $u
systemctl daemon-reload
systemctl start nb-sandbox-probe.service
pid=0
for _ in $(seq 200); do
    pid=$(systemctl show -p MainPID --value nb-sandbox-probe.service)
    [ "$pid" != 0 ] && tr '\0' ' ' < /proc/$pid/cmdline | grep -q '^/bin/sleep' && break
    sleep 0.1
done
grep -E '^(CapBnd|NoNewPrivs|Seccomp):' /proc/$pid/status | tr -d '\t'
for p in / /run /run/systemd /etc /usr /var/lib /etc/kubernetes /run/node-bootstrap /run/systemd/system /var/lib/node-bootstrap /opt/bin; do
    if nsenter -t $pid -m test -w $p; then echo "rw $p"; else echo "ro $p"; fi
done
systemctl stop nb-sandbox-probe.service
rm $u
systemctl daemon-reload
"#)
        .unwrap();
    let got = out.stdout_str();
    let want = "CapBnd:000000000020000e\nNoNewPrivs:1\nSeccomp:2\n\
                ro /\nro /run\nro /run/systemd\nro /etc\nro /usr\nro /var/lib\n\
                rw /etc/kubernetes\nrw /run/node-bootstrap\nrw /run/systemd/system\n\
                rw /var/lib/node-bootstrap\nrw /opt/bin\n";
    assert_eq!(got, want, "{}\n{}", out.stderr_str(), vm.diagnostics());
}
