//! Which kubelet image to take for the cluster's version: a pure decision
//! over the cluster version and the versions the search path offers.
//!
//! The rule, from the Kubernetes version-skew policy (the kubelet must not
//! be newer than kube-apiserver, and may be up to three minors older, two
//! for a kubelet before 1.25: [`crate::cluster::version::max_lag_for`]):
//! 1. the cluster's exact version when offered ([`Rule::Exact`]; with
//!    several builds of it, the one with the same `+build` suffix);
//! 2. else the newest patch of the cluster's `major.minor` that is not newer
//!    than the cluster's version ([`Rule::NewestPatch`]);
//! 3. else, only when `kubelet.max_minor_lag` allows (default 0: never), the
//!    newest kubelet of the newest older minor within that lag
//!    ([`Rule::OlderMinor`]);
//! 4. else refuse, naming what is offered.
//!
//! Why this and not "anything the skew policy tolerates": the policy's
//! window for older kubelets exists so that a cluster can be upgraded
//! control plane first, nodes after. A node that bootstraps now is not in
//! the middle of an upgrade; joining with an older minor would start it at
//! the edge of the window, and nothing would move it forward before the
//! next control plane upgrade pushed it out. A newer kubelet, even by a
//! patch, is never taken: the policy forbids a kubelet newer than the API
//! server, and upgrades go control plane first. Pre-releases are taken only
//! when they are exactly the cluster's version. Among equal versions the
//! earlier offer (search order) wins.

use crate::cluster::version::KubeVersion;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// Which rule chose the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    Exact,
    NewestPatch,
    OlderMinor,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Exact => "exact",
            Rule::NewestPatch => "newest-patch",
            Rule::OlderMinor => "older-minor",
        }
    }
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Take the offer at `index`.
    Take { index: usize, rule: Rule },
    /// Nothing offered is allowed; `why` says what is offered and what
    /// would be allowed.
    Refuse { why: String },
}

pub use crate::cluster::version::precedence;

/// The version without its `+build` suffix (`v1.9.6` of `v1.9.6+coreos.0`).
fn core(v: &KubeVersion) -> String {
    KubeVersion {
        build: None,
        ..v.clone()
    }
    .to_string()
}

