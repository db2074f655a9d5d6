//! The kubelet-sysext step's checks of an image before it is installed,
//! as systemd-sysext would check it: the agent mounts the image read-only
//! in a mount namespace of its own (root), reads its extension-release
//! against the node's os-release, and runs its `usr/bin/kubelet --version`.
//! `node-bootstrap kubelet ensure` on a node laid out in a temp dir; the
//! agent asks systemd for a merge over a system bus that does not exist
//! there (and a `systemd-sysext` guard on its PATH), so nothing that gets
//! as far as a merge reaches this host (the merge itself: `tests/node/kubelet_sysext_node.rs`).
//! The release rules themselves are held against the real systemd-sysext
//! (`--root` merges in a private mount namespace), pair by pair.

use testkit::cli::{code, stderr};
use testkit::kubelet_sysext::{
    DirNode, Kubelet, fake_kubelet, flatcar_os_release, kubelet_image, release,
};
use testkit::torcx_fixtures::sysext_image_of;

fn skip() -> bool {
    testkit::skip_unless_root("the image check mounts the image, as systemd-sysext does")
        || testkit::skip_without(&["mkfs.ext4", "mount"])
}

/// The node's images dir and extensions dir, hidden files included.
fn nothing_installed(n: &DirNode) {
    assert_eq!(n.installed(), (vec![], vec![]), "nothing may be installed");
}

/// Runs `ensure` for v1.20.2 against a mirror holding only `image` as
/// v1.20.2; returns the exit code and stderr.
fn ensure_with(image: &[u8]) -> (DirNode, i32, String) {
    let n = DirNode::new(&flatcar_os_release("3815.2.0")).unwrap();
    n.mirror.publish(&[("v1.20.2", image)]).unwrap();
    let out = n.ensure("v1.20.2");
    (n, code(&out), stderr(&out))
}

#[test]
fn an_image_for_another_os_release_is_refused_with_exit_5_and_nothing_is_installed() {
    if skip() {
        return;
    }
    for (ext, why) in [
        (
            release("flatcar", "2.0"),
            "it is for SYSEXT_LEVEL=2.0, this node has SYSEXT_LEVEL=1.0",
        ),
        (
            release("fedora", "1.0"),
            "it is for OS ID=fedora, this node runs ID=flatcar",
        ),
        (
            "ID=flatcar\nVERSION_ID=3760.2.0\n".to_string(),
            "it is for VERSION_ID=3760.2.0, this node runs VERSION_ID=3815.2.0",
        ),
    ] {
        let img = kubelet_image(Kubelet::Bytes(&fake_kubelet("v1.20.2")), &ext).unwrap();
        let (n, code, err) = ensure_with(&img);
        assert_eq!(code, 5, "{ext:?}: {err}");
        assert!(err.contains("is not for this node"), "{err}");
        assert!(err.contains(why), "{ext:?}: {err}");
        assert!(err.contains("kubelet v1.20.2 was not installed"), "{err}");
        nothing_installed(&n);
    }
}

#[test]
fn an_image_without_a_kubelet_or_with_another_kubelet_is_refused_with_exit_5() {
    if skip() {
        return;
    }
    let no_kubelet = sysext_image_of(
        "kubernetes",
        &[("usr/bin/kubectl", b"#!/bin/sh\n", 0o755)],
        &release("flatcar", "1.0"),
    )
    .unwrap();
    let (n, code, err) = ensure_with(&no_kubelet);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("has no /usr/bin/kubelet: it is not a kubelet image"),
        "{err}"
    );
    nothing_installed(&n);

    // Published as v1.20.2, but its kubelet is a v1.21.0.
    let mislabelled = kubelet_image(
        Kubelet::Bytes(&fake_kubelet("v1.21.0")),
        &release("flatcar", "1.0"),
    )
    .unwrap();
    let (n, code, err) = ensure_with(&mislabelled);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("its kubelet says \"Kubernetes v1.21.0\", the metadata lists it as v1.20.2"),
        "{err}"
    );
    nothing_installed(&n);

    // An image named for another extension: systemd-sysext would not merge
    // it as kubernetes.raw.
    let other = sysext_image_of(
        "k8s",
        &[("usr/bin/kubelet", &fake_kubelet("v1.20.2"), 0o755)],
        &release("flatcar", "1.0"),
    )
    .unwrap();
    let (n, code, err) = ensure_with(&other);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("has no /usr/lib/extension-release.d/extension-release.kubernetes"),
        "{err}"
    );
    nothing_installed(&n);
}

