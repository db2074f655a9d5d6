//! The node's OS identity from os-release: `VERSION_ID` (not `VERSION`,
//! which carries a `+date` suffix on dev builds) and `COREOS_BOARD`
//! (default by architecture, as torcx does).

use super::version::OsVersion;
use crate::error::{Error, Result};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsIdentity {
    /// `VERSION_ID`, e.g. `1632.3.0`.
    pub version_id: String,
    pub version: OsVersion,
    /// `COREOS_BOARD`, e.g. `amd64-usr`.
    pub board: String,
}

/// The board torcx assumes when os-release names none.
pub fn default_board() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("amd64-usr"),
        "aarch64" => Some("arm64-usr"),
        _ => None,
    }
}

/// Values of an os-release file (`KEY=value`, optionally quoted).
pub fn parse_env(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        out.push((k.trim().to_string(), unquote(v.trim())));
    }
    out
}

fn unquote(v: &str) -> String {
    let bytes = v.as_bytes();
    if bytes.len() >= 2
        && (bytes[0] == b'"' || bytes[0] == b'\'')
        && bytes[bytes.len() - 1] == bytes[0]
    {
        let inner = &v[1..v.len() - 1];
        if bytes[0] == b'"' {
            let mut s = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        s.push(n);
                    }
                } else {
                    s.push(c);
                }
            }
            return s;
        }
        return inner.to_string();
    }
    v.to_string()
}

impl OsIdentity {
    /// Parses os-release text; `source` names the file in errors.
    pub fn parse(text: &str, source: &Path) -> Result<OsIdentity> {
        let env = parse_env(text);
        let get = |k: &str| {
            env.iter()
                .rev()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        let version_id = get("VERSION_ID").ok_or_else(|| {
            Error::bad_input(format!("os-release {} has no VERSION_ID", source.display()))
        })?;
        let version = OsVersion::parse(&version_id).ok_or_else(|| {
            Error::bad_input(format!(
                "os-release {} has VERSION_ID={version_id:?}, not an OS version like 1632.3.0",
                source.display()
            ))
        })?;
        let board = match get("COREOS_BOARD") {
            Some(b) => b,
            None => default_board()
                .ok_or_else(|| {
                    Error::refused(format!(
                        "os-release {} has no COREOS_BOARD and architecture {} has no default board",
                        source.display(),
                        std::env::consts::ARCH
                    ))
                })?
                .to_string(),
        };
        if !board
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::bad_input(format!(
                "os-release {} has COREOS_BOARD={board:?}, not a board name like amd64-usr",
                source.display()
            )));
        }
        Ok(OsIdentity {
            version_id,
            version,
            board,
        })
    }

    pub fn read(path: &Path) -> Result<OsIdentity> {
        let text = crate::fsutil::read_input("os-release", path)?;
        Self::parse(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    const P: &str = "/usr/lib/os-release";

    #[test]
    fn container_linux_os_release() {
        let text = "NAME=\"Container Linux by CoreOS\"\nID=coreos\nVERSION=1632.3.0+2018-01-10\nVERSION_ID=1632.3.0\nBUILD_ID=2018-02-14-0338\nPRETTY_NAME=\"Container Linux by CoreOS 1632.3.0 (Ladybug)\"\nCOREOS_BOARD=\"arm64-usr\"\n";
        let os = OsIdentity::parse(text, Path::new(P)).unwrap();
        assert_eq!(os.version_id, "1632.3.0");
        assert_eq!(os.version, OsVersion(1632, 3, 0));
        assert_eq!(os.board, "arm64-usr");
    }

    #[test]
    fn board_defaults_by_arch() {
        let os = OsIdentity::parse("VERSION_ID='1520.3.0'\n", Path::new(P)).unwrap();
        assert_eq!(os.version_id, "1520.3.0");
        assert_eq!(Some(os.board.as_str()), default_board());
    }

    #[test]
    fn missing_or_odd_version_id_names_the_file() {
        let err = OsIdentity::parse("VERSION=1632.3.0+2018\n", Path::new(P)).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert_eq!(
            err.to_string(),
            "os-release /usr/lib/os-release has no VERSION_ID"
        );
        let err = OsIdentity::parse("VERSION_ID=12\n", Path::new(P)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "os-release /usr/lib/os-release has VERSION_ID=\"12\", not an OS version like 1632.3.0"
        );
        let err =
            OsIdentity::parse("VERSION_ID=1.2.3\nCOREOS_BOARD=../x\n", Path::new(P)).unwrap_err();
        assert!(err.to_string().contains("COREOS_BOARD=\"../x\""), "{err}");
    }
}
