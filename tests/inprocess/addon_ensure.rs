//! The docker addon phase (torcx backend) end to end on a node laid out in
//! a temp dir: real runtime mappings, os-release, a real OpenPGP key and
//! signed manifests, real `.torcx.tgz` archives served by a local HTTP
//! server with injected faults. Each test checks what a user would look at:
//! the store, the profile, next-profile, and the reboot answer.

use node_bootstrap::addon::{self, AddonOutcome, AddonRequest};
use node_bootstrap::config::Config;
use node_bootstrap::error::ErrorClass;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use testkit::pkgserver::Fault;
use testkit::torcx_fixtures::{AddonRig, PkgEntry, SigningKey, docker_archive, manifest_hash};

const OS: &str = "1632.3.0";
const CLUSTER: &str = "v1.9.6+coreos.0";
const STORE: &str = "/var/lib/torcx/store/1632.3.0";

fn config(rig: &AddonRig, addon: serde_json::Value) -> Config {
    Config::from_json(
        &rig.config_json(addon),
        Path::new("/etc/node-bootstrap/config.json"),
    )
    .unwrap()
}

fn req(next_os: Option<&str>) -> AddonRequest {
    AddonRequest {
        cluster_version: CLUSTER.to_string(),
        next_os_version: next_os.map(str::to_string),
    }
}

/// A rig whose manifest for `OS` offers docker 1.12 and 17.03.
fn rig_with_packages() -> (AddonRig, Vec<u8>, Vec<u8>) {
    let rig = AddonRig::new(OS);
    let d112 = docker_archive("1.12.6");
    let d1703 = docker_archive("17.03.2-ce");
    let e112 = rig.publish_package("1.12", &d112);
    let e1703 = rig.publish_package("17.03", &d1703);
    rig.publish_manifest(OS, &[e112, e1703]);
    (rig, d112, d1703)
}

fn package_requests(rig: &AddonRig, version: &str, data: &[u8]) -> usize {
    rig.server
        .requests_for(&rig.package_path(version, data))
        .len()
}

fn assert_untouched(rig: &AddonRig) {
    assert_eq!(
        rig.files_in(STORE),
        Vec::<String>::new(),
        "store must stay empty"
    );
    assert!(!rig.exists("/etc/torcx/profiles/tectonic.json"));
    assert!(!rig.exists("/etc/torcx/next-profile"));
}

