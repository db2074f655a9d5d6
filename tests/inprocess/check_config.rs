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
