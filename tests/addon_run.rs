//! The docker addon phase inside `node-bootstrap run` on the simulated node:
//! k8s-node-bootstrap.service runs the real agent, torcx's generator
//! stand-in applies the profile at each boot, packages come from a local
//! HTTP server.
//!
//! - a fresh node gets the package, profile and next-profile, reboots once
//!   with the docker datadir cleanup unit (docker's datadir is gone after
//!   the reboot), confirms docker 17.03 runs, and kubelet starts;
//! - a node already running that docker gets no reboot;
//! - a tampered package stops the bootstrap with exit 6 and leaves store,
//!   profile and kubelet.env untouched.

use serde_json::{Value, json};
use std::time::Duration;
use testkit::agentnode::{AgentNode, kubelet_starts, state_journal, wait_kubelet_starts};
use testkit::simnode::{SimNode, skip_unless_possible};
use testkit::torcx_fixtures::{AddonRig, docker_archive, runtime_mappings_yaml};

const OS: &str = "1632.3.0";
const STORE: &str = "/var/lib/torcx/store/1632.3.0";
const T: Duration = Duration::from_secs(90);

/// An agent node with the addon enabled against the rig's server, the
/// real torcx generator, and the OS image's vendor docker `vendor_docker`.
fn node(name: &str, rig: &AddonRig, vendor_docker: &str) -> SimNode {
    let full: Value = serde_json::from_str(&rig.config_json_for_root("", json!({}))).unwrap();
    let n = AgentNode::new(name)
        .config(json!({"addon": full["addon"]}))
        // The first master: its cluster version comes from the seed
        // kubelet.env, no API server needed for these tests.
        .bootkube_master()
        .seed("KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n")
        .build()
        .unwrap();
    n.write(
        testkit::agentnode::OS_RELEASE,
        testkit::torcx_fixtures::os_release(OS, &rig.board),
        0o644,
    )
    .unwrap();
    testkit::torcx::install_generator(&n).unwrap();
    n.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        runtime_mappings_yaml("1.9", &["17.03", "1.12"]),
        0o644,
    )
    .unwrap();
    n.write(
        "/etc/kubernetes/installer/keyring.asc",
        rig.key.public_armored(),
        0o644,
    )
    .unwrap();
    n.write(
        "/usr/share/torcx/profiles/vendor.json",
        format!(r#"{{"kind":"profile-manifest-v0","value":{{"images":[{{"name":"docker","reference":"{vendor_docker}"}}]}}}}"#),
        0o644,
    )
    .unwrap();
    n.write(
        &format!("/usr/share/torcx/store/docker:{vendor_docker}.torcx.tgz"),
        docker_archive(&format!("{vendor_docker}.2")),
        0o644,
    )
    .unwrap();
    // Docker's datadir from the first boot's vendor docker.
    n.write("/var/lib/docker/image/marker", "old docker data\n", 0o644)
        .unwrap();
    n
}

fn publish(rig: &AddonRig) -> Vec<u8> {
    let d1703 = docker_archive("17.03.2");
    let e112 = rig.publish_package("1.12", &docker_archive("1.12.2"));
    let e1703 = rig.publish_package("17.03", &d1703);
    rig.publish_manifest(OS, &[e112, e1703]);
    d1703
}

