//! Today's Flatcar for real: containerd 2.1.4 (built from its source) on a
//! simulated Flatcar-like node, the real agent end to end for a cluster
//! whose API server says v1.32, then crictl 1.32, the CRI v1 client,
//! doing what a 1.32 kubelet does against the socket the agent's
//! KubeletConfiguration names: a pod sandbox from the sandbox image the
//! agent configured, a container in it, its log, an exec, on the cgroup
//! driver the KubeletConfiguration names. No kubelet newer than 1.20 can
//! be built here; cri-tools 1.32 can.
//!
//! - the OS's containerd 2.1.4 (Flatcar's unit, `--config
//!   ${CONTAINERD_CONFIG}`) on a node that keeps cgroup v1 with Flatcar's
//!   own `10-use-cgroupfs.conf` drop-in: the agent's drop-in wins, and the
//!   real systemd runs containerd with the agent's file;
//! - containerd 2.1.4 as the sysext-bakery's image from the signed mirror,
//!   merged by the real systemd-sysext on a node whose OS has none;
//! - a kubelet 1.20 (CRI v1alpha2 only) with the OS's containerd 2.1.4 (v1
//!   only): refused before kubelet.env, both CRI versions named; then with
//!   runtime mappings listing 1.6, which the mirror offers (Debian's
//!   1.6.20 as an image), that one is installed and answers.
//!
//! - a 1.35 cluster on containerd 2.1.4: below containerd's own support
//!   matrix (2.1.5+), warned in the journal and the record, not refused.
//!
//! Test parts of this machine kind: the runc shim that clamps
//! `oomScoreAdj` and a tmpfs for `/var/lib/containerd`
//! (`testkit::pods::containerd_test_parts`).

use node_bootstrap::container_runtime::cri::{self, CgroupDriver, CriApi};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use testkit::agentnode::{AgentNode, Cluster, OS_RELEASE, state_journal};
use testkit::apiserver::ApiServerOptions;
use testkit::containerd_sysext::{
    IMAGES, LINK, PRODUCT, debian_image, flatcar_release, hide_os_containerd, install_ensure_sysext,
};
use testkit::containerd2::{self, CrictlPod};
use testkit::kubelet_sysext::{
    ExtensionMirror, KEYRING_PATH, flatcar_os_release, share_root_for_merges,
};
use testkit::pods;
use testkit::simnode::SimNode;

const T: Duration = Duration::from_secs(120);
const KNB: &str = "k8s-node-bootstrap.service";
const CONTAINERD: &str = "containerd.service";
const KUBELET_CONFIG: &str = "/etc/kubernetes/kubelet-config.yaml";
/// Flatcar stable with containerd 2.1 (its changelog of 2025-10-30).
const FLATCAR_STABLE: &str = "4593.2.0";

fn skip() -> bool {
    testkit::containerd_sysext::skip_unless_possible()
        || testkit::containerd::skip_unless_v2()
        || pods::skip_unless_containerd_pods()
}

/// What containerd answers over CRI on a running node, asked from the host
/// through the node's root.
fn ask_cri(n: &SimNode) -> cri::RuntimeAnswer {
    let socket = format!(
        "/proc/{}/root/run/containerd/containerd.sock",
        n.pid1().expect("the node runs")
    );
    testkit::runtime()
        .block_on(cri::ask(
            std::path::Path::new(&socket),
            Duration::from_secs(10),
        ))
        .unwrap_or_else(|e| {
            panic!(
                "containerd does not answer CRI: {e}\n{}",
                n.journal(CONTAINERD)
            )
        })
}

/// The value of a top-level `key: value` line of the KubeletConfiguration.
fn yaml_value(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        .trim()
        .trim_matches('"')
        .to_string()
}

/// A worker for a v1.32 cluster on today's Flatcar with `runtime` settings.
fn worker_1_32(name: &str, api: &Cluster, extra: Value) -> SimNode {
    let pause = pods::pause_image().unwrap();
    let n = AgentNode::new(name)
        .config(json!({"runtime": {
            "sandbox_image": pause.tag,
            "containerd": {"start_timeout_secs": 30}
        }}))
        .config(extra)
        .kubeconfig(api.kubeconfig())
        .build()
        .unwrap();
    n.write(OS_RELEASE, flatcar_os_release(FLATCAR_STABLE), 0o644)
        .unwrap();
    pods::containerd_test_parts(&n).unwrap();
    n
}

