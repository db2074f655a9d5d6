//! Which agent this is: its version, the node's architecture, and the
//! product that names both in artifact metadata.
//!
//! The version is read from a stamp in the binary (`STAMP`): the crate's
//! version at build time. A release pipeline may rewrite the stamp in a
//! built binary to publish the very same build under another version
//! (`scripts/stamp-version.sh`, as Go's `-ldflags -X` does); the upgrade
//! tests publish "newer" agents that way.

use serde::Serialize;

/// The stamp's marker; the version follows it, NUL-padded.
pub const STAMP_MARKER: &[u8] = b"NODE_BOOTSTRAP_VERSION_STAMP=";
/// The stamp's whole length (marker, version, NUL padding).
pub const STAMP_LEN: usize = 96;

const fn stamp(version: &str) -> [u8; STAMP_LEN] {
    let mut out = [0u8; STAMP_LEN];
    let mut i = 0;
    while i < STAMP_MARKER.len() {
        out[i] = STAMP_MARKER[i];
        i += 1;
    }
    let v = version.as_bytes();
    let mut j = 0;
    while j < v.len() {
        out[i + j] = v[j];
        j += 1;
    }
    out
}

#[used]
static STAMP: [u8; STAMP_LEN] = stamp(env!("CARGO_PKG_VERSION"));

/// This agent's version, e.g. `0.1.0` (see module docs).
pub fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        // A volatile read of a copy: the compiler must not fold the stamp
        // into a constant, since a release may rewrite it in the binary.
        let bytes: [u8; STAMP_LEN] = unsafe { std::ptr::read_volatile(&STAMP) };
        let v = &bytes[STAMP_MARKER.len()..];
        let len = v.iter().position(|b| *b == 0).unwrap_or(v.len());
        String::from_utf8_lossy(&v[..len]).into_owned()
    })
}

/// The node's architecture as artifact metadata names it (Debian/Go
/// names: `amd64`, `arm64`), `None` on others.
pub fn arch() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("amd64"),
        "aarch64" => Some("arm64"),
        _ => None,
    }
}

/// The product name of agent binaries; series `any` (one binary for every
/// OS version).
pub const PRODUCT: &str = "node-bootstrap";
pub const SERIES: &str = "any";

/// What `node-bootstrap version --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionInfo {
    pub version: String,
    pub arch: Option<String>,
    /// The versions an upgrade takes without `--major`: same major, not older.
    pub compatible: String,
}

pub fn info() -> VersionInfo {
    let v = version();
    let compatible = match semver::Version::parse(v) {
        Ok(s) => format!(">={v}, <{}.0.0", s.major + 1),
        Err(_) => format!("={v}"),
    };
    VersionInfo {
        version: v.to_string(),
        arch: arch().map(str::to_string),
        compatible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_holds_the_crate_version() {
        assert_eq!(version(), env!("CARGO_PKG_VERSION"));
        assert!(STAMP.starts_with(STAMP_MARKER));
        let i = info();
        assert_eq!(i.version, version());
        assert!(i.compatible.starts_with(&format!(">={}, <", version())));
    }
}
