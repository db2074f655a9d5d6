//! The node's OS identity from os-release (docs/formats.md §5): the one
//! parser of it, for the flow (which OS runs, did the update take effect),
//! the docker addon (which packages fit) and the backends a release has
//! (kubelet-wrapper, torcx). `VERSION_ID`, not `VERSION`, which carries a
//! `+date` suffix on dev builds; `COREOS_BOARD`, defaulting by architecture
//! as torcx does.
//!
//! What a release has, by its number (Container Linux and Flatcar number
//! their releases on one line, so one comparison holds for both):
//! - kubelet-wrapper (`/usr/lib/coreos/kubelet-wrapper`, which runs the
//!   kubelet through `rkt fly`) until Flatcar removed rkt and with it the
//!   wrapper in Alpha 2857.0.0 (flatcar/Flatcar#180, coreos-overlay#965):
//!   [`OsVersion::has_kubelet_wrapper`];
//! - torcx until Flatcar removed it in 3794.0.0 (Alpha, 2023), where docker
//!   and containerd became system extensions of the OS
//!   (`docker-flatcar.raw`, `containerd-flatcar.raw`):
//!   [`OsVersion::has_torcx`].

use crate::error::{Error, Result};
use std::fmt;
use std::path::Path;

/// A Container Linux / Flatcar OS version (`VERSION_ID`): `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OsVersion(pub u64, pub u64, pub u64);

impl OsVersion {
    /// The first OS version with remote docker packages (tectonic-torcx's
    /// `MinimumRemoteDocker`).
    pub const FIRST_REMOTE_PACKAGES: OsVersion = OsVersion(1520, 3, 0);
    /// The first release without kubelet-wrapper (Flatcar removed rkt,
    /// and the wrapper with it, in Alpha 2857.0.0).
    pub const WITHOUT_KUBELET_WRAPPER: OsVersion = OsVersion(2857, 0, 0);
    /// The first release without torcx (Flatcar 3794.0.0: docker and
    /// containerd are the OS's own system extensions from there).
    pub const WITHOUT_TORCX: OsVersion = OsVersion(3794, 0, 0);

    pub fn parse(s: &str) -> Option<OsVersion> {
        let mut it = s.trim().split('.');
        let mut next = || -> Option<u64> {
            let p = it.next()?;
            if p.is_empty() || p.len() > 9 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse().ok()
        };
        let v = OsVersion(next()?, next()?, next()?);
        if it.next().is_some() {
            return None;
        }
        Some(v)
    }

    /// Whether remote docker packages exist for this OS version.
    pub fn has_remote_packages(self) -> bool {
        self >= Self::FIRST_REMOTE_PACKAGES
    }

    /// Whether this release has kubelet-wrapper (module docs).
    pub fn has_kubelet_wrapper(self) -> bool {
        self < Self::WITHOUT_KUBELET_WRAPPER
    }

    /// Whether this release has torcx (module docs).
    pub fn has_torcx(self) -> bool {
        self < Self::WITHOUT_TORCX
    }
}

impl fmt::Display for OsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// `VERSION_ID` of the os-release file at `path`, whatever it looks like
/// (the flow compares it; only the addon needs a Container Linux version).
pub fn version_id(path: &Path) -> Result<String> {
    let text = crate::fsutil::read_input("os-release", path)?;
    value(&parse_env(&text), "VERSION_ID")
        .ok_or_else(|| Error::bad_input(format!("os-release {} has no VERSION_ID", path.display())))
}

/// The last non-empty value of `key`.
fn value(env: &[(String, String)], key: &str) -> Option<String> {
    env.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsIdentity {
    /// `NAME`, e.g. `Flatcar Container Linux by Kinvolk` (`ID` when there
    /// is no `NAME`, else empty).
    pub name: String,
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
        let get = |k: &str| value(&env, k);
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
        let name = get("NAME").or_else(|| get("ID")).unwrap_or_default();
        Ok(OsIdentity {
            name,
            version_id,
            version,
            board,
        })
    }

    pub fn read(path: &Path) -> Result<OsIdentity> {
        let text = crate::fsutil::read_input("os-release", path)?;
        Self::parse(&text, path)
    }

    /// `Flatcar Container Linux by Kinvolk 4459.2.0`, for messages.
    pub fn describe(&self) -> String {
        if self.name.is_empty() {
            format!("OS {}", self.version_id)
        } else {
            format!("{} {}", self.name, self.version_id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    const P: &str = "/usr/lib/os-release";

    #[test]
    fn os_versions_compare_numerically() {
        let v = |s| OsVersion::parse(s).unwrap();
        assert!(v("1520.3.0").has_remote_packages());
        assert!(v("2765.2.6").has_kubelet_wrapper() && !v("2857.0.0").has_kubelet_wrapper());
        assert!(v("3760.2.0").has_torcx() && !v("3794.0.0").has_torcx());
        assert!(!v("4459.2.0").has_kubelet_wrapper() && !v("4459.2.0").has_torcx());
        assert!(!v("1520.2.9").has_remote_packages());
        assert!(v("1632.3.0") > v("1520.10.0"));
        assert!(v("1520.10.0") > v("1520.9.0"));
        for bad in ["1520.3", "1520.3.0.1", "1520.3.0+2017-12-01", "x.y.z", ""] {
            assert!(OsVersion::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn container_linux_os_release() {
        let text = "NAME=\"Container Linux by CoreOS\"\nID=coreos\nVERSION=1632.3.0+2018-01-10\nVERSION_ID=1632.3.0\nBUILD_ID=2018-02-14-0338\nPRETTY_NAME=\"Container Linux by CoreOS 1632.3.0 (Ladybug)\"\nCOREOS_BOARD=\"arm64-usr\"\n";
        let os = OsIdentity::parse(text, Path::new(P)).unwrap();
        assert_eq!(os.version_id, "1632.3.0");
        assert_eq!(os.version, OsVersion(1632, 3, 0));
        assert_eq!(os.board, "arm64-usr");
        assert_eq!(os.describe(), "Container Linux by CoreOS 1632.3.0");
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
