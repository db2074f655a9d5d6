//! The pre-reboot hook and store GC, through the real `node-bootstrap addon`
//! subcommands on a node laid out in a temp dir: the package for the OS the
//! node reboots into is in the store before the reboot, and stores of OS
//! versions older than the running one are removed (newer ones and foreign
//! directories are kept).

use testkit::cli;
use testkit::torcx_fixtures::{AddonRig, docker_archive};

const OS: &str = "1632.3.0";
const NEXT: &str = "1688.0.0";

fn agent(rig: &AddonRig, args: &[&str]) -> (i32, String, String) {
    let cfg = rig.path("/etc/node-bootstrap/config.json");
    if !cfg.exists() {
        rig.write(
            "/etc/node-bootstrap/config.json",
            rig.config_json(serde_json::json!({})),
        );
    }
    let out = cli::agent_command()
        .arg("--config")
        .arg(&cfg)
        .args(["--log-format", "text"])
        .args(args)
        .output()
        .unwrap();
    (cli::code(&out), cli::stdout(&out), cli::stderr(&out))
}

fn seed_stores(rig: &AddonRig) {
    for (os, v) in [("1576.4.0", "1.12"), ("1520.3.0", "1.12"), (OS, "17.03")] {
        rig.write(
            &format!("/var/lib/torcx/store/{os}/docker:{v}.torcx.tgz"),
            docker_archive(v),
        );
    }
    rig.write("/var/lib/torcx/store/custom/keep-me.torcx.tgz", b"x");
    rig.write("/var/lib/torcx/store/docker:1.12.torcx.tgz", b"unversioned");
}

#[test]
fn pre_reboot_hook_prepares_the_next_os_and_collects_older_stores() {
    let rig = AddonRig::new(OS);
    seed_stores(&rig);
    let d1703 = docker_archive("17.03");
    let e = rig.publish_package("17.03", &d1703);
    rig.publish_manifest(NEXT, std::slice::from_ref(&e));
    rig.publish_manifest(OS, &[e]);
    rig.write(
        "/etc/kubernetes/kubelet.env",
        "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n",
    );

    let (code, stdout, stderr) = agent(
        &rig,
        &["addon", "pre-reboot-hook", "--next-os-version", NEXT],
    );
    assert_eq!(code, 0, "{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["addon"]["docker_next"], "17.03");
    assert_eq!(out["addon"]["os_versions"], serde_json::json!([NEXT, OS]));
    assert_eq!(
        std::fs::read(rig.path(&format!(
            "/var/lib/torcx/store/{NEXT}/docker:17.03.torcx.tgz"
        )))
        .unwrap(),
        d1703
    );
    assert_eq!(rig.read("/etc/torcx/next-profile").unwrap(), "tectonic\n");
    let removed: Vec<String> = out["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        removed,
        [
            rig.path("/var/lib/torcx/store/1520.3.0")
                .display()
                .to_string(),
            rig.path("/var/lib/torcx/store/1576.4.0")
                .display()
                .to_string()
        ]
    );
    assert_eq!(
        rig.files_in("/var/lib/torcx/store"),
        [OS, NEXT, "custom", "docker:1.12.torcx.tgz"]
    );
    // The same build was already in the running OS's store: reused by hash,
    // not downloaded.
    assert_eq!(
        rig.server
            .requests_for(&rig.package_path("17.03", &d1703))
            .len(),
        0
    );
}

#[test]
fn gc_removes_only_older_os_versions_and_is_idempotent() {
    let rig = AddonRig::new(OS);
    seed_stores(&rig);
    rig.write(
        &format!("/var/lib/torcx/store/{NEXT}/docker:17.03.torcx.tgz"),
        b"next",
    );
    let (code, stdout, stderr) = agent(&rig, &["addon", "gc"]);
    assert_eq!(code, 0, "{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["removed"].as_array().unwrap().len(), 2);
    assert_eq!(
        rig.files_in("/var/lib/torcx/store"),
        [OS, NEXT, "custom", "docker:1.12.torcx.tgz"]
    );
    let (code, stdout, _) = agent(&rig, &["addon", "gc"]);
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["removed"],
        serde_json::json!([])
    );
}

#[test]
fn hook_errors_exit_with_their_class() {
    let rig = AddonRig::new(OS);
    // No kubelet.env: the cluster version cannot be known (bad input, 5).
    let (code, _, stderr) = agent(
        &rig,
        &["addon", "pre-reboot-hook", "--next-os-version", NEXT],
    );
    assert_eq!(code, 5, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "failed to read kubelet.env at {}",
            rig.path("/etc/kubernetes/kubelet.env").display()
        )),
        "{stderr}"
    );
    // ensure with a manifest whose signature is bad: verification (6).
    let d = docker_archive("17.03");
    let e = rig.publish_package("17.03", &d);
    let m = testkit::torcx_fixtures::package_manifest(&[e]);
    rig.publish_manifest_raw(
        OS,
        m.as_bytes(),
        Some(rig.key.sign(b"something else").as_bytes()),
    );
    let (code, _, stderr) = agent(
        &rig,
        &["addon", "ensure", "--cluster-version", "v1.9.6+coreos.0"],
    );
    assert_eq!(code, 6, "{stderr}");
    assert!(
        stderr.contains("BAD signature on package manifest"),
        "{stderr}"
    );
    // confirm: nothing applied at this boot (refused, 7).
    let (code, _, stderr) = agent(&rig, &["addon", "confirm", "--docker-next", "17.03"]);
    assert_eq!(code, 7, "{stderr}");
    rig.set_running_docker("17.03");
    let (code, stdout, _) = agent(&rig, &["addon", "confirm", "--docker-next", "17.03"]);
    assert_eq!((code, stdout.trim()), (0, "docker 17.03 is active"));
}