#[tokio::test]
async fn fresh_node_gets_package_profile_next_profile_and_a_reboot() {
    let (rig, _, d1703) = rig_with_packages();
    rig.set_running_docker("1.12");
    let c = config(&rig, json!({}));

    let out = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();

    let store_file = rig.path(&format!("{STORE}/docker:17.03.torcx.tgz"));
    assert_eq!(std::fs::read(&store_file).unwrap(), d1703);
    assert_eq!(
        std::fs::metadata(&store_file).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert_eq!(
        rig.files_in(STORE),
        ["docker:17.03.torcx.tgz"],
        "no temp files left"
    );
    assert_eq!(
        rig.read("/etc/torcx/profiles/tectonic.json").unwrap(),
        "{\"kind\":\"profile-manifest-v0\",\"value\":{\"images\":[{\"name\":\"docker\",\"reference\":\"17.03\"}]}}\n"
    );
    assert_eq!(rig.read("/etc/torcx/next-profile").unwrap(), "tectonic\n");
    assert_eq!(out.docker_running.as_deref(), Some("1.12"));
    assert_eq!(
        out.docker_running_source.as_deref(),
        Some("torcx-run-profile")
    );
    assert_eq!(out.docker_next, "17.03");
    assert!(out.reboot_needed && out.wipe_docker_datadir);
    assert_eq!(out.profile.as_deref(), Some("tectonic"));
    assert_eq!(out.os_versions, [OS]);
    assert_eq!(
        out.installed,
        [
            store_file.clone(),
            rig.path("/etc/torcx/profiles/tectonic.json"),
            rig.path("/etc/torcx/next-profile")
        ]
    );
    assert_eq!(package_requests(&rig, "17.03", &d1703), 1);

    // Idempotent: nothing downloaded or written again; still a reboot away.
    let again = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();
    assert_eq!(again.installed, Vec::<PathBuf>::new());
    assert!(again.reboot_needed);
    assert_eq!(package_requests(&rig, "17.03", &d1703), 1);

    // The outcome survives the state journal (JSON) as the flow stores it.
    let stored: AddonOutcome = serde_json::from_value(serde_json::to_value(&out).unwrap()).unwrap();
    assert_eq!(stored, out);
    assert!(
        !addon::confirm_active(&c.addon_inputs(), &stored).unwrap(),
        "not before the reboot"
    );

    // The reboot: torcx applies the profile.
    rig.set_running_docker("17.03");
    assert!(addon::confirm_active(&c.addon_inputs(), &stored).unwrap());
    let after = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();
    assert!(!after.reboot_needed && !after.wipe_docker_datadir);
    assert_eq!(after.installed, Vec::<PathBuf>::new());
    assert_eq!(package_requests(&rig, "17.03", &d1703), 1);
}

#[tokio::test]
async fn node_already_running_that_docker_gets_no_reboot() {
    let (rig, _, _) = rig_with_packages();
    rig.set_running_docker("17.03");
    let out = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(out.docker_next, "17.03");
    assert!(!out.reboot_needed, "{out:?}");
    assert!(!out.wipe_docker_datadir);
    assert!(rig.exists(&format!("{STORE}/docker:17.03.torcx.tgz")));
}

#[tokio::test]
async fn preference_order_and_largest_build_reach_the_profile() {
    let rig = AddonRig::new(OS);
    let entries: Vec<PkgEntry> = ["1.12", "17.03.1", "17.03.2", "17.06"]
        .iter()
        .map(|v| rig.publish_package(v, &docker_archive(v)))
        .collect();
    rig.publish_manifest(OS, &entries);
    let out = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(out.docker_next, "17.03.2");
    assert!(rig.exists(&format!("{STORE}/docker:17.03.2.torcx.tgz")));
    assert!(
        rig.read("/etc/torcx/profiles/tectonic.json")
            .unwrap()
            .contains("\"reference\":\"17.03.2\"")
    );
    assert!(
        out.reboot_needed && out.wipe_docker_datadir,
        "nothing ran before"
    );
}

#[tokio::test]
async fn tampered_manifest_leaves_store_and_profile_untouched() {
    let (rig, _, _) = rig_with_packages();
    // Someone edits the signed manifest to point at their own package.
    let evil = docker_archive("17.03-evil");
    let e = rig.publish_package("17.03", &evil);
    let signed = testkit::torcx_fixtures::package_manifest(&[
        rig.publish_package("17.03", &docker_archive("17.03"))
    ]);
    let sig = rig.key.sign(signed.as_bytes());
    let tampered = testkit::torcx_fixtures::package_manifest(&[e]);
    rig.publish_manifest_raw(OS, tampered.as_bytes(), Some(sig.as_bytes()));

    let err = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Verification);
    let msg = err.to_string();
    let url = rig.server.url(&rig.manifest_path(OS));
    assert!(
        msg.starts_with(&format!(
            "BAD signature on package manifest {url}: it does not match the data"
        )),
        "{msg}"
    );
    assert_eq!(package_requests(&rig, "17.03", &evil), 0, "nothing fetched");
    assert_untouched(&rig);
    assert!(!rig.exists(STORE), "no store directory either");
}