fn api_at(version: &str) -> Cluster {
    Cluster::start(ApiServerOptions {
        git_version: version.into(),
        ..Default::default()
    })
    .unwrap()
}

/// The agent's run done; what its containerd record and the kubelet's
/// files say; then crictl 1.32 runs a pod where they point.
fn crictl_runs_a_pod_where_the_agent_points(n: &SimNode) -> Value {
    n.wait_active_state(KNB, "active", T)
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", n.journal(KNB), n.journal(CONTAINERD)));
    let j = state_journal(n).unwrap();
    let rec = j["steps"]["containerd"]["result"].clone();
    assert_eq!(
        rec["runtime"],
        format!("containerd://{}", containerd2::VERSION),
        "{rec:#}"
    );
    assert_eq!(rec["cri_api"], "v1", "{rec:#}");
    assert_eq!(rec["config_source"], "written", "{rec:#}");
    // 2.x reports no sandbox image over CRI: said, not refused.
    assert_eq!(
        rec["verified"]["not_reported"],
        json!(["sandbox image"]),
        "{rec:#}"
    );
    assert!(
        rec["verified"]["checked"]
            .as_array()
            .unwrap()
            .contains(&json!("config file (its command line)")),
        "{rec:#}"
    );
    let driver = an_driver();
    assert_eq!(rec["cgroup_driver"], driver, "{rec:#}");

    // The kubelet's files for 1.32: the endpoint and the cgroup driver.
    let config = n.read(KUBELET_CONFIG).unwrap();
    let endpoint = yaml_value(&config, "containerRuntimeEndpoint");
    assert_eq!(
        endpoint, "unix:///run/containerd/containerd.sock",
        "{config}"
    );
    assert_eq!(yaml_value(&config, "cgroupDriver"), driver, "{config}");
    let env = n.read("/etc/kubernetes/kubelet.env").unwrap();
    assert!(env.contains("KUBELET_RUNTIME=\"containerd\""), "{env}");
    assert!(
        !env.contains("--container-runtime="),
        "1.27 removed the flag: {env}"
    );

    // containerd answers what a 1.31+ kubelet asks: RuntimeConfig's driver.
    let answer = ask_cri(n);
    assert_eq!(answer.apis, [CriApi::V1]);
    let want = if driver == "systemd" {
        CgroupDriver::Systemd
    } else {
        CgroupDriver::Cgroupfs
    };
    assert_eq!(answer.cgroup_driver, Some(want));

    // crictl 1.32 where the KubeletConfiguration points.
    let pause = pods::pause_image().unwrap();
    let busybox = pods::busybox_image().unwrap();
    pods::ctr_import(n, &pause, None).unwrap();
    pods::ctr_import(n, &busybox, None).unwrap();
    let version = containerd2::crictl(n, &endpoint, &["version"]).unwrap();
    assert!(version.contains("RuntimeApiVersion:  v1"), "{version}");
    let t0 = Instant::now();
    let pod = CrictlPod::run(n, &endpoint, "nb-crictl", &busybox.tag, &driver)
        .unwrap_or_else(|e| panic!("{e:#}\n{}", n.journal(CONTAINERD)));
    let inspect = pod
        .wait_running(n, &endpoint, Duration::from_secs(60))
        .unwrap();
    let ran = t0.elapsed();
    // The sandbox is of the image the agent configured (pinned_images.sandbox
    // after 2.x's migration of sandbox_image).
    let out = n
        .exec(&[
            pods::CTR,
            "--namespace",
            "k8s.io",
            "containers",
            "info",
            &pod.pod_id,
        ])
        .unwrap();
    let info: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(info["Image"], pause.tag.as_str(), "{info:#}");
    // The cgroup driver the KubeletConfiguration names is the one runc used.
    let cgroups_path = inspect["info"]["runtimeSpec"]["linux"]["cgroupsPath"]
        .as_str()
        .unwrap_or_else(|| panic!("{inspect:#}"))
        .to_string();
    let parent = containerd2::cgroup_parent(&driver);
    if driver == "systemd" {
        assert!(
            cgroups_path.starts_with(&format!("{parent}:cri-containerd:")),
            "{cgroups_path}"
        );
    } else {
        assert_eq!(cgroups_path, format!("{parent}/{}", pod.container_id));
    }
    let pid = inspect["info"]["pid"].as_u64().unwrap();
    let cgroup = in_node(n, &["cat", &format!("/proc/{pid}/cgroup")]);
    assert!(
        cgroup.contains(&pod.container_id),
        "runc placed it there: {cgroup}"
    );
    // Its log and an exec.
    let logs = containerd2::crictl(n, &endpoint, &["logs", &pod.container_id]).unwrap();
    assert_eq!(logs.trim(), containerd2::MARKER);
    // The exec joins the container (its cgroup). Which root it sees is the
    // rig's: a node entered with a chroot keeps the host's `/` for runc
    // exec (docs/TEST-RIG, "exec landed in the host's root"); the VM tier
    // has no such limit.
    let exec = containerd2::crictl(
        n,
        &endpoint,
        &["exec", "-s", &pod.container_id, "cat", "/proc/self/cgroup"],
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        exec.contains(&pod.container_id),
        "exec runs in the container's cgroup: {exec}"
    );
    eprintln!("crictl 1.32: the pod's container ran {ran:?} after runp");
    rec
}