/// The decision (see module docs).
pub fn choose(cluster: &KubeVersion, offered: &[KubeVersion], max_minor_lag: u64) -> Decision {
    // The newest offer among those `allowed`, the earlier one on a tie;
    // `better` breaks ties between equal precedences first.
    let best = |allowed: &dyn Fn(&KubeVersion) -> bool, better: &dyn Fn(&KubeVersion) -> bool| {
        offered
            .iter()
            .enumerate()
            .filter(|(_, v)| allowed(v))
            .max_by(|(ia, a), (ib, b)| {
                precedence(a, b)
                    .then_with(|| better(a).cmp(&better(b)))
                    .then(ib.cmp(ia))
            })
            .map(|(i, _)| i)
    };
    let same_build = |v: &KubeVersion| v.build == cluster.build;
    let exact = |v: &KubeVersion| precedence(v, cluster) == Ordering::Equal;
    if let Some(index) = best(&exact, &same_build) {
        return Decision::Take {
            index,
            rule: Rule::Exact,
        };
    }
    let same_minor = |v: &KubeVersion| {
        v.major == cluster.major
            && v.minor == cluster.minor
            && v.pre.is_none()
            && precedence(v, cluster) == Ordering::Less
    };
    if let Some(index) = best(&same_minor, &|_| false) {
        return Decision::Take {
            index,
            rule: Rule::NewestPatch,
        };
    }
    let older_minor = |v: &KubeVersion| {
        v.major == cluster.major
            && v.minor < cluster.minor
            && cluster.minor - v.minor <= max_minor_lag
            && crate::cluster::version::skew_violation(v, cluster).is_none()
            && v.pre.is_none()
    };
    if let Some(index) = best(&older_minor, &|_| false) {
        return Decision::Take {
            index,
            rule: Rule::OlderMinor,
        };
    }
    let mut listed: Vec<&KubeVersion> = offered.iter().collect();
    listed.sort_by(|a, b| precedence(b, a));
    let mut names: Vec<String> = listed.iter().map(|v| v.to_string()).collect();
    names.dedup();
    let offers = if names.is_empty() {
        "no kubelet image at all".to_string()
    } else {
        names.join(", ")
    };
    let allowed = if max_minor_lag == 0 {
        format!(
            "{}.{} kubelets not newer than {}",
            cluster.major,
            cluster.minor,
            core(cluster)
        )
    } else {
        // The skew policy's limit: 2 minors for a kubelet before 1.25.
        let policy = (0..=max_minor_lag)
            .rev()
            .find(|lag| {
                cluster.minor >= *lag
                    && *lag <= crate::cluster::version::max_lag_for(cluster.minor - lag)
            })
            .unwrap_or(0);
        let lowest = cluster.minor - policy;
        format!(
            "kubelets from {}.{} up to {} (kubelet.max_minor_lag {max_minor_lag}{})",
            cluster.major,
            lowest,
            core(cluster),
            if policy < max_minor_lag {
                "; the version-skew policy lets a kubelet before 1.25 lag only 2"
            } else {
                ""
            }
        )
    };
    Decision::Refuse {
        why: format!(
            "no kubelet the version-skew policy allows for cluster version {cluster}: the search path offers {offers}; allowed are {allowed}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> KubeVersion {
        KubeVersion::parse(s).unwrap()
    }

    fn pick(cluster: &str, offered: &[&str], lag: u64) -> String {
        let o: Vec<KubeVersion> = offered.iter().map(|s| v(s)).collect();
        match choose(&v(cluster), &o, lag) {
            Decision::Take { index, rule } => format!("{} {}", offered[index], rule.as_str()),
            Decision::Refuse { why } => format!("refused: {why}"),
        }
    }

    #[test]
    fn the_exact_version_wins_over_newer_and_older_patches() {
        assert_eq!(
            pick("v1.20.2", &["v1.20.1", "v1.20.2", "v1.20.5", "v1.21.0"], 0),
            "v1.20.2 exact"
        );
    }

    #[test]
    fn else_the_newest_patch_not_newer_than_the_cluster() {
        assert_eq!(
            pick("v1.20.4", &["v1.20.1", "v1.20.3", "v1.20.5", "v1.19.9"], 0),
            "v1.20.3 newest-patch"
        );
        // Numeric order, not string order.
        assert_eq!(
            pick("v1.20.12", &["v1.20.9", "v1.20.10"], 0),
            "v1.20.10 newest-patch"
        );
    }

    #[test]
    fn a_newer_kubelet_is_refused_even_by_a_patch_and_the_refusal_names_the_offers() {
        let got = pick("v1.20.2", &["v1.21.0", "v1.20.3"], 3);
        assert_eq!(
            got,
            "refused: no kubelet the version-skew policy allows for cluster version v1.20.2: \
             the search path offers v1.21.0, v1.20.3; allowed are kubelets from 1.18 up to v1.20.2 \
             (kubelet.max_minor_lag 3; the version-skew policy lets a kubelet before 1.25 lag only 2)"
        );
        let got = pick("v1.20.2+coreos.0", &["v1.21.0"], 0);
        assert!(
            got.ends_with("offers v1.21.0; allowed are 1.20 kubelets not newer than v1.20.2"),
            "{got}"
        );
        assert!(pick("v1.20.2", &[], 0).contains("offers no kubelet image at all"));
    }

    #[test]
    fn older_minors_only_as_far_as_max_minor_lag_allows() {
        let offered = ["v1.19.7", "v1.18.20", "v1.16.0"];
        assert!(pick("v1.20.2", &offered, 0).starts_with("refused"));
        assert_eq!(pick("v1.20.2", &offered, 1), "v1.19.7 older-minor");
        assert_eq!(
            pick("v1.20.2", &["v1.18.20", "v1.16.0"], 2),
            "v1.18.20 older-minor"
        );
        assert!(pick("v1.20.2", &["v1.16.0"], 3).starts_with("refused"));
        // A lag of 3 only for a kubelet of 1.25 or newer (version-skew policy).
        assert!(pick("v1.20.2", &["v1.17.17"], 3).starts_with("refused"));
        assert_eq!(pick("v1.28.3", &["v1.25.16"], 3), "v1.25.16 older-minor");
        assert!(
            !pick("v1.28.3", &["v1.25.16"], 3).contains("lag only 2"),
            "a 1.25 kubelet may lag 3"
        );
        // The cluster's minor is always preferred over an older one.
        assert_eq!(
            pick("v1.20.2", &["v1.19.7", "v1.20.0"], 3),
            "v1.20.0 newest-patch"
        );
        // Other majors never.
        assert!(pick("v2.0.0", &["v1.20.2"], 3).starts_with("refused"));
    }

    #[test]
    fn build_suffixes_and_pre_releases() {
        // The same build suffix wins among builds of the exact version;
        // another build of it is still exact.
        assert_eq!(
            pick("v1.9.6+coreos.0", &["v1.9.6", "v1.9.6+coreos.0"], 0),
            "v1.9.6+coreos.0 exact"
        );
        assert_eq!(pick("v1.9.6+coreos.0", &["v1.9.6"], 0), "v1.9.6 exact");
        // A pre-release only when it is exactly the cluster's.
        assert_eq!(
            pick(
                "v1.21.0-beta.1",
                &["v1.21.0-beta.1", "v1.21.0-beta.0", "v1.21.0"],
                0
            ),
            "v1.21.0-beta.1 exact"
        );
        assert!(pick("v1.21.0-beta.1", &["v1.21.0-beta.0"], 0).starts_with("refused"));
        assert_eq!(
            pick("v1.20.4", &["v1.20.4-rc.1", "v1.20.3"], 0),
            "v1.20.3 newest-patch"
        );
    }

    #[test]
    fn equal_versions_go_to_the_earlier_offer() {
        let o = [v("v1.20.2"), v("v1.20.2")];
        assert_eq!(
            choose(&v("v1.20.2"), &o, 0),
            Decision::Take {
                index: 0,
                rule: Rule::Exact
            }
        );
        let o = [v("v1.20.1"), v("v1.20.1")];
        assert_eq!(
            choose(&v("v1.20.2"), &o, 0),
            Decision::Take {
                index: 0,
                rule: Rule::NewestPatch
            }
        );
    }
}
