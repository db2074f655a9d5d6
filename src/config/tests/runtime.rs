//! The config file's `runtime` section ([`crate::container_runtime::config`]),
//! read as the agent reads it: through [`crate::config::Config`], errors
//! named by file and field.

use crate::config::Config;
use crate::container_runtime::config::Package;
use std::path::Path;

fn load(runtime: &str) -> crate::error::Result<Config> {
    Config::from_json(
        &format!(r#"{{"runtime": {runtime}}}"#),
        Path::new("/etc/node-bootstrap/config.json"),
    )
}

#[test]
fn containerd_may_come_as_a_package_by_default_laid_out_as_the_bakery_does() {
    let c = load("{}").unwrap();
    let d = &c.runtime.containerd;
    assert_eq!(d.package, Package::Sysext);
    assert_eq!(d.images_dir, Path::new("/opt/extensions/containerd"));
    assert_eq!(d.sysext_mask, ["containerd-flatcar"]);
    assert_eq!(d.max_image_bytes, 512 * 1024 * 1024);
    assert_eq!(d.merge_timeout.as_secs(), 120);
    assert_eq!(c.paths.containerd_binary, Path::new("/usr/bin/containerd"));
    let d = load(
        r#"{"containerd": {"package": "none", "sysext_mask": [], "images_dir": "/var/lib/ext/containerd"}}"#,
    )
    .unwrap()
    .runtime
    .containerd;
    assert_eq!(d.package, Package::None);
    assert!(d.sysext_mask.is_empty());
    assert_eq!(d.images_dir, Path::new("/var/lib/ext/containerd"));
}

#[test]
fn bad_values_name_their_field() {
    for (json, field, what) in [
        (
            r#"{"containerd": {"package": "torcx"}}"#,
            "runtime.containerd.package",
            "unknown variant `torcx`, expected `none` or `sysext`",
        ),
        (
            r#"{"containerd": {"package": true}}"#,
            "runtime.containerd.package",
            "expected value",
        ),
        (
            r#"{"containerd": {"images_dir": "opt/containerd"}}"#,
            "runtime.containerd.images_dir",
            "absolute",
        ),
        (
            r#"{"containerd": {"sysext_mask": ["containerd-flatcar", "containerd"]}}"#,
            "runtime.containerd.sysext_mask[1]",
            "must not mask the extension this agent installs",
        ),
        (
            r#"{"containerd": {"sysext_mask": ["../x"]}}"#,
            "runtime.containerd.sysext_mask[0]",
            "[A-Za-z0-9._-]",
        ),
        (
            r#"{"containerd": {"max_image_bytes": 0}}"#,
            "runtime.containerd.max_image_bytes",
            "greater than 0",
        ),
        (
            r#"{"containerd": {"merge_timeout_secs": 0}}"#,
            "runtime.containerd.merge_timeout_secs",
            "between 1 and 1800",
        ),
        (
            r#"{"containerd": {"pakage": "none"}}"#,
            "runtime.containerd",
            "pakage",
        ),
    ] {
        let err = load(json).unwrap_err();
        assert_eq!(err.class(), crate::error::ErrorClass::Config, "{json}");
        let err = err.to_string();
        assert!(err.contains(&format!("field `{field}")), "{json}: {err}");
        assert!(err.contains(what), "{json}: {err}");
    }
}