fn torcx_docker(n: &SimNode) -> String {
    let out = n.exec(&["/run/torcx/bin/docker", "--version"]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn run_installs_docker_reboots_once_wiping_its_datadir_and_starts_kubelet() {
    if skip_unless_possible(
        "run_installs_docker_reboots_once_wiping_its_datadir_and_starts_kubelet",
    ) {
        return;
    }
    let rig = AddonRig::new(OS);
    let d1703 = publish(&rig);
    let mut n = node("addon-run-fresh", &rig, "1.12");
    n.boot().unwrap();
    // Boot 1 ends in the agent's reboot.
    assert_eq!(
        n.wait_down(T).unwrap(),
        testkit::simnode::BootEnd::Reboot,
        "the agent should reboot for the docker change"
    );
    assert_eq!(
        std::fs::read(n.path(&format!("{STORE}/docker:17.03.torcx.tgz"))).unwrap(),
        d1703
    );
    assert_eq!(n.read("/etc/torcx/next-profile").unwrap(), "tectonic\n");
    assert!(!n.exists("/etc/kubernetes/kubelet.env"));
    assert!(
        !n.exists("/var/lib/docker/image/marker"),
        "the docker datadir cleanup unit wiped the old datadir on the way down"
    );

    // Boot 2: torcx applies docker 17.03, the agent confirms it and
    // writes kubelet.env; kubelet starts.
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert!(torcx_docker(&n).contains("17.03.2"), "{}", torcx_docker(&n));
    let j = state_journal(&n).unwrap();
    let addon = &j["steps"]["docker-addon"]["result"];
    assert_eq!(addon["docker_next"], "17.03");
    assert_eq!(addon["docker_running"], "1.12");
    assert!(addon["confirmed_in_boot"].is_string(), "{addon}");
    assert_eq!(wait_kubelet_starts(&n, 1).len(), 1);
    assert_eq!(
        rig.server
            .requests_for(&rig.package_path("17.03", &d1703))
            .len(),
        1
    );
    n.shutdown().unwrap();
}

#[test]
fn run_on_a_node_already_running_that_docker_does_not_reboot() {
    if skip_unless_possible("run_on_a_node_already_running_that_docker_does_not_reboot") {
        return;
    }
    let rig = AddonRig::new(OS);
    publish(&rig);
    let mut n = node("addon-run-same", &rig, "17.03");
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert_eq!(n.boots(), 1, "no reboot");
    let j = state_journal(&n).unwrap();
    assert_eq!(j["steps"]["docker-addon"]["result"]["reboot_needed"], false);
    assert!(
        n.exists("/var/lib/docker/image/marker"),
        "docker's data kept"
    );
    assert_eq!(wait_kubelet_starts(&n, 1).len(), 1);
    n.shutdown().unwrap();
}

#[test]
fn run_with_a_tampered_package_stops_with_a_verification_error() {
    if skip_unless_possible("run_with_a_tampered_package_stops_with_a_verification_error") {
        return;
    }
    let rig = AddonRig::new(OS);
    let d1703 = publish(&rig);
    rig.server.put(
        &rig.package_path("17.03", &d1703),
        docker_archive("17.03-backdoored"),
    );
    let mut n = node("addon-run-tampered", &rig, "1.12");
    n.boot().unwrap();
    n.wait_for("the bootstrap to fail", T, |n| {
        let j = state_journal(n)?;
        (j["steps"]["docker-addon"]["status"] == "failed").then_some(j)
    })
    .unwrap();
    let j = state_journal(&n).unwrap();
    let rec = &j["steps"]["docker-addon"];
    assert_eq!(rec["error_class"], "verification");
    assert!(
        rec["error"]
            .as_str()
            .unwrap()
            .contains("does not match the manifest: sha512 is"),
        "{rec}"
    );
    assert_eq!(
        std::fs::read_dir(n.path("/var/lib/torcx/store"))
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
    assert!(!n.exists("/etc/torcx/next-profile"));
    assert!(!n.exists("/etc/kubernetes/kubelet.env"));
    assert!(kubelet_starts(&n).is_empty());
    assert_eq!(n.boots(), 1);
    n.shutdown().unwrap();
}

#[test]
fn run_killed_during_the_download_leaves_no_final_file_and_the_restart_completes() {
    if skip_unless_possible(
        "run_killed_during_the_download_leaves_no_final_file_and_the_restart_completes",
    ) {
        return;
    }
    let rig = AddonRig::new(OS);
    let d1703 = publish(&rig);
    let pkg = rig.package_path("17.03", &d1703);
    rig.server.set_rate(&pkg, Some(d1703.len() as u64 / 8));
    let mut n = node("addon-run-kill", &rig, "1.12");
    n.boot().unwrap();
    let partial = format!(
        "{STORE}/.docker:17.03.torcx.tgz.part-{}",
        &testkit::torcx_fixtures::manifest_hash(&d1703)[7..23]
    );
    n.wait_for("the download to be under way", T, |n| {
        (std::fs::metadata(n.path(&partial)).ok()?.len() > 20_000).then_some(())
    })
    .unwrap();
    // kill -9 of the agent (the unit's main process).
    n.systemctl(&[
        "kill",
        "--kill-who=main",
        "-s",
        "KILL",
        "k8s-node-bootstrap.service",
    ])
    .unwrap();
    // Killed half-way: nothing under a final name, nothing activated.
    assert!(!n.exists(&format!("{STORE}/docker:17.03.torcx.tgz")));
    assert!(!n.exists("/etc/torcx/next-profile"));
    rig.server.set_rate(&pkg, None);

    // systemd restarts the unit; the run resumes the download, reboots
    // once, and the next boot starts kubelet with docker 17.03.
    assert_eq!(n.wait_down(T).unwrap(), testkit::simnode::BootEnd::Reboot);
    assert_eq!(
        std::fs::read(n.path(&format!("{STORE}/docker:17.03.torcx.tgz"))).unwrap(),
        d1703
    );
    let ranges: Vec<Option<String>> = rig
        .server
        .requests_for(&pkg)
        .into_iter()
        .map(|r| r.range)
        .collect();
    assert_eq!(ranges.len(), 2, "{ranges:?}");
    assert!(
        ranges[1]
            .as_deref()
            .is_some_and(|r| r.starts_with("bytes=")),
        "resumed: {ranges:?}"
    );
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert!(torcx_docker(&n).contains("17.03.2"), "{}", torcx_docker(&n));
    n.shutdown().unwrap();
}
