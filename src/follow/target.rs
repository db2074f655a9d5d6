//! Which kubelet this node should run: a pure decision over the version
//! its kubelet runs, what the API server said in the last looks, the
//! operator's minor target and (for the sysext) what the mirror offers.
//!
//! The rules (the Kubernetes version-skew policy: a kubelet is never newer
//! than the oldest API server, and may be a few minors older; drain before
//! a minor kubelet upgrade, which is not done in place):
//! 1. the API server's version counts only once the last
//!    `follow.stable_checks` looks all saw it (an HA control plane answers
//!    from one instance at a time while it is upgraded; a version that
//!    comes and goes is no target) — else [`Intent::Settling`];
//! 2. the minor to be at is the operator's `minor` (ConfigMap), else the
//!    node's own: a node never crosses a minor without the operator's
//!    target ([`Intent::AwaitOperator`] when the API server is at a newer
//!    minor and none is set);
//! 3. a target minor newer than the API server's, older than the node's,
//!    of another major, or more than one minor ahead of the node, is
//!    refused ([`Intent::Refuse`]): never newer than the API server, never
//!    a downgrade, one minor at a time;
//! 4. within the target minor: the API server's own version when it is at
//!    that minor; below it, the newest patch of that minor the mirror
//!    offers (sysext; a kubelet-wrapper node has no list of releases and
//!    refuses) ([`pick`]); the choice must satisfy the skew policy against
//!    the API server;
//! 5. nothing newer than the node's kubelet: [`Intent::UpToDate`] (a node
//!    whose kubelet is newer than the cluster's target is never
//!    downgraded; it says so).

use super::policy::MinorVersion;
use crate::cluster::version::{KubeVersion, precedence, skew_violation};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// Whether a pre-release tag is a release candidate or earlier
/// (`alpha.1`, `beta.0`, `rc.2`), as Kubernetes names its pre-releases.
fn real_pre_release(pre: &str) -> bool {
    ["alpha", "beta", "rc"].iter().any(|p| pre.starts_with(p))
}

/// The upstream release an API server's version names: a distribution's
/// suffix in the pre-release place dropped (`v1.20.4-eks-6b7464`,
/// `v1.20.4-gke.1800` are v1.20.4), a real pre-release (`-rc.1`) and
/// `+build` kept. What the node follows is that release: a kubelet-wrapper
/// node's image tag, the sysext mirror's versions, the skew rules.
pub fn upstream(v: &KubeVersion) -> KubeVersion {
    KubeVersion {
        pre: v.pre.clone().filter(|p| real_pre_release(p)),
        ..v.clone()
    }
}

/// Patch or minor: a minor change drains the node first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Patch,
    Minor,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Patch => "patch",
            Kind::Minor => "minor",
        }
    }
}

/// What the node should do about its kubelet's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// The API server's answers do not agree yet.
    Settling { why: String },
    /// Nothing to change.
    UpToDate { why: String },
    /// The API server runs a newer minor; the operator has named none.
    AwaitOperator { why: String },
    /// The operator's target or the versions break a rule.
    Refuse { why: String },
    /// Move to `minor`, the API server being at `apiserver`.
    Move {
        minor: MinorVersion,
        apiserver: KubeVersion,
    },
}

/// The API server's version once the last `stable_checks` looks (newest
/// last in `seen`) agree; why not otherwise.
pub fn settled(seen: &[KubeVersion], stable_checks: usize) -> Result<&KubeVersion, String> {
    let Some(last) = seen.last() else {
        return Err("the API server has not been asked yet".into());
    };
    let window = &seen[seen.len().saturating_sub(stable_checks)..];
    if window.len() < stable_checks {
        return Err(format!(
            "the API server said {last} in {} of the {stable_checks} consecutive looks follow.stable_checks asks for",
            window.len()
        ));
    }
    if let Some(other) = window.iter().find(|v| *v != last) {
        return Err(format!(
            "the API server said {other} and {last} in the last {stable_checks} looks (a control plane being upgraded?)"
        ));
    }
    Ok(last)
}

