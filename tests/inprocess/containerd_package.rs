//! Where containerd comes from (`node-bootstrap containerd choose`, the
//! first part of the `containerd` step): the OS's containerd held to the
//! runtime mappings' containerd list for the cluster, else a containerd
//! system extension chosen from a real signed mirror (images published
//! with the agent's own `metadata generate --sign-key`), on a node laid
//! out in a temp dir whose OS containerd is a stand-in answering
//! `--version` as containerd does, or absent. Nothing is installed,
//! downloaded or merged by a choice (a `systemd-sysext` guard on the
//! agent's PATH fails the test if it were run). The install and merge:
//! `tests/node/containerd_package_node.rs`.

use serde_json::json;
use testkit::cli::{code, json_stdout, stderr};
use testkit::containerd_sysext::{PRODUCT, fake_containerd, fake_image, flatcar_release};
use testkit::kubelet_sysext::{DirNode, ExtensionMirror, flatcar_os_release};

/// A Flatcar node with a containerd mirror offering `versions` (stand-ins)
/// and the runtime mappings `mappings` (none: no file).
fn node(versions: &[&str], mappings: Option<&str>) -> DirNode {
    let n = DirNode::with_mirror(
        &flatcar_os_release("3815.2.0"),
        ExtensionMirror::of(PRODUCT).unwrap(),
    )
    .unwrap();
    let images: Vec<(String, Vec<u8>)> = versions
        .iter()
        .map(|v| (v.to_string(), fake_image(v, &flatcar_release()).unwrap()))
        .collect();
    let refs: Vec<(&str, &[u8])> = images
        .iter()
        .map(|(v, b)| (v.as_str(), b.as_slice()))
        .collect();
    n.mirror.publish(&refs).unwrap();
    if let Some(m) = mappings {
        testkit::torcx_fixtures::write(
            &n.path("/etc/kubernetes/installer/runtime-mappings.yaml"),
            m,
        )
        .unwrap();
    }
    n
}

