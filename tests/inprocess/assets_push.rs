//! Push mode: the agent never fetches; `assets check` (what `status` and
//! `run` use, through `assets::readiness`) says what it waits for and
//! where, and recognises assets pushed the way Tectonic's terraform did
//! (`rm -rf /opt/tectonic; mv /home/core/tectonic /opt/`) or completed by a
//! marker the push writes last.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn check(config: &Path) -> Output {
    testkit::cli::agent_command()
        .arg("--config")
        .arg(config)
        .args(["--log-format", "text", "assets", "check"])
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn terraform_style_push_is_recognised_once_moved_into_place() {
    let d = tempfile::tempdir().unwrap();
    let opt = d.path().join("opt");
    let assets = opt.join("tectonic");
    let cfg = d.path().join("config.json");
    fs::write(
        &cfg,
        format!(r#"{{"paths":{{"assets_dir":"{}"}}}}"#, assets.display()),
    )
    .unwrap();

    let out = check(&cfg);
    assert_eq!(out.status.code(), Some(10));
    assert_eq!(
        stdout(&out),
        format!(
            "waiting for assets at {}, pushed by terraform over SSH (moved into place in one `mv`)",
            assets.display()
        )
    );

    // terraform's file provisioner uploads to $HOME/tectonic, then remote-exec
    // moves the complete tree into place.
    let home = d.path().join("home/core/tectonic");
    fs::create_dir_all(home.join("tls")).unwrap();
    fs::write(home.join("bootkube.sh"), "#!/bin/bash\n").unwrap();
    fs::write(home.join("tls/ca.key"), "k").unwrap();
    let script = format!(
        "mkdir -p {opt}; rm -rf {opt}/tectonic; mv {home} {opt}/",
        opt = opt.display(),
        home = home.display()
    );
    assert!(
        Command::new("sh")
            .args(["-c", &script])
            .status()
            .unwrap()
            .success()
    );

    let out = check(&cfg);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        format!("assets complete at {}", assets.display())
    );
}

#[test]
fn with_a_marker_the_assets_count_only_once_it_is_written() {
    let d = tempfile::tempdir().unwrap();
    let assets = d.path().join("opt/tectonic");
    let cfg = d.path().join("config.json");
    fs::write(
        &cfg,
        format!(
            r#"{{"paths":{{"assets_dir":"{}"}},"assets":{{"mode":"push","marker":".assets-complete"}}}}"#,
            assets.display()
        ),
    )
    .unwrap();
    // Files copied in place one by one (no atomic mv), marker not yet there.
    fs::create_dir_all(&assets).unwrap();
    fs::write(assets.join("bootkube.sh"), "#!/bin/bash\n").unwrap();
    let out = testkit::cli::agent_command()
        .arg("--config")
        .arg(&cfg)
        .args(["assets", "check", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "waiting");
    assert_eq!(
        v["what"],
        format!(
            "waiting for assets at {} (complete once {}/.assets-complete exists), pushed by terraform over SSH, which writes .assets-complete last",
            assets.display(),
            assets.display()
        )
    );
    fs::write(assets.join(".assets-complete"), "").unwrap();
    let out = check(&cfg);
    assert_eq!(out.status.code(), Some(0));
}