#[tokio::test]
async fn manifest_signed_by_another_key_is_refused() {
    let (rig, _, _) = rig_with_packages();
    let other = SigningKey::generate("mirror@example.invalid");
    let m = testkit::torcx_fixtures::package_manifest(&[
        rig.publish_package("17.03", &docker_archive("17.03"))
    ]);
    rig.publish_manifest_raw(OS, m.as_bytes(), Some(other.sign(m.as_bytes()).as_bytes()));
    let err = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Verification);
    let msg = err.to_string();
    assert!(msg.contains(&other.fingerprint()), "{msg}");
    assert!(
        msg.contains(&format!(
            "which is not in the keyring {}",
            rig.path("/etc/kubernetes/installer/keyring.asc").display()
        )),
        "{msg}"
    );
    assert_untouched(&rig);
}

#[tokio::test]
async fn unsigned_manifest_only_when_allowed() {
    let (rig, _, d1703) = rig_with_packages();
    let m = testkit::torcx_fixtures::package_manifest(&[rig.publish_package("17.03", &d1703)]);
    rig.publish_manifest_raw(OS, m.as_bytes(), None);
    let err = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Verification);
    let url = rig.server.url(&rig.manifest_path(OS));
    assert_eq!(
        err.to_string(),
        format!(
            "package manifest {url} has no signature at {url}.asc; refusing an unsigned manifest (addon.allow_unsigned is false)"
        )
    );
    assert_untouched(&rig);
    let out = addon::ensure(
        &config(&rig, json!({"allow_unsigned": true})).addon_inputs(),
        &req(None),
    )
    .await
    .unwrap();
    assert_eq!(out.docker_next, "17.03");
    // A signature that is there must still verify, allowed or not.
    rig.publish_manifest_raw(
        OS,
        m.as_bytes(),
        Some(b"-----BEGIN PGP SIGNATURE-----\n\nAAAA\n-----END PGP SIGNATURE-----\n"),
    );
    let err = addon::ensure(
        &config(&rig, json!({"allow_unsigned": true})).addon_inputs(),
        &req(None),
    )
    .await
    .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Verification);
}

#[tokio::test]
async fn tampered_package_fails_hash_and_leaves_nothing() {
    let rig = AddonRig::new(OS);
    let good = docker_archive("17.03");
    let entry = rig.publish_package("17.03", &good);
    rig.publish_manifest(OS, &[entry]);
    // The server now serves other bytes at the same URL.
    let path = rig.package_path("17.03", &good);
    let evil = docker_archive("17.03-evil");
    rig.server.put(&path, evil.clone());

    let err = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Verification);
    let msg = err.to_string();
    let want_hash = &manifest_hash(&good)[7..];
    let got_hash = &manifest_hash(&evil)[7..];
    assert_eq!(
        msg,
        format!(
            "docker 17.03 for OS {OS} was not installed: package {} does not match the manifest: sha512 is {got_hash}, the manifest says {want_hash}; nothing was installed",
            rig.server.url(&path)
        )
    );
    assert_untouched(&rig);
    assert!(
        !rig.exists(STORE),
        "the store directory it created is gone again"
    );
}

#[tokio::test]
async fn truncated_download_is_resumed_with_a_range_request() {
    let (rig, _, d1703) = rig_with_packages();
    let path = rig.package_path("17.03", &d1703);
    rig.server.fail_next(&path, Fault::Truncate(1000));
    let out = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(out.docker_next, "17.03");
    assert_eq!(
        std::fs::read(rig.path(&format!("{STORE}/docker:17.03.torcx.tgz"))).unwrap(),
        d1703
    );
    let reqs = rig.server.requests_for(&path);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0].range, None);
    assert_eq!(reqs[1].range.as_deref(), Some("bytes=1000-"));
    assert_eq!(reqs[1].status, 206);
}

#[tokio::test]
async fn truncated_download_restarts_when_the_server_ignores_ranges() {
    let (rig, _, d1703) = rig_with_packages();
    rig.server.set_ranges(false);
    let path = rig.package_path("17.03", &d1703);
    rig.server.fail_next(&path, Fault::Truncate(1000));
    addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(rig.path(&format!("{STORE}/docker:17.03.torcx.tgz"))).unwrap(),
        d1703
    );
    let reqs = rig.server.requests_for(&path);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].status, 200, "whole file again");
}

