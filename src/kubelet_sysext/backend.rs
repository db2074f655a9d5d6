//! Which kubelet a node runs: `kubelet.backend` against the release the
//! node runs (os-release `VERSION_ID`, [`crate::osrelease`]). Pure.
//!
//! - `auto` (the default) takes what the release has: kubelet-wrapper
//!   before 2857.0.0 (Container Linux, and Flatcar until it removed rkt and
//!   the wrapper with it), the kubernetes system extension from there (every
//!   release that reads the Ignition module's spec 3.3.0 configs, 3185.0.0
//!   and newer, is one of those);
//! - `wrapper` on a release without it is refused (exit 7) before anything
//!   changes: kubelet.service would run a program the node does not have;
//! - `sysext` is taken as asked (an older release with systemd-sysext may
//!   run the kubelet that way too).
//!
//! The flow decides with the release running when `run` starts, and again
//! before kubelet.env (an OS update may have crossed 2857.0.0); `status`
//! says the same with its reason.

use super::config::Backend;
use crate::error::{Error, Result};
use crate::osrelease::{OsIdentity, OsVersion};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The kubelet a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runs {
    /// `/usr/lib/coreos/kubelet-wrapper` (kubelet.service's own ExecStart).
    Wrapper,
    /// `/usr/bin/kubelet` of the merged kubernetes extension (the drop-in
    /// `units/kubelet-sysext.conf`, which the agent puts in place).
    Sysext,
}

impl Runs {
    pub fn name(self) -> &'static str {
        match self {
            Runs::Wrapper => "wrapper",
            Runs::Sysext => "sysext",
        }
    }
}

/// What the node runs, and why (for the journal and `status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    pub runs: Runs,
    pub why: String,
}

/// The backend for `setting` on the release `os` runs (module docs).
pub fn resolve(setting: Backend, os: &OsIdentity) -> Result<Resolved> {
    let removed = OsVersion::WITHOUT_KUBELET_WRAPPER;
    let has = os.version.has_kubelet_wrapper();
    match setting {
        Backend::Sysext => Ok(Resolved {
            runs: Runs::Sysext,
            why: "kubelet.backend is \"sysext\"".into(),
        }),
        Backend::Wrapper if has => Ok(Resolved {
            runs: Runs::Wrapper,
            why: "kubelet.backend is \"wrapper\"".into(),
        }),
        Backend::Wrapper => Err(Error::refused(format!(
            "kubelet.backend is \"wrapper\", but this node runs {}, which has no kubelet-wrapper: \
             Flatcar removed it, with rkt, in {removed}; set kubelet.backend to \"auto\" or \
             \"sysext\" (the kubelet as a system extension from the configured sources); nothing \
             was changed",
            os.describe()
        ))),
        Backend::Auto if has => Ok(Resolved {
            runs: Runs::Wrapper,
            why: format!(
                "auto: {} has kubelet-wrapper (releases before {removed})",
                os.describe()
            ),
        }),
        Backend::Auto => Ok(Resolved {
            runs: Runs::Sysext,
            why: format!(
                "auto: {} has no kubelet-wrapper (Flatcar removed it in {removed})",
                os.describe()
            ),
        }),
    }
}

/// [`resolve`] with the node's os-release at `os_release`; `sysext` needs
/// none.
pub fn on_node(setting: Backend, os_release: &Path) -> Result<Resolved> {
    if setting == Backend::Sysext {
        return resolve(setting, &placeholder());
    }
    let os = OsIdentity::read(os_release).map_err(|e| {
        e.context(format!(
            "kubelet.backend is {:?}: which kubelet this node runs depends on its release",
            name(setting)
        ))
    })?;
    resolve(setting, &os)
}

fn name(setting: Backend) -> &'static str {
    match setting {
        Backend::Auto => "auto",
        Backend::Wrapper => "wrapper",
        Backend::Sysext => "sysext",
    }
}

/// An identity `sysext` ignores.
fn placeholder() -> OsIdentity {
    OsIdentity {
        name: String::new(),
        version_id: String::new(),
        version: OsVersion(0, 0, 0),
        board: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    fn os(text: &str) -> OsIdentity {
        OsIdentity::parse(text, Path::new("/usr/lib/os-release")).unwrap()
    }

    const FLATCAR: &str = "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION_ID=4459.2.0\n";
    const CONTAINER_LINUX: &str = "NAME=\"Container Linux by CoreOS\"\nID=coreos\nVERSION_ID=1632.3.0\n";

    #[test]
    fn auto_takes_the_sysext_on_todays_flatcar_and_the_wrapper_where_it_is() {
        let r = resolve(Backend::Auto, &os(FLATCAR)).unwrap();
        assert_eq!(r.runs, Runs::Sysext);
        assert_eq!(
            r.why,
            "auto: Flatcar Container Linux by Kinvolk 4459.2.0 has no kubelet-wrapper (Flatcar removed it in 2857.0.0)"
        );
        let r = resolve(Backend::Auto, &os(CONTAINER_LINUX)).unwrap();
        assert_eq!(r.runs, Runs::Wrapper);
        // The last release with the wrapper, and the first without.
        let v = |v: &str| os(&format!("ID=flatcar\nVERSION_ID={v}\n"));
        assert_eq!(resolve(Backend::Auto, &v("2856.9.9")).unwrap().runs, Runs::Wrapper);
        assert_eq!(resolve(Backend::Auto, &v("2857.0.0")).unwrap().runs, Runs::Sysext);
    }

    #[test]
    fn the_wrapper_where_the_release_has_none_is_refused_naming_the_release() {
        let e = resolve(Backend::Wrapper, &os(FLATCAR)).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Refused);
        let m = e.to_string();
        assert!(m.contains("Flatcar Container Linux by Kinvolk 4459.2.0"), "{m}");
        assert!(m.contains("removed it, with rkt, in 2857.0.0"), "{m}");
        assert!(m.contains("set kubelet.backend to \"auto\""), "{m}");
        assert_eq!(
            resolve(Backend::Wrapper, &os(CONTAINER_LINUX)).unwrap().runs,
            Runs::Wrapper
        );
        // sysext is taken as asked, on any release.
        for t in [FLATCAR, CONTAINER_LINUX] {
            assert_eq!(resolve(Backend::Sysext, &os(t)).unwrap().runs, Runs::Sysext);
        }
    }

    #[test]
    fn on_a_node_without_os_release_auto_says_why_it_needs_one() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("os-release");
        assert_eq!(on_node(Backend::Sysext, &missing).unwrap().runs, Runs::Sysext);
        let e = on_node(Backend::Auto, &missing).unwrap_err();
        assert!(
            e.to_string().contains("which kubelet this node runs depends on its release"),
            "{e}"
        );
        std::fs::write(&missing, FLATCAR).unwrap();
        assert_eq!(on_node(Backend::Auto, &missing).unwrap().runs, Runs::Sysext);
    }
}
