//! The `containerd` step's checks of what a running containerd runs with,
//! against both real containerds: Debian's 1.6.20 and 2.1.4 (today's
//! Flatcar's, built from its source), each a private daemon here.
//!
//! - the agent's own file (`container_runtime::containerd::render`, with
//!   only its root, state and socket moved into the test's dir) is
//!   accepted: 1.6 reports the sandbox image, 2.1 does not (its images
//!   plugin holds it) and the check says so instead of refusing;
//! - an operator's file is run as it is, with the cgroup driver taken from
//!   what containerd reports: the sysext-bakery's version-3 file (2.1:
//!   systemd) and Flatcar's cgroup-v1 file `config-cgroupfs.toml` (both:
//!   cgroupfs);
//! - containerd started with another file than the agent's (a foreign
//!   `CONTAINERD_CONFIG`) is refused, naming both files;
//! - what `imports` do, per series (`containerd config dump`): 1.6
//!   replaces the whole CRI section with the fragment's, 2.1 merges; so
//!   the agent's file has none and says so on its first line.

use node_bootstrap::container_runtime::containerd::{self, ContainerdConfig, MARKER};
use node_bootstrap::container_runtime::cri::{self, CgroupDriver, CriApi, RuntimeAnswer};
use node_bootstrap::container_runtime::ensure::{check_runs_ours, reported_driver};
use node_bootstrap::error::ErrorClass;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use testkit::containerd::{self as ctrd, Kind, PrivateContainerd};

const WITHIN: Duration = Duration::from_secs(10);
const KINDS: [Kind; 2] = [Kind::Debian, Kind::V2];

fn skip() -> bool {
    ctrd::skip_unless_possible() || ctrd::skip_unless_v2()
}

fn wanted(systemd_cgroup: bool) -> ContainerdConfig {
    ContainerdConfig {
        socket: "/run/containerd/containerd.sock".into(),
        systemd_cgroup,
        sandbox_image: "registry.k8s.io/pause:3.10".into(),
        cni_conf_dir: "/etc/kubernetes/cni/net.d".into(),
        cni_bin_dir: "/opt/cni/bin".into(),
        snapshotter: "native".into(),
    }
}

