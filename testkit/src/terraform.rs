//! Terraform run on a configuration of the repository with everything it
//! writes (data dir, state, plugin cache) in a private temp dir: the
//! delivery tier's tests of the modules and examples, and the VM tier's
//! pushes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `terraform init` for a configuration without a backend.
const INIT: [&str; 4] = ["init", "-backend=false", "-input=false", "-no-color"];

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
        self.checked(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`run`](Self::run): stdout, or an error with terraform's output.
    pub fn checked(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.run(args);
        if !out.status.success() {
            anyhow::bail!(
                "terraform {args:?} in {} failed ({}):\n{}\n{}",
                self.dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// init, apply with `apply_args` (a `-var-file=` with an absolute
    /// path, say) and `output -json NAME`: what a test's fixture renders
    /// with a module, or an error with terraform's output.
    pub fn render(&self, apply_args: &[&str], output: &str) -> anyhow::Result<serde_json::Value> {
        self.checked(&INIT)?;
        let mut extra = vec!["-lock=false"];
        extra.extend_from_slice(apply_args);
        let apply = self.apply_args(&extra);
        self.checked(&apply.iter().map(String::as_str).collect::<Vec<_>>())?;
        let state = format!("-state={}", self.state().display());
        let text = self.checked(&["output", "-no-color", "-json", &state, output])?;
        Ok(serde_json::from_str(&text)?)
    }

    pub fn init(&self) {
        self.ok(&INIT);
    }

    /// `apply -auto-approve` with the state in the temp dir, then `extra`.
    fn apply_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = ["apply", "-auto-approve", "-input=false", "-no-color"]
            .map(String::from)
            .into();
        args.push(format!("-state={}", self.state().display()));
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    }

    /// `terraform apply -auto-approve` with the state in the temp dir.
    pub fn apply(&self, extra: &[&str]) -> Output {
        let args = self.apply_args(extra);
        self.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
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
