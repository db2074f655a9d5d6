//! containerd as a package (`runtime.containerd.package = "sysext"`, the
//! default) on a simulated node of today's Flatcar whose OS has no
//! containerd (Debian's hidden: binaries, unit and config): the real agent
//! bootstraps a Kubernetes 1.26 worker (`runtime.name` `auto`: containerd),
//! finds no containerd, chooses a containerd system extension from a
//! signed mirror by the runtime mappings' preference order, and the real
//! `systemd-sysext` merges it without a reboot; containerd.service comes
//! with the image, systemd starts it, and it answers CRI before
//! kubelet.env is written. After a reboot, systemd-sysext.service merges
//! it at boot and Flatcar's ensure-sysext.service starts containerd again
//! (the agent does not run: kubelet.env is there).
//!
//! The mirror offers Debian's containerd 1.6.20 (its binaries and unit as
//! an image) and two stand-ins a wrong choice would take: 1.7.27 (the
//! mappings' second series; first by version) and 2.0.0 (newest, not
//! listed). Neither serves a socket, so a node that took one has no
//! containerd to answer.

use node_bootstrap::container_runtime::cri::{self, CriApi};
use serde_json::json;
use std::time::Duration;
use testkit::agentnode::{AgentNode, Cluster, OS_RELEASE, state_journal};
use testkit::apiserver::ApiServerOptions;
use testkit::containerd_sysext::{
    IMAGES, LINK, PRODUCT, UNIT_FILE, debian_image, fake_image, flatcar_release,
    hide_os_containerd, install_ensure_sysext, skip_unless_possible,
};
use testkit::kubelet_sysext::{
    ExtensionMirror, KEYRING_PATH, flatcar_os_release, share_root_for_merges,
};
use testkit::simnode::{BootEnd, SimNode};

const T: Duration = Duration::from_secs(120);
const KNB: &str = "k8s-node-bootstrap.service";
const CONTAINERD: &str = "containerd.service";

/// Kubernetes 1.26 takes containerd 1.6, then 1.7 (this mirror's 1.7 is a
/// stand-in: the order must be kept).
const MAPPINGS: &str = "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.26\":\n      containerd: [\"1.6\", \"1.7\"]\n";

/// What containerd says over CRI on a running node, asked from the host
/// through the node's root (its `/run` is its own).
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

