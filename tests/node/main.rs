//! Tier `node`: simulated nodes, a real systemd as PID 1.
//!
//! What it proves: what happens on a machine, boot after boot. Each test
//! boots one or more simulated nodes (`testkit::simnode`: systemd 252 as
//! PID 1 in a PID and mount namespace, on an overlay whose lower dir is the
//! host's `/`, with its own D-Bus, journald and logind; a reboot keeps the
//! disk, a power cut kills everything at once) with the project's units,
//! and checks what systemd itself reports: the units' ordering, restarts
//! and conditions (with the agent stub), the real agent's `run` through an
//! OS update, the docker addon and its reboot (applied by the real
//! `torcx-generator`, or by `systemd-sysext`), pull mode from moto,
//! `status` against systemd, power cuts at every stage of a first
//! boot, pods running on containerd (CRI) and docker (dockershim), and
//! the demo (`./scripts/demo.sh`'s code path, `testkit::demo`).
//!
//! What it needs: root (namespaces, overlay mounts), systemd, util-linux
//! (`unshare`, `nsenter`), the real torcx (`scripts/build-torcx.sh`) and
//! `moto_server`, `prometheus-node-exporter` and `promtool`, containerd,
//! the CNI plugins and the pods' images (scripts/setup.sh). Elsewhere each test says
//! `SKIPPED <test>: …`; under `CI=true` it fails instead.
//! `scripts/mutate-units.sh` runs `node_units::` against mutated units.
//!
//! Run it: `sudo -E cargo test --test node`; one file: `cargo test --test
//! node addon_node::`. `SIMNODE_KEEP=1` keeps a node's files.

// `run` with `agent.upgrade`: the agent upgrades itself, then completes the first boot.
mod agent_upgrade_node;
// The docker addon's subcommands run inside a node, rebooted when they say so.
mod addon_node;
// The backends by default on today's Flatcar (the sysext where no kubelet-wrapper is, the
// wrapper where it is), and the refusals of a backend the release does not have.
mod backend_node;
// The README's first command: the demo's own code, today's Flatcar worker joining a real cluster.
mod cluster_demo;
// A real cluster: a bootkube master and workers joining it, Ready.
mod cluster_join;
// Day two: workers follow the control plane to v1.20.3 one at a time; a bad release halts at the first.
mod follow_cluster;
// The real kubelet on containerd through CRI: Node Ready, a pod Running, logs and exec.
mod containerd_pod;
// containerd as a sysext the agent chose and merged where the OS has none; it answers CRI.
mod containerd_package_node;
// Today's Flatcar: containerd 2.1.4 (the OS's, and the bakery's sysext), the agent for a
// 1.32 cluster, crictl 1.32 runs a pod; kubelet 1.20 with containerd 2.1 refused.
mod containerd2_node;
// The docker addon inside `node-bootstrap run`: one reboot, datadir wiped.
mod addon_run;
// Pull mode: init-assets.service pulls from moto, bootkube.path fires once.
mod assets_node;
// The kubelet as a sysext image the agent chose, merged by the real systemd-sysext.
mod kubelet_sysext_node;
// Metrics through node_exporter, and the journal catalog behind `journalctl -x`.
mod metrics_node;
// The units of `units/` with the agent stub: ordering, restarts, conditions.
mod node_units;
// A panic in `run`: its journal entry (MESSAGE_ID, location), exit 1, the unit's restart.
mod panic_node;
// Every sandbox option of the shipped units, as the kernel applied it to their processes.
mod sandbox_node;
// Power cuts at every stage of a full first boot; the node converges.
mod reliability_power_loss;
// `node-bootstrap run` end to end: API server, update_engine, reboots.
mod run_e2e;
// `status` at each stage of a first boot, against `systemctl show`.
mod status_node;
