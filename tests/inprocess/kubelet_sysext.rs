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
