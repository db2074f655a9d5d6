//! `node-bootstrap run` with `agent.upgrade` on a simulated node: the agent
//! upgrades itself first from a signed mirror on loopback, hands over, and
//! the new agent completes the first boot.

use serde_json::{Value, json};
use std::fs;
use std::time::Duration;
use testkit::agent_mirror::Rig;

/// `run` with `agent.upgrade: minor` finds a newer agent of its major, installs it, hands over to it, and the
/// new agent completes the first boot (kubelet runs); later boots keep it.
#[test]
fn run_upgrades_the_agent_first_and_the_new_agent_completes_the_first_boot() {
    use testkit::agentnode::{AgentNode, state_journal, wait_kubelet_starts};
    if testkit::simnode::skip_unless_possible() {
        return;
    }
    let rig = Rig::new("0.1.0");
    rig.publish_agents(&["0.1.5", "0.2.0", "1.0.0"]);
    // The forced version is not checked against an API server; the
    // kubelet still needs a kubeconfig.
    let pki = testkit::apiserver::Pki::generate();
    let kubeconfig = pki.kubeconfig(
        "https://127.0.0.1:1",
        &testkit::apiserver::KubeAuth::ClientCert,
    );
    let mut n = AgentNode::new("agent-upgrade")
        .kubeconfig(kubeconfig)
        .config(json!({
            "agent": {"upgrade": "minor"},
            "cluster": {"forced_version": "v1.9.6+coreos.0", "check_forced_skew": false},
            "sources": {"url": rig.server.url("/mirror"), "use_default": false,
                        "use_cluster_bucket": false, "timeout_secs": 5},
        }))
        .build()
        .unwrap();
    n.write(
        "/etc/kubernetes/installer/keyring.asc",
        fs::read(rig.path("keyring.asc")).unwrap(),
        0o644,
    )
    .unwrap();
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", Duration::from_secs(90))
        .unwrap();
    assert_eq!(wait_kubelet_starts(&n, 1).len(), 1);
    let v = n
        .exec(&["/opt/bin/node-bootstrap", "version", "--json"])
        .unwrap();
    let v: Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["version"], "0.2.0", "the newest 0.x, not 1.0.0");
    let previous = n
        .exec(&["/opt/bin/node-bootstrap.previous", "version"])
        .unwrap();
    assert!(String::from_utf8_lossy(&previous.stdout).contains(env!("CARGO_PKG_VERSION")));
    // Both agents ran `run` in this boot: the first upgraded, the second
    // did the rest.
    let started: Vec<String> = n
        .journal_json(&["STEP=run", "MESSAGE=node-bootstrap run started"])
        .iter()
        .map(|l| l["VERSION"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(started, [env!("CARGO_PKG_VERSION"), "0.2.0"]);
    // The run records kubelet-env done (fsynced) after its READY=1, beside
    // the kubelet's start (src/flow/driver.rs): waited for, not read at once.
    let j = n
        .wait_for(
            "kubelet-env done in the state journal",
            Duration::from_secs(60),
            |n| state_journal(n).filter(|j| j["steps"]["kubelet-env"]["status"] == "done"),
        )
        .unwrap();
    assert_eq!(j["steps"]["agent-upgrade"]["result"]["to"], "0.2.0");
    assert_eq!(j["steps"]["agent-upgrade"]["result"]["action"], "upgraded");
    n.shutdown().unwrap();
}
