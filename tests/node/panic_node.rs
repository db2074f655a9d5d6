//! A panic is an error like the others (src/panic_hook.rs), seen as an
//! operator sees it: `run` under the shipped, sandboxed
//! k8s-node-bootstrap.service panics (the test-only trigger: a variable
//! holding one exact sentence, given by a drop-in), the journal has the
//! panic's entry with its `MESSAGE_ID`, source location and class, the
//! process exited 1 (not 101, not a signal), and systemd restarts it as
//! the unit documents for exit 1; once the cause is gone, the next restart
//! resumes and bootstraps the node.

use std::time::Duration;
use testkit::agentnode::{AgentNode, Cluster};
use testkit::apiserver::ApiServerOptions;
use testkit::simnode::skip_unless_possible;

const T: Duration = Duration::from_secs(90);
const KNB: &str = "k8s-node-bootstrap.service";
const TRIGGER_DROP_IN: &str = "/etc/systemd/system/k8s-node-bootstrap.service.d/test-panic.conf";

#[test]
fn a_panic_in_run_is_logged_with_its_location_exits_1_and_is_restarted_until_the_run_completes() {
    if skip_unless_possible() {
        return;
    }
    let c = Cluster::start(ApiServerOptions {
        git_version: "v1.9.6+coreos.0".into(),
        ..Default::default()
    })
    .unwrap();
    let mut n = AgentNode::new("panic")
        .kubeconfig(c.kubeconfig())
        .build()
        .unwrap();
    n.drop_in(
        KNB,
        "test-panic",
        &format!(
            "[Service]\nEnvironment=\"{}={}\"\n",
            node_bootstrap::panic_hook::TEST_TRIGGER_VAR,
            node_bootstrap::panic_hook::TEST_TRIGGER_VALUE
        ),
    )
    .unwrap();
    n.boot().unwrap();

    // systemd restarts it (Restart=on-failure; 1 is not in
    // RestartPreventExitStatus=).
    n.wait_for("the panicking run to be restarted twice", T, |n| {
        (n.prop(KNB, "NRestarts").ok()?.parse::<u32>().ok()? >= 2).then_some(())
    })
    .unwrap();
    let panics = n.journal_json(&[&format!(
        "MESSAGE_ID={}",
        node_bootstrap::message_ids::PANICKED
    )]);
    assert!(panics.len() >= 2, "{panics:#?}\n{}", n.journal(KNB));
    let p = &panics[0];
    assert_eq!(p["SYSLOG_IDENTIFIER"], "node-bootstrap");
    assert_eq!(p["_SYSTEMD_UNIT"], KNB);
    assert_eq!(p["PRIORITY"], "3", "an error");
    assert_eq!(p["ERROR_CLASS"], "internal");
    assert_eq!(p["EXIT_CODE"], "1");
    let location = p["PANIC_LOCATION"].as_str().unwrap();
    assert!(
        location.starts_with("src/panic_hook.rs:"),
        "the panic's own source location: {location}"
    );
    assert_eq!(p["PANIC_THREAD"], "main");
    let message = p["MESSAGE"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("node-bootstrap panicked at {location}: "))
            && message.contains("asked for a panic"),
        "{message}"
    );
    // It exited with code 1, the code of every internal error: not Rust's
    // 101, not a signal (the release build aborts on a panic).
    // (Read between two runs: while one runs, ExecMainCode is 0.)
    let shown = n
        .wait_for("a run to have exited", T, |n| {
            let s = n
                .show(KNB, &["ExecMainCode", "ExecMainStatus", "Result"])
                .ok()?;
            (s["ExecMainCode"] != "0").then_some(s)
        })
        .unwrap();
    assert_eq!(shown["ExecMainCode"], "1", "CLD_EXITED: {shown:?}");
    assert_eq!(shown["ExecMainStatus"], "1", "{shown:?}");
    assert_eq!(shown["Result"], "exit-code", "{shown:?}");
    assert!(!n.exists("/etc/kubernetes/kubelet.env"));

    // The cause goes away: the next restart resumes and completes.
    n.remove(TRIGGER_DROP_IN).unwrap();
    n.systemctl(&["daemon-reload"]).unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert!(n.exists("/etc/kubernetes/kubelet.env"));
    n.shutdown().unwrap();
}
