//! The kubelet as a systemd-sysext image (`kubelet.backend = "sysext"`) on
//! a simulated node: the real agent chooses the image for the cluster's
//! version from a signed mirror of several, and the real `systemd-sysext`
//! merges it; kubelet.service (with `units/kubelet-sysext.conf`) runs the
//! merged `/usr/bin/kubelet`, a stand-in that answers `--version` and
//! records its starts (testkit::kubelet_sysext).
//!
//! - first boot: the exact version is chosen among three, merged without a
//!   reboot, and kubelet.service starts once, after the merge, running that
//!   kubelet; kubelet.env is still written; `status` shows the image;
//! - `kubelet ensure` for a newer cluster replaces the image in one step
//!   (link and merge; the previous image kept), without a reboot, and the
//!   next boot merges the new image at boot (systemd-sysext.service);
//! - a mirror with only a too-new kubelet: the bootstrap unit fails with
//!   exit 7, not restarted, nothing installed or merged, no kubelet start.

use serde_json::{Value, json};
use std::time::Duration;
use testkit::agentnode::{AgentNode, Cluster, OS_RELEASE, state_journal};
use testkit::apiserver::ApiServerOptions;
use testkit::kubelet_sysext::{
    Kubelet, KubeletMirror, fake_kubelet, fake_kubelet_starts, flatcar_os_release, kubelet_image,
    prepare_node, release,
};
use testkit::simnode::{BootEnd, SimNode, skip_unless_possible};

const T: Duration = Duration::from_secs(90);
const KNB: &str = "k8s-node-bootstrap.service";
const LINK: &str = "/etc/extensions/kubernetes.raw";
const IMAGES: &str = "/opt/extensions/kubernetes";

fn image(version: &str) -> Vec<u8> {
    kubelet_image(
        Kubelet::Bytes(&fake_kubelet(version)),
        &release("flatcar", "1.0"),
    )
    .unwrap()
}

/// A worker on Flatcar 3815.2.0 whose API server (the stand-in) runs
/// `cluster`, with the sysext backend reading `mirror`.
fn node(name: &str, mirror: &KubeletMirror, cluster: &str) -> (SimNode, Cluster) {
    let c = Cluster::start(ApiServerOptions {
        git_version: cluster.into(),
        ..Default::default()
    })
    .unwrap();
    let n = AgentNode::new(name)
        .config(mirror.config_patch())
        .kubeconfig(c.kubeconfig())
        .build()
        .unwrap();
    n.write(OS_RELEASE, flatcar_os_release("3815.2.0"), 0o644)
        .unwrap();
    prepare_node(&n, mirror).unwrap();
    (n, c)
}