#[tokio::test]
async fn partial_left_by_a_killed_run_is_resumed() {
    let (rig, _, d1703) = rig_with_packages();
    let partial = rig.path(&format!(
        "{STORE}/.docker:17.03.torcx.tgz.part-{}",
        &manifest_hash(&d1703)[7..23]
    ));
    testkit::torcx_fixtures::write(&partial, &d1703[..777]).unwrap();
    addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    let reqs = rig.server.requests_for(&rig.package_path("17.03", &d1703));
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].range.as_deref(), Some("bytes=777-"));
    assert_eq!(rig.files_in(STORE), ["docker:17.03.torcx.tgz"]);
}

#[tokio::test]
async fn server_errors_are_retried_then_reported_as_retryable() {
    let (rig, _, d1703) = rig_with_packages();
    let path = rig.package_path("17.03", &d1703);
    rig.server.fail_next(&path, Fault::Status(503));
    rig.server.fail_next(&path, Fault::Status(500));
    addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(rig.server.requests_for(&path).len(), 3);

    // A server that keeps failing: three attempts, then a retryable error.
    let (rig, _, d1703) = rig_with_packages();
    let path = rig.package_path("17.03", &d1703);
    for _ in 0..3 {
        rig.server.fail_next(&path, Fault::Status(503));
    }
    let err = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable);
    let url = rig.server.url(&path);
    assert_eq!(
        err.to_string(),
        format!(
            "docker 17.03 for OS {OS} was not installed: download {url} failed after 3 attempts: {url} answered HTTP 503 for the package"
        )
    );
    assert_untouched(&rig);
}

#[tokio::test]
async fn unreachable_server_is_retryable_naming_the_url() {
    let rig = AddonRig::new(OS);
    // A port nobody listens on.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let c = config(
        &rig,
        json!({"manifest_url": format!("http://127.0.0.1:{port}/manifests/{{board}}/{{os_version}}/torcx_manifest.json")}),
    );
    let err = addon::ensure(&c.addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable);
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "GET http://127.0.0.1:{port}/manifests/amd64-usr/{OS}/torcx_manifest.json failed after 3 attempts: fetching package manifest from"
        )),
        "{msg}"
    );
    assert!(msg.contains("could not connect"), "{msg}");
}

#[tokio::test]
async fn missing_package_and_oversized_package_are_bad_input() {
    let (rig, _, d1703) = rig_with_packages();
    let path = rig.package_path("17.03", &d1703);
    rig.server.remove(&path);
    let err = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput);
    assert!(
        err.to_string().ends_with(&format!(
            "{} answered HTTP 404 for the package",
            rig.server.url(&path)
        )),
        "{err}"
    );
    assert_eq!(
        rig.server.requests_for(&path).len(),
        1,
        "a 404 is not retried"
    );

    let (rig, _, d1703) = rig_with_packages();
    let err = addon::ensure(
        &config(&rig, json!({"max_package_bytes": 1000})).addon_inputs(),
        &req(None),
    )
    .await
    .unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput);
    assert!(
        err.to_string().ends_with(&format!(
            "package {} is {} bytes, more than addon.max_package_bytes (1000)",
            rig.server.url(&rig.package_path("17.03", &d1703)),
            d1703.len()
        )),
        "{err}"
    );
    assert_untouched(&rig);
}

