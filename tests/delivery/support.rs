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

/// A copy of what an operator's checkout holds for terraform (`terraform/`
/// and `units/`) under `dest`, without anything a run of terraform left in
/// the repository (`.terraform`, state, rendered configs, tfvars).
pub fn checkout_copy(dest: &Path) -> PathBuf {
    let root = root();
    std::fs::create_dir_all(dest).unwrap();
    for dir in ["terraform", "units"] {
        let st = Command::new("cp")
            .arg("-a")
            .arg(root.join(dir))
            .arg(dest)
            .status()
            .expect("running cp");
        assert!(st.success(), "cp -a {dir} failed");
    }
    for p in testkit::files::tree(&dest.join("terraform")) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let left = name == ".terraform"
            || name == "rendered"
            || name == "terraform.tfvars"
            || name.ends_with(".auto.tfvars.json")
            || name.starts_with("terraform.tfstate")
            || name == ".terraform.lock.hcl";
        if left && p.exists() {
            if p.is_dir() {
                std::fs::remove_dir_all(&p).unwrap();
            } else {
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
    dest.to_path_buf()
}

/// The shell block of docs/operators.md that follows the marker
/// `<!-- metal step: NAME`: the commands as an operator types them.
pub fn operators_md_block(name: &str) -> String {
    let doc = std::fs::read_to_string(root().join("docs/operators.md")).unwrap();
    let marker = format!("<!-- metal step: {name}");
    let at = doc
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/operators.md has no {marker:?}"));
    let rest = &doc[at..];
    let start = rest
        .find("```sh\n")
        .expect("a ```sh block after the marker")
        + 6;
    let end = rest[start..].find("```").expect("the block's end") + start;
    rest[start..end].to_string()
}

/// Runs `script` with bash (`-euo pipefail`) in `dir`, as an operator's
/// shell would, with `node-bootstrap` on `PATH` (the built agent) and
/// terraform kept offline and answering its own prompts
/// (`TF_CLI_ARGS_apply=-auto-approve`); stdout, or a panic with both
/// streams.
pub fn operator_shell(dir: &Path, script: &str) -> String {
    let bin = dir.join(".operator-bin");
    if !bin.exists() {
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(testkit::cli::agent_binary(), bin.join("node-bootstrap"))
            .unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env("TF_CLI_CONFIG_FILE", "/dev/null")
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_CLI_ARGS_apply", "-auto-approve -input=false -no-color")
        .env("TF_CLI_ARGS_plan", "-input=false -no-color")
        .env("TF_CLI_ARGS_init", "-input=false -no-color")
        .env("NODE_BOOTSTRAP_LOG_FORMAT", "text")
        .env_remove("SSH_AUTH_SOCK")
        .env_remove("TF_LOG")
        .env_remove("TF_DATA_DIR")
        .env_remove("NODE_BOOTSTRAP_CONFIG")
        .output()
        .expect("running bash");
    assert!(
        out.status.success(),
        "in {}:\n{script}\nfailed ({}):\n{}\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