fn kubelet_version(n: &SimNode) -> String {
    let out = n.exec(&["/usr/bin/kubelet", "--version"]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn link(n: &SimNode) -> String {
    std::fs::read_link(n.path(LINK))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// The fake kubelet's record once it holds `count` starts (it writes it a
/// moment after systemd reports the unit active).
fn wait_starts(n: &SimNode, count: usize) -> Vec<String> {
    n.wait_for(&format!("{count} kubelet starts"), T, |n| {
        let s = fake_kubelet_starts(n);
        (s.len() >= count).then_some(s)
    })
    .unwrap()
}

fn status_json(n: &SimNode) -> Value {
    let out = n
        .exec(&["/opt/bin/node-bootstrap", "status", "--json"])
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Whether a recorded start ran `version` with kubelet.service's arguments
/// (`units/kubelet-sysext.conf` keeps them) and the flags kubelet.env
/// gives a kubelet with a configuration file.
fn ran_kubelet(start: &str, version: &str) -> bool {
    start.starts_with(&format!(
        "start version={version} args=--lock-file=/var/run/lock/kubelet.lock --exit-on-lock-contention "
    )) && start.contains(
        " --config=/etc/kubernetes/kubelet-config.yaml --kubeconfig=/etc/kubernetes/kubeconfig ",
    )
}

#[test]
fn the_kubelet_of_the_clusters_version_is_merged_before_kubelet_starts_and_replaced_without_a_reboot()
 {
    if skip_unless_possible() {
        return;
    }
    let mirror = KubeletMirror::start().unwrap();
    let (v1, v2, v3) = (image("v1.20.1"), image("v1.20.2"), image("v1.21.0"));
    mirror
        .publish(&[("v1.20.1", &v1), ("v1.20.2", &v2), ("v1.21.0", &v3)])
        .unwrap();
    let (mut n, _api) = node("kubelet-sysext", &mirror, "v1.20.2");
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T)
        .unwrap_or_else(|e| panic!("{e}\n{}", n.journal(KNB)));

    // The exact version, linked as the bakery lays it out, merged.
    let v2_path = format!("{IMAGES}/kubernetes-v1.20.2-x86-64.raw");
    assert_eq!(link(&n), v2_path);
    assert_eq!(std::fs::read(n.path(&v2_path)).unwrap(), v2);
    assert_eq!(kubelet_version(&n), "Kubernetes v1.20.2");
    // kubelet.service ran the merged kubelet once, with its arguments: it
    // did not start (and fail) before the merge.
    let starts = wait_starts(&n, 1);
    assert!(
        starts.len() == 1 && ran_kubelet(&starts[0], "v1.20.2"),
        "{starts:?}"
    );
    assert_eq!(n.prop("kubelet.service", "NRestarts").unwrap(), "0");
    let merged_at = n
        .journal_json(&["STEP=kubelet-sysext"])
        .into_iter()
        .find(|l| l["MESSAGE"] == "systemd-sysext refresh merged the extensions")
        .map(|l| {
            l["__MONOTONIC_TIMESTAMP"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .unwrap_or_else(|| panic!("no merge in the journal:\n{}", n.journal(KNB)));
    let kubelet_started = n
        .timestamp_us("kubelet.service", "ExecMainStartTimestamp")
        .unwrap();
    assert!(
        kubelet_started > merged_at,
        "kubelet started at {kubelet_started}, the merge was at {merged_at}"
    );
    assert_eq!(n.boots(), 1, "no reboot");
    // kubelet.env is written as ever.
    assert!(
        n.read("/etc/kubernetes/kubelet.env")
            .unwrap()
            .contains("KUBELET_IMAGE_TAG=\"v1.20.2\""),
    );
    let j = state_journal(&n).unwrap();
    let rec = &j["steps"]["kubelet-sysext"];
    assert_eq!(rec["status"], "done");
    assert_eq!(rec["result"]["version"], "v1.20.2");
    assert_eq!(rec["result"]["rule"], "exact");
    assert_eq!(rec["result"]["signed"], true);
    // What the step adds to a first boot (printed for the record, not
    // asserted): from its start to its end, and the refresh within it.
    let at = |msg: &str| {
        n.journal_json(&["STEP=kubelet-sysext"])
            .into_iter()
            .find(|l| l["MESSAGE"] == msg)
            .and_then(|l| l["__MONOTONIC_TIMESTAMP"].as_str()?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {msg:?} in the journal"))
    };
    let started = at("step started");
    eprintln!(
        "kubelet-sysext step on the simulated node: {} ms in all (chosen after {} ms; merged {} ms after the start)",
        (at("step done") - started) / 1000,
        (at("kubelet image chosen") - started) / 1000,
        (merged_at - started) / 1000,
    );
    // `status` says which image is merged.
    let s = status_json(&n);
    assert_eq!(
        s["kubelet_sysext"],
        json!({"link": LINK, "image": v2_path, "merged": true, "version": "v1.20.2"})
    );
    let text = n.exec(&["/opt/bin/node-bootstrap", "status"]).unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "kubelet sysext: {LINK} -> {v2_path} (kubelet v1.20.2), merged"
        )),
        "{text}"
    );

    // The control plane moves to 1.21: the operator runs `kubelet ensure`.
    let out = n
        .exec(&[
            "/opt/bin/node-bootstrap",
            "kubelet",
            "ensure",
            "--cluster-version",
            "v1.21.0",
            "--json",
        ])
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let v3_path = format!("{IMAGES}/kubernetes-v1.21.0-x86-64.raw");
    assert_eq!(rec["previous"], v2_path);
    assert_eq!(rec["refreshed"], true);
    assert_eq!(link(&n), v3_path);
    assert_eq!(
        kubelet_version(&n),
        "Kubernetes v1.21.0",
        "merged, no reboot"
    );
    assert_eq!(n.boots(), 1);
    assert_eq!(
        testkit::files::names(&n.path(IMAGES)),
        [
            "kubernetes-v1.20.2-x86-64.raw",
            "kubernetes-v1.21.0-x86-64.raw"
        ],
        "the previous image is kept, nothing half-written is left"
    );
    n.systemctl(&["restart", "kubelet.service"]).unwrap();
    let starts = wait_starts(&n, 2);
    assert!(ran_kubelet(&starts[1], "v1.21.0"), "{starts:?}");

    // Later boots: systemd-sysext.service merges the linked image at boot.
    n.exec(&["systemctl", "reboot"]).unwrap();
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert_eq!(
        n.prop("systemd-sysext.service", "ActiveState").unwrap(),
        "active",
        "{}",
        n.journal("systemd-sysext.service")
    );
    assert_eq!(n.prop(KNB, "ConditionResult").unwrap(), "no");
    let starts = wait_starts(&n, 3);
    assert!(ran_kubelet(&starts[2], "v1.21.0"), "{starts:?}");
    n.shutdown().unwrap();
}

#[test]
fn a_mirror_with_only_a_too_new_kubelet_is_refused_and_nothing_is_merged() {
    if skip_unless_possible() {
        return;
    }
    let mirror = KubeletMirror::start().unwrap();
    mirror.publish(&[("v1.21.0", &image("v1.21.0"))]).unwrap();
    let (mut n, _api) = node("kubelet-sysext-new", &mirror, "v1.20.2");
    n.boot().unwrap();
    n.wait_active_state(KNB, "failed", T).unwrap();
    assert_eq!(n.prop(KNB, "ExecMainStatus").unwrap(), "7");
    assert_eq!(
        n.prop(KNB, "NRestarts").unwrap(),
        "0",
        "exit 7 is not restarted"
    );
    let log = n.journal(KNB);
    assert!(
        log.contains("no kubelet the version-skew policy allows for cluster version v1.20.2: the search path offers v1.21.0"),
        "{log}"
    );
    assert!(!n.exists(LINK));
    assert!(testkit::files::names(&n.path(IMAGES)).is_empty());
    assert!(!n.exists("/usr/bin/kubelet"), "nothing merged");
    assert!(!n.exists("/etc/kubernetes/kubelet.env"));
    assert!(fake_kubelet_starts(&n).is_empty());
    let s = status_json(&n);
    assert_eq!(s["verdict"], "failed");
    assert_eq!(s["kubelet_sysext"]["image"], Value::Null);
    n.shutdown().unwrap();
}
