//! Tier `conformance`: Kubernetes' own node conformance suite on the nodes
//! the agent bootstraps.
//!
//! What it proves: a cluster bootstrapped by the agent on simulated nodes
//! (a bootkube master; workers on docker through the addon and torcx, on
//! the OS's containerd, and with the kubelet as a sysext; pods with
//! addresses of their own from the rig's network add-on, `exec` in the
//! container's own root) passes the [NodeConformance] specs of its
//! release's `e2e.test` (1.20.2, built from Debian's source with its
//! images), every spec run once, the specs split over the three workers,
//! each run pinned to its worker; every spec passes or is skipped by the
//! repository's list (`tests/conformance/skip-list.txt`, each entry with
//! the reason a node of this rig cannot host it). `scripts/conformance.sh`
//! runs the whole suite on every worker (the run of record, README).
//!
//! What it needs: what the `node` tier needs, and the suite
//! (`scripts/build-e2e.sh`, `scripts/build-e2e-images.sh`: Debian's
//! docker-registry, skopeo, apache2-utils). Elsewhere each test says
//! `SKIPPED <test>: …`; under `CI=true` it fails instead.
//!
//! Run it: `sudo -E cargo test --test conformance -- --nocapture` (the
//! tables).

// The [NodeConformance] specs, split over the three kinds of worker.
mod node_conformance;