fn containerd_version_in_node(n: &SimNode) -> String {
    let out = n.exec(&["/usr/bin/containerd", "--version"]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_node_without_containerd_gets_the_listed_one_merged_without_a_reboot_and_it_answers_cri() {
    if skip_unless_possible() {
        return;
    }
    let debian = testkit::containerd::version().unwrap();
    let mirror = ExtensionMirror::of(PRODUCT).unwrap();
    let real = debian_image(&flatcar_release()).unwrap();
    let (wrong, unlisted) = (
        fake_image("1.7.27", &flatcar_release()).unwrap(),
        fake_image("2.0.0", &flatcar_release()).unwrap(),
    );
    mirror
        .publish(&[("1.6.20", &real), ("1.7.27", &wrong), ("2.0.0", &unlisted)])
        .unwrap();
    let api = Cluster::start(ApiServerOptions {
        git_version: "v1.26.3".into(),
        ..Default::default()
    })
    .unwrap();
    let mut n = AgentNode::new("ctr-package")
        .config(mirror.sources_patch(KEYRING_PATH))
        .config(json!({"runtime": {"containerd": {"start_timeout_secs": 20}}}))
        .kubeconfig(api.kubeconfig())
        .build()
        .unwrap();
    n.write(OS_RELEASE, flatcar_os_release("3815.2.0"), 0o644)
        .unwrap();
    n.write(KEYRING_PATH, mirror.key.public_armored(), 0o644)
        .unwrap();
    n.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        MAPPINGS,
        0o644,
    )
    .unwrap();
    hide_os_containerd(&n).unwrap();
    testkit::pods::containerd_test_parts(&n).unwrap();
    share_root_for_merges(&n).unwrap();
    install_ensure_sysext(&n).unwrap();

    n.boot().unwrap();
    // The OS has none.
    let out = n.exec(&["test", "-e", "/usr/bin/containerd"]).unwrap();
    assert!(!out.status.success(), "the node has an OS containerd");
    n.wait_active_state(KNB, "active", T)
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", n.journal(KNB), n.journal(CONTAINERD)));

    // The listed series' image, linked as the bakery lays it out, merged.
    let image = format!("{IMAGES}/containerd-1.6.20-x86-64.raw");
    assert_eq!(
        std::fs::read_link(n.path(LINK))
            .unwrap()
            .display()
            .to_string(),
        image
    );
    assert_eq!(
        testkit::files::names(&n.path(IMAGES)),
        ["containerd-1.6.20-x86-64.raw"]
    );
    assert!(
        std::fs::read(n.path(&image)).unwrap() == real,
        "the image is the mirror's, byte for byte"
    );
    assert!(
        containerd_version_in_node(&n).contains(&format!(" {debian} ")),
        "{}",
        containerd_version_in_node(&n)
    );
    // Flatcar's own containerd extension is masked while the agent's runs.
    assert_eq!(
        std::fs::read_link(n.path("/etc/extensions/containerd-flatcar.raw")).unwrap(),
        std::path::Path::new("/dev/null")
    );
    for stand_in in ["1.7.27", "2.0.0"] {
        assert!(
            mirror
                .server
                .requests_for(&mirror.image_path(stand_in))
                .is_empty(),
            "{stand_in} was downloaded"
        );
    }
    // systemd runs containerd from the unit the image brought (the OS's is
    // hidden; Debian's /lib is /usr/lib).
    assert_eq!(n.prop(CONTAINERD, "ActiveState").unwrap(), "active");
    let fragment = n.prop(CONTAINERD, "FragmentPath").unwrap();
    assert!(
        [UNIT_FILE, "/lib/systemd/system/containerd.service"].contains(&fragment.as_str()),
        "{fragment}"
    );
    // It answers CRI as the kubelet will ask it.
    let answer = ask_cri(&n);
    assert_eq!(answer.version.runtime_name, "containerd");
    assert_eq!(answer.version.runtime_version, debian);
    assert!(answer.apis.contains(&CriApi::V1), "{:?}", answer.apis);
    assert_eq!(n.boots(), 1, "no reboot");
    // The state journal says where containerd came from.
    let j = state_journal(&n).unwrap();
    let rec = &j["steps"]["containerd"]["result"];
    assert_eq!(rec["runtime"], format!("containerd://{debian}"), "{rec:#}");
    assert_eq!(rec["cri_api"], "v1");
    let package = &rec["package"];
    assert_eq!(package["version"], "1.6.20");
    assert_eq!(
        package["why"],
        "the OS has no containerd (/usr/bin/containerd is absent)"
    );
    assert_eq!(
        (
            &package["signed"],
            &package["refreshed"],
            &package["downloaded"]
        ),
        (&json!(true), &json!(true), &json!(true))
    );
    // kubelet.env is written only after all of that, naming the socket.
    assert!(
        n.read("/etc/kubernetes/kubelet.env")
            .unwrap()
            .contains("unix:///run/containerd/containerd.sock"),
        "{:?}",
        n.read("/etc/kubernetes/kubelet.env")
    );

    // The next boot: merged at boot, started again, no agent.
    n.exec(&["systemctl", "reboot"]).unwrap();
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    n.boot().unwrap();
    n.wait_active_state(CONTAINERD, "active", T)
        .unwrap_or_else(|e| {
            panic!(
                "{e}\n{}\n{}",
                n.journal("ensure-sysext.service"),
                n.journal(CONTAINERD)
            )
        });
    assert_eq!(n.prop(KNB, "ConditionResult").unwrap(), "no");
    assert_eq!(ask_cri(&n).version.runtime_version, debian);
    n.shutdown().unwrap();
}
