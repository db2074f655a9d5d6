//! The systemd-sysext backend on a node laid out in a temp dir: the same
//! signed manifest and sha512 rules, `/etc/extensions/docker.raw`, masks of
//! Flatcar's built-in extensions, `systemd-sysext.service` enabled, and the
//! reboot answer before and after a (simulated) boot merged the image.
//! The real merge by systemd-sysext is covered on the simulated node
//! (`addon_node.rs`).

use node_bootstrap::addon::{self, AddonRequest};
use node_bootstrap::config::Config;
use node_bootstrap::error::ErrorClass;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use testkit::torcx_fixtures::{AddonRig, PkgEntry, filler, runtime_mappings_yaml};

const OS: &str = "3815.2.0";

fn rig() -> (AddonRig, Vec<u8>) {
    let rig = AddonRig::new(OS);
    rig.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        runtime_mappings_yaml("1.9", &["24.0", "20.10"]),
    );
    let image = filler("docker-24.0.9.raw", 300 * 1024);
    let p = format!("/sysext/{}/docker-24.0.9-x86-64.raw", rig.board);
    rig.server.put(&p, image.clone());
    rig.publish_manifest(OS, &[PkgEntry::new("24.0.9", &image, &rig.server.url(&p))]);
    (rig, image)
}

fn config(rig: &AddonRig) -> Config {
    Config::from_json(
        &rig.config_json(json!({"backend": "sysext"})),
        Path::new("/etc/node-bootstrap/config.json"),
    )
    .unwrap()
}

fn req() -> AddonRequest {
    AddonRequest {
        cluster_version: "v1.9.6+coreos.0".into(),
        next_os_version: None,
    }
}

/// A new boot: a new boot id, and systemd-sysext merged docker.raw.
fn reboot(rig: &AddonRig, release: &str) {
    std::fs::remove_file(rig.path("/run/node-bootstrap/boot-id")).unwrap();
    rig.write(
        "/usr/lib/extension-release.d/extension-release.docker",
        release,
    );
}

#[tokio::test]
async fn sysext_image_installed_masked_enabled_and_reboot_only_when_it_changes() {
    let (rig, image) = rig();
    let c = config(&rig);
    let out = addon::ensure(&c.addon_inputs(), &req()).await.unwrap();

    let raw = rig.path("/etc/extensions/docker.raw");
    assert_eq!(std::fs::read(&raw).unwrap(), image);
    assert_eq!(
        std::fs::metadata(&raw).unwrap().permissions().mode() & 0o777,
        0o644
    );
    for masked in ["docker-flatcar.raw", "containerd-flatcar.raw"] {
        assert_eq!(
            std::fs::read_link(rig.path(&format!("/etc/extensions/{masked}"))).unwrap(),
            Path::new("/dev/null"),
            "{masked}"
        );
    }
    assert_eq!(
        rig.files_in("/etc/extensions"),
        ["containerd-flatcar.raw", "docker-flatcar.raw", "docker.raw"]
    );
    let wants = rig.path("/etc/systemd/system/sysinit.target.wants/systemd-sysext.service");
    assert!(
        std::fs::read_link(&wants)
            .unwrap()
            .ends_with("systemd/system/systemd-sysext.service")
    );
    assert_eq!(out.docker_next, "24.0.9");
    assert_eq!(out.docker_running, None);
    assert!(out.reboot_needed && out.wipe_docker_datadir);
    assert_eq!(out.installed.len(), 5, "{:?}", out.installed);
    assert!(!addon::confirm_active(&c.addon_inputs(), &out).unwrap());

    // Same boot, again: nothing written, still a reboot away.
    let again = addon::ensure(&c.addon_inputs(), &req()).await.unwrap();
    assert!(again.installed.is_empty(), "{:?}", again.installed);
    assert!(again.reboot_needed);
    assert_eq!(
        rig.server
            .requests()
            .iter()
            .filter(|r| r.path.ends_with(".raw"))
            .count(),
        1
    );

    // The boot merged it (a release file without a version: the agent's
    // record of what it installed in the previous boot tells).
    reboot(&rig, "ID=flatcar\nSYSEXT_LEVEL=1.0\n");
    assert!(addon::confirm_active(&c.addon_inputs(), &out).unwrap());
    let after = addon::ensure(&c.addon_inputs(), &req()).await.unwrap();
    assert_eq!(after.docker_running.as_deref(), Some("24.0.9"));
    assert_eq!(
        after.docker_running_source.as_deref(),
        Some("sysext-record")
    );
    assert!(!after.reboot_needed && after.installed.is_empty());
}

#[tokio::test]
async fn sysext_already_running_that_docker_needs_no_reboot() {
    let (rig, _) = rig();
    rig.write(
        "/usr/lib/extension-release.d/extension-release.docker",
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nSYSEXT_VERSION_ID=24.0.9\n",
    );
    let out = addon::ensure(&config(&rig).addon_inputs(), &req())
        .await
        .unwrap();
    assert_eq!(out.docker_running.as_deref(), Some("24.0.9"));
    assert_eq!(out.docker_running_source.as_deref(), Some("sysext-release"));
    assert!(!out.reboot_needed && !out.wipe_docker_datadir);
    assert!(rig.exists("/etc/extensions/docker.raw"));
}

#[tokio::test]
async fn sysext_upgrade_replaces_the_image_and_wipes_across_minors() {
    let (rig, image) = rig();
    rig.write("/etc/extensions/docker.raw", b"the old 23.0 image");
    rig.write(
        "/usr/lib/extension-release.d/extension-release.docker",
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nSYSEXT_VERSION_ID=23.0.6\n",
    );
    let out = addon::ensure(&config(&rig).addon_inputs(), &req())
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(rig.path("/etc/extensions/docker.raw")).unwrap(),
        image
    );
    assert_eq!(out.docker_running.as_deref(), Some("23.0.6"));
    assert!(out.reboot_needed && out.wipe_docker_datadir);
}

#[tokio::test]
async fn sysext_tampered_image_installs_nothing() {
    let (rig, _) = rig();
    let p = format!("/sysext/{}/docker-24.0.9-x86-64.raw", rig.board);
    rig.server.put(&p, filler("evil", 300 * 1024));
    let err = addon::ensure(&config(&rig).addon_inputs(), &req())
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Verification);
    assert!(
        err.to_string().starts_with(&format!(
            "package {} does not match the manifest: sha512 is ",
            rig.server.url(&p)
        )),
        "{err}"
    );
    assert_eq!(rig.files_in("/etc/extensions"), Vec::<String>::new());
    assert!(!rig.exists("/etc/systemd/system/sysinit.target.wants"));
    assert!(!rig.exists("/var/lib/node-bootstrap/addon-sysext.json"));
}
