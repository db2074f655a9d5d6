//! The backends by default, and their refusals, on simulated nodes whose
//! os-release is today's Flatcar (4593.2.0), as an operator's config
//! leaves them (no `kubelet.backend`, no `addon.backend`):
//!
//! - a node without kubelet-wrapper: `kubelet.backend: "wrapper"` is
//!   refused at the `runtime` step (exit 7, not restarted) naming the
//!   release that removed it, before anything changed; the operator takes
//!   the setting out and restarts the unit, and the agent takes the kubelet
//!   as a system extension from the signed mirror, writes kubelet.service's
//!   drop-in and reloads systemd, and kubelet.service runs the merged
//!   `/usr/bin/kubelet` (the mirror's stand-in, which records its starts);
//!   the `runtime` step's record and `status` say why;
//! - the same release with kubelet-wrapper on its disk: `addon.backend:
//!   "torcx"` is refused the same way (no torcx since 3794.0.0, nothing
//!   stored); without it the wrapper runs by default, and no drop-in.
//!
//! One node each (the refusal first, then the default on the same disk: a
//! refusal leaves nothing that changes what the next run does).

use serde_json::{Value, json};
use std::time::Duration;
use testkit::agentnode::{
    AgentNode, CONFIG_PATH, Cluster, KUBELET_WRAPPER_PATH, OS_RELEASE, kubelet_starts,
    state_journal,
};
use testkit::apiserver::ApiServerOptions;
use testkit::kubelet_sysext::{
    KEYRING_PATH, Kubelet, KubeletMirror, fake_kubelet, fake_kubelet_starts, flatcar_os_release,
    kubelet_image, release, share_root_for_merges,
};
use testkit::simnode::{SimNode, skip_unless_possible};

const T: Duration = Duration::from_secs(90);
const KNB: &str = "k8s-node-bootstrap.service";
const FLATCAR: &str = "4593.2.0";
const DROP_IN: &str = "/etc/systemd/system/kubelet.service.d/10-kubelet-sysext.conf";

/// A worker of today's Flatcar whose API server (the stand-in) runs
/// `cluster`, its config `patch` over the test defaults; kubelet-wrapper on
/// its disk only when `wrapper`.
fn node(name: &str, cluster: &str, patch: Value, wrapper: bool) -> (SimNode, Cluster) {
    let c = Cluster::start(ApiServerOptions {
        git_version: cluster.into(),
        ..Default::default()
    })
    .unwrap();
    let n = AgentNode::new(name)
        .config(patch)
        .kubeconfig(c.kubeconfig())
        .build()
        .unwrap();
    n.write(OS_RELEASE, flatcar_os_release(FLATCAR), 0o644)
        .unwrap();
    if !wrapper {
        std::fs::remove_file(n.path(KUBELET_WRAPPER_PATH)).unwrap();
    }
    (n, c)
}

