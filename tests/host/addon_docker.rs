//! "What runs now" from a real Docker daemon through its API (bollard):
//! a private `dockerd` on a socket in a temp dir. When docker is up its
//! answer wins over `/run/torcx/profile.json`; a dead socket falls back to
//! the profile quickly.
//!
//! Needs root and `dockerd` (testkit's private dockerd, scripts/setup.sh
//! installs it): skipped with a reason outside CI, fails under CI=true.

use node_bootstrap::addon::{self, AddonRequest};
use node_bootstrap::config::Config;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};
use testkit::docker::{PrivateDockerd, skip_unless_possible};
use testkit::torcx_fixtures::{AddonRig, docker_archive, runtime_mappings_yaml};

const OS: &str = "1632.3.0";

/// The daemon's version as its API reports it.
fn daemon_version(d: &PrivateDockerd) -> String {
    let (status, body) = d.http("GET", "/version").unwrap();
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["Version"].as_str().unwrap().to_string()
}

fn major_minor(v: &str) -> String {
    let mut it = v.split(['.', '-', '+']);
    format!("{}.{}", it.next().unwrap(), it.next().unwrap())
}

fn config(rig: &AddonRig, socket: &Path) -> Config {
    let mut v: serde_json::Value = serde_json::from_str(&rig.config_json(json!({}))).unwrap();
    v["paths"]["docker_socket"] = json!(socket.display().to_string());
    Config::from_json(&v.to_string(), Path::new("/etc/node-bootstrap/config.json")).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn running_docker_comes_from_the_daemon_when_it_is_up() {
    if skip_unless_possible() {
        return;
    }
    let d = PrivateDockerd::start().unwrap();
    let daemon = daemon_version(&d);
    let mm = major_minor(&daemon);
    let rig = AddonRig::new(OS);
    rig.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        runtime_mappings_yaml("1.9", &[&mm, "1.12"]),
    );
    let e = rig.publish_package(&mm, &docker_archive(&daemon));
    rig.publish_manifest(OS, &[e]);
    // torcx's record says otherwise; the live daemon is the truth.
    rig.set_running_docker("1.12");

    let t0 = Instant::now();
    let out = addon::ensure(
        &config(&rig, &d.socket()).addon_inputs(),
        &AddonRequest {
            cluster_version: "v1.9.6+coreos.0".into(),
            next_os_version: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(out.docker_running.as_deref(), Some(daemon.as_str()));
    assert_eq!(out.docker_running_source.as_deref(), Some("docker-api"));
    assert_eq!(out.docker_next, mm);
    assert!(
        !out.reboot_needed,
        "the daemon already runs {daemon}: {out:?}"
    );
    eprintln!("ensure with a live daemon took {:?}", t0.elapsed());
}

#[tokio::test]
async fn a_dead_docker_socket_falls_back_to_torcx_quickly() {
    if skip_unless_possible() {
        return;
    }
    let rig = AddonRig::new(OS);
    let e = rig.publish_package("17.03", &docker_archive("17.03"));
    rig.publish_manifest(OS, &[e]);
    rig.set_running_docker("1.12");
    // A socket file nobody listens on (docker stopped uncleanly).
    let sock = rig.path("/run/dead-docker.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    drop(l);
    let t0 = Instant::now();
    let out = addon::ensure(
        &config(&rig, &sock).addon_inputs(),
        &AddonRequest {
            cluster_version: "v1.9.6+coreos.0".into(),
            next_os_version: None,
        },
    )
    .await
    .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(out.docker_running.as_deref(), Some("1.12"));
    assert_eq!(
        out.docker_running_source.as_deref(),
        Some("torcx-run-profile")
    );
    assert!(out.reboot_needed);
}
