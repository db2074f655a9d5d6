//! `node-bootstrap check-config` as an operator uses it: it says the file
//! is valid and prints the settings in effect as a config file (the
//! file's own field names and units, every default filled in), which, put
//! back into a file, is accepted and shows the same settings.

use std::fs;
use testkit::cli::{agent_command, code, stderr, stdout};

fn check_config(path: &std::path::Path) -> std::process::Output {
    agent_command()
        .arg("--config")
        .arg(path)
        .args(["--log-format", "text", "check-config"])
        .output()
        .unwrap()
}

#[test]
fn the_settings_shown_are_a_config_file_that_reads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("config.json");
    fs::write(
        &written,
        r#"{
  "role": "master",
  "os_update": {"enabled": true, "timeout_secs": 1200},
  "assets": {"limits": {"max_total_mib": 512}},
  "cluster": {"api_retry_max_secs": 30},
  "helpers": {"tectonic": {"mode": "docker",
              "docker": {"image": "quay.io/coreos/tectonic:1", "env": {"API_TOKEN": "tok-4f9a1c77"}}}}
}"#,
    )
    .unwrap();
    let out = check_config(&written);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("config ok: {}", written.display())),
        "{}",
        stderr(&out)
    );
    let shown: serde_json::Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("check-config does not print JSON ({e}):\n{}", stdout(&out)));
    // What was written, in the file's names and units.
    assert_eq!(shown["role"], "master");
    assert_eq!(shown["os_update"]["enabled"], true);
    assert_eq!(shown["os_update"]["timeout_secs"], 1200);
    assert_eq!(shown["assets"]["limits"]["max_total_mib"], 512);
    assert_eq!(shown["cluster"]["api_retry_max_secs"], 30);
    // What was not, filled in with the defaults.
    assert_eq!(shown["os_update"]["stall_timeout_secs"], 600);
    assert_eq!(shown["cluster"]["api_retry_initial_secs"], 2);
    assert_eq!(shown["paths"]["kubelet_env"], "/etc/kubernetes/kubelet.env");
    assert_eq!(
        shown["helpers"]["tectonic"]["docker"]["mounts"],
        serde_json::json!(["/opt/tectonic:/assets", "/etc/kubernetes:/etc/kubernetes"])
    );
    // A secret is named, never shown.
    assert_eq!(
        shown["helpers"]["tectonic"]["docker"]["env"]["API_TOKEN"],
        "<redacted>"
    );
    assert!(!stdout(&out).contains("tok-4f9a1c77"));

    // Copied back into a file, it is accepted and shows the same.
    let copied = dir.path().join("copied.json");
    fs::write(&copied, stdout(&out)).unwrap();
    let again = check_config(&copied);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert_eq!(stdout(&again), stdout(&out));
}

#[test]
fn an_invalid_file_prints_no_settings_and_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("config.json");
    fs::write(&p, r#"{"os_update": {"timeout_secs": 9999}}"#).unwrap();
    let out = check_config(&p);
    assert_eq!(code(&out), 4);
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("field `os_update.timeout_secs`: must be between 1 and 3300 seconds"),
        "{}",
        stderr(&out)
    );
}

/// A rendered Ignition config of the files `check-config --ignition`
/// reads (inline, as the ignition module writes them).
fn ignition(files: &[(&str, &str)]) -> String {
    use base64::Engine as _;
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|(path, text)| {
            serde_json::json!({"path": path, "contents": {"source": format!(
                "data:;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(text)
            )}})
        })
        .collect();
    serde_json::json!({"ignition": {"version": "3.3.0"}, "storage": {"files": files}}).to_string()
}

fn check_ignition(
    dir: &std::path::Path,
    config: &str,
    mappings: &str,
    tag: &str,
) -> std::process::Output {
    let seed =
        format!("KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"{tag}\"\n");
    let path = dir.join("node.ign");
    fs::write(
        &path,
        ignition(&[
            ("/etc/node-bootstrap/config.json", config),
            ("/etc/kubernetes/installer/runtime-mappings.yaml", mappings),
            ("/etc/kubernetes/installer/kubelet.env", &seed),
        ]),
    )
    .unwrap();
    agent_command()
        .args(["--log-format", "text", "check-config", "--ignition"])
        .arg(&path)
        .output()
        .unwrap()
}

const CONTAINERD_MAPPINGS: &str = "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.31\":\n      containerd: [\"2.1\", \"1.7\"]\n";
const DOCKER_MAPPINGS: &str =
    "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.9\":\n      docker: [\"17.03\"]\n";
