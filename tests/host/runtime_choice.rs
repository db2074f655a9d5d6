//! The runtime and the kubelet's configuration are decided from the
//! cluster's version before anything changes: `node-bootstrap run` (a
//! private system bus, an API server stand-in of the version under test)
//! refuses docker for a cluster without dockershim and a version newer
//! than the agent knows, with a named error and exit 7, nothing installed
//! or committed, the OS update never asked for.

use serde_json::Value;
use std::path::Path;
use std::process::Output;
use testkit::apiserver::{ApiServerOptions, FakeApiServer, KubeAuth, Pki};

/// `run` on a worker whose API server says `version`, with `extra` merged
/// into its config; its files are under `d`.
fn run_against(d: &Path, version: &str, extra: Value) -> Output {
    let bus = testkit::fleet::FleetBus::start(d).unwrap();
    let rt = testkit::server_runtime(1).unwrap();
    let pki = Pki::generate();
    let api = rt
        .block_on(FakeApiServer::start(
            &pki,
            ApiServerOptions {
                git_version: version.into(),
                ..Default::default()
            },
        ))
        .unwrap();
    let kubeconfig = pki.kubeconfig(&api.url(), &KubeAuth::ClientCert);
    let config =
        testkit::fleet::agent_dir(d, &kubeconfig, serde_json::json!({"api_attempts": 1})).unwrap();
    let mut c: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    testkit::agentnode::merge(&mut c, extra);
    std::fs::write(&config, c.to_string()).unwrap();
    let out = std::process::Command::new(testkit::cli::agent_binary())
        .arg("run")
        .env("NODE_BOOTSTRAP_CONFIG", &config)
        .env("NODE_BOOTSTRAP_LOG_FORMAT", "text")
        .env("DBUS_SYSTEM_BUS_ADDRESS", bus.address())
        .env_remove("JOURNAL_STREAM")
        .output()
        .unwrap();
    drop(api);
    out
}

fn journal(d: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(d.join("state/state.json")).unwrap()).unwrap()
}

/// What a refusal leaves: exit 7 with `message` in stderr, the runtime step
/// failed as refused, nothing after it started, no kubelet.env and no
/// kubelet configuration.
fn refused_before_anything_changes(d: &Path, out: &Output, message: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
    let j = journal(d);
    let steps = &j["steps"];
    assert_eq!(steps["cluster-version"]["status"], "done", "{j:#}");
    assert_eq!(steps["runtime"]["status"], "failed", "{j:#}");
    assert_eq!(steps["runtime"]["error_class"], "refused", "{j:#}");
    for later in [
        "os-update",
        "docker-addon",
        "reboot",
        "containerd",
        "kubelet-env",
    ] {
        assert!(
            steps.get(later).is_none(),
            "{later} ran after the refusal: {j:#}"
        );
    }
    assert!(!d.join("kubelet.env").exists(), "nothing committed");
    assert!(!d.join("kubelet-config.yaml").exists(), "nothing written");
}

#[test]
fn docker_for_a_cluster_without_dockershim_is_refused_by_name() {
    if testkit::fake_update_engine::skip_unless_bus() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = run_against(
        d.path(),
        "v1.24.3",
        serde_json::json!({"runtime": {"name": "docker"}}),
    );
    refused_before_anything_changes(
        d.path(),
        &out,
        "runtime.name is \"docker\" but the cluster runs Kubernetes 1.24, whose kubelet has no dockershim",
    );
}

#[test]
fn a_kubernetes_newer_than_the_agent_knows_is_refused_unless_allowed() {
    if testkit::fake_update_engine::skip_unless_bus() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = run_against(d.path(), "v1.37.0", serde_json::json!({}));
    refused_before_anything_changes(
        d.path(),
        &out,
        "Kubernetes 1.37 is newer than the newest this agent knows (1.36)",
    );

    // Allowed: the runtime step passes with the newest rules it has, and
    // the run goes on (to containerd, which this bus cannot start).
    let d = tempfile::tempdir().unwrap();
    let out = run_against(
        d.path(),
        "v1.37.0",
        serde_json::json!({"kubelet_config": {"allow_newer_kubernetes": true}}),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let j = journal(d.path());
    let runtime = &j["steps"]["runtime"];
    assert_eq!(runtime["status"], "done", "{stderr}\n{j:#}");
    assert_eq!(runtime["result"]["runtime"], "containerd", "{j:#}");
    assert_eq!(runtime["result"]["kubernetes"], "1.37", "{j:#}");
    assert_eq!(runtime["result"]["kubelet_rules"], "1.36", "{j:#}");
    assert!(
        stderr.contains("configuring its kubelet by the newest rules"),
        "{stderr}"
    );
    assert!(!d.path().join("kubelet.env").exists());
}