#[test]
fn a_good_image_passes_the_checks_and_is_in_place_before_the_merge() {
    if skip() {
        return;
    }
    let img = kubelet_image(
        Kubelet::Bytes(&fake_kubelet("v1.20.2")),
        &release("_any", "1.0"),
    )
    .unwrap();
    let (n, code, err) = ensure_with(&img);
    // The checks passed, the image is linked, and then the agent asked
    // systemd for the merge, over a system bus that does not exist here.
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!(
            "cannot connect to the system bus at {}",
            n.no_system_bus()
        )),
        "{err}"
    );
    assert_eq!(
        n.installed(),
        (
            vec!["kubernetes-v1.20.2-x86-64.raw".to_string()],
            vec!["kubernetes.raw".to_string()]
        )
    );
    assert_eq!(
        std::fs::read_link(n.path("/etc/extensions/kubernetes.raw")).unwrap(),
        n.path("/opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw")
    );
    assert_eq!(
        std::fs::read(n.path("/opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw")).unwrap(),
        img
    );
    // The check left no mount point behind.
    assert_eq!(
        testkit::files::names(&n.path("/run/node-bootstrap")),
        Vec::<String>::new()
    );
}

/// Whether the real systemd-sysext merges an extension whose release file
/// is `ext` on a root whose os-release is `host`: `systemd-sysext
/// --root=<dir> merge` in a mount namespace of its own (with a /run of its
/// own, so nothing of the merge outlives the command or reaches the host).
fn real_sysext_merges(host: &str, ext: &str) -> bool {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let release_dir = r.join("var/lib/extensions/kubernetes/usr/lib/extension-release.d");
    std::fs::create_dir_all(&release_dir).unwrap();
    std::fs::create_dir_all(r.join("usr/lib")).unwrap();
    std::fs::write(r.join("usr/lib/os-release"), host).unwrap();
    std::fs::write(release_dir.join("extension-release.kubernetes"), ext).unwrap();
    let out = std::process::Command::new("unshare")
        .args(["--mount", "sh", "-c"])
        .arg(
            "mount --make-rprivate / && mount -t tmpfs tmpfs /run && \
             exec systemd-sysext --root=\"$1\" merge",
        )
        .args(["sh", r.to_str().unwrap()])
        .env("SYSTEMD_LOG_LEVEL", "debug")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let merged = said.contains("Using extensions 'kubernetes'.");
    let refused = said.contains("No suitable extensions found");
    assert!(
        merged != refused && out.status.success(),
        "systemd-sysext gave no clear answer for {host:?} / {ext:?} ({}): {said}",
        out.status
    );
    merged
}

/// The agent's check refuses exactly the images the real systemd-sysext
/// (Debian 12's, 252, the same as the simulated node's) would skip, for
/// every pairing of these hosts and release files.
#[test]
fn the_release_checks_agree_with_the_real_systemd_sysext() {
    if testkit::skip_unless_root("systemd-sysext merges in a mount namespace of its own")
        || testkit::skip_without(&["systemd-sysext", "unshare"])
    {
        return;
    }
    let hosts = [
        "ID=flatcar\nVERSION_ID=3815.2.0\nSYSEXT_LEVEL=1.0\n",
        "ID=flatcar\nVERSION_ID=3815.2.0\n",
        "ID=flatcar\nSYSEXT_LEVEL=1.0\n",
        "ID=arch\n",
    ];
    let exts = [
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=x86-64\n",
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=_any\n",
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=arm64\n",
        "ID=flatcar\nSYSEXT_LEVEL=2.0\n",
        "ID=flatcar\nVERSION_ID=3815.2.0\n",
        "ID=flatcar\nVERSION_ID=3760.2.0\n",
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nVERSION_ID=3760.2.0\n",
        "ID=flatcar\n",
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nSYSEXT_SCOPE=portable\n",
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nSYSEXT_SCOPE=initrd system\n",
        "ID=_any\n",
        "ID=_any\nARCHITECTURE=arm64\n",
        "ID=_any\nSYSEXT_SCOPE=initrd\n",
        "ID=fedora\nSYSEXT_LEVEL=1.0\n",
        "ID=arch\nVERSION_ID=1\n",
        "VERSION_ID=3815.2.0\n",
    ];
    let parse = node_bootstrap::osrelease::parse_env;
    let arch = node_bootstrap::sysext::image::systemd_arch().unwrap();
    let mut disagree = vec![];
    let (mut merged, mut refused) = (0, 0);
    for host in hosts {
        for ext in exts {
            let real = real_sysext_merges(host, ext);
            if real {
                merged += 1;
            } else {
                refused += 1;
            }
            let ours = node_bootstrap::sysext::image::compatible(&parse(host), &parse(ext), arch);
            if ours.is_ok() != real {
                disagree.push(format!(
                    "host {host:?}, image {ext:?}: systemd-sysext {}, the agent {ours:?}",
                    if real { "merges" } else { "skips" }
                ));
            }
        }
    }
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
    // Both answers occur, so the comparison compared something.
    assert!(
        merged >= 10 && refused >= 10,
        "{merged} merged, {refused} refused"
    );
}