const MASTER: &str = r#"{"role": "bootkube-master", "kubelet": {"backend": "wrapper"}}"#;

/// The pure steps a bootkube master runs before it changes anything, run
/// on its rendered config: the version from its seed, the runtime step,
/// the mappings' entry for that minor; refused with the node's exit code.
#[test]
fn ignition_check_runs_the_bootkube_masters_runtime_step_for_its_seed() {
    let d = tempfile::tempdir().unwrap();
    let out = check_ignition(d.path(), MASTER, CONTAINERD_MAPPINGS, "v1.31.4");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for line in [
        "cluster version: v1.31.4 (the bootkube master's seed KUBELET_IMAGE_TAG)",
        "runtime step ok for Kubernetes 1.31: containerd of series 2.1, 1.7 (the mappings)",
        "kubelet backend: wrapper (kubelet-wrapper: refused on Flatcar 2857.0.0 and newer",
    ] {
        assert!(stderr(&out).contains(line), "{line:?}:\n{}", stderr(&out));
    }
    // A version the agent does not configure: the node's exit 7.
    let out = check_ignition(d.path(), MASTER, CONTAINERD_MAPPINGS, "v1.37.0");
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the node would stop at its runtime step for Kubernetes v1.37.0")
            && stderr(&out).contains("newer than the newest this agent knows (1.36)"),
        "{}",
        stderr(&out)
    );
    // docker through the addon for a minor the mappings lack: exit 5.
    let addon = r#"{"role": "bootkube-master", "addon": {"enabled": true, "allow_unsigned": true,
        "manifest_url": "https://m.example.invalid/{board}/{os_version}/torcx_manifest.json"}}"#;
    let out = check_ignition(d.path(), addon, DOCKER_MAPPINGS, "v1.20.2");
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("have no entry for Kubernetes 1.20"),
        "{}",
        stderr(&out)
    );
    let out = check_ignition(d.path(), addon, DOCKER_MAPPINGS, "v1.9.6_coreos.0");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "runtime step ok for Kubernetes 1.9: docker 17.03 (the addon, from the mappings)"
        ),
        "{}",
        stderr(&out)
    );
}

/// A kubelet sysext with nowhere remote to come from: a warning, not a
/// refusal (the node's local store may be filled by hand).
#[test]
fn ignition_check_warns_of_a_sysext_kubelet_with_no_source() {
    let d = tempfile::tempdir().unwrap();
    let out = check_ignition(
        d.path(),
        r#"{"role": "worker"}"#,
        CONTAINERD_MAPPINGS,
        "v1.31.4",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("WARN kubelet.backend is \"auto\"")
            && stderr(&out).contains("no remote location is set"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("runtime step ok for Kubernetes 1.31"),
        "{}",
        stderr(&out)
    );
}

/// Off a node, `preflight` and `upgrade --dry-run` leave nothing behind
/// (the state dir, where `run` keeps its lock, is not created).
#[test]
fn preflight_and_a_dry_run_upgrade_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("var/lib/node-bootstrap");
    fs::write(
        d.path().join("config.json"),
        serde_json::json!({
            "paths": {"state_dir": state, "seed_dir": d.path().join("installer")},
            "agent": {"binary": d.path().join("opt/bin/node-bootstrap")},
            "sources": {"local_dir": d.path().join("store"), "use_default": false,
                        "use_cluster_bucket": false},
        })
        .to_string(),
    )
    .unwrap();
    let run = |args: &[&str]| {
        agent_command()
            .arg("--config")
            .arg(d.path().join("config.json"))
            .args(["--log-format", "text"])
            .args(args)
            .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
            .output()
            .unwrap()
    };
    let out = run(&["preflight"]);
    assert!(
        stdout(&out).contains("state dir") && stdout(&out).contains("absent ("),
        "{}",
        stdout(&out)
    );
    let _ = run(&["upgrade", "--dry-run"]);
    let mut left = Vec::new();
    for e in walkdir(d.path()) {
        left.push(e);
    }
    assert_eq!(left, ["config.json".to_string()], "written: {left:?}");
}

fn walkdir(root: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in fs::read_dir(&p).unwrap() {
            let e = e.unwrap().path();
            if e.is_dir() {
                stack.push(e.clone());
            }
            out.push(e.strip_prefix(root).unwrap().display().to_string());
        }
    }
    out.sort();
    out
}
