//! The CRI probe (`container_runtime::cri::ask`) against a real containerd
//! (Debian's 1.6.20, CRI plugin built in): what it says of itself and
//! which CRI APIs it serves, as the kubelet would learn it; a containerd
//! without its CRI plugin, a socket nobody serves and a socket that is
//! not gRPC, each named.

use node_bootstrap::container_runtime::cri::{self, CriApi};
use node_bootstrap::error::ErrorClass;
use std::time::Duration;
use testkit::containerd::{self, PrivateContainerd};

const WITHIN: Duration = Duration::from_secs(10);

#[test]
fn containerd_answers_with_its_version_on_both_cri_apis() {
    if containerd::skip_unless_possible() {
        return;
    }
    let ctr = PrivateContainerd::start(
        r#"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
[plugins."io.containerd.grpc.v1.cri".cni]
  conf_dir = "/etc/kubernetes/cni/net.d"
"#,
    )
    .unwrap();
    let answer = testkit::runtime()
        .block_on(cri::ask(&ctr.socket(), WITHIN))
        .unwrap_or_else(|e| panic!("{e}\n{}", ctr.log()));
    assert_eq!(answer.version.runtime_name, "containerd");
    assert_eq!(
        answer.version.runtime_version,
        containerd::version().unwrap()
    );
    assert_eq!(
        answer.apis,
        [CriApi::V1, CriApi::V1alpha2],
        "containerd 1.6 serves both"
    );
    assert_eq!(answer.version.runtime_api_version, "v1");
    assert_eq!(
        answer.version.as_node_reports(),
        format!("containerd://{}", containerd::version().unwrap())
    );
    // What its verbose Status says it runs with: the config it was given.
    let seen = answer.config.expect("containerd's CRI reports its config");
    assert_eq!(seen.systemd_cgroup, Some(true));
    assert_eq!(
        seen.sandbox_image.as_deref(),
        Some("registry.k8s.io/pause:3.10")
    );
    assert_eq!(seen.snapshotter.as_deref(), Some("native"));
    assert_eq!(
        seen.cni_conf_dir.as_deref(),
        Some("/etc/kubernetes/cni/net.d")
    );
}

#[test]
fn containerd_reports_cgroupfs_when_its_runc_is_not_told_systemd() {
    if containerd::skip_unless_possible() {
        return;
    }
    let ctr = PrivateContainerd::start("").unwrap();
    let answer = testkit::runtime()
        .block_on(cri::ask(&ctr.socket(), WITHIN))
        .unwrap_or_else(|e| panic!("{e}\n{}", ctr.log()));
    let seen = answer.config.expect("containerd's CRI reports its config");
    assert_ne!(seen.systemd_cgroup, Some(true), "{seen:?}");
    assert_eq!(seen.snapshotter.as_deref(), Some("overlayfs"));
}

#[test]
fn a_containerd_without_cri_is_refused_by_name() {
    if containerd::skip_unless_possible() {
        return;
    }
    let ctr =
        PrivateContainerd::start("disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n").unwrap();
    let err = testkit::runtime()
        .block_on(cri::ask(&ctr.socket(), WITHIN))
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Refused, "{err}");
    let text = err.to_string();
    assert!(text.contains(&ctr.socket().display().to_string()), "{text}");
    assert!(text.contains("serves no CRI API"), "{text}");
}

#[test]
fn a_socket_without_a_runtime_is_retryable_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("containerd.sock");
    let err = testkit::runtime()
        .block_on(cri::ask(&socket, WITHIN))
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable, "{err}");
    assert!(
        err.to_string().contains(&socket.display().to_string()),
        "{err}"
    );

    // Something listens, but speaks no HTTP/2: it closes at once.
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let closer = std::thread::spawn(move || {
        for conn in listener.incoming().take(1) {
            drop(conn);
        }
    });
    let err = testkit::runtime()
        .block_on(cri::ask(&socket, WITHIN))
        .unwrap_err();
    closer.join().unwrap();
    assert_eq!(err.class(), ErrorClass::Retryable, "{err}");
    assert!(
        err.to_string().contains(&socket.display().to_string()),
        "{err}"
    );
}
