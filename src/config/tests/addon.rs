//! The config file's `addon` section ([`crate::addon::config`]), read as the
//! agent reads it: through [`crate::config::Config`], errors named by file and field.

use crate::config::Config;
use std::path::Path;

fn load(addon: &str) -> crate::error::Result<Config> {
    Config::from_json(
        &format!(r#"{{"addon": {addon}}}"#),
        Path::new("/etc/node-bootstrap/config.json"),
    )
}

#[test]
fn defaults_are_the_original_ones_but_the_backend_follows_the_release() {
    let c = load("{}").unwrap();
    let a = &c.addon;
    assert!(!a.enabled);
    assert_eq!(a.backend, crate::addon::config::BackendSetting::Auto);
    assert_eq!(
        a.package_source,
        crate::addon::config::PackageSource::TorcxManifest
    );
    assert_eq!(a.profile_name, "tectonic");
    assert!(!a.allow_unsigned);
    assert_eq!(a.download_attempts, 5);
    assert_eq!(a.max_package_bytes, 512 * 1024 * 1024);
    assert_eq!(a.sysext_mask, vec!["docker-flatcar", "containerd-flatcar"]);
}

#[test]
fn enabled_without_a_manifest_source_names_the_field() {
    let err = load(r#"{"enabled": true}"#).unwrap_err();
    assert!(
        err.to_string()
            .contains("field `addon.manifest_url`: required when addon.enabled is true"),
        "{err}"
    );
}

#[test]
fn metadata_source_needs_nothing_else_and_refuses_manifest_fields() {
    let c = load(r#"{"enabled": true, "package_source": "metadata"}"#).unwrap();
    assert_eq!(
        c.addon.package_source,
        crate::addon::config::PackageSource::Metadata
    );
    assert!(c.addon.manifest_url.is_none());
    let c =
        load(r#"{"enabled": true, "backend": "sysext", "package_source": "metadata"}"#).unwrap();
    assert_eq!(
        c.addon.backend,
        crate::addon::config::BackendSetting::Sysext
    );
    for (json, field, instead) in [
        (
            r#"{"package_source": "metadata", "manifest_url": "https://m/{board}.json"}"#,
            "addon.manifest_url",
            "sources.url",
        ),
        (
            r#"{"package_source": "metadata", "manifest_file": "/m/{board}.json"}"#,
            "addon.manifest_file",
            "sources.local_dir",
        ),
        (
            r#"{"package_source": "metadata", "keyring": "/k.asc"}"#,
            "addon.keyring",
            "sources.keyring",
        ),
        (
            r#"{"package_source": "metadata", "allow_unsigned": true}"#,
            "addon.allow_unsigned",
            "sources.allow_unsigned",
        ),
    ] {
        let err = load(json).unwrap_err().to_string();
        assert!(
            err.contains(&format!("field `{field}`: belongs to addon.package_source")),
            "{json}: {err}"
        );
        assert!(err.contains(instead), "{json}: {err}");
    }
    let err = load(r#"{"enabled": true, "package_source": "metadta"}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("field `addon.package_source"), "{err}");
    assert!(err.contains("metadta"), "{err}");
}

#[test]
fn templates_are_checked() {
    let err = load(r#"{"manifest_url": "https://x/{arch}/m.json"}"#).unwrap_err();
    assert!(
        err.to_string()
            .contains("field `addon.manifest_url`: unknown placeholder"),
        "{err}"
    );
    let err = load(r#"{"manifest_url": "ftp://x/{board}/m.json"}"#).unwrap_err();
    assert!(err.to_string().contains("scheme must be"), "{err}");
    let err = load(r#"{"manifest_file": "manifests/{board}.json"}"#).unwrap_err();
    assert!(
        err.to_string()
            .contains("field `addon.manifest_file`: must be an absolute path"),
        "{err}"
    );
    let c = load(
        r#"{"enabled": true, "backend": "sysext", "manifest_url": "http://127.0.0.1:1/m/{board}/{os_version}/torcx_manifest.json"}"#,
    )
    .unwrap();
    assert_eq!(
        c.addon.backend,
        crate::addon::config::BackendSetting::Sysext
    );
}

#[test]
fn bad_values_name_their_field() {
    for (json, field) in [
        (r#"{"profile_name": "../etc"}"#, "addon.profile_name"),
        (r#"{"profile_name": "vendor"}"#, "addon.profile_name"),
        (r#"{"download_attempts": 0}"#, "addon.download_attempts"),
        (r#"{"max_package_bytes": 0}"#, "addon.max_package_bytes"),
        (r#"{"keyring": "keys.asc"}"#, "addon.keyring"),
        (r#"{"sysext_mask": ["docker"]}"#, "addon.sysext_mask[0]"),
        (
            r#"{"download_backoff_secs": 10, "download_backoff_max_secs": 5}"#,
            "addon.download_backoff_max_secs",
        ),
        (r#"{"backend": "rkt"}"#, "addon.backend"),
        (r#"{"allow_unsgined": true}"#, "addon"),
    ] {
        let err = load(json).unwrap_err();
        assert!(
            err.to_string().contains(&format!("field `{field}")),
            "{json}: {err}"
        );
    }
}

/// `auto` takes torcx where the release the node boots next has it, the
/// system extension from 3794.0.0; torcx asked for there is refused naming
/// that release.
#[test]
fn the_backend_setting_against_the_release() {
    use crate::addon::config::{Backend, BackendSetting};
    use crate::osrelease::OsVersion;
    let v = |s| OsVersion::parse(s).unwrap();
    let os = "Flatcar Container Linux by Kinvolk 4459.2.0";
    assert_eq!(
        BackendSetting::Auto.resolve(v("3760.2.0"), os).unwrap(),
        Backend::Torcx
    );
    assert_eq!(
        BackendSetting::Auto.resolve(v("3794.0.0"), os).unwrap(),
        Backend::Sysext
    );
    assert_eq!(
        BackendSetting::Sysext.resolve(v("1632.3.0"), os).unwrap(),
        Backend::Sysext
    );
    assert_eq!(
        BackendSetting::Torcx.resolve(v("1632.3.0"), os).unwrap(),
        Backend::Torcx
    );
    let e = BackendSetting::Torcx
        .resolve(v("4459.2.0"), os)
        .unwrap_err();
    assert_eq!(e.class(), crate::error::ErrorClass::Refused);
    let m = e.to_string();
    assert!(
        m.contains(os) && m.contains("removed it in 3794.0.0"),
        "{m}"
    );
    assert!(m.contains("set addon.backend to \"auto\""), "{m}");
}
