//! The README's first command (`./scripts/demo.sh`) runs
//! `testkit::demo::run`; this test runs that same code and checks what the
//! screen shows against the cluster: both Nodes Ready at the cluster's
//! version, the worker on the runtime the agent put in place, a pod Running
//! on the worker with its log, the worker updated through the
//! update_engine stand-in, `node-bootstrap status` content, and the times.

use testkit::demo::{self, GREETING, MASTER, NEXT_OS, POD, WORKER};

fn skip() -> bool {
    testkit::kube::skip_unless_available()
        || testkit::torcx::skip_unless_available()
        || testkit::pods::skip_unless_containerd_pods()
        || testkit::skip_without(&["terraform", "/usr/sbin/dockerd"])
}

#[test]
fn the_demo_shows_a_worker_joining_a_real_cluster_and_running_a_pod() {
    if skip() {
        return;
    }
    let mut screen = Vec::new();
    let report = demo::run(&mut screen, None);
    let screen = String::from_utf8_lossy(&screen).into_owned();
    let r = report.unwrap_or_else(|e| panic!("{e:#}\n--- the screen so far:\n{screen}"));
    eprintln!("{screen}");

    // Both Nodes Ready, the kubelet of the cluster's version; the worker on
    // the runtime the agent put in place (the addon's docker).
    let scheme = r.runtime.scheme();
    for name in [MASTER, WORKER] {
        let n = r.nodes.iter().find(|n| n.name == name).unwrap();
        assert!(n.ready, "{n:?}");
        assert_eq!(n.kubelet_version, r.version, "{n:?}");
        assert_eq!(
            n.container_runtime_version,
            format!(
                "{scheme}://{}",
                testkit::pods::kubelet_shown_version(&r.runtime_version)
            ),
            "{n:?}"
        );
    }
    // The worker booted the OS update_engine staged, and its kubelet.env
    // names the cluster's release (its seed named an older one).
    assert_eq!(r.worker_os, NEXT_OS);
    let tag = r.version.replace('+', "_");
    assert!(
        r.kubelet_env
            .contains(&format!("KUBELET_IMAGE_TAG=\"{tag}\"")),
        "{}",
        r.kubelet_env
    );
    // The pod: placed on the worker by the scheduler, run by its runtime,
    // its log read through the API server and the kubelet.
    assert_eq!(r.pod.phase, "Running");
    assert_eq!(r.pod.node, WORKER);
    assert!(
        r.pod.container_id.starts_with(&format!("{scheme}://")),
        "{:?}",
        r.pod
    );
    assert_eq!(r.pod_log.lines().next(), Some(GREETING), "{}", r.pod_log);
    // `status` on the worker: done, with the cluster's version.
    assert_eq!(r.status.0, 0, "{}", r.status.1);
    assert!(r.status.1.contains(&r.version), "{}", r.status.1);
    // The times: the agent ran for part of the way to Ready.
    assert!(
        r.agent > 0.0 && r.agent < r.first_boot_to_ready,
        "agent {} s of {} s",
        r.agent,
        r.first_boot_to_ready
    );

    // What the screen says is what the cluster shows.
    let table: Vec<&str> = screen
        .lines()
        .skip_while(|l| *l != "$ kubectl get nodes -o wide")
        .skip(2)
        .take(2)
        .collect();
    for (line, name) in table.iter().zip([MASTER, WORKER]) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols.first(), Some(&name), "{line}");
        assert_eq!(cols.get(1), Some(&"Ready"), "{line}");
        assert!(cols.contains(&r.version.as_str()), "{line}");
        assert!(
            cols.last().unwrap().starts_with(&format!("{scheme}://")),
            "{line}"
        );
    }
    assert_eq!(table.len(), 2, "{screen}");
    let pod_line = screen
        .lines()
        .find(|l| l.starts_with(&format!("{POD} ")))
        .unwrap_or_else(|| panic!("no pod line: {screen}"));
    assert!(
        pod_line.contains("Running") && pod_line.contains(WORKER),
        "{pod_line}"
    );
    for named in [
        "update_engine (the OS update",
        "runc shim",
        "kubelet-wrapper",
        &format!("OS {NEXT_OS} (update_engine stand-in)"),
        &format!(
            "first boot to Node Ready {:.1} s, of which the agent ran {:.1} s",
            r.first_boot_to_ready, r.agent
        ),
    ] {
        assert!(screen.contains(named), "the screen does not say {named:?}");
    }
}
