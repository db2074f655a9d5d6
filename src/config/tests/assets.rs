//! The config file's `assets` section ([`crate::assets::config`]), read as the
//! agent reads it: through [`crate::config::Config`], errors named by file and field.

use crate::config::Config;
use std::path::Path;

fn load(text: &str) -> crate::error::Result<Config> {
    Config::from_json(text, Path::new("/etc/node-bootstrap/config.json"))
}

#[test]
fn plain_http_endpoints_only_on_loopback() {
    let cfg = |ep: &str| {
        load(&format!(
            r#"{{"assets":{{"mode":"pull","s3":{{"bucket":"b","key":"k","endpoint":"{ep}"}}}}}}"#
        ))
    };
    for ok in [
        "http://127.0.0.1:9000",
        "http://localhost:9000",
        "http://[::1]:9000",
        "https://s3.example.internal",
    ] {
        cfg(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    let err = cfg("http://s3.example.internal").unwrap_err();
    assert!(
        err.to_string()
            .contains("field `assets.s3.endpoint`: must be https://"),
        "{err}"
    );
}

#[test]
fn defaults_are_push_mode_without_marker() {
    let c = load("{}").unwrap();
    assert_eq!(c.assets.mode, crate::assets::config::AssetsMode::Push);
    assert_eq!(c.assets.marker, None);
    assert!(c.assets.s3.is_none());
}

#[test]
fn pull_mode_needs_bucket_and_key() {
    let e = load(r#"{"assets":{"mode":"pull"}}"#).unwrap_err();
    assert!(
        e.to_string().contains("field `assets.s3`: is required"),
        "{e}"
    );
    let e = load(r#"{"assets":{"mode":"pull","s3":{"bucket":"b"}}}"#).unwrap_err();
    assert!(
        e.to_string().contains("field `assets.s3.key`: is required"),
        "{e}"
    );
}

#[test]
fn pull_settings_parse_with_defaults() {
    let c = load(
        r#"{"assets":{"mode":"pull","s3":{"bucket":"b","key":"/a/b.tgz",
            "endpoint":"http://127.0.0.1:9000","checksum_sha256":"AB"}}}"#,
    );
    let e = c.unwrap_err();
    assert!(
        e.to_string()
            .contains("field `assets.s3.checksum_sha256`: must be 64 hex digits"),
        "{e}"
    );
    let sha = "ab".repeat(32);
    let c = load(&format!(
        r#"{{"assets":{{"mode":"pull","s3":{{"bucket":"b","key":"/a/b.tgz",
            "endpoint":"http://127.0.0.1:9000","checksum_sha256":"{sha}"}}}}}}"#
    ))
    .unwrap();
    let s3 = c.assets.s3.unwrap();
    assert_eq!(s3.key, "a/b.tgz");
    assert!(s3.force_path_style);
    assert_eq!(s3.part_size, 16 * 1024 * 1024);
    assert_eq!(
        s3.checksums,
        vec![crate::assets::config::Checksum::Sha256(sha)]
    );
    assert_eq!(s3.uri(), "s3://b/a/b.tgz");
}

#[test]
fn marker_must_be_a_plain_name() {
    let e = load(r#"{"assets":{"marker":"../x"}}"#).unwrap_err();
    assert!(e.to_string().contains("field `assets.marker`"), "{e}");
    assert!(load(r#"{"assets":{"marker":".assets-complete"}}"#).is_ok());
}

#[test]
fn out_of_range_numbers_name_the_field() {
    let e = load(r#"{"assets":{"s3":{"bucket":"b","key":"k","concurrency":0}}}"#).unwrap_err();
    assert!(e.to_string().contains("assets.s3.concurrency"), "{e}");
    let e = load(r#"{"assets":{"limits":{"max_entry_mib":0}}}"#).unwrap_err();
    assert!(e.to_string().contains("assets.limits.max_entry_mib"), "{e}");
}
