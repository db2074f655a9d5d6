//! Tier `inprocess`: the agent against real inputs and real servers, as
//! any user, with no node.
//!
//! What it proves: what the agent makes of everything it reads, fetches
//! and is told, through its library functions and its binary run as a
//! child process, against files laid out in temp dirs and real servers on
//! loopback (the API server stand-in over TLS, testkit's package server,
//! moto as S3, python's http.server, fault-injecting proxies in front of
//! each); the formats it shares with real programs that can run here
//! (Canonical's simplestreams tools and GnuPG, both ways); and, property
//! based, that no parser of outside input panics or gives the wrong class
//! of error.
//!
//! What it needs: no root, no simulated node; `moto_server`,
//! `python-simplestreams`, `gnupg` and `promtool` (scripts/setup.sh
//! installs them). A
//! test whose tool is missing says `SKIPPED <test>: …` outside CI and fails
//! under `CI=true`.
//!
//! Run it: `cargo test --test inprocess`; one file: `cargo test --test
//! inprocess assets_s3::`.

// `node-bootstrap upgrade`: choice, verification, replace, rollback, kill -9.
mod agent_upgrade;
// `node-bootstrap addon ensure/confirm` (torcx backend) on a node laid out in a temp dir.
mod addon_ensure;
// `addon pre-reboot-hook` and `addon gc` through the binary.
mod addon_hook;
// The docker addon with packages found through artifact metadata.
mod addon_metadata;
// The systemd-sysext backend of the docker addon.
mod addon_sysext;
// The kubelet sysext: refusals before anything is installed (exit 7, 6).
mod kubelet_sysext;
// Day two's textfile: lint-clean, and the halted alert fires on it (promtool).
mod follow_metrics;
// Where containerd comes from: the OS's, or a package from a signed mirror.
mod containerd_package;
// Push mode: `assets check` recognises pushed assets.
mod assets_push;
// `assets pull` against moto, with faults.
mod assets_s3;
// Malicious asset bundles are refused and leave nothing behind.
mod assets_unpack;
// `check-config`: the settings in effect, shown as a config file that reads back.
mod check_config;
// The CLI off a node: field names, JSON errors, preflight's API server check, no colour, relative dirs.
mod cli_operator;
// Cluster version discovery against the API server stand-in.
mod cluster_version;
// README's exit code table against `--help`, the error classes and the unit.
mod docs_exit_codes;
// Every repository path the docs name exists; nothing outside the repository is cited.
mod docs_paths;
// `helper bootkube|tectonic` in script mode.
mod helper_script;
// Artifact metadata: generate, find, search order, signatures, HTTP and S3 locations.
mod metadata_search;
// Artifact metadata against Canonical's real simplestreams tools.
mod metadata_simplestreams;
// The alert rules against promtool, on series the agent renders and writes.
mod metrics_alerts;
// The textfile the binary leaves: while a step runs, across restarts, disabled.
mod metrics_textfile;
// Property tests: parsers of downloaded and provisioned artifacts.
mod proptest_inputs;
// Property tests: config, seed kubelet.env, os-release, kubeconfig, state journal, versions.
mod proptest_parsers;
// Network faults in front of the API server, the package server and S3.
mod reliability_faults;
// `run` / `preflight` against missing or wrong inputs.
mod run_cli;
// No secret in any output: each secret-bearing input given wrong.
mod secrets_cli;
// The static binary needs no library and no newer kernel than the README says.
mod static_binary;
// `status` without systemd, from the state journal alone.
mod status_offline;

/// The property tests' config: `cases` cases per property; a failing case
/// is saved beside the test's source file
/// (`proptest_parsers.proptest-regressions`, checked in) and replayed
/// first on every later run. (proptest's default would put it in a
/// `proptest-regressions/` tree beside this tier's main.rs instead.)
/// `NB_PROPTEST_CASES=N` runs N cases per property instead, for a longer
/// search than CI's.
fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("NB_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config {
        cases,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..proptest::test_runner::Config::default()
    }
}
