//! The config file's `sources` section ([`crate::metadata::config`]), read as the
//! agent reads it: through [`crate::config::Config`], errors named by file and field.

use crate::config::Config;
use crate::metadata::config::*;
use std::path::Path;
use std::path::PathBuf;

fn load(text: &str) -> crate::error::Result<Config> {
    Config::from_json(text, Path::new("/c.json"))
}

#[test]
fn defaults_refuse_unsigned_everywhere() {
    let c = load("{}").unwrap();
    assert!(c.sources.allow_unsigned.is_empty());
    assert_eq!(c.sources.local_dir, PathBuf::from(DEFAULT_LOCAL_DIR));
    assert!(
        c.sources.default_url.is_none(),
        "the default location is opt-in"
    );
    assert_eq!(
        c.sources.keyring_path(&c.paths),
        PathBuf::from("/etc/kubernetes/installer/keyring.asc")
    );
}

#[test]
fn locations_parse_and_bad_ones_name_the_field() {
    let c = load(r#"{"sources":{"url":"file:///srv/mirror","allow_unsigned":["url"]}}"#).unwrap();
    assert_eq!(
        c.sources.url,
        Some(UserLocation::Dir(PathBuf::from("/srv/mirror")))
    );
    let e = load(r#"{"sources":{"url":"ftp://x/y"}}"#).unwrap_err();
    assert!(
        e.to_string()
            .contains("field `sources.url`: scheme \"ftp\""),
        "{e}"
    );
    let e = load(r#"{"sources":{"allow_unsigned":["everywhere"]}}"#).unwrap_err();
    assert!(e.to_string().contains("sources.allow_unsigned"), "{e}");
    let c = load(r#"{"sources":{"use_default":false}}"#).unwrap();
    assert!(c.sources.default_url.is_none());
    let c = load(r#"{"sources":{}}"#).unwrap();
    assert!(
        c.sources.default_url.is_none(),
        "no public mirror: the default is opt-in"
    );
    let c =
        load(r#"{"sources":{"default_url":"https://mirror.example.internal/streams"}}"#).unwrap();
    assert!(c.sources.default_url.is_some());
    let c = load(r#"{"sources":{"use_default":true}}"#).unwrap();
    assert_eq!(
        c.sources.default_url.as_ref().unwrap().as_str(),
        DEFAULT_URL
    );
}
