//! The config file's `os_update` section ([`crate::os_update::config`]), read as the
//! agent reads it: through [`crate::config::Config`], errors named by file and field.

use crate::config::Config;
use std::path::Path;

#[test]
fn defaults_and_bounds() {
    let c = Config::from_json("{}", Path::new("/c.json"))
        .unwrap()
        .os_update;
    assert!(!c.enabled);
    assert_eq!(
        (
            c.timeout.as_secs(),
            c.poll_interval.as_secs(),
            c.stall_timeout.as_secs()
        ),
        (2400, 5, 600)
    );
    let e = Config::from_json(
        r#"{"os_update":{"timeout_secs":3600}}"#,
        Path::new("/c.json"),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains(
            "field `os_update.timeout_secs`: must be between 1 and 3300 seconds, got 3600"
        ),
        "{e}"
    );
}
