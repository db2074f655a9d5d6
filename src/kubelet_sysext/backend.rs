//! Which kubelet a node runs: `kubelet.backend` against what the node has.
//! Pure but for [`on_node`], which looks.
//!
//! A node has kubelet-wrapper when `/usr/lib/coreos/kubelet-wrapper` is
//! there, or its release predates 2857.0.0 (Container Linux, and Flatcar
//! until it removed rkt and the wrapper with it; os-release `VERSION_ID`,
//! [`crate::osrelease`]). Every release that reads the Ignition module's
//! spec 3.3.0 configs (3185.0.0 and newer) has none.
//!
//! - `auto` (the default) takes what the node has: kubelet-wrapper where
//!   it is, the kubernetes system extension everywhere else;
//! - `wrapper` on a node without it is refused (exit 7) before anything
//!   changes, naming the release that removed it: kubelet.service would run
//!   a program the node does not have;
//! - `sysext` is taken as asked (a release with kubelet-wrapper and
//!   systemd-sysext may run the kubelet that way too).
//!
//! The flow decides when `run` starts, in its `runtime` step, and again
//! before kubelet.env (an OS update may have removed the wrapper); `status`
//! says the same with its reason.

use super::config::Backend;
use crate::error::{Error, Result};
use crate::osrelease::{OsIdentity, OsVersion};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where Container Linux and Flatcar before 2857.0.0 have kubelet-wrapper
/// (kubelet.service's own `ExecStart=`).
pub const KUBELET_WRAPPER: &str = "/usr/lib/coreos/kubelet-wrapper";

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

/// What the node has: its release (`None`: os-release unreadable) and
/// whether kubelet-wrapper is at [`KUBELET_WRAPPER`].
#[derive(Debug, Clone)]
pub struct NodeHas {
    pub os: Option<OsIdentity>,
    pub wrapper_file: bool,
}

impl NodeHas {
    /// kubelet-wrapper is there, or the release is one that has it.
    pub fn kubelet_wrapper(&self) -> bool {
        self.wrapper_file
            || self
                .os
                .as_ref()
                .is_some_and(|o| o.version.has_kubelet_wrapper())
    }

    fn describe(&self) -> String {
        self.os.as_ref().map_or_else(
            || "an OS whose os-release cannot be read".to_string(),
            OsIdentity::describe,
        )
    }
}

/// The backend for `setting` on a node that has `has` (module docs).
pub fn resolve(setting: Backend, has: &NodeHas) -> Result<Resolved> {
    let removed = OsVersion::WITHOUT_KUBELET_WRAPPER;
    let wrapper = has.kubelet_wrapper();
    let os = has.describe();
    match setting {
        Backend::Sysext => Ok(Resolved {
            runs: Runs::Sysext,
            why: "kubelet.backend is \"sysext\"".into(),
        }),
        Backend::Wrapper if wrapper => Ok(Resolved {
            runs: Runs::Wrapper,
            why: "kubelet.backend is \"wrapper\"".into(),
        }),
        Backend::Wrapper => Err(Error::refused(format!(
            "kubelet.backend is \"wrapper\", but this node runs {os} and has no kubelet-wrapper \
             ({KUBELET_WRAPPER}): Flatcar removed it, with rkt, in {removed}; set kubelet.backend \
             to \"auto\" or \"sysext\" (the kubelet as a system extension from the configured \
             sources); nothing was changed"
        ))),
        Backend::Auto if wrapper => Ok(Resolved {
            runs: Runs::Wrapper,
            why: format!("auto: {os} has kubelet-wrapper"),
        }),
        Backend::Auto => Ok(Resolved {
            runs: Runs::Sysext,
            why: format!("auto: {os} has no kubelet-wrapper (Flatcar removed it in {removed})"),
        }),
    }
}

/// What this node has: its os-release at `os_release` and [`KUBELET_WRAPPER`]
/// (seen from the agent's root, as kubelet.service sees it).
pub fn look(os_release: &Path) -> NodeHas {
    NodeHas {
        os: OsIdentity::read(os_release).ok(),
        wrapper_file: Path::new(KUBELET_WRAPPER).exists(),
    }
}

/// [`resolve`] on this node ([`look`]).
pub fn on_node(setting: Backend, os_release: &Path) -> Result<Resolved> {
    resolve(setting, &look(os_release))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    fn has(text: &str, wrapper_file: bool) -> NodeHas {
        NodeHas {
            os: Some(OsIdentity::parse(text, Path::new("/usr/lib/os-release")).unwrap()),
            wrapper_file,
        }
    }

    const FLATCAR: &str =
        "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION_ID=4593.2.0\n";
    const CONTAINER_LINUX: &str =
        "NAME=\"Container Linux by CoreOS\"\nID=coreos\nVERSION_ID=1632.3.0\n";

    #[test]
    fn auto_takes_the_wrapper_where_the_node_has_it_and_the_sysext_elsewhere() {
        let r = resolve(Backend::Auto, &has(FLATCAR, false)).unwrap();
        assert_eq!(r.runs, Runs::Sysext);
        assert_eq!(
            r.why,
            "auto: Flatcar Container Linux by Kinvolk 4593.2.0 has no kubelet-wrapper (Flatcar removed it in 2857.0.0)"
        );
        // The same release with the wrapper on its disk (a test image).
        let r = resolve(Backend::Auto, &has(FLATCAR, true)).unwrap();
        assert_eq!(r.runs, Runs::Wrapper);
        assert_eq!(
            r.why,
            "auto: Flatcar Container Linux by Kinvolk 4593.2.0 has kubelet-wrapper"
        );
        // An old release has it, whether or not this tree shows the file.
        assert_eq!(
            resolve(Backend::Auto, &has(CONTAINER_LINUX, false))
                .unwrap()
                .runs,
            Runs::Wrapper
        );
        let v = |v: &str| has(&format!("ID=flatcar\nVERSION_ID={v}\n"), false);
        assert_eq!(
            resolve(Backend::Auto, &v("2856.9.9")).unwrap().runs,
            Runs::Wrapper
        );
        assert_eq!(
            resolve(Backend::Auto, &v("2857.0.0")).unwrap().runs,
            Runs::Sysext
        );
        // No os-release and no wrapper: the sysext.
        let none = NodeHas {
            os: None,
            wrapper_file: false,
        };
        assert_eq!(resolve(Backend::Auto, &none).unwrap().runs, Runs::Sysext);
    }

    #[test]
    fn the_wrapper_where_the_node_has_none_is_refused_naming_the_release() {
        let e = resolve(Backend::Wrapper, &has(FLATCAR, false)).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Refused);
        let m = e.to_string();
        assert!(
            m.contains("Flatcar Container Linux by Kinvolk 4593.2.0"),
            "{m}"
        );
        assert!(m.contains("removed it, with rkt, in 2857.0.0"), "{m}");
        assert!(m.contains("set kubelet.backend to \"auto\""), "{m}");
        for ok in [has(FLATCAR, true), has(CONTAINER_LINUX, false)] {
            assert_eq!(resolve(Backend::Wrapper, &ok).unwrap().runs, Runs::Wrapper);
        }
        // sysext is taken as asked, on any node.
        for n in [has(FLATCAR, false), has(CONTAINER_LINUX, true)] {
            assert_eq!(resolve(Backend::Sysext, &n).unwrap().runs, Runs::Sysext);
        }
    }
}
