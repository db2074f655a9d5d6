//! The README's first command (`./scripts/demo.sh`) runs
//! `testkit::demo::run` with today's Flatcar flow; this test runs that same
//! code and checks what the screen shows against the cluster: both Nodes
//! Ready at the cluster's version, each with an address of its own, on
//! containerd; the worker updated through the update_engine stand-in to a
//! Flatcar release, its kubelet the system extension the agent chose by
//! default (no backend in its config, no kubelet-wrapper on the OS); a pod
//! Running on the worker with its own IP and its log; `node-bootstrap
//! status` content; and the times. (The seed's Tectonic flow,
//! `demo.sh --tectonic`, is the rig of tests/node/cluster_join.rs.)

use testkit::demo::{self, Flow, GREETING, MASTER, NEXT_FLATCAR, POD, WORKER};

fn skip() -> bool {
    testkit::kube::skip_unless_available()
        || testkit::pods::skip_unless_containerd_pods()
        || testkit::skip_without(&["terraform", "/usr/sbin/dockerd", "mkfs.ext4"])
}

#[test]
fn the_demo_shows_todays_flatcar_worker_joining_a_real_cluster_and_running_a_pod() {
    if skip() {
        return;
    }
    let mut screen = Vec::new();
    let report = demo::run(&mut screen, Flow::Today);
    let screen = String::from_utf8_lossy(&screen).into_owned();
    let r = report.unwrap_or_else(|e| panic!("{e:#}\n--- the screen so far:\n{screen}"));
    eprintln!("{screen}");

    // Both Nodes Ready, the kubelet of the cluster's version, on the
    // containerd the agent configured; each with an INTERNAL-IP of its own.
    let scheme = r.runtime.scheme();
    assert_eq!(scheme, "containerd");
    let mut addresses = Vec::new();
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
        addresses.push(n.internal_ip.clone().unwrap_or_else(|| panic!("{n:?}")));
    }
    assert_ne!(addresses[0], addresses[1], "the nodes share an address");
    // The worker booted the Flatcar release update_engine staged, and its
    // kubelet.env names the cluster's release (its seed named an older one).
    assert_eq!(r.worker_os, NEXT_FLATCAR);
    assert_eq!(r.worker_os_name, "Flatcar Container Linux by Kinvolk");
    let tag = r.version.replace('+', "_");
    assert!(
        r.kubelet_env
            .contains(&format!("KUBELET_IMAGE_TAG=\"{tag}\"")),
        "{}",
        r.kubelet_env
    );
    // The pod: placed on the worker by the scheduler, run by containerd, an
    // address of its own (neither node's), its log read through the API
    // server and the kubelet.
    assert_eq!(r.pod.phase, "Running");
    assert_eq!(r.pod.node, WORKER);
    assert!(
        r.pod.container_id.starts_with(&format!("{scheme}://")),
        "{:?}",
        r.pod
    );
    assert!(
        !r.pod.pod_ip.is_empty() && !addresses.contains(&r.pod.pod_ip),
        "{:?} {addresses:?}",
        r.pod
    );
    assert_eq!(r.pod.host_ip, addresses[1], "{:?}", r.pod);
    assert_eq!(r.pod_log.lines().next(), Some(GREETING), "{}", r.pod_log);
    // `status` on the worker: done, with the cluster's version, the kubelet
    // the agent chose by default and why, and the merged extension.
    assert_eq!(r.status.0, 0, "{}", r.status.1);
    assert!(r.status.1.contains(&r.version), "{}", r.status.1);
    assert!(
        r.status.1.contains(&format!(
            "backends: kubelet sysext (auto: Flatcar Container Linux by Kinvolk {NEXT_FLATCAR} has no kubelet-wrapper"
        )),
        "{}",
        r.status.1
    );
    assert!(
        r.status
            .1
            .contains("kubelet sysext: /etc/extensions/kubernetes.raw -> ")
            && r.status.1.contains(", merged"),
        "{}",
        r.status.1
    );
    assert!(!r.status.1.contains("torcx:"), "{}", r.status.1);
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
    for ((line, name), address) in table.iter().zip([MASTER, WORKER]).zip(&addresses) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols.first(), Some(&name), "{line}");
        assert_eq!(cols.get(1), Some(&"Ready"), "{line}");
        assert!(cols.contains(&r.version.as_str()), "{line}");
        assert!(cols.contains(&address.as_str()), "{line}");
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
        pod_line.contains("Running")
            && pod_line.contains(WORKER)
            && pod_line.contains(&r.pod.pod_ip),
        "{pod_line}"
    );
    // (Words, whatever the screen's line breaks.)
    let flat = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    for named in [
        "today's Flatcar",
        "update_engine (the OS update to 4593.2.0",
        "runc shim",
        &format!(
            "Flatcar Container Linux by Kinvolk {NEXT_FLATCAR} (update_engine stand-in), containerd"
        ),
        &format!(
            "Kubernetes {} from the kubernetes system extension",
            r.version
        ),
        &format!(
            "kubelet-sysext kubelet {} (exact for the cluster's {})",
            r.version, r.version
        ),
        &format!("Flatcar Container Linux by Kinvolk {NEXT_FLATCAR} (Oklo)"),
        &format!(
            "first boot to Node Ready {:.1} s, of which the agent ran {:.1} s",
            r.first_boot_to_ready, r.agent
        ),
    ] {
        assert!(flat.contains(named), "the screen does not say {named:?}");
    }
    assert!(!screen.contains("kubelet-wrapper (runs"), "{screen}");
}