/// Rules 1-3 (module docs).
pub fn intent(
    current: &KubeVersion,
    seen: &[KubeVersion],
    stable_checks: usize,
    target_minor: Option<MinorVersion>,
) -> Intent {
    let apiserver = match settled(seen, stable_checks) {
        Ok(v) => v.clone(),
        Err(why) => return Intent::Settling { why },
    };
    let own = MinorVersion::of(current);
    let api = MinorVersion::of(&apiserver);
    let newer_kubelet = precedence(current, &apiserver) == Ordering::Greater;
    if newer_kubelet && target_minor.is_none_or(|t| t <= own) {
        return Intent::UpToDate {
            why: format!(
                "this node's kubelet {current} is newer than the API server {apiserver}; it is never downgraded (the version-skew policy wants it no newer: look at the control plane)"
            ),
        };
    }
    let minor = match target_minor {
        Some(t) => t,
        None if api > own => {
            return Intent::AwaitOperator {
                why: format!(
                    "the API server runs {apiserver} and this node's kubelet {current}: a minor version changes only when the operator names it (data.minor of the follow ConfigMap)"
                ),
            };
        }
        None => own,
    };
    if minor.major != own.major {
        return Intent::Refuse {
            why: format!(
                "target minor {minor} is of another major than this node's kubelet {current}"
            ),
        };
    }
    if minor > api {
        return Intent::Refuse {
            why: format!(
                "target minor {minor} is newer than the API server {apiserver}: a kubelet never runs newer than the API server"
            ),
        };
    }
    if minor < own {
        return Intent::Refuse {
            why: format!(
                "target minor {minor} is older than this node's kubelet {current}: no downgrades"
            ),
        };
    }
    if minor.minor > own.minor + 1 {
        return Intent::Refuse {
            why: format!(
                "target minor {minor} is more than one minor ahead of this node's kubelet {current}: one minor at a time"
            ),
        };
    }
    Intent::Move { minor, apiserver }
}

/// Rule 4 and 5: the version to move to within `minor`, given what the
/// mirror offers (`None`: a kubelet-wrapper node, which has no list and
/// takes the API server's own version). `Ok(None)`: nothing newer than
/// `current`.
pub fn pick(
    current: &KubeVersion,
    minor: MinorVersion,
    apiserver: &KubeVersion,
    offered: Option<&[KubeVersion]>,
) -> Result<Option<KubeVersion>, String> {
    let at_api_minor = MinorVersion::of(apiserver) == minor;
    let chosen = match offered {
        None if at_api_minor => apiserver.clone(),
        None => {
            return Err(format!(
                "target minor {minor} is older than the API server {apiserver}: a kubelet-wrapper node takes the API server's own version and has no list of {minor} releases (set data.minor to {})",
                MinorVersion::of(apiserver)
            ));
        }
        Some(offers) => {
            let best = offers
                .iter()
                .filter(|v| MinorVersion::of(v) == minor && v.pre.is_none())
                .filter(|v| precedence(v, apiserver) != Ordering::Greater)
                .max_by(|a, b| precedence(a, b));
            // The exact version with the same `+build` wins a tie.
            let exact = offers.iter().find(|v| *v == apiserver && at_api_minor);
            match exact.or(best) {
                Some(v) => v.clone(),
                None => {
                    return Err(format!(
                        "the mirror offers no kubelet of {minor} not newer than the API server {apiserver}"
                    ));
                }
            }
        }
    };
    if let Some(why) = skew_violation(&chosen, apiserver) {
        return Err(format!(
            "kubelet {chosen} against the API server {apiserver}: {why}"
        ));
    }
    if precedence(&chosen, current) != Ordering::Greater {
        return Ok(None);
    }
    Ok(Some(chosen))
}

