//! The config file's `helpers` section ([`crate::helper::config`]), read as the
//! agent reads it: through [`crate::config::Config`], errors named by file and field.

use crate::config::Config;
use crate::helper::config::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn load(text: &str) -> crate::error::Result<Config> {
    Config::from_json(text, Path::new("/etc/node-bootstrap/config.json"))
}

#[test]
fn defaults_are_script_mode_with_the_asset_scripts() {
    let c = load("{}").unwrap();
    let b = &c.helpers.bootkube;
    assert_eq!(b.mode, HelperMode::Script);
    assert_eq!(
        b.script_path(&c.paths.assets_dir, "bootkube.sh"),
        PathBuf::from("/opt/tectonic/bootkube.sh")
    );
    assert_eq!(
        c.helpers
            .tectonic
            .script_path(&c.paths.assets_dir, "tectonic-wrapper.sh"),
        PathBuf::from("/opt/tectonic/tectonic-wrapper.sh")
    );
    assert_eq!(b.timeout, Duration::from_secs(1500));
    assert_eq!(b.log_tail_lines, 40);
    assert!(b.docker.is_none());
}

#[test]
fn docker_mode_defaults_to_what_bootkube_sh_ran() {
    let c = load(
        r#"{"helpers":{"bootkube":{"mode":"docker","docker":{"image":"quay.io/coreos/bootkube:v0.10.0"}}}}"#,
    )
    .unwrap();
    let d = c.helpers.bootkube.docker.unwrap();
    assert_eq!(d.entrypoint.clone().unwrap(), vec!["/bootkube"]);
    assert_eq!(
        d.args.clone().unwrap(),
        vec!["start", "--asset-dir=/assets"]
    );
    assert!(d.host_network);
    assert_eq!(
        d.binds(Path::new("/opt/tectonic")),
        vec!["/opt/tectonic:/assets", "/etc/kubernetes:/etc/kubernetes"]
    );
}

#[test]
fn printed_settings_name_env_variables_but_never_show_their_values() {
    let c = load(
        r#"{"helpers":{"tectonic":{"mode":"docker","docker":{"image":"i","env":{"TOKEN":"s3cret-token"}}}}}"#,
    )
    .unwrap();
    let printed = format!("{c:#?}");
    assert!(printed.contains("\"TOKEN\": \"<redacted>\""), "{printed}");
    assert!(!printed.contains("s3cret-token"), "{printed}");
}

#[test]
fn docker_mode_without_image_names_the_field() {
    let err = load(r#"{"helpers":{"tectonic":{"mode":"docker"}}}"#).unwrap_err();
    assert!(
        err.to_string()
            .contains("field `helpers.tectonic.docker.image`: is required"),
        "{err}"
    );
}

#[test]
fn bad_values_name_their_field() {
    let cases = [
        (
            r#"{"helpers":{"bootkube":{"timeout_secs":0}}}"#,
            "helpers.bootkube.timeout_secs",
        ),
        (
            r#"{"helpers":{"bootkube":{"timeout_secs":3600}}}"#,
            "helpers.bootkube.timeout_secs",
        ),
        (
            r#"{"helpers":{"tectonic":{"script":"tectonic.sh"}}}"#,
            "helpers.tectonic.script",
        ),
        (
            r#"{"helpers":{"bootkube":{"log_tail_lines":0}}}"#,
            "helpers.bootkube.log_tail_lines",
        ),
        (
            r#"{"helpers":{"bootkube":{"docker":{"image":"x","mounts":["assets:/assets"]}}}}"#,
            "helpers.bootkube.docker.mounts[0]",
        ),
        (
            r#"{"helpers":{"bootkube":{"docker":{"image":"a b"}}}}"#,
            "helpers.bootkube.docker.image",
        ),
    ];
    for (text, field) in cases {
        let err = load(text).unwrap_err().to_string();
        assert!(err.contains(&format!("field `{field}`")), "{text}: {err}");
    }
    let err = load(r#"{"helpers":{"bootkube":{"mdoe":"docker"}}}"#).unwrap_err();
    assert!(err.to_string().contains("mdoe"), "{err}");
}

#[test]
fn explicit_command_replaces_the_default() {
    let c = load(
        r#"{"helpers":{"bootkube":{"mode":"docker","docker":{"image":"x","args":["version"],"mounts":["/a:/b:ro"],"host_network":false}}}}"#,
    )
    .unwrap();
    let d = c.helpers.bootkube.docker.unwrap();
    assert_eq!(d.entrypoint, None);
    assert_eq!(d.args.clone().unwrap(), vec!["version"]);
    assert_eq!(d.binds(Path::new("/opt/tectonic")), vec!["/a:/b:ro"]);
    assert!(!d.host_network);
}