/// What a command prints inside the node.
fn in_node(n: &SimNode, argv: &[&str]) -> String {
    let out = n.exec(argv).unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The cgroup driver the agent gives a node of this host (cgroup v1:
/// cgroupfs, v2: systemd).
fn an_driver() -> String {
    testkit::agentnode::host_cgroup_driver().to_string()
}

#[test]
fn flatcar_stables_own_containerd_2_1_runs_a_crictl_1_32_pod_as_the_agent_configured_it() {
    if skip() {
        return;
    }
    let api = api_at("v1.32.4");
    let mut n = worker_1_32(
        "ctr2-os",
        &api,
        json!({"runtime": {"containerd": {"package": "none"}}}),
    );
    containerd2::install_os(&n).unwrap();
    // An upgraded node that kept cgroup v1 (this host's): Flatcar's drop-in.
    containerd2::install_flatcar_cgroupfs_dropin(&n).unwrap();
    n.boot().unwrap();
    let rec = crictl_runs_a_pod_where_the_agent_points(&n);
    assert!(rec.get("package").is_none(), "the OS's containerd: {rec:#}");
    // The real systemd ran containerd with the agent's file, not Flatcar's
    // cgroupfs one: the agent's drop-in sorts after 10-use-cgroupfs.conf.
    let main_pid = n.prop(CONTAINERD, "MainPID").unwrap();
    let cmdline = in_node(&n, &["cat", &format!("/proc/{main_pid}/cmdline")]);
    assert!(
        cmdline.contains("--config\0/etc/containerd/config.toml"),
        "{cmdline:?}\n{}",
        n.exec(&["systemctl", "cat", CONTAINERD])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    );
    let dropins = n.prop(CONTAINERD, "DropInPaths").unwrap();
    assert!(
        dropins.contains("10-use-cgroupfs.conf") && dropins.contains("50-node-bootstrap.conf"),
        "{dropins}"
    );
    n.shutdown().unwrap();
}

#[test]
fn the_bakerys_containerd_2_1_sysext_from_the_signed_mirror_runs_a_crictl_1_32_pod() {
    if skip() {
        return;
    }
    let mirror = ExtensionMirror::of(PRODUCT).unwrap();
    let image = containerd2::image(&flatcar_release()).unwrap();
    mirror.publish(&[("2.1.4", &image)]).unwrap();
    let api = api_at("v1.32.4");
    let mut n = worker_1_32("ctr2-sysext", &api, mirror.sources_patch(KEYRING_PATH));
    n.write(KEYRING_PATH, mirror.key.public_armored(), 0o644)
        .unwrap();
    hide_os_containerd(&n).unwrap();
    share_root_for_merges(&n).unwrap();
    install_ensure_sysext(&n).unwrap();
    n.boot().unwrap();
    let rec = crictl_runs_a_pod_where_the_agent_points(&n);
    assert_eq!(rec["package"]["version"], "2.1.4", "{rec:#}");
    assert_eq!(rec["package"]["signed"], true, "{rec:#}");
    assert_eq!(
        std::fs::read_link(n.path(LINK))
            .unwrap()
            .display()
            .to_string(),
        format!("{IMAGES}/containerd-2.1.4-x86-64.raw")
    );
    let merged = n.exec(&["/usr/bin/containerd", "--version"]).unwrap();
    assert!(
        String::from_utf8_lossy(&merged.stdout).contains(" v2.1.4"),
        "systemd-sysext merged 2.1.4: {merged:?}"
    );
    n.shutdown().unwrap();
}

#[test]
fn kubelet_1_20_on_containerd_2_1_is_refused_naming_both_cri_versions_until_a_listed_1_6_is_offered()
 {
    if skip() {
        return;
    }
    let api = api_at("v1.20.2");
    let mirror = ExtensionMirror::of(PRODUCT).unwrap();
    let v2 = containerd2::image(&flatcar_release()).unwrap();
    // The mirror offers only 2.1.4 at first: nothing a 1.20 kubelet can use.
    mirror.publish(&[("2.1.4", &v2)]).unwrap();
    // runtime.name containerd (auto would take docker for 1.20).
    let mut n = worker_1_32(
        "ctr2-old-kubelet",
        &api,
        json!({"runtime": {"name": "containerd"}}),
    );
    let mut config: Value =
        serde_json::from_str(&n.read(testkit::agentnode::CONFIG_PATH).unwrap()).unwrap();
    testkit::agentnode::merge(&mut config, mirror.sources_patch(KEYRING_PATH));
    n.write(
        testkit::agentnode::CONFIG_PATH,
        serde_json::to_vec_pretty(&config).unwrap(),
        0o644,
    )
    .unwrap();
    n.write(KEYRING_PATH, mirror.key.public_armored(), 0o644)
        .unwrap();
    containerd2::install_os(&n).unwrap();
    share_root_for_merges(&n).unwrap();
    n.boot().unwrap();
    n.wait_active_state(KNB, "failed", T)
        .unwrap_or_else(|e| panic!("{e}\n{}", n.journal(KNB)));
    let journal = n.journal(KNB);
    assert!(
        journal.contains("speaks only CRI v1alpha2, and containerd 2.1 serves only CRI v1"),
        "{journal}"
    );
    assert!(
        journal.contains("the search path offers 2.1.4"),
        "{journal}"
    );
    assert_eq!(n.prop(KNB, "ExecMainStatus").unwrap(), "7", "{journal}");
    assert!(
        n.read("/etc/kubernetes/kubelet.env").is_none(),
        "refused before the commit point"
    );
    assert!(
        n.read("/etc/containerd/config.toml").is_none(),
        "nothing written: {journal}"
    );
    assert!(
        testkit::files::names(&n.path(IMAGES)).is_empty(),
        "nothing installed"
    );

    // The mappings list 1.6, which the mirror now offers too: installed.
    mirror
        .publish(&[
            ("1.6.20", &debian_image(&flatcar_release()).unwrap()),
            ("2.1.4", &v2),
        ])
        .unwrap();
    n.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.20\":\n      containerd: [\"1.6\"]\n",
        0o644,
    )
    .unwrap();
    n.systemctl(&["reset-failed", KNB]).unwrap();
    n.systemctl(&["start", KNB]).unwrap();
    n.wait_active_state(KNB, "active", T)
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", n.journal(KNB), n.journal(CONTAINERD)));
    let j = state_journal(&n).unwrap();
    let rec = &j["steps"]["containerd"]["result"];
    assert_eq!(rec["package"]["version"], "1.6.20", "{rec:#}");
    assert_eq!(rec["cri_api"], "v1alpha2", "{rec:#}");
    let answer = ask_cri(&n);
    assert!(answer.apis.contains(&CriApi::V1alpha2), "{:?}", answer.apis);
    assert!(n.read("/etc/kubernetes/kubelet.env").is_some());
    n.shutdown().unwrap();
}

#[test]
fn a_1_35_cluster_on_containerd_2_1_4_is_warned_of_containerds_matrix_and_goes_on() {
    if skip() {
        return;
    }
    // A 1.35 cluster: containerd's own matrix names 2.1.5+ for it, so the
    // step warns about 2.1.4 and goes on (a warning, not a refusal:
    // docs/operators.md): kubelet.env is written.
    let api = api_at("v1.35.0");
    let mut n = worker_1_32(
        "ctr2-critest",
        &api,
        json!({"runtime": {"containerd": {"package": "none"}}}),
    );
    containerd2::install_os(&n).unwrap();
    n.boot().unwrap();
    n.wait_active_state(KNB, "active", T)
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", n.journal(KNB), n.journal(CONTAINERD)));
    let j = state_journal(&n).unwrap();
    let advice = j["steps"]["containerd"]["result"]["advice"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        advice.contains("names 1.7.28+, 2.1.5+, 2.2.0+ for Kubernetes 1.35, not 2.1.4"),
        "{j:#}"
    );
    assert!(
        n.journal(KNB).contains("older than its own support matrix"),
        "{}",
        n.journal(KNB)
    );
    assert!(n.read("/etc/kubernetes/kubelet.env").is_some());
    n.shutdown().unwrap();
}