/// The kind of the change from `current` to `to`.
pub fn kind(current: &KubeVersion, to: &KubeVersion) -> Kind {
    if MinorVersion::of(current) == MinorVersion::of(to) {
        Kind::Patch
    } else {
        Kind::Minor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> KubeVersion {
        KubeVersion::parse(s).unwrap()
    }
    fn vs(s: &[&str]) -> Vec<KubeVersion> {
        s.iter().map(|x| v(x)).collect()
    }
    fn m(s: &str) -> Option<MinorVersion> {
        MinorVersion::parse(s)
    }

    #[test]
    fn the_api_servers_version_counts_once_the_last_looks_agree() {
        let seen = vs(&["v1.20.2", "v1.20.3", "v1.20.3"]);
        assert_eq!(settled(&seen, 2).unwrap().to_string(), "v1.20.3");
        let e = settled(&seen, 3).unwrap_err();
        assert!(e.contains("said v1.20.2 and v1.20.3"), "{e}");
        let e = settled(&seen[2..], 3).unwrap_err();
        assert!(e.contains("in 1 of the 3 consecutive looks"), "{e}");
        assert!(settled(&[], 1).is_err());
        // An HA pair answering in turn never settles.
        let flapping = vs(&["v1.20.3", "v1.20.2", "v1.20.3", "v1.20.2", "v1.20.3"]);
        assert!(matches!(
            intent(&v("v1.20.2"), &flapping, 2, None),
            Intent::Settling { .. }
        ));
    }

    #[test]
    fn a_patch_of_the_nodes_minor_is_followed_without_the_operator() {
        let seen = vs(&["v1.20.3", "v1.20.3", "v1.20.3"]);
        let i = intent(&v("v1.20.2"), &seen, 3, None);
        let Intent::Move { minor, apiserver } = i else {
            panic!("{i:?}")
        };
        assert_eq!(
            (minor.to_string(), apiserver.to_string()),
            ("1.20".into(), "v1.20.3".into())
        );
        assert_eq!(
            pick(&v("v1.20.2"), minor, &apiserver, None).unwrap(),
            Some(v("v1.20.3"))
        );
        assert_eq!(kind(&v("v1.20.2"), &v("v1.20.3")), Kind::Patch);
        // Already there.
        assert_eq!(pick(&v("v1.20.3"), minor, &apiserver, None).unwrap(), None);
    }

    #[test]
    fn no_minor_change_without_the_operators_target() {
        let seen = vs(&["v1.21.1"; 3]);
        let i = intent(&v("v1.20.3"), &seen, 3, None);
        let Intent::AwaitOperator { why } = i else {
            panic!("{i:?}")
        };
        assert!(why.contains("data.minor"), "{why}");
        // With it: a minor change to the API server's version.
        let Intent::Move { minor, apiserver } = intent(&v("v1.20.3"), &seen, 3, m("1.21")) else {
            panic!()
        };
        let to = pick(&v("v1.20.3"), minor, &apiserver, None)
            .unwrap()
            .unwrap();
        assert_eq!(to.to_string(), "v1.21.1");
        assert_eq!(kind(&v("v1.20.3"), &to), Kind::Minor);
        // The operator's target of the node's own minor: patches only.
        assert!(matches!(
            intent(&v("v1.20.3"), &seen, 3, m("1.20")),
            Intent::Move { minor, .. } if minor.to_string() == "1.20"
        ));
    }

    #[test]
    fn a_target_newer_than_the_api_server_is_refused() {
        let seen = vs(&["v1.20.2"; 3]);
        let Intent::Refuse { why } = intent(&v("v1.20.2"), &seen, 3, m("1.21")) else {
            panic!()
        };
        assert!(
            why.contains("target minor 1.21 is newer than the API server v1.20.2"),
            "{why}"
        );
    }

    #[test]
    fn downgrades_other_majors_and_minor_jumps_are_refused() {
        let seen = vs(&["v1.23.0"; 2]);
        for (target, says) in [
            ("1.19", "no downgrades"),
            ("2.0", "another major"),
            ("1.22", "one minor at a time"),
        ] {
            let i = intent(&v("v1.20.3"), &seen, 2, m(target));
            assert!(
                matches!(&i, Intent::Refuse { why } if why.contains(says)),
                "{target}: {i:?}"
            );
        }
    }

    #[test]
    fn a_kubelet_newer_than_the_api_server_is_never_downgraded() {
        let seen = vs(&["v1.20.2"; 3]);
        let i = intent(&v("v1.20.3"), &seen, 3, None);
        assert!(
            matches!(&i, Intent::UpToDate { why } if why.contains("never downgraded")),
            "{i:?}"
        );
    }

    #[test]
    fn a_sysext_node_takes_what_the_mirror_offers_never_newer_than_the_api_server() {
        let api = v("v1.20.5");
        let minor = m("1.20").unwrap();
        let offers = vs(&["v1.20.2", "v1.20.4", "v1.20.6", "v1.21.0", "v1.20.5-rc.1"]);
        // The API server's version is not offered: the newest below it.
        assert_eq!(
            pick(&v("v1.20.2"), minor, &api, Some(&offers)).unwrap(),
            Some(v("v1.20.4"))
        );
        // Offered: exactly it, its +build too.
        let offers = vs(&["v1.20.5", "v1.20.5+flatcar.1"]);
        let api = v("v1.20.5+flatcar.1");
        assert_eq!(
            pick(&v("v1.20.2"), minor, &api, Some(&offers)).unwrap(),
            Some(v("v1.20.5+flatcar.1"))
        );
        // Nothing of the minor.
        let e = pick(&v("v1.20.2"), minor, &api, Some(&vs(&["v1.21.0"]))).unwrap_err();
        assert!(e.contains("offers no kubelet of 1.20"), "{e}");
        // Nothing newer than the node's.
        assert_eq!(
            pick(&v("v1.20.4"), minor, &v("v1.20.9"), Some(&vs(&["v1.20.3"]))).unwrap(),
            None
        );
    }

    #[test]
    fn a_distributions_suffix_is_the_upstream_release() {
        assert_eq!(upstream(&v("v1.20.4-eks-6b7464")), v("v1.20.4"));
        assert_eq!(upstream(&v("v1.20.4-gke.1800")), v("v1.20.4"));
        assert_eq!(upstream(&v("v1.21.0-rc.1")), v("v1.21.0-rc.1"));
        assert_eq!(upstream(&v("v1.20.5+flatcar.1")), v("v1.20.5+flatcar.1"));
        // The node at the same release is up to date, not "newer".
        let seen = vs(&["v1.20.3"; 3]);
        let api = upstream(&v("v1.20.3-eks-1"));
        assert_eq!(api, seen[0]);
        let Intent::Move { minor, apiserver } = intent(&v("v1.20.3"), &seen, 3, None) else {
            panic!()
        };
        assert_eq!(pick(&v("v1.20.3"), minor, &apiserver, None).unwrap(), None);
        // A sysext node takes the release itself, not the patch before it.
        let offers = vs(&["v1.20.3", "v1.20.4"]);
        let api = upstream(&v("v1.20.4-eks-x"));
        assert_eq!(
            pick(&v("v1.20.3"), minor, &api, Some(&offers)).unwrap(),
            Some(v("v1.20.4"))
        );
    }

    #[test]
    fn below_the_api_servers_minor_a_wrapper_node_refuses_and_a_sysext_node_takes_the_newest_offered()
     {
        let api = v("v1.22.1");
        let minor = m("1.21").unwrap();
        let e = pick(&v("v1.20.3"), minor, &api, None).unwrap_err();
        assert!(
            e.contains("kubelet-wrapper node takes the API server's own version"),
            "{e}"
        );
        let offers = vs(&["v1.21.0", "v1.21.7", "v1.22.1"]);
        assert_eq!(
            pick(&v("v1.20.3"), minor, &api, Some(&offers)).unwrap(),
            Some(v("v1.21.7"))
        );
    }
}