/// The OS's containerd: a stand-in answering `--version` as `version`.
fn os_containerd(n: &DirNode, version: &str) {
    let p = n.path("/usr/bin/containerd");
    testkit::torcx_fixtures::write(&p, fake_containerd(version)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Kubernetes 1.26 wants containerd 1.7, then 1.6 (and 1.20 docker).
const MAPPINGS: &str = "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.20\":\n      docker: [\"20.10\"]\n    \"1.26\":\n      containerd: [\"1.7\", \"1.6\"]\n";

const OFFERED: &[&str] = &["1.6.20", "1.7.2", "1.7.13", "2.0.0", "1.7.14-rc.1"];

fn choose(n: &DirNode, cluster: &str) -> std::process::Output {
    n.agent(&[
        "containerd",
        "choose",
        "--cluster-version",
        cluster,
        "--json",
    ])
}

/// Nothing installed, and no image even downloaded (metadata only).
fn nothing_fetched_or_installed(n: &DirNode) {
    assert_eq!(n.installed(), (vec![], vec![]), "nothing may be installed");
    for v in OFFERED {
        assert!(
            n.mirror
                .server
                .requests_for(&n.mirror.image_path(v))
                .is_empty(),
            "{v} was downloaded"
        );
    }
}

#[test]
fn the_oss_containerd_in_the_list_is_kept_and_the_mirror_is_not_asked() {
    let n = node(OFFERED, Some(MAPPINGS));
    os_containerd(&n, "1.6.20~ds1");
    let out = choose(&n, "v1.26.3");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json_stdout(&out);
    assert_eq!(v["from"], "os", "{v:#}");
    assert_eq!(v["containerd"]["version"], "1.6.20~ds1");
    assert_eq!(
        v["containerd"]["binary"],
        n.path("/usr/bin/containerd").display().to_string()
    );
    assert_eq!(v["listed"], json!(["1.7", "1.6"]));
    assert!(
        n.mirror.server.requests().is_empty(),
        "an OS containerd that fits needs no mirror"
    );
    nothing_fetched_or_installed(&n);
}

#[test]
fn flatcar_lts_3033s_containerd_1_5_for_kubernetes_1_26_gives_way_to_the_first_listed_series_offered()
 {
    let n = node(OFFERED, Some(MAPPINGS));
    os_containerd(&n, "1.5.8");
    let out = choose(&n, "v1.26.3");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json_stdout(&out);
    assert_eq!(v["from"], "sysext", "{v:#}");
    // 1.7 first: its newest release, not the release candidate, not 2.0.
    assert_eq!(v["version"], "1.7.13");
    assert_eq!(
        v["why"],
        "the OS's containerd 1.5.8 does not fit: its series 1.5 is not in the runtime mappings' \
         list for Kubernetes 1.26 (1.7, 1.6)"
    );
    assert_eq!(v["signed"], true);
    assert_eq!(
        v["url"],
        n.mirror.server.url(&n.mirror.image_path("1.7.13"))
    );
    let mut offered: Vec<String> = serde_json::from_value(v["offered"].clone()).unwrap();
    offered.sort();
    assert_eq!(
        offered,
        ["1.6.20", "1.7.13", "1.7.14-rc.1", "1.7.2", "2.0.0"]
    );
    // The same node's operator reads it in one line.
    let out = n.agent(&["containerd", "choose", "--cluster-version", "v1.26.3"]);
    let line = testkit::cli::stdout(&out);
    assert!(
        line.starts_with("the OS's containerd 1.5.8 does not fit")
            && line.contains(": containerd 1.7.13 from http://")
            && line.contains("(signed metadata)"),
        "{line}"
    );
    nothing_fetched_or_installed(&n);
}

#[test]
fn a_node_without_containerd_takes_the_listed_order_or_without_a_list_the_newest_its_kubelet_can_use()
 {
    let n = node(OFFERED, Some(MAPPINGS));
    let out = choose(&n, "v1.26.3");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json_stdout(&out);
    assert_eq!(
        (v["from"].as_str(), v["version"].as_str()),
        (Some("sysext"), Some("1.7.13"))
    );
    assert_eq!(
        v["why"],
        format!(
            "the OS has no containerd ({} is absent)",
            n.path("/usr/bin/containerd").display()
        )
    );
    // The list's order is the operator's preference, not the newest
    // first: 1.6 listed before 1.7 takes 1.6's newest release.
    testkit::torcx_fixtures::write(
        &n.path("/etc/kubernetes/installer/runtime-mappings.yaml"),
        MAPPINGS.replace("\"1.7\", \"1.6\"", "\"1.6\", \"1.7\""),
    )
    .unwrap();
    let out = choose(&n, "v1.26.3");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json_stdout(&out);
    assert_eq!(v["version"], "1.6.20", "{v:#}");
    // No mappings file (a node that never runs docker may have none):
    // the newest release that serves the kubelet's CRI.
    std::fs::remove_file(n.path("/etc/kubernetes/installer/runtime-mappings.yaml")).unwrap();
    for (cluster, version) in [("v1.26.3", "2.0.0"), ("v1.22.4", "1.7.13")] {
        let out = choose(&n, cluster);
        assert_eq!(code(&out), 0, "{cluster}: {}", stderr(&out));
        assert_eq!(json_stdout(&out)["version"], version, "{cluster}");
    }
    nothing_fetched_or_installed(&n);
}

#[test]
fn package_none_refuses_with_exit_7_naming_the_oss_containerd_and_the_list() {
    let n = node(OFFERED, Some(MAPPINGS));
    os_containerd(&n, "1.5.8");
    n.configure(json!({"runtime": {"containerd": {"package": "none"}}}))
        .unwrap();
    let out = choose(&n, "v1.26.3");
    let err = stderr(&out);
    assert_eq!(code(&out), 7, "{err}");
    assert!(
        err.contains(
            "the OS's containerd 1.5.8 does not fit: its series 1.5 is not in the runtime \
             mappings' list for Kubernetes 1.26 (1.7, 1.6), and runtime.containerd.package is \
             \"none\""
        ),
        "{err}"
    );
    assert!(n.mirror.server.requests().is_empty());
    nothing_fetched_or_installed(&n);
}

#[test]
fn a_mirror_without_a_listed_series_is_refused_with_exit_7_naming_what_it_offers() {
    let n = node(
        &["1.6.20", "2.0.0"],
        Some(&MAPPINGS.replace("\"1.7\", \"1.6\"", "\"1.7\"")),
    );
    os_containerd(&n, "1.6.20~ds1");
    let out = choose(&n, "v1.26.3");
    let err = stderr(&out);
    assert_eq!(code(&out), 7, "{err}");
    assert!(
        err.contains(
            "the OS's containerd 1.6.20~ds1 does not fit: its series 1.6 is not in the runtime \
             mappings' list for Kubernetes 1.26 (1.7); no containerd package to install instead: \
             no containerd to install: the search path offers 2.0.0, 1.6.20; the runtime mappings \
             list 1.7 for Kubernetes 1.26"
        ),
        "{err}"
    );
    nothing_fetched_or_installed(&n);
}

#[test]
fn mappings_that_list_a_containerd_the_kubelet_cannot_use_are_bad_input_naming_the_file() {
    let n = node(
        OFFERED,
        Some(&MAPPINGS.replace("\"1.7\", \"1.6\"", "\"1.7\", \"1.5\"")),
    );
    let out = choose(&n, "v1.26.3");
    let err = stderr(&out);
    assert_eq!(code(&out), 5, "{err}");
    assert!(
        err.contains(&format!(
            "invalid runtime mappings {}: versions.k8s.\"1.26\".containerd has \"1.5\": the \
             kubelet of Kubernetes 1.26 speaks only CRI v1, which containerd serves from 1.6, not 1.5",
            n.path("/etc/kubernetes/installer/runtime-mappings.yaml").display()
        )),
        "{err}"
    );
    nothing_fetched_or_installed(&n);
}

#[test]
fn tampered_signed_metadata_is_refused_with_exit_6() {
    let n = node(OFFERED, Some(MAPPINGS));
    let path = "/mirror/streams/v1/com.node-bootstrap-artifacts.sjson";
    let text = String::from_utf8(n.mirror.server.get(path).unwrap()).unwrap();
    n.mirror
        .server
        .put(path, text.replace("1.7.13", "1.7.99").into_bytes());
    let out = choose(&n, "v1.26.3");
    let err = stderr(&out);
    assert_eq!(code(&out), 6, "{err}");
    assert!(err.contains("signed metadata rejected"), "{err}");
    nothing_fetched_or_installed(&n);
}