#[tokio::test]
async fn missing_mapping_and_manifest_errors_name_what_and_where() {
    let (rig, _, _) = rig_with_packages();
    let c = config(&rig, json!({}));
    let err = addon::ensure(
        &c.addon_inputs(),
        &AddonRequest {
            cluster_version: "v1.10.1+coreos.0".into(),
            next_os_version: None,
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput);
    assert_eq!(
        err.to_string(),
        format!(
            "runtime mappings {} have no entry for Kubernetes 1.10 (cluster version v1.10.1+coreos.0); they cover: 1.9",
            rig.path("/etc/kubernetes/installer/runtime-mappings.yaml")
                .display()
        )
    );
    // No manifest published for the OS version: BadInput naming the URL.
    rig.set_os_version("1688.0.0");
    let err = addon::ensure(&c.addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput);
    assert_eq!(
        err.to_string(),
        format!(
            "no package manifest for board amd64-usr, OS version 1688.0.0 at {}",
            rig.server
                .url("/manifests/amd64-usr/1688.0.0/torcx_manifest.json")
        )
    );
}

#[tokio::test]
async fn pending_update_installs_for_the_next_os_and_keeps_the_running_one_covered() {
    let (rig, _, d1703) = rig_with_packages();
    rig.set_running_docker("1.12");
    let next = "1688.0.0";
    let e = rig.publish_package("17.03", &d1703);
    rig.publish_manifest(next, &[e]);
    let out = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(Some(next)))
        .await
        .unwrap();
    assert_eq!(out.os_versions, [next, OS]);
    for os in [next, OS] {
        assert_eq!(
            std::fs::read(rig.path(&format!("/var/lib/torcx/store/{os}/docker:17.03.torcx.tgz")))
                .unwrap(),
            d1703,
            "{os}"
        );
    }
    // One download; the second store got a copy of the verified file.
    assert_eq!(package_requests(&rig, "17.03", &d1703), 1);
    assert!(out.reboot_needed);
}

#[tokio::test]
async fn package_already_in_another_store_is_reused_by_hash() {
    let (rig, _, d1703) = rig_with_packages();
    // An older OS version's store holds the same build under another name.
    rig.write(
        "/var/lib/torcx/store/1576.4.0/docker:17.03-old-name.torcx.tgz",
        &d1703,
    );
    let out = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(package_requests(&rig, "17.03", &d1703), 0, "no download");
    assert_eq!(
        std::fs::read(rig.path(&format!("{STORE}/docker:17.03.torcx.tgz"))).unwrap(),
        d1703
    );
    assert_eq!(out.installed.len(), 3);

    // In the vendor store of this OS under its torcx name: nothing to do.
    let (rig, _, d1703) = rig_with_packages();
    rig.write("/usr/share/torcx/store/docker:17.03.torcx.tgz", &d1703);
    let out = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(package_requests(&rig, "17.03", &d1703), 0);
    assert!(!rig.exists(STORE));
    assert_eq!(
        out.installed,
        [
            rig.path("/etc/torcx/profiles/tectonic.json"),
            rig.path("/etc/torcx/next-profile")
        ]
    );
}

#[tokio::test]
async fn the_users_own_next_profile_is_kept_and_extended() {
    let (rig, _, _) = rig_with_packages();
    rig.write(
        "/etc/torcx/profiles/mine.json",
        r#"{"kind":"profile-manifest-v0","value":{"images":[{"name":"rkt","reference":"1.30"},{"name":"docker","reference":"1.12"}]}}"#,
    );
    rig.write("/etc/torcx/next-profile", "mine\n");
    let out = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(out.profile.as_deref(), Some("mine"));
    assert_eq!(
        rig.read("/etc/torcx/profiles/mine.json").unwrap(),
        "{\"kind\":\"profile-manifest-v0\",\"value\":{\"images\":[{\"name\":\"rkt\",\"reference\":\"1.30\"},{\"name\":\"docker\",\"reference\":\"17.03\"}]}}\n"
    );
    assert_eq!(rig.read("/etc/torcx/next-profile").unwrap(), "mine\n");
    assert!(!rig.exists("/etc/torcx/profiles/tectonic.json"));

    // "vendor" in next-profile is torcx's own: our configured profile is used.
    let (rig, _, _) = rig_with_packages();
    rig.write("/etc/torcx/next-profile", "vendor\n");
    let out = addon::ensure(
        &config(&rig, json!({"profile_name": "k8s"})).addon_inputs(),
        &req(None),
    )
    .await
    .unwrap();
    assert_eq!(out.profile.as_deref(), Some("k8s"));
    assert_eq!(rig.read("/etc/torcx/next-profile").unwrap(), "k8s\n");
}