fn status_json(n: &SimNode) -> Value {
    let out = n
        .exec(&["/opt/bin/node-bootstrap", "status", "--json"])
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn runtime_record(n: &SimNode) -> Value {
    state_journal(n).unwrap()["steps"]["runtime"].clone()
}

/// The operator takes `key` out of the config's `section` and restarts the
/// unit, as operators.md says after a refusal.
fn fix_and_restart(n: &SimNode, section: &str, key: Option<&str>) {
    let mut config: Value = serde_json::from_str(&n.read(CONFIG_PATH).unwrap()).unwrap();
    let o = config.as_object_mut().unwrap();
    match key {
        Some(k) => {
            o[section].as_object_mut().unwrap().remove(k);
        }
        None => {
            o.remove(section);
        }
    }
    n.write(
        CONFIG_PATH,
        serde_json::to_vec_pretty(&config).unwrap(),
        0o644,
    )
    .unwrap();
    n.systemctl(&["restart", KNB]).unwrap();
}

#[test]
fn on_todays_flatcar_the_wrapper_is_refused_and_the_kubelet_is_the_sysext_by_default() {
    if skip_unless_possible() {
        return;
    }
    let mirror = KubeletMirror::start().unwrap();
    let image = kubelet_image(
        Kubelet::Bytes(&fake_kubelet("v1.20.2")),
        &release("flatcar", "1.0"),
    )
    .unwrap();
    mirror.publish(&[("v1.20.2", &image)]).unwrap();
    // The mirror, its key, and the wrapper asked for.
    let mut patch = mirror.sources_patch(KEYRING_PATH);
    patch["kubelet"] = json!({"backend": "wrapper"});
    let (mut n, _api) = node("backend-sysext", "v1.20.2", patch, false);
    n.write(KEYRING_PATH, mirror.key.public_armored(), 0o644)
        .unwrap();
    share_root_for_merges(&n).unwrap();
    n.boot().unwrap();
    assert_refused_before_anything_changed(
        &mut n,
        &[
            &format!(
                "kubelet.backend is \"wrapper\", but this node runs Flatcar Container Linux by Kinvolk {FLATCAR}"
            ),
            "Flatcar removed it, with rkt, in 2857.0.0",
        ],
    );
    assert!(
        status_json(&n)["backends"]["kubelet_why"]
            .as_str()
            .unwrap()
            .contains("2857.0.0")
    );

    // No backend named: the sysext.
    fix_and_restart(&n, "kubelet", Some("backend"));
    n.wait_active_state("kubelet.service", "active", T)
        .unwrap_or_else(|e| panic!("{e}\n{}", n.journal(KNB)));
    // The drop-in is the repository's, written by the agent.
    assert_eq!(
        n.read(DROP_IN).unwrap(),
        std::fs::read_to_string(testkit::unit_file("kubelet-sysext.conf")).unwrap()
    );
    // kubelet.service ran the merged kubelet, not kubelet-wrapper.
    let starts = n.wait_for("the sysext kubelet's start", T, |n| {
        let s = fake_kubelet_starts(n);
        (!s.is_empty()).then_some(s)
    });
    let starts = starts.unwrap_or_else(|e| panic!("{e}\n{}", n.journal("kubelet.service")));
    assert!(
        starts[0].starts_with("start version=v1.20.2 args=--lock-file=/var/run/lock/kubelet.lock"),
        "{starts:?}"
    );
    assert!(kubelet_starts(&n).is_empty(), "kubelet-wrapper ran");
    let exec = n.prop("kubelet.service", "ExecStart").unwrap();
    assert!(exec.contains("path=/usr/bin/kubelet"), "{exec}");
    // Why, in the journal's record and in status.
    let r = runtime_record(&n);
    assert_eq!(r["status"], "done", "{r}");
    assert_eq!(r["result"]["kubelet"], "sysext", "{r}");
    assert_eq!(
        r["result"]["kubelet_why"],
        format!(
            "auto: Flatcar Container Linux by Kinvolk {FLATCAR} has no kubelet-wrapper (Flatcar removed it in 2857.0.0)"
        )
    );
    let s = status_json(&n);
    assert_eq!(s["backends"]["kubelet"], "sysext", "{s}");
    assert_eq!(s["kubelet_sysext"]["version"], "v1.20.2", "{s}");
    n.shutdown().unwrap();
}

#[test]
fn with_kubelet_wrapper_on_its_disk_torcx_is_refused_and_the_wrapper_runs_by_default() {
    if skip_unless_possible() {
        return;
    }
    // A docker cluster (1.9) with the addon on through torcx: the node's
    // release has no torcx since 3794.0.0.
    let (mut n, _api) = node(
        "backend-wrapper",
        "v1.9.6+coreos.0",
        json!({"addon": {"enabled": true, "backend": "torcx", "allow_unsigned": true,
            "manifest_url": "http://127.0.0.1:1/{board}/{os_version}/torcx_manifest.json"}}),
        true,
    );
    n.boot().unwrap();
    assert_refused_before_anything_changed(
        &mut n,
        &[
            &format!(
                "addon.backend is \"torcx\", but Flatcar Container Linux by Kinvolk {FLATCAR}"
            ),
            "Flatcar removed it in 3794.0.0",
        ],
    );
    assert!(
        testkit::files::names(&n.path("/var/lib/torcx/store")).is_empty(),
        "a torcx package was stored"
    );

    // No addon: kubelet-wrapper, the node has it.
    fix_and_restart(&n, "addon", None);
    n.wait_for("kubelet-wrapper's start", T, |n| {
        (!kubelet_starts(n).is_empty()).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", n.journal(KNB)));
    assert!(!n.exists(DROP_IN), "a sysext drop-in on a wrapper node");
    let r = runtime_record(&n);
    assert_eq!(r["status"], "done", "{r}");
    assert_eq!(r["result"]["kubelet"], "wrapper", "{r}");
    assert_eq!(
        r["result"]["kubelet_why"],
        format!("auto: Flatcar Container Linux by Kinvolk {FLATCAR} has kubelet-wrapper")
    );
    assert!(
        state_journal(&n).unwrap()["steps"]
            .get("kubelet-sysext")
            .is_none()
    );
    assert_eq!(status_json(&n)["backends"]["kubelet"], "wrapper");
    n.shutdown().unwrap();
}

/// The run stopped at the `runtime` step with exit 7, not restarted, its
/// error saying each of `says`; nothing after it happened.
fn assert_refused_before_anything_changed(n: &mut SimNode, says: &[&str]) {
    n.wait_active_state(KNB, "failed", T).unwrap();
    assert_eq!(n.prop(KNB, "ExecMainStatus").unwrap(), "7");
    assert_eq!(
        n.prop(KNB, "NRestarts").unwrap(),
        "0",
        "exit 7 is not restarted"
    );
    let r = runtime_record(n);
    assert_eq!(r["status"], "failed", "{r}");
    let error = r["error"].as_str().unwrap_or_default().to_string();
    for s in says {
        assert!(error.contains(s), "{s:?} not in {error}");
    }
    let steps = state_journal(n).unwrap()["steps"].clone();
    for later in [
        "os-update",
        "docker-addon",
        "reboot",
        "kubelet-sysext",
        "kubelet-env",
    ] {
        assert!(steps.get(later).is_none(), "{later} ran: {steps}");
    }
    assert!(!n.exists("/etc/kubernetes/kubelet.env"));
    assert!(!n.exists(DROP_IN));
    assert!(!n.exists("/etc/torcx/next-profile"));
    assert!(kubelet_starts(n).is_empty() && fake_kubelet_starts(n).is_empty());
    let s = status_json(n);
    assert_eq!(s["verdict"], "failed", "{s}");
}
