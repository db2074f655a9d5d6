//! The config file's `agent` section ([`crate::agent_upgrade::config`]), read as the
//! agent reads it: through [`crate::config::Config`], errors named by file and field.

use crate::config::Config;
use std::path::Path;

#[test]
fn defaults_and_errors_name_the_field() {
    let c = Config::from_json("{}", Path::new("/c.json")).unwrap();
    assert_eq!(
        c.agent.upgrade,
        crate::agent_upgrade::config::AutoUpgrade::Off
    );
    assert_eq!(
        c.agent.previous_binary(),
        Path::new("/opt/bin/node-bootstrap.previous")
    );
    let e = Config::from_json(r#"{"agent":{"upgrade":"major"}}"#, Path::new("/c.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("agent.upgrade"), "{e}");
    let e = Config::from_json(
        r#"{"agent":{"binary":"node-bootstrap"}}"#,
        Path::new("/c.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("field `agent.binary`: must be an absolute path"),
        "{e}"
    );
}
