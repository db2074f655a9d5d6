//! The docker addon phase on the simulated node (a real systemd 252 as PID 1,
//! reboots keep the disk): the agent binary runs inside the node against a
//! local package server, and each boot applies what it left behind: torcx
//! through the real `torcx-generator` (built from flatcar/torcx, installed
//! where Flatcar has it), sysext through the real `systemd-sysext.service`.
//!
//! Here the agent's `addon` subcommands (`ensure`, `confirm`,
//! `pre-reboot-hook`, `gc`) are run inside the node and the test reboots it
//! when the agent says so; `addon_run.rs` covers the same phase inside
//! `node-bootstrap run` (reboot with the datadir cleanup unit, kubelet).
//!
//! - a fresh node gets the package, profile and next-profile, and the next
//!   boot runs that docker (and needs no further reboot);
//! - a node already running that docker gets no reboot;
//! - a tampered manifest or package fails with exit 6 and a clear message,
//!   store, profile and kubelet.env untouched;
//! - a kill -9 during the download leaves no file under a final name and
//!   the next run completes (resuming the download);
//! - sysext: on a Flatcar without torcx (3794.0.0 on), the backend the
//!   operator left to `auto` is sysext, and the image is merged by
//!   systemd-sysext at the next boot;
//! - pre-reboot hook + GC: the next OS version boots with its docker.

use serde_json::{Value, json};
use std::process::Output;
use std::time::{Duration, Instant};
use testkit::simnode::{BootEnd, SimNode, skip_unless_possible};
use testkit::torcx_fixtures::{
    AddonRig, PkgEntry, docker_archive, docker_archive_without_directories, manifest_hash,
    runtime_mappings_yaml, sysext_image,
};

const OS: &str = "1632.3.0";
const CLUSTER: &str = "v1.9.6+coreos.0";
const STORE: &str = "/var/lib/torcx/store/1632.3.0";
const T: Duration = Duration::from_secs(60);

fn agent_bin() -> String {
    testkit::cli::agent_binary().display().to_string()
}

/// A torcx node: the real torcx generator, os-release, mappings, keyring,
/// config, and the vendor docker 1.12 of the OS image.
fn torcx_node(name: &str, rig: &AddonRig, addon: Value) -> SimNode {
    let n = SimNode::new(name).unwrap();
    testkit::torcx::install_os_image(&n, rig, OS, "1.12", "1.12.6").unwrap();
    n.write(
        "/etc/node-bootstrap/config.json",
        rig.config_json_for_root("", addon),
        0o644,
    )
    .unwrap();
    n
}

/// Skips unless simulated nodes can run here and the real torcx is built.
fn skip_unless_torcx_node() -> bool {
    skip_unless_possible() || testkit::torcx::skip_unless_available()
}

fn agent(n: &SimNode, args: &[&str]) -> Output {
    let bin = agent_bin();
    let mut argv = vec![
        bin.as_str(),
        "--config",
        "/etc/node-bootstrap/config.json",
        "--log-format",
        "text",
    ];
    argv.extend_from_slice(args);
    n.exec(&argv).unwrap()
}

