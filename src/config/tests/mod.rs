//! The config file as a whole, then each section as the agent reads it
//! (one file a section).

mod addon;
mod agent;
mod assets;
mod cluster;
mod helpers;
mod kubelet;
mod metrics;
mod os_update;
mod sources;

use super::*;

fn load(text: &str) -> Result<Config> {
    Config::from_json(text, Path::new("/etc/node-bootstrap/config.json"))
}

#[test]
fn empty_object_gives_real_defaults() {
    let c = load("{}").unwrap();
    assert_eq!(c.role, Role::Worker);
    assert_eq!(
        c.paths.kubelet_env,
        PathBuf::from("/etc/kubernetes/kubelet.env")
    );
    assert_eq!(c.paths.seed_dir, PathBuf::from("/etc/kubernetes/installer"));
    assert_eq!(c.paths.state_dir, PathBuf::from("/var/lib/node-bootstrap"));
    assert_eq!(c.paths.assets_dir, PathBuf::from("/opt/tectonic"));
    assert_eq!(c.paths.torcx_store, PathBuf::from("/var/lib/torcx/store"));
}

#[test]
fn unknown_field_is_named_with_file() {
    let err = load(r#"{"paths": {"kubelet_evn": "/x"}}"#).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("/etc/node-bootstrap/config.json"), "{msg}");
    assert!(msg.contains("paths"), "{msg}");
    assert!(msg.contains("kubelet_evn"), "{msg}");
    assert_eq!(err.exit_code(), crate::error::exit::CONFIG);
}

#[test]
fn wrong_type_names_the_field() {
    let err = load(r#"{"role": "captain"}"#).unwrap_err();
    assert!(err.to_string().contains("field `role`"), "{err}");
}

#[test]
fn relative_path_is_rejected_by_field() {
    let err = load(r#"{"paths": {"state_dir": "var/lib"}}"#).unwrap_err();
    assert!(
        err.to_string()
            .contains("field `paths.state_dir`: must be an absolute path"),
        "{err}"
    );
}

#[test]
fn syntax_error_names_the_file() {
    let err = load("{").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid config file /etc/node-bootstrap/config.json"),
        "{err}"
    );
}

#[test]
fn missing_file_is_a_config_error() {
    let err = Config::load(Path::new("/nonexistent/config.json")).unwrap_err();
    assert_eq!(err.exit_code(), crate::error::exit::CONFIG);
    assert!(err.to_string().contains("/nonexistent/config.json"));
}

#[test]
fn bootkube_master_role_parses() {
    assert_eq!(
        load(r#"{"role":"bootkube-master"}"#).unwrap().role,
        Role::BootkubeMaster
    );
}
