//! The config file's `kubelet` section ([`crate::kubelet_sysext::config`]), read as the
//! agent reads it: through [`crate::config::Config`], errors named by file and field.

use crate::config::Config;
use std::path::Path;

fn load(kubelet: &str) -> crate::error::Result<Config> {
    Config::from_json(
        &format!(r#"{{"kubelet": {kubelet}}}"#),
        Path::new("/etc/node-bootstrap/config.json"),
    )
}

#[test]
fn defaults_follow_the_release_and_the_bakery_layout() {
    let k = load("{}").unwrap().kubelet;
    assert_eq!(k.backend, crate::kubelet_sysext::config::Backend::Auto);
    assert_eq!(k.extension_name, "kubernetes");
    assert_eq!(k.images_dir, Path::new("/opt/extensions/kubernetes"));
    assert_eq!(k.max_minor_lag, 0);
    assert_eq!(Config::defaults().kubelet, k);
    let k = load(r#"{"backend": "sysext", "max_minor_lag": 3}"#)
        .unwrap()
        .kubelet;
    assert_eq!(
        (k.backend, k.max_minor_lag),
        (crate::kubelet_sysext::config::Backend::Sysext, 3)
    );
}

#[test]
fn bad_values_name_their_field() {
    for (json, field, what) in [
        (r#"{"backend": "rkt"}"#, "kubelet.backend", "rkt"),
        (
            r#"{"max_minor_lag": 4}"#,
            "kubelet.max_minor_lag",
            "between 0 and 3",
        ),
        (
            r#"{"extension_name": "../x"}"#,
            "kubelet.extension_name",
            "[A-Za-z0-9._-]",
        ),
        (
            r#"{"extension_name": "docker"}"#,
            "kubelet.extension_name",
            "docker addon",
        ),
        (
            r#"{"extension_name": "containerd"}"#,
            "kubelet.extension_name",
            "containerd's package",
        ),
        (
            r#"{"images_dir": "opt/ext"}"#,
            "kubelet.images_dir",
            "absolute",
        ),
        (r#"{"max_image_bytes": 0}"#, "kubelet.max_image_bytes", "0"),
        (
            r#"{"merge_timeout_secs": 0}"#,
            "kubelet.merge_timeout_secs",
            "between 1 and 1800",
        ),
        (r#"{"bakend": "sysext"}"#, "kubelet", "bakend"),
    ] {
        let err = load(json).unwrap_err().to_string();
        assert!(err.contains(&format!("field `{field}")), "{json}: {err}");
        assert!(err.contains(what), "{json}: {err}");
    }
}