fn ensure(n: &SimNode, extra: &[&str]) -> Value {
    let mut args = vec!["addon", "ensure", "--cluster-version", CLUSTER];
    args.extend_from_slice(extra);
    let out = agent(n, &args);
    assert!(
        out.status.success(),
        "addon ensure failed ({}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        n.diagnostics()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn reboot(n: &mut SimNode) {
    n.exec(&["systemctl", "reboot"]).unwrap();
    assert_eq!(n.wait_down(T).unwrap(), BootEnd::Reboot);
    n.boot().unwrap();
    wait_booted(n);
}

fn wait_booted(n: &SimNode) {
    n.wait_for("the node to finish booting", T, |n| {
        let s = n.exec(&["systemctl", "is-system-running"]).ok()?;
        let s = String::from_utf8_lossy(&s.stdout).trim().to_string();
        (s == "running" || s == "degraded").then_some(())
    })
    .unwrap();
}

/// What `/run/torcx/bin/docker` says: the docker torcx applied at boot.
fn torcx_docker(n: &SimNode) -> String {
    let out = n.exec(&["/run/torcx/bin/docker", "--version"]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn ls(n: &SimNode, dir: &str) -> Vec<String> {
    testkit::files::names(&n.path(dir))
}

fn publish(rig: &AddonRig) -> Vec<u8> {
    let d1703 = docker_archive("17.03.2-ce");
    let e112 = rig.publish_package("1.12", &docker_archive("1.12.6"));
    let e1703 = rig.publish_package("17.03", &d1703);
    rig.publish_manifest(OS, &[e112, e1703]);
    d1703
}

#[test]
fn fresh_node_installs_docker_reboots_once_and_runs_it() {
    if skip_unless_torcx_node() {
        return;
    }
    let rig = AddonRig::new(OS);
    let d1703 = publish(&rig);
    let mut n = torcx_node("addon-fresh", &rig, json!({}));
    n.boot().unwrap();
    wait_booted(&n);
    // Boot 1: torcx applied the vendor profile.
    assert!(torcx_docker(&n).contains("1.12.6"), "{}", torcx_docker(&n));

    let out = ensure(&n, &[]);
    assert_eq!(out["docker_running"], "1.12");
    assert_eq!(out["docker_next"], "17.03");
    assert_eq!(out["reboot_needed"], true);
    assert_eq!(out["wipe_docker_datadir"], true);
    assert_eq!(
        std::fs::read(n.path(&format!("{STORE}/docker:17.03.torcx.tgz"))).unwrap(),
        d1703
    );
    assert_eq!(ls(&n, STORE), ["docker:17.03.torcx.tgz"]);
    assert_eq!(
        n.read("/etc/torcx/profiles/tectonic.json").unwrap(),
        "{\"kind\":\"profile-manifest-v0\",\"value\":{\"images\":[{\"name\":\"docker\",\"reference\":\"17.03\"}]}}\n"
    );
    assert_eq!(n.read("/etc/torcx/next-profile").unwrap(), "tectonic\n");
    assert!(!n.exists("/etc/kubernetes/kubelet.env"));

    // Boot 2: torcx applies the new profile; docker 17.03 runs.
    reboot(&mut n);
    assert!(
        torcx_docker(&n).contains("17.03.2-ce"),
        "{}",
        torcx_docker(&n)
    );
    let meta = n.read("/run/metadata/torcx").unwrap();
    assert!(meta.contains("TORCX_UPPER_PROFILE=\"tectonic\""), "{meta}");
    // torcx put the image's docker.service in place; it runs its dockerd.
    assert_eq!(
        n.prop("docker.service", "FragmentPath").unwrap(),
        "/run/systemd/system/docker.service"
    );
    n.systemctl(&["start", "docker.service"]).unwrap();
    assert_eq!(n.prop("docker.service", "ActiveState").unwrap(), "active");
    n.wait_for("dockerd 17.03.2-ce in docker.service's journal", T, |n| {
        n.journal("docker.service")
            .contains("dockerd 17.03.2-ce (test image)")
            .then_some(())
    })
    .unwrap();
    let confirm = agent(&n, &["addon", "confirm", "--docker-next", "17.03"]);
    assert!(
        confirm.status.success(),
        "{}",
        String::from_utf8_lossy(&confirm.stderr)
    );
    let again = ensure(&n, &[]);
    assert_eq!(again["docker_running"], "17.03");
    assert_eq!(again["reboot_needed"], false);
    assert_eq!(again["installed"], json!([]));
    assert_eq!(
        rig.server
            .requests_for(&rig.package_path("17.03", &d1703))
            .len(),
        1,
        "downloaded once"
    );
    n.shutdown().unwrap();
}

#[test]
fn node_already_running_the_docker_gets_no_reboot() {
    if skip_unless_torcx_node() {
        return;
    }
    let rig = AddonRig::new(OS);
    publish(&rig);
    let mut n = torcx_node("addon-same", &rig, json!({}));
    // This OS image's vendor profile already selects 17.03.
    n.write(
        "/usr/share/torcx/profiles/vendor.json",
        r#"{"kind":"profile-manifest-v0","value":{"images":[{"name":"docker","reference":"17.03"}]}}"#,
        0o644,
    )
    .unwrap();
    n.write(
        "/usr/share/torcx/store/docker:17.03.torcx.tgz",
        docker_archive("17.03.2-ce"),
        0o644,
    )
    .unwrap();
    n.boot().unwrap();
    wait_booted(&n);
    let out = ensure(&n, &[]);
    assert_eq!(out["docker_running"], "17.03");
    assert_eq!(out["reboot_needed"], false);
    assert_eq!(out["wipe_docker_datadir"], false);
    // The vendor store already had that very build: nothing downloaded.
    assert_eq!(ls(&n, STORE), Vec::<String>::new());
    assert_eq!(n.read("/etc/torcx/next-profile").unwrap(), "tectonic\n");
    n.shutdown().unwrap();
}

#[test]
fn tampered_manifest_or_package_fails_cleanly_and_touches_nothing() {
    if skip_unless_torcx_node() {
        return;
    }
    let rig = AddonRig::new(OS);
    let d1703 = publish(&rig);
    let mut n = torcx_node("addon-tamper", &rig, json!({}));
    n.boot().unwrap();
    wait_booted(&n);
    let untouched = |n: &SimNode| {
        assert_eq!(ls(n, "/var/lib/torcx/store"), Vec::<String>::new());
        assert!(!n.exists("/etc/torcx/profiles/tectonic.json"));
        assert!(!n.exists("/etc/torcx/next-profile"));
        assert!(!n.exists("/etc/kubernetes/kubelet.env"));
    };

    // A manifest altered after signing.
    let m = testkit::torcx_fixtures::package_manifest(&[rig.publish_package("17.03", &d1703)]);
    let sig = rig.key.sign(m.as_bytes());
    let altered = m.replace("17.03", "17.09");
    rig.publish_manifest_raw(OS, altered.as_bytes(), Some(sig.as_bytes()));
    let out = agent(&n, &["addon", "ensure", "--cluster-version", CLUSTER]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: BAD signature on package manifest {}",
            rig.server.url(&rig.manifest_path(OS))
        )),
        "{stderr}"
    );
    untouched(&n);

    // A genuine manifest, but the package on the server was swapped.
    rig.publish_manifest(OS, &[rig.publish_package("17.03", &d1703)]);
    rig.server.put(
        &rig.package_path("17.03", &d1703),
        docker_archive("17.03-backdoored"),
    );
    let out = agent(&n, &["addon", "ensure", "--cluster-version", CLUSTER]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains("does not match the manifest: sha512 is"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was installed"), "{stderr}");
    untouched(&n);
    n.shutdown().unwrap();
}

#[test]
fn kill_during_download_leaves_no_final_file_and_the_next_run_completes() {
    if skip_unless_torcx_node() {
        return;
    }
    let rig = AddonRig::new(OS);
    let d1703 = publish(&rig);
    let pkg = rig.package_path("17.03", &d1703);
    // About six seconds for the whole package.
    rig.server.set_rate(&pkg, Some(d1703.len() as u64 / 6));
    let mut n = torcx_node("addon-kill", &rig, json!({}));
    n.boot().unwrap();
    wait_booted(&n);

    let script = format!(
        "echo $$ > /run/addon-agent.pid; exec {} --config /etc/node-bootstrap/config.json --log-format text addon ensure --cluster-version {CLUSTER}",
        agent_bin()
    );
    let mut child = n.spawn(&["sh", "-c", &script]).unwrap();
    let partial = format!(
        "{STORE}/.docker:17.03.torcx.tgz.part-{}",
        &manifest_hash(&d1703)[7..23]
    );
    let deadline = Instant::now() + T;
    let got = loop {
        let len = std::fs::metadata(n.path(&partial))
            .map(|m| m.len())
            .unwrap_or(0);
        if len > 20_000 {
            break len;
        }
        assert!(
            Instant::now() < deadline,
            "the download never started\n{}",
            n.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(got < d1703.len() as u64, "already complete");
    let pid = n.read("/run/addon-agent.pid").unwrap();
    let kill = n.exec(&["kill", "-9", pid.trim()]).unwrap();
    assert!(kill.status.success());
    let status = child.wait().unwrap();
    assert!(!status.success(), "the agent was killed: {status}");

    // No file under a final name, nothing activated.
    assert!(!n.exists(&format!("{STORE}/docker:17.03.torcx.tgz")));
    assert_eq!(ls(&n, STORE), [partial.rsplit('/').next().unwrap()]);
    assert!(!n.exists("/etc/torcx/next-profile"));

    // The next run completes, resuming the partial download.
    rig.server.set_rate(&pkg, None);
    let out = ensure(&n, &[]);
    assert_eq!(out["docker_next"], "17.03");
    assert_eq!(
        std::fs::read(n.path(&format!("{STORE}/docker:17.03.torcx.tgz"))).unwrap(),
        d1703
    );
    assert_eq!(ls(&n, STORE), ["docker:17.03.torcx.tgz"]);
    let last = rig.server.requests_for(&pkg).pop().unwrap();
    assert!(
        last.range
            .as_deref()
            .is_some_and(|r| r.starts_with("bytes=")),
        "resumed: {last:?}"
    );
    n.shutdown().unwrap();
}

#[test]
fn pre_reboot_hook_readies_the_next_os_which_then_boots_with_its_docker() {
    if skip_unless_torcx_node() {
        return;
    }
    let next = "1688.0.0";
    let rig = AddonRig::new(OS);
    let d1703 = publish(&rig);
    rig.publish_manifest(next, &[rig.publish_package("17.03", &d1703)]);
    let mut n = torcx_node("addon-hook", &rig, json!({}));
    // An old OS version's store, left from before.
    n.write(
        "/var/lib/torcx/store/1576.4.0/docker:1.12.torcx.tgz",
        docker_archive("1.12.6"),
        0o644,
    )
    .unwrap();
    n.write(
        "/etc/kubernetes/kubelet.env",
        "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n",
        0o644,
    )
    .unwrap();
    n.boot().unwrap();
    wait_booted(&n);

    let out = agent(&n, &["addon", "pre-reboot-hook", "--next-os-version", next]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hook: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(hook["addon"]["os_versions"], json!([next, OS]));
    assert_eq!(hook["removed"], json!(["/var/lib/torcx/store/1576.4.0"]));
    assert_eq!(ls(&n, "/var/lib/torcx/store"), [OS, next]);
    assert!(n.exists(&format!(
        "/var/lib/torcx/store/{next}/docker:17.03.torcx.tgz"
    )));

    // The OS update lands: the next boot runs the new OS version, and torcx
    // finds docker 17.03 in that version's store.
    n.exec(&[
        "sh",
        "-c",
        &format!("sed -i 's/{OS}/{next}/g' /usr/lib/os-release"),
    ])
    .unwrap();
    reboot(&mut n);
    assert!(
        torcx_docker(&n).contains("17.03.2-ce"),
        "{}",
        torcx_docker(&n)
    );
    let applied = n.read("/run/torcx/profile.json").unwrap();
    assert!(applied.contains("\"reference\": \"17.03\""), "{applied}");
    // GC on the new OS removes the store of the version it left.
    let out = agent(&n, &["addon", "gc"]);
    assert!(out.status.success());
    assert_eq!(ls(&n, "/var/lib/torcx/store"), [next]);
    n.shutdown().unwrap();
}

/// A release without torcx (Flatcar removed it in 3794.0.0) and an addon
/// config that names no backend, as the examples write it: `auto` picks
/// sysext.
#[test]
fn without_torcx_auto_picks_the_sysext_image_which_systemd_sysext_merges_at_the_next_boot() {
    if skip_unless_possible() {
        return;
    }
    let os = "3815.2.0";
    let rig = AddonRig::new(os);
    let image = sysext_image(
        "24.0.9",
        &format!("ID=flatcar\nVERSION_ID={os}\nSYSEXT_VERSION_ID=24.0.9\n"),
    )
    .unwrap();
    let p = "/sysext/docker-24.0.9-x86-64.raw";
    rig.server.put(p, image.clone());
    rig.publish_manifest(os, &[PkgEntry::new("24.0.9", &image, &rig.server.url(p))]);

    let mut n = SimNode::new("addon-sysext").unwrap();
    let release = format!(
        "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION={os}\nVERSION_ID={os}\nCOREOS_BOARD=\"amd64-usr\"\n"
    );
    n.write("/usr/lib/os-release", release, 0o644).unwrap();
    n.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        runtime_mappings_yaml("1.9", &["24.0", "20.10"]),
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
        "/etc/node-bootstrap/config.json",
        rig.config_json_for_root("", json!({})),
        0o644,
    )
    .unwrap();
    // The simulated node's root mount is private; a real PID 1's is shared,
    // which systemd-sysext needs to show its merge to the rest of the node.
    n.drop_in(
        "systemd-sysext.service",
        "simnode-shared-root",
        "[Service]\nExecStartPre=/bin/mount --make-rshared /\n",
    )
    .unwrap();
    n.boot().unwrap();
    wait_booted(&n);

    let out = ensure(&n, &[]);
    assert_eq!(out["backend"], "sysext", "auto on {os}: {out}");
    assert_eq!(out["docker_next"], "24.0.9");
    assert_eq!(out["reboot_needed"], true);
    assert!(!n.exists("/etc/torcx/next-profile"), "no torcx on {os}");
    assert_eq!(
        std::fs::read(n.path("/etc/extensions/docker.raw")).unwrap(),
        image
    );
    assert_eq!(
        std::fs::read_link(n.path("/etc/extensions/docker-flatcar.raw")).unwrap(),
        std::path::Path::new("/dev/null")
    );
    assert!(!n.exists("/usr/lib/extension-release.d/extension-release.docker"));

    reboot(&mut n);
    assert_eq!(
        n.prop("systemd-sysext.service", "ActiveState").unwrap(),
        "active",
        "{}",
        n.journal("systemd-sysext.service")
    );
    let docker = n.exec(&["/usr/bin/docker", "--version"]).unwrap();
    assert!(
        String::from_utf8_lossy(&docker.stdout).contains("Docker version 24.0.9"),
        "{}",
        n.journal("systemd-sysext.service")
    );
    let confirm = agent(&n, &["addon", "confirm", "--docker-next", "24.0.9"]);
    assert!(
        confirm.status.success(),
        "{}",
        String::from_utf8_lossy(&confirm.stderr)
    );
    let again = ensure(&n, &[]);
    assert_eq!(again["docker_running"], "24.0.9");
    assert_eq!(again["docker_running_source"], "sysext-release");
    assert_eq!(again["reboot_needed"], false);
    assert_eq!(again["installed"], json!([]));
    n.shutdown().unwrap();
}

/// What `/run/torcx/profile.json` says torcx applied at this boot, if it
/// wrote one (it writes none when an image failed).
fn applied(n: &SimNode) -> Option<String> {
    n.read("/run/torcx/profile.json")
}

#[test]
fn a_package_torcx_cannot_apply_is_refused_and_torcx_agrees() {
    if skip_unless_torcx_node() {
        return;
    }
    let rig = AddonRig::new(OS);
    let flat = docker_archive_without_directories("17.03.2-ce");
    let e112 = rig.publish_package("1.12", &docker_archive("1.12.6"));
    let e1703 = rig.publish_package("17.03", &flat);
    rig.publish_manifest(OS, &[e112, e1703]);
    let mut n = torcx_node("addon-flat", &rig, json!({}));
    n.boot().unwrap();
    wait_booted(&n);

    let out = agent(&n, &["addon", "ensure", "--cluster-version", CLUSTER]);
    assert_eq!(out.status.code(), Some(5), "bad input, not retried");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not an image torcx can apply: entry \".torcx/manifest.json\" comes before any entry for its directory")
            && err.contains("no reboot is asked for"),
        "{err}"
    );
    assert_eq!(ls(&n, STORE), Vec::<String>::new(), "nothing installed");
    assert!(!n.exists("/etc/torcx/next-profile"));

    // The real torcx refuses the same archive: put it in place by hand and
    // boot it; torcx applies nothing and docker is not activated.
    n.write(&format!("{STORE}/docker:17.03.torcx.tgz"), &flat, 0o644)
        .unwrap();
    n.write(
        "/etc/torcx/profiles/by-hand.json",
        r#"{"kind":"profile-manifest-v0","value":{"images":[{"name":"docker","reference":"17.03"}]}}"#,
        0o644,
    )
    .unwrap();
    n.write("/etc/torcx/next-profile", "by-hand\n", 0o644)
        .unwrap();
    reboot(&mut n);
    assert_eq!(applied(&n), None, "torcx applied a profile");
    assert!(!n.exists("/run/torcx/bin/docker"));
    assert!(
        n.console()
            .contains("open /.torcx/manifest.json: no such file or directory"),
        "{}",
        n.console()
    );
    n.shutdown().unwrap();
}

#[test]
fn a_users_v1_next_profile_stays_v1_and_torcx_applies_it() {
    if skip_unless_torcx_node() {
        return;
    }
    let rig = AddonRig::new(OS);
    publish(&rig);
    let mut n = torcx_node("addon-v1", &rig, json!({}));
    n.write(
        "/etc/torcx/profiles/mine.json",
        r#"{"kind":"profile-manifest-v1","value":{"images":[{"name":"docker","reference":"1.12","remote":""}]}}"#,
        0o644,
    )
    .unwrap();
    n.write("/etc/torcx/next-profile", "mine\n", 0o644).unwrap();
    n.boot().unwrap();
    wait_booted(&n);
    assert!(
        torcx_docker(&n).contains("1.12.6"),
        "torcx read the v1 profile"
    );

    let out = ensure(&n, &[]);
    assert_eq!(out["profile"], "mine");
    assert_eq!(out["docker_next"], "17.03");
    assert_eq!(
        n.read("/etc/torcx/profiles/mine.json").unwrap(),
        "{\"kind\":\"profile-manifest-v1\",\"value\":{\"images\":[{\"name\":\"docker\",\"reference\":\"17.03\",\"remote\":\"\"}]}}\n"
    );
    let check = testkit::torcx::run_in(&n, &["profile", "check", "--name", "mine"]).unwrap();
    assert!(
        check.status.success(),
        "torcx profile check: {}",
        String::from_utf8_lossy(&check.stderr)
    );

    reboot(&mut n);
    assert!(
        torcx_docker(&n).contains("17.03.2-ce"),
        "{}",
        torcx_docker(&n)
    );
    let meta = n.read("/run/metadata/torcx").unwrap();
    assert!(meta.contains("TORCX_UPPER_PROFILE=\"mine\""), "{meta}");
    n.shutdown().unwrap();
}

#[test]
fn a_boot_where_torcx_applied_no_image_is_understood() {
    if skip_unless_torcx_node() {
        return;
    }
    let rig = AddonRig::new(OS);
    publish(&rig);
    let mut n = torcx_node("addon-null", &rig, json!({}));
    // An OS image without a vendor profile: torcx applies nothing.
    n.remove("/usr/share/torcx/profiles/vendor.json").unwrap();
    n.boot().unwrap();
    wait_booted(&n);
    assert_eq!(
        applied(&n).unwrap(),
        include_str!("../fixtures/torcx/run-profile-no-images.json"),
        "what torcx writes when it applied no image"
    );

    // Nothing runs, so whether 17.03 runs is "no", not an error.
    let confirm = agent(&n, &["addon", "confirm", "--docker-next", "17.03"]);
    assert_eq!(
        confirm.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&confirm.stderr)
    );
    let out = ensure(&n, &[]);
    assert_eq!(out["docker_running"], Value::Null);
    assert_eq!(out["reboot_needed"], true);
    reboot(&mut n);
    assert!(torcx_docker(&n).contains("17.03.2-ce"));
    n.shutdown().unwrap();
}

/// The fixtures in tests/fixtures/torcx (read by the agent's unit tests)
/// are byte for byte what the real torcx writes.
#[test]
fn the_torcx_fixtures_are_what_the_real_torcx_writes() {
    if skip_unless_torcx_node() {
        return;
    }
    let fixture = |name: &str| {
        std::fs::read_to_string(
            testkit::project_root()
                .join("tests/fixtures/torcx")
                .join(name),
        )
        .unwrap()
    };
    let rig = AddonRig::new(OS);
    let mut n = torcx_node("addon-fixtures", &rig, json!({}));
    n.boot().unwrap();
    wait_booted(&n);
    assert_eq!(applied(&n).unwrap(), fixture("run-profile-docker.json"));
    assert_eq!(
        n.read("/run/metadata/torcx").unwrap(),
        fixture("metadata-torcx")
    );
    let torcx = |args: &[&str]| {
        let o = testkit::torcx::run_in(&n, args).unwrap();
        assert!(
            o.status.success(),
            "torcx {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    torcx(&["profile", "new", "--name", "fresh"]);
    assert_eq!(
        n.read("/etc/torcx/profiles/fresh.json").unwrap(),
        fixture("user-profile-new.json")
    );
    torcx(&["profile", "new", "--name", "mine"]);
    torcx(&["profile", "use-image", "--name", "mine", "docker:1.12"]);
    assert_eq!(
        n.read("/etc/torcx/profiles/mine.json").unwrap(),
        fixture("user-profile-use-image.json")
    );
    n.shutdown().unwrap();
    // And with no image to apply (no vendor profile).
    n.remove("/usr/share/torcx/profiles/vendor.json").unwrap();
    n.boot().unwrap();
    wait_booted(&n);
    assert_eq!(applied(&n).unwrap(), fixture("run-profile-no-images.json"));
    n.shutdown().unwrap();
}
