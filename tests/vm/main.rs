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
//! - a worker on containerd (the OS's, `runtime.name: containerd`) joins a
//!   control plane on the host after its OS update's reboot: the agent
//!   writes containerd's config, starts it and proves it before kubelet.env,
//!   the real kubelet 1.20.2 registers through CRI, and a pod (not
//!   `hostNetwork`) gets its own address from the bridge CNI plugin, runs on
//!   the real runc (the VM's kernel lets it set the sandbox's
//!   `oom_score_adj`), and `kubectl logs` and `exec` reach it through the
//!   API server, which dials the VM's kubelet through a QEMU forward;
//!   then Kubernetes' [NodeConformance] specs run on it (a named sample of
//!   5, what a simulated node cannot host: a privileged pod
//!   making a dummy network device; image pulls from the host's
//!   registries; the whole suite with `NB_VM_CONFORMANCE=all`);
//! - a worker of today's Flatcar with neither containerd nor a kubelet in
//!   its OS: the sandboxed agent has the real PID 1 merge both as system
//!   extensions from one signed mirror (a transient `systemd-sysext
//!   refresh` each), and containerd.service and kubelet.service run the
//!   merged programs, without a reboot;
//! - a worker of today's Flatcar for a v1.32 API server: the agent takes
//!   the sysext-bakery's containerd 2.1.4 image (built from its source)
//!   from its signed mirror, the guest's real systemd-sysext merges it, the
//!   agent's step proves it (no test part: the real runc, cgroup v2), and
//!   crictl 1.32 runs a pod there, its log and an exec in its own root;
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
//! Every test holds `vm::slot()`: two tests' machines at a time
//! (`NB_VM_AT_ONCE`). Run it:
//! `sudo -E cargo test --test vm -- --nocapture` (timings of each boot go to
//! stderr).

mod checks;
mod rig;

mod bootkube_master_push;
// Kubernetes' node conformance suite on the worker VM (called by worker_joins_a_control_plane).
mod conformance_vm;
mod power_cuts;
mod sysext_worker;
mod worker_first_boot;
mod worker_joins_a_control_plane;
mod worker_on_containerd2;

use std::time::Duration;

/// A boot under TCG takes about a minute; a loaded CI host, more.
pub(crate) const BOOT: Duration = Duration::from_secs(600);
/// The agent's work once the machine is up.
pub(crate) const WORK: Duration = Duration::from_secs(600);
pub(crate) const AGENT_PATH: &str = "/node-bootstrap/v0.1.0/node-bootstrap";
pub(crate) const SEED_TAG: &str = "v1.8.4_coreos.0";
pub(crate) const CLUSTER_VERSION: &str = "v1.9.6+coreos.0";
pub(crate) const OS_VERSION: &str = "1632.3.0";