/// The agent's file as `render` writes it, its root, state and socket
/// lines left to the private daemon's header (they would be the host's).
fn agents_file_body(c: &ContainerdConfig) -> String {
    let text = containerd::render(c);
    assert!(text.starts_with(MARKER), "{text}");
    let mut out = String::new();
    let mut in_grpc = false;
    for line in text.lines() {
        if line.starts_with('[') {
            in_grpc = line == "[grpc]";
        }
        let moved = line.starts_with("version =")
            || line.starts_with("root =")
            || line.starts_with("state =")
            || in_grpc;
        if !moved {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn ask(ctr: &PrivateContainerd) -> RuntimeAnswer {
    testkit::runtime()
        .block_on(cri::ask(&ctr.socket(), WITHIN))
        .unwrap_or_else(|e| panic!("{e}\n{}", ctr.log()))
}

#[test]
fn the_agents_file_is_accepted_by_the_check_on_1_6_and_on_2_1() {
    if skip() {
        return;
    }
    for kind in KINDS {
        for systemd in [true, false] {
            let w = wanted(systemd);
            let ctr = PrivateContainerd::start_as(kind, 2, &agents_file_body(&w)).unwrap();
            let a = ask(&ctr);
            let socket = ctr.socket().display().to_string();
            let v = check_runs_ours(&a, &w, &ctr.config_path(), &socket)
                .unwrap_or_else(|e| panic!("{kind:?} systemd={systemd}: {e}\n{}", ctr.log()));
            assert!(
                v.checked
                    .contains(&"config file (its command line)".to_string()),
                "{kind:?}: {v:?}"
            );
            assert!(v.checked.contains(&"cgroup driver".to_string()), "{v:?}");
            assert!(v.checked.contains(&"CNI conf_dir".to_string()), "{v:?}");
            match kind {
                Kind::Debian => {
                    assert_eq!(a.apis, [CriApi::V1, CriApi::V1alpha2]);
                    assert!(v.checked.contains(&"sandbox image".to_string()), "{v:?}");
                    assert_eq!(a.cgroup_driver, None, "1.6 has no RuntimeConfig");
                }
                Kind::V2 => {
                    assert_eq!(a.apis, [CriApi::V1], "2.x serves v1 only");
                    assert_eq!(a.version.runtime_version, "v2.1.4");
                    assert_eq!(v.not_reported, ["sandbox image"], "{v:?}");
                    let want = if systemd {
                        CgroupDriver::Systemd
                    } else {
                        CgroupDriver::Cgroupfs
                    };
                    assert_eq!(a.cgroup_driver, Some(want), "2.x answers RuntimeConfig");
                }
            }
            // A file that says otherwise is told apart, value by value.
            let err =
                check_runs_ours(&a, &wanted(!systemd), &ctr.config_path(), &socket).unwrap_err();
            assert_eq!(err.class(), ErrorClass::Refused);
            assert!(err.to_string().contains("cgroup driver"), "{err}");
        }
    }
}

/// The sysext-bakery's containerd config (flatcar/sysext-bakery,
/// containerd.sysext/files/usr/share/containerd/config.toml), less its
/// `version` line (the private daemon's header has it).
const BAKERY_V3: &str = "# set containerd's OOM score\noom_score = -999\n\
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  SystemdCgroup = true\n";

/// Flatcar's `/usr/share/containerd/config-cgroupfs.toml` (the file its
/// `10-use-cgroupfs.conf` drop-in names on cgroup-v1 nodes), its
/// CRI part.
const FLATCAR_CGROUPFS: &str = "subreaper = true\noom_score = -999\n\
[plugins.\"io.containerd.grpc.v1.cri\".registry]\nconfig_path = \"/etc/containerd/certs.d\"\n\
[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n\
[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\nSystemdCgroup = false\n";

#[test]
fn an_operators_file_gives_the_cgroup_driver_containerd_reports() {
    if skip() {
        return;
    }
    for (kind, version, file, driver) in [
        (Kind::V2, 3, BAKERY_V3, "systemd"),
        (Kind::V2, 2, FLATCAR_CGROUPFS, "cgroupfs"),
        (Kind::Debian, 2, FLATCAR_CGROUPFS, "cgroupfs"),
    ] {
        let ctr = PrivateContainerd::start_as(kind, version, file).unwrap();
        let a = ask(&ctr);
        let got = reported_driver(&a, &ctr.socket().display().to_string())
            .unwrap_or_else(|e| panic!("{kind:?} v{version}: {e}"));
        assert_eq!(got.name(), driver, "{kind:?} version {version}: {a:#?}");
    }
}

#[test]
fn containerd_started_with_another_file_is_refused_naming_both() {
    if skip() {
        return;
    }
    for kind in KINDS {
        // containerd.service read the file of a CONTAINERD_CONFIG set after
        // the agent's drop-in; the agent wrote its own beside it.
        let ctr = PrivateContainerd::start_as(kind, 2, FLATCAR_CGROUPFS).unwrap();
        let agents = ctr.dir().join("agent-config.toml");
        std::fs::write(&agents, containerd::render(&wanted(false))).unwrap();
        let err = check_runs_ours(
            &ask(&ctr),
            &wanted(false),
            &agents,
            &ctr.socket().display().to_string(),
        )
        .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Refused);
        let text = err.to_string();
        assert!(
            text.contains(&format!(
                "was started with the config file {}, not the agent's {}",
                ctr.config_path().display(),
                agents.display()
            )),
            "{kind:?}: {text}"
        );
    }
}

/// `containerd config dump` of `kind` for a main file that imports a
/// fragment setting one key of the CRI plugin.
fn dump_with_import(kind: Kind, dir: &Path) -> String {
    let main = dir.join("main.toml");
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    std::fs::write(
        &main,
        format!(
            "{}imports = [\"{}/conf.d/*.toml\"]\n{}",
            "version = 2\n",
            dir.display(),
            agents_file_body(&wanted(true))
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("conf.d/50-registry.toml"),
        "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n",
    )
    .unwrap();
    let out = Command::new(kind.program())
        .arg("--config")
        .arg(&main)
        .args(["config", "dump"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{kind:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).replace('\'', "\"")
}

#[test]
fn imports_replace_whole_plugin_sections_on_1_6_and_merge_on_2_1() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let v16 = dump_with_import(Kind::Debian, &dir.path().join("16"));
    assert!(
        v16.contains("config_path = \"/etc/containerd/certs.d\""),
        "{v16}"
    );
    // The main file's CRI keys are gone: the fragment's section replaced it.
    assert!(!v16.contains("registry.k8s.io/pause:3.10"), "{v16}");
    assert!(!v16.contains("SystemdCgroup = true"), "{v16}");
    assert!(!v16.contains("/etc/kubernetes/cni/net.d"), "{v16}");
    let v21 = dump_with_import(Kind::V2, &dir.path().join("21"));
    assert!(
        v21.contains("config_path = \"/etc/containerd/certs.d\""),
        "{v21}"
    );
    assert!(
        v21.contains("sandbox = \"registry.k8s.io/pause:3.10\""),
        "{v21}"
    );
    assert!(v21.contains("SystemdCgroup = true"), "{v21}");
    assert!(v21.contains("/etc/kubernetes/cni/net.d"), "{v21}");
    // So the agent's file imports nothing, and says so.
    let text = containerd::render(&wanted(true));
    assert!(!text.contains("imports ="), "{text}");
    assert!(MARKER.contains("no imports"), "{MARKER}");
}
