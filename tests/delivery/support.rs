//! Helpers shared by the delivery tests (tests/delivery/delivery_*.rs): running
//! terraform without touching the repository, finding the real tools, and
//! reading Ignition configs.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// Runs terraform in a configuration directory of the repository with its
/// data dir, state and plugin cache in a private temp dir, so nothing is
/// written into the repository and tests can run side by side.
pub struct Terraform {
    dir: PathBuf,
    work: tempfile::TempDir,
}

impl Terraform {
    pub fn new(dir: impl Into<PathBuf>) -> Terraform {
        let work = tempfile::Builder::new()
            .prefix("delivery-tf-")
            .tempdir()
            .unwrap();
        Terraform {
            dir: dir.into(),
            work,
        }
    }

    pub fn work(&self) -> &Path {
        self.work.path()
    }

    pub fn state(&self) -> PathBuf {
        self.work.path().join("terraform.tfstate")
    }

    /// `terraform -chdir=DIR ARGS` with a clean environment for terraform.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("terraform")
            .arg(format!("-chdir={}", self.dir.display()))
            .args(args)
            .env("TF_CLI_CONFIG_FILE", "/dev/null")
            .env("TF_DATA_DIR", self.work.path().join("tfdata"))
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .env_remove("SSH_AUTH_SOCK")
            .env_remove("TF_LOG")
            .output()
            .expect("running terraform")
    }

    /// Like [`run`](Self::run), panicking with terraform's output on failure.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "terraform {args:?} in {} failed ({}):\n{}\n{}",
            self.dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn init(&self) {
        self.ok(&["init", "-backend=false", "-input=false", "-no-color"]);
    }

    /// `terraform apply -auto-approve` with the state in the temp dir.
    pub fn apply(&self, extra: &[&str]) -> Output {
        let state = format!("-state={}", self.state().display());
        let mut args = vec![
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
            &state,
        ];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    pub fn apply_ok(&self, extra: &[&str]) -> String {
        let out = self.apply(extra);
        assert!(
            out.status.success(),
            "terraform apply {extra:?} in {} failed ({}):\n{}\n{}",
            self.dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `terraform output -json NAME` from the temp state.
    pub fn output(&self, name: &str) -> serde_json::Value {
        let state = format!("-state={}", self.state().display());
        let text = self.ok(&["output", "-no-color", "-json", &state, name]);
        serde_json::from_str(&text).expect("terraform output -json is JSON")
    }
}

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
