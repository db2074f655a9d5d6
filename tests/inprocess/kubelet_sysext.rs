//! `node-bootstrap kubelet ensure` (the kubelet-sysext step) against a
//! signed mirror on loopback, on a node laid out in a temp dir: the
//! refusals that come before any image is looked inside. Nothing is
//! installed or merged by any of them (a `systemd-sysext` guard on the
//! agent's PATH fails the test if it were run). The checks that look inside
//! an image need root: `tests/host/kubelet_sysext_checks.rs`; the merge:
//! `tests/node/kubelet_sysext_node.rs`.

use testkit::cli::{code, stderr};
use testkit::kubelet_sysext::{
    DirNode, Kubelet, fake_kubelet, flatcar_os_release, kubelet_image, release,
};

fn image(version: &str) -> Vec<u8> {
    kubelet_image(
        Kubelet::Bytes(&fake_kubelet(version)),
        &release("flatcar", "1.0"),
    )
    .unwrap()
}

fn nothing_installed(n: &DirNode) {
    assert_eq!(n.installed(), (vec![], vec![]), "nothing may be installed");
}

#[test]
fn a_mirror_with_only_newer_kubelets_is_refused_with_exit_7_naming_what_it_has() {
    let n = DirNode::new(&flatcar_os_release("3815.2.0")).unwrap();
    n.mirror
        .publish(&[
            ("v1.21.0", &image("v1.21.0")),
            ("v1.20.3", &image("v1.20.3")),
        ])
        .unwrap();
    let out = n.ensure("v1.20.2");
    let err = stderr(&out);
    assert_eq!(code(&out), 7, "{err}");
    assert!(
        err.contains(
            "no kubelet the version-skew policy allows for cluster version v1.20.2: \
             the search path offers v1.21.0, v1.20.3; allowed are 1.20 kubelets not newer than v1.20.2"
        ),
        "{err}"
    );
    assert!(
        err.contains(&format!("v1.21.0 at {}", n.mirror.url())),
        "{err}"
    );
    nothing_installed(&n);
    assert!(
        n.mirror
            .server
            .requests_for(&n.mirror.image_path("v1.21.0"))
            .is_empty(),
        "a refused image is not even downloaded"
    );
}

#[test]
fn a_tampered_image_is_refused_with_exit_6_and_nothing_is_installed() {
    let n = DirNode::new(&flatcar_os_release("3815.2.0")).unwrap();
    let good = image("v1.20.2");
    n.mirror.publish(&[("v1.20.2", &good)]).unwrap();
    let mut bad = good.clone();
    bad[4096] ^= 0xff;
    n.mirror.server.put(&n.mirror.image_path("v1.20.2"), bad);
    let out = n.ensure("v1.20.2");
    let err = stderr(&out);
    assert_eq!(code(&out), 6, "{err}");
    assert!(err.contains("sha256 is"), "{err}");
    assert!(err.contains("nothing was installed"), "{err}");
    nothing_installed(&n);
}

#[test]
fn tampered_signed_metadata_is_refused_with_exit_6() {
    let n = DirNode::new(&flatcar_os_release("3815.2.0")).unwrap();
    n.mirror.publish(&[("v1.20.2", &image("v1.20.2"))]).unwrap();
    let path = "/mirror/streams/v1/com.node-bootstrap-artifacts.sjson";
    let text = String::from_utf8(n.mirror.server.get(path).unwrap()).unwrap();
    n.mirror
        .server
        .put(path, text.replace("v1.20.2", "v1.20.9").into_bytes());
    let out = n.ensure("v1.20.2");
    let err = stderr(&out);
    assert_eq!(code(&out), 6, "{err}");
    assert!(err.contains("signed metadata rejected"), "{err}");
    nothing_installed(&n);
}

#[test]
fn kubelet_choose_says_what_a_mirror_of_two_versions_gives_each_cluster() {
    let n = DirNode::new(&flatcar_os_release("3815.2.0")).unwrap();
    n.mirror
        .publish(&[
            ("v1.20.2", &image("v1.20.2")),
            ("v1.21.1", &image("v1.21.1")),
        ])
        .unwrap();
    let choose = |cluster: &str| {
        let out = testkit::cli::agent_command()
            .arg("--config")
            .arg(n.config_path())
            .args(["kubelet", "choose", "--cluster-version", cluster, "--json"])
            .output()
            .unwrap();
        (code(&out), testkit::cli::json_stdout(&out))
    };
    for (cluster, version, rule) in [
        ("v1.21.1", "v1.21.1", "exact"),
        ("v1.21.4", "v1.21.1", "newest-patch"),
        ("v1.20.2", "v1.20.2", "exact"),
    ] {
        let (c, v) = choose(cluster);
        assert_eq!(c, 0, "{cluster}: {v}");
        assert_eq!(
            (v["version"].as_str(), v["rule"].as_str()),
            (Some(version), Some(rule)),
            "{cluster}"
        );
        assert_eq!(v["signed"], true);
        assert_eq!(v["offered"], serde_json::json!(["v1.20.2", "v1.21.1"]));
    }
    // 1.21.0 is older than every 1.21 offered, 1.22 has none: refused.
    for cluster in ["v1.21.0", "v1.22.0"] {
        let out = n.ensure(cluster);
        assert_eq!(code(&out), 7, "{cluster}: {}", stderr(&out));
    }
    nothing_installed(&n);
}