#[tokio::test]
async fn os_before_remote_packages_keeps_the_vendor_docker() {
    let (rig, _, _) = rig_with_packages();
    rig.set_os_version("1465.8.0");
    rig.set_running_docker("1.12");
    rig.write(
        "/usr/share/torcx/profiles/vendor.json",
        r#"{"kind":"profile-manifest-v0","value":{"images":[{"name":"docker","reference":"1.12"}]}}"#,
    );
    let out = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(rig.server.requests(), vec![], "nothing fetched");
    assert!(!out.reboot_needed && !out.wipe_docker_datadir);
    assert_eq!(out.docker_next, "1.12");
    assert!(
        out.note
            .as_deref()
            .unwrap()
            .contains("predates remote docker packages (1520.3.0)")
    );
    assert!(!rig.exists("/etc/torcx/next-profile"));
}

/// A mirror on the node's own disk: docker 17.03 (`archive`) as a file
/// beside a signed manifest for the OS; the addon section that names it.
fn local_mirror(rig: &AddonRig, archive: &[u8]) -> serde_json::Value {
    let pkg = rig.path("/srv/mirror/pkgs/docker:17.03.torcx.tgz");
    testkit::torcx_fixtures::write(&pkg, archive).unwrap();
    let entry = PkgEntry::new("17.03", archive, "../pkgs/docker:17.03.torcx.tgz");
    let m = testkit::torcx_fixtures::package_manifest(&[entry]);
    let mf = rig.path(&format!("/srv/mirror/{OS}/torcx_manifest.json"));
    testkit::torcx_fixtures::write(&mf, &m).unwrap();
    testkit::torcx_fixtures::write(
        &mf.with_file_name("torcx_manifest.json.asc"),
        rig.key.sign(m.as_bytes()),
    )
    .unwrap();
    let mf = rig.path("/srv/mirror/{os_version}/torcx_manifest.json");
    json!({"manifest_file": mf.display().to_string()})
}

#[tokio::test]
async fn local_manifest_file_and_file_packages_work_offline() {
    let rig = AddonRig::new(OS);
    let d1703 = docker_archive("17.03");
    let c = config(&rig, local_mirror(&rig, &d1703));
    let out = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();
    assert_eq!(out.docker_next, "17.03");
    assert_eq!(
        std::fs::read(rig.path(&format!("{STORE}/docker:17.03.torcx.tgz"))).unwrap(),
        d1703
    );
    assert!(rig.server.requests().is_empty());
}

