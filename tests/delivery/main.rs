//! Tier `delivery`: how the agent reaches a node.
//!
//! What it proves: the terraform modules pass the real `terraform init`,
//! `validate` and `fmt -check`, refuse bad inputs at plan time naming the
//! variable, and (AWS ones, parsed with python-hcl2) keep the asset bucket
//! private; the checked-in Ignition examples are what the sources render
//! today and pass the real `ignition-validate`; `install-assets.sh` swaps
//! pushed assets into place atomically; every provider-free example
//! renders, as an operator runs it, configs that pass `ignition-validate`
//! and the agent's `check-config --ignition`, with each mistake reported
//! once; and push mode end to end, following docs/operators.md's metal
//! steps as written (render, outputs, then the push over SSH to a
//! simulated node running sshd), and a second apply changes nothing. And
//! setup's own apt step, simulated (`apt-get -s`) against the packages a
//! new machine of CI's kind starts with: it installs, by setup's
//! backports rule (docs/testing.md).
//!
//! What it needs: `terraform`, `ignition-validate`, apt (its lists
//! updated by setup, bookworm-backports among them), `python3` with
//! python-hcl2 (scripts/setup.sh installs them); root for
//! `install-assets.sh` (it chowns) and for the push end to end (a
//! simulated node with sshd). Elsewhere each test says
//! `SKIPPED <test>: …`; under `CI=true` it fails instead.
//!
//! Run it: `cargo test --test delivery`; one file: `cargo test --test
//! delivery delivery_terraform::`.

// Setup's apt step simulated against the machine image's packages (the backports rule).
mod apt_plan;
// Bootstrap tokens: the module's exact output and refusals; a worker with no client credential.
mod delivery_bootstrap_token;
// Day two: the ignition module's follow switch, the follow-rbac module.
mod delivery_follow;
// The examples as an operator runs them: rendered, validated, checked by the agent; errors once.
mod delivery_examples;
// The Ignition configs: fresh, valid, each role's units and files.
mod delivery_ignition;
// `terraform apply` of the metal example pushing assets to a simulated node over SSH.
mod delivery_push_e2e;
// The terraform modules and install-assets.sh.
mod delivery_terraform;
// Running terraform in a private dir, the real tools, reading Ignition configs.
mod support;
// Every shipped service's `systemd-analyze security` score: its ceiling, the review's number.
mod unit_security;
