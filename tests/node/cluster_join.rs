//! Nodes join a real Kubernetes cluster (testkit::cluster): the bootkube
//! master's first boot brings up etcd and kube-apiserver (bootkube), then
//! applies the first manifests (tectonic); the workers' agents learn the
//! cluster's version from that API server, put the docker the runtime
//! mappings want in place through the addon (the real torcx), reboot once,
//! write kubelet.env; the real kubelet of that version, run by
//! kubelet-wrapper from the image kubelet.env names, registers its Node on
//! that docker, and every Node is Ready.

use std::time::{Duration, Instant};
use testkit::cluster::{Auth, ClusterRig, NodeSpec, node_docker};
use testkit::simnode::{BootEnd, SimNode};

const KNB: &str = "k8s-node-bootstrap.service";
/// A node's first boot through its reboot to a running kubelet.
const BOOT: Duration = Duration::from_secs(240);

fn skip() -> bool {
    testkit::kube::skip_unless_available()
        || testkit::torcx::skip_unless_available()
        || testkit::skip_without(&["terraform"])
}

/// Boots `n`, expects the agent's reboot for the docker change, boots it
/// again and waits for kubelet to run.
fn first_boot_with_docker_reboot(n: &mut SimNode, timeout: Duration) {
    n.boot().unwrap();
    assert_eq!(
        n.wait_down(timeout).unwrap(),
        BootEnd::Reboot,
        "{}: the agent reboots once for the docker change",
        n.name()
    );
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", BOOT)
        .unwrap();
}

#[test]
fn a_bootkube_master_and_two_workers_form_a_cluster_on_the_addons_docker() {
    if skip() {
        return;
    }
    let t0 = Instant::now();
    let rig = ClusterRig::new(&[
        NodeSpec::master("master-1"),
        NodeSpec::worker("worker-1", Auth::Cert),
        NodeSpec::worker("worker-2", Auth::Token("worker-2-token".into())),
    ])
    .unwrap();
    let mut nodes = rig.nodes().unwrap();
    eprintln!("rig and nodes ready after {:?}", t0.elapsed());
    let version = rig.parts.version.clone();
    std::thread::scope(|s| {
        let (master, workers) = nodes.split_first_mut().unwrap();
        let rig = &rig;
        s.spawn(move || {
            rig.push_assets(master).unwrap();
            first_boot_with_docker_reboot(master, BOOT);
            master
                .wait_for("bootkube and tectonic to complete", BOOT, |n| {
                    (n.exists("/opt/tectonic/init_bootkube.done")
                        && n.exists("/opt/tectonic/init_tectonic.done"))
                    .then_some(())
                })
                .unwrap();
        });
        for w in workers {
            s.spawn(move || first_boot_with_docker_reboot(w, BOOT));
        }
    });
    eprintln!("all nodes run kubelet after {:?}", t0.elapsed());
    let ready = rig
        .kubectl
        .wait_ready(&["master-1", "worker-1", "worker-2"], BOOT)
        .unwrap();
    eprintln!("all nodes Ready after {:?}", t0.elapsed());
    for n in &nodes {
        let info = ready.iter().find(|i| i.name == n.name()).unwrap();
        let (docker_version, docker_exe) = node_docker(n).unwrap();
        assert_eq!(info.kubelet_version, version, "{}", n.name());
        assert_eq!(
            info.container_runtime_version,
            format!("docker://{docker_version}"),
            "{}",
            n.name()
        );
        assert_eq!(docker_version, rig.docker.version, "{}", n.name());
        assert_eq!(
            docker_exe,
            "/run/torcx/unpack/docker/bin/dockerd",
            "{}",
            n.name()
        );
        assert_eq!(n.prop(KNB, "Result").unwrap(), "success", "{}", n.name());
    }
}