#[tokio::test]
async fn download_cut_every_time_is_retryable_and_leaves_no_final_file() {
    let (rig, _, d1703) = rig_with_packages();
    let path = rig.package_path("17.03", &d1703);
    for n in [10_000, 20_000, 30_000] {
        rig.server.fail_next(&path, Fault::Truncate(n));
    }
    let err = addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable);
    let url = rig.server.url(&path);
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "docker 17.03 for OS {OS} was not installed: download {url} failed after 3 attempts: download of {url} broke off at byte 60000 of the {} announced: ",
            d1703.len()
        )),
        "{msg}"
    );
    assert!(
        msg.ends_with("end of file before message length reached"),
        "{msg}"
    );
    // Each attempt resumed where the last one was cut.
    let ranges: Vec<Option<String>> = rig
        .server
        .requests_for(&path)
        .into_iter()
        .map(|r| r.range)
        .collect();
    assert_eq!(
        ranges,
        [
            None,
            Some("bytes=10000-".into()),
            Some("bytes=30000-".into())
        ]
    );
    // No file under its final name; the partial (60000 bytes) waits for the
    // next run, and no profile points at anything.
    let partial = format!(
        ".docker:17.03.torcx.tgz.part-{}",
        &manifest_hash(&d1703)[7..23]
    );
    assert_eq!(rig.files_in(STORE), std::slice::from_ref(&partial));
    assert_eq!(
        std::fs::metadata(rig.path(&format!("{STORE}/{partial}")))
            .unwrap()
            .len(),
        60_000
    );
    assert!(!rig.exists("/etc/torcx/next-profile"));
    // The next run completes from there.
    addon::ensure(&config(&rig, json!({})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert_eq!(
        rig.server
            .requests_for(&path)
            .last()
            .unwrap()
            .range
            .as_deref(),
        Some("bytes=60000-")
    );
    assert_eq!(rig.files_in(STORE), ["docker:17.03.torcx.tgz"]);
}

/// A package torcx could not apply (its `.torcx/manifest.json` comes before
/// any entry for its directory), published as docker 17.03, and the way it
/// reaches the node: the check follows a fresh download, and one whose
/// retry continues with `Range` where the cut left it; it reads the
/// finished file when the download started over (the server ignores
/// ranges), continued a partial of an earlier run, or the package is a
/// local file. Every way, it is refused by name and nothing is installed.
async fn unappliable_package_is_refused(arrives: &str) {
    let rig = AddonRig::new(OS);
    let flat = testkit::torcx_fixtures::docker_archive_without_directories("17.03.2-ce");
    let path = rig.package_path("17.03", &flat);
    let mut addon = json!({});
    match arrives {
        "downloaded" => {}
        "resumed" => rig.server.fail_next(&path, Fault::Truncate(1000)),
        "restarted" => {
            rig.server.set_ranges(false);
            rig.server.fail_next(&path, Fault::Truncate(1000));
        }
        "left by a killed run" => testkit::torcx_fixtures::write(
            &rig.path(&format!(
                "{STORE}/.docker:17.03.torcx.tgz.part-{}",
                &manifest_hash(&flat)[7..23]
            )),
            &flat[..777],
        )
        .unwrap(),
        "a local file" => addon = local_mirror(&rig, &flat),
        other => panic!("{other}"),
    }
    if arrives != "a local file" {
        let entry = rig.publish_package("17.03", &flat);
        rig.publish_manifest(OS, &[entry]);
    }

    let err = match addon::ensure(&config(&rig, addon).addon_inputs(), &req(None)).await {
        Ok(out) => panic!("{arrives}: installed {:?}", out.installed),
        Err(e) => e,
    };
    assert_eq!(err.class(), ErrorClass::BadInput, "{arrives}: {err}");
    let msg = err.to_string();
    assert!(
        msg.contains("is not an image torcx can apply: entry \".torcx/manifest.json\" comes before any entry for its directory")
            && msg.contains("no reboot is asked for"),
        "{arrives}: {msg}"
    );
    assert_untouched(&rig);
    let reqs = rig.server.requests_for(&path);
    match arrives {
        "downloaded" => assert_eq!(reqs.len(), 1, "{reqs:?}"),
        "resumed" => assert_eq!(reqs[1].range.as_deref(), Some("bytes=1000-"), "{reqs:?}"),
        "restarted" => assert_eq!(reqs[1].status, 200, "{reqs:?}"),
        "left by a killed run" => assert_eq!(reqs[0].range.as_deref(), Some("bytes=777-")),
        _ => assert!(rig.server.requests().is_empty()),
    }
}

#[tokio::test]
async fn a_package_torcx_cannot_apply_is_refused_however_it_arrives() {
    for arrives in [
        "downloaded",
        "resumed",
        "restarted",
        "left by a killed run",
        "a local file",
    ] {
        unappliable_package_is_refused(arrives).await;
    }
}
