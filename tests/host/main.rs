//! Tier `host`: the agent against real daemons on this host that need
//! root, with no simulated node.
//!
//! What it proves: the agent's D-Bus client of update_engine against the
//! stand-in (`testkit::fake_update_engine`, docs/formats.md §7) served on a
//! private `dbus-daemon` configured like the system bus with the shipped
//! `com.coreos.update1` policy (which lets only root own the name); a fleet
//! of agent processes retrying a failing API server spreads its retries;
//! `status` probes update_engine and Docker; kubelet TLS bootstrapping
//! against a real 1.20 control plane in bootstrap-token mode, with the
//! token, kubeconfig and RBAC of `terraform/modules/bootstrap-token` (a
//! node's certificate requested, approved, used and renewed; expired and
//! deleted tokens refused); the kubelet sysext image
//! checks (the image mounted read-only in a private mount namespace, as
//! systemd-sysext would read it); and the docker addon and the
//! docker-mode helpers against a real, private `dockerd` (its own socket,
//! data root and exec root in a temp dir, so it never touches the host's
//! Docker). And one check of the test rig itself: the CNI networks it
//! gives nodes' runtimes work with Debian's plugins (in private network
//! namespaces); and `scripts/demo.sh` stopping at once, in one line, on
//! a machine that cannot run simulated nodes.
//!
//! What it needs: root, `dbus-daemon`, `dockerd`, `busybox-static`,
//! `containernetworking-plugins`, `containerd`, terraform and the real
//! Kubernetes parts (scripts/setup.sh installs and builds them). Elsewhere each test says
//! `SKIPPED <test>: …`; under `CI=true` it fails instead.
//!
//! Run it: `sudo -E cargo test --test host`; one file: `cargo test --test
//! host update_engine::`.

// "What runs now" from a private dockerd's API, and the fallback to torcx.
mod addon_docker;
// The agent with a bootstrap token against the real control plane: /version,
// rejected and malformed tokens, the secret nowhere, the join it reads.
mod bootstrap_agent;
// Bootstrap tokens and kubelet TLS bootstrapping against the real control plane.
mod bootstrap_tokens;
// The test rig's CNI networks through Debian's plugins in private namespaces.
mod cni_networks;
// The CRI probe against a real, private containerd.
mod containerd_cri;
// The containerd step's checks against real containerd 1.6.20 and 2.1.4: the
// agent's file, an operator's (the bakery's version 3), another file, imports.
mod containerd_versions;
// Agents against a real kube-apiserver out of request slots (429, Retry-After).
mod cluster_overload;
// A hundred simulated nodes' follow against the real API server: the lease's
// history from its audit log, a failing node halting the rest.
mod follow_fleet;
// `scripts/demo.sh` on a machine that cannot run it: one line, exit 2, nothing built.
mod demo_script;
// The runtime and the kubelet's rules decided from the cluster's version, before anything changes.
mod runtime_choice;
// Dozens of `node-bootstrap run` processes retrying a failing API server.
mod fleet_retries;
// The kubelet sysext image checks: mounted as systemd-sysext would, refused before install.
mod kubelet_sysext_checks;
// `helper bootkube|tectonic` in docker mode against a private dockerd.
mod helper_docker;
// The static binary in a chroot with no library and no NSS: names from /etc/hosts and DNS.
mod static_binary_dns;
// `status` probes: update_engine's `GetStatus`, Docker's version.
mod status_probes;
// What the TLS bootstrapping tests share: HTTPS as a node, CSRs as a kubelet.
mod support;
// The update_engine client against the stand-in on a private system bus.
mod update_engine;
