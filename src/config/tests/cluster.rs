//! The config file's `cluster` section ([`crate::cluster::config`]), read as the
//! agent reads it: through [`crate::config::Config`], errors named by file and field.

use crate::config::Config;
use std::path::Path;

fn load(text: &str) -> crate::error::Result<Config> {
    Config::from_json(text, Path::new("/etc/node-bootstrap/config.json"))
}

#[test]
fn defaults() {
    let c = load("{}").unwrap().cluster;
    assert_eq!(c.forced_version, None);
    assert_eq!(c.api_attempts, 3);
    assert_eq!(c.api_timeout.as_secs(), 10);
    assert!(!c.fallback_to_seed);
    assert!(c.check_forced_skew);
    let p = c.api_retry_policy();
    assert_eq!(
        (p.max_attempts, p.initial.as_secs(), p.max_delay.as_secs()),
        (3, 2, 20)
    );
}

#[test]
fn forced_version_must_be_a_kubernetes_version() {
    let e = load(r#"{"cluster":{"forced_version":"latest"}}"#).unwrap_err();
    assert_eq!(e.exit_code(), crate::error::exit::CONFIG);
    assert!(
        e.to_string()
            .contains("field `cluster.forced_version`: \"latest\" is not a Kubernetes version"),
        "{e}"
    );
    let c = load(r#"{"cluster":{"forced_version":"v1.9.6+coreos.0","fallback_to_seed":true}}"#)
        .unwrap()
        .cluster;
    assert_eq!(c.forced_version.as_deref(), Some("v1.9.6+coreos.0"));
    assert!(c.fallback_to_seed);
}

#[test]
fn attempts_are_bounded() {
    let e = load(r#"{"cluster":{"api_attempts":0}}"#).unwrap_err();
    assert!(
        e.to_string().contains("field `cluster.api_attempts`"),
        "{e}"
    );
}
