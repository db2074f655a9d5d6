//! Helpers shared by the delivery tests (tests/delivery/delivery_*.rs): running
//! terraform without touching the repository, finding the real tools, and
//! reading Ignition configs.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn root() -> PathBuf {
    testkit::project_root()
}

pub use testkit::skip_without;

/// A python3 that can import `module` (python-hcl2 is `hcl2`).
pub fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

pub use testkit::terraform::Terraform;

pub use testkit::ignition::decode_data_url;

/// `ignition-validate FILE`: Ok or its complaint.
pub fn ignition_validate(path: &Path) -> Result<(), String> {
    let out = Command::new("ignition-validate")
        .arg(path)
        .output()
        .expect("running ignition-validate");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ignition-validate {}: {}{}",
            path.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The `storage.files` entry of an Ignition config for `path`.
pub fn ignition_file<'a>(cfg: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    cfg["storage"]["files"]
        .as_array()?
        .iter()
        .find(|f| f["path"] == path)
}

/// The decoded inline contents of a file of an Ignition config.
pub fn ignition_file_text(cfg: &serde_json::Value, path: &str) -> Option<String> {
    let f = ignition_file(cfg, path)?;
    let bytes = decode_data_url(f["contents"]["source"].as_str()?)?;
    String::from_utf8(bytes).ok()
}
