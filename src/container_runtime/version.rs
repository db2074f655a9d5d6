//! containerd's versions as the runtime mappings, a mirror and containerd
//! itself spell them, which containerd a kubelet can use, and which one
//! the node takes: pure decisions.
//!
//! The minimum per Kubernetes version, the hard rule ([`serves`]): the
//! agent needs containerd 1.5 or newer. The file it writes (config version
//! 2, the runc v2 shim) needs 1.3 (containerd's RELEASES.md, "Daemon
//! Configuration": version 2 from v1.3.0), and the cgroup driver the
//! kubelet must match is read back from containerd's CRI status, whose
//! runtime `options` containerd reports from 1.5 only: 1.3 and 1.4 declare
//! them `Options *toml.Primitive`, which marshals as `{}` (their vendored
//! `github.com/containerd/cri/pkg/config`), 1.5 made them a map
//! (`pkg/cri/config/config.go` at v1.5.0), so on 1.3 and 1.4 the agent
//! could neither prove its `SystemdCgroup` took effect nor learn an
//! operator's. A kubelet from 1.10 up to 1.22 speaks only CRI v1alpha2,
//! which containerd serves up to 1.7 (2.0 dropped it), so 1.5 to 1.7; from
//! 1.26 it speaks only v1, which containerd serves from 1.6 (Kubernetes
//! 1.26's release notes: "containerd 1.6.0 or later"), so 1.6 or newer; in
//! between 1.5 or newer.
//! A kubelet before 1.10 speaks CRI v1alpha1, which only cri-containerd 1.0
//! served: no containerd the agent configures
//! ([`super::choice::choose`] refuses containerd there). Every containerd
//! list of the runtime mappings is held to this, and without a list it is
//! the whole rule.
//!
//! Beyond it, containerd's own support matrix (RELEASES.md, "Kubernetes
//! Support", as of the v1.7.0, v2.0.0, v2.1.0 and v2.3.0 tags) names a
//! newer floor per minor from 1.24 (e.g. 1.29: 1.7.11+, 1.6.27+; 1.34:
//! 2.1.3+, 2.0.6+, 1.7.28+, 1.6.39+): [`recommended`] says it, and the step
//! warns where the running containerd is below it, without refusing
//! (docs/operators.md says why). From Kubernetes 1.29 the kubelet keeps
//! the pause image from its image garbage collection only where the
//! runtime reports it pinned (kubernetes PR #118544, "allow sandbox image
//! pinning from CRI": `--pod-infra-container-image` no longer counts),
//! which containerd does for its `sandbox_image` from 1.6.22 and 1.7.3
//! (`pkg/cri/server/image_pull.go`, the `io.cri-containerd.pinned` label):
//! [`unpinned_pause`] names the containerd that leaves it unprotected, and
//! the step warns (an air-gapped node cannot pull it back).
//!
//! The OS's containerd fits a cluster ([`os_fits`]) when its `major.minor`
//! is in the mappings' list for the cluster's `major.minor`; with no list,
//! when it can serve that kubelet by the rule above (the CRI check of the
//! running containerd has the last word either way). Where it does not
//! fit, the package taken from the search path ([`choose_offer`]) is, for
//! the first `major.minor` of the list any location offers, its newest
//! patch (pre-releases never); with no list the newest offer that can
//! serve the kubelet. Among equal versions the earlier offer wins.

use crate::kubelet_config::table::Minor;
use std::cmp::Ordering;

/// A containerd version: `1.6.20`, `v1.7.13`, Debian's `1.6.20~ds1`,
/// `2.0.0-rc.1`; what follows the patch number is kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// A semver pre-release (`rc.1` of `2.0.0-rc.1`).
    pub pre: Option<String>,
    /// The version as written, without a leading `v`.
    pub text: String,
}

impl ContainerdVersion {
    /// Reads `[v]MAJOR.MINOR.PATCH[-pre][+build|~distro…]`.
    pub fn parse(s: &str) -> Option<ContainerdVersion> {
        let text = s.trim().strip_prefix('v').unwrap_or(s.trim());
        let end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (numbers, rest) = text.split_at(end);
        let mut n = numbers.split('.').map(number);
        let (major, minor, patch) = (n.next()??, n.next()??, n.next()??);
        if n.next().is_some() {
            return None;
        }
        let pre = rest
            .strip_prefix('-')
            .map(|p| p.split(['+', '~']).next().unwrap_or_default().to_string());
        if !(rest.is_empty() || rest.starts_with(['-', '+', '~'])) {
            return None;
        }
        Some(ContainerdVersion {
            major,
            minor,
            patch,
            pre,
            text: text.to_string(),
        })
    }

    /// Its series, `major.minor`.
    pub fn series(&self) -> Series {
        Series(self.major, self.minor)
    }

    /// The same release: major, minor, patch and pre-release equal (Debian's
    /// `1.6.20~ds1` is release `1.6.20`).
    pub fn same_release(&self, other: &ContainerdVersion) -> bool {
        self.order(other) == Ordering::Equal
    }

    /// Release order: numbers, then a pre-release before its release.
    pub fn order(&self, other: &ContainerdVersion) -> Ordering {
        let key = |v: &ContainerdVersion| (v.major, v.minor, v.patch, v.pre.is_none());
        key(self)
            .cmp(&key(other))
            .then_with(|| match (&self.pre, &other.pre) {
                (Some(a), Some(b)) => crate::cluster::version::pre_release_cmp(a, b),
                _ => Ordering::Equal,
            })
    }
}

impl std::fmt::Display for ContainerdVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn number(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 6 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A containerd series, `major.minor` (`1.7`), as the mappings list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Series(pub u64, pub u64);

impl Series {
    /// `"1.7"`: exactly two numbers.
    pub fn parse(s: &str) -> Option<Series> {
        let (a, b) = s.trim().split_once('.')?;
        Some(Series(number(a)?, number(b)?))
    }
}

impl std::fmt::Display for Series {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// The version in `containerd --version`'s answer, its third word:
/// `containerd github.com/containerd/containerd v1.7.13 7c3aca7…`, or
/// Debian's `containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u1`.
pub fn from_version_answer(answer: &str) -> Option<ContainerdVersion> {
    let mut words = answer.split_whitespace();
    if words.next() != Some("containerd") {
        return None;
    }
    ContainerdVersion::parse(words.nth(1)?)
}

/// Whether containerd of `series` can serve a kubelet of `kube` (module
/// docs); the error says why not.
pub fn serves(kube: Minor, series: Series) -> Result<(), String> {
    if kube < Minor(1, 10) {
        return Err(format!(
            "the kubelet of Kubernetes {kube} speaks CRI v1alpha1, which no containerd the agent configures serves (containerd serves v1alpha2 from 1.1, for Kubernetes 1.10 on)"
        ));
    }
    if series < MINIMUM {
        return Err(format!(
            "the agent needs containerd {MINIMUM} or newer, not {series}: containerd reports the runtime options (SystemdCgroup, the cgroup driver the kubelet must match) from 1.5 only"
        ));
    }
    if kube >= Minor(1, 26) && series < Series(1, 6) {
        return Err(format!(
            "the kubelet of Kubernetes {kube} speaks only CRI v1, which containerd serves from 1.6, not {series}"
        ));
    }
    if kube <= Minor(1, 22) && series >= Series(2, 0) {
        return Err(format!(
            "the kubelet of Kubernetes {kube} speaks only CRI v1alpha2, and containerd {series} serves only CRI v1 (2.0 dropped v1alpha2)"
        ));
    }
    Ok(())
}

/// The oldest containerd the agent configures: config version 2 (1.3),
/// and runtime options it can read back (1.5, module docs).
pub const MINIMUM: Series = Series(1, 5);

/// The containerd releases containerd's own support matrix names for a
/// Kubernetes minor, where it names a floor above [`serves`]: per series,
/// the first patch (containerd main's RELEASES.md, "Kubernetes Support";
/// docs/operators.md has the table with its sources). `None`: the matrix
/// adds nothing to the hard rule, or the minor is not in it.
pub fn recommended(kube: Minor) -> Option<&'static [(Series, u64)]> {
    match kube {
        // RELEASES.md at v1.7.0 (1.24 to 1.26); 1.27 and 1.28 fall under
        // the deprecated table's "v1.6.15+, v1.7.0+ | 1.26+".
        Minor(1, 24..=25) => Some(&[(Series(1, 6), 4), (Series(1, 7), 0)]),
        Minor(1, 26..=28) => Some(&[(Series(1, 6), 15), (Series(1, 7), 0), (Series(2, 0), 0)]),
        // At v2.0.0.
        Minor(1, 29) => Some(&[(Series(1, 6), 27), (Series(1, 7), 11)]),
        Minor(1, 30) => Some(&[(Series(1, 6), 28), (Series(1, 7), 13), (Series(2, 0), 0)]),
        Minor(1, 31) => Some(&[(Series(1, 6), 34), (Series(1, 7), 20), (Series(2, 0), 0)]),
        // At v2.1.0 and v2.3.0.
        Minor(1, 32) => Some(&[
            (Series(1, 6), 36),
            (Series(1, 7), 24),
            (Series(2, 0), 1),
            (Series(2, 1), 0),
        ]),
        Minor(1, 33) => Some(&[
            (Series(1, 6), 36),
            (Series(1, 7), 24),
            (Series(2, 0), 4),
            (Series(2, 1), 0),
        ]),
        Minor(1, 34) => Some(&[
            (Series(1, 6), 39),
            (Series(1, 7), 28),
            (Series(2, 0), 6),
            (Series(2, 1), 3),
        ]),
        Minor(1, 35) => Some(&[(Series(1, 7), 28), (Series(2, 1), 5), (Series(2, 2), 0)]),
        Minor(1, 36..) => Some(&[(Series(2, 2), 0), (Series(2, 3), 0)]),
        _ => None,
    }
}

/// The first Kubernetes whose kubelet keeps the pause image from its image
/// garbage collection only where the runtime reports it pinned (module
/// docs).
pub const PINNED_PAUSE_FROM: Minor = Minor(1, 29);

/// Why a kubelet of `kube` on containerd `v` may garbage-collect the pause
/// image, or `None`: from [`PINNED_PAUSE_FROM`], a containerd that does not
/// pin its `sandbox_image` (before 1.6.22 and 1.7.3).
pub fn unpinned_pause(kube: Minor, v: &ContainerdVersion) -> Option<String> {
    let pins = match v.series() {
        Series(1, 6) => v.patch >= 22,
        Series(1, 7) => v.patch >= 3,
        s => s >= Series(2, 0),
    };
    (kube >= PINNED_PAUSE_FROM && !pins).then(|| {
        format!(
            "the kubelet of Kubernetes {kube} keeps the pause image only where the runtime \
             reports it pinned (kubernetes #118544), and containerd {v} does not pin its \
             sandbox_image (from 1.6.22 and 1.7.3): image garbage collection may remove it, and \
             a node that cannot reach its registry cannot start pods until it is pulled again"
        )
    })
}

/// Why `v` is below what containerd's support matrix names for `kube`
/// ([`recommended`]), or `None`.
pub fn below_recommended(kube: Minor, v: &ContainerdVersion) -> Option<String> {
    let floors = recommended(kube)?;
    let newest = floors.iter().map(|(s, _)| *s).max()?;
    let fits = floors
        .iter()
        .any(|(s, patch)| v.series() == *s && v.patch >= *patch)
        || v.series() > newest;
    if fits {
        return None;
    }
    let names = floors
        .iter()
        .map(|(s, p)| format!("{s}.{p}+"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "containerd's support matrix (RELEASES.md \"Kubernetes Support\") names {names} for Kubernetes {kube}, not {v}"
    ))
}

/// The runtime mappings' containerd list for the cluster's minor, read:
/// series in preference order.
pub fn parse_list(list: &[String]) -> Result<Vec<Series>, String> {
    list.iter()
        .map(|s| {
            Series::parse(s)
                .ok_or_else(|| format!("{s:?} is not a containerd major.minor like \"1.7\""))
        })
        .collect()
}

fn listed(list: &[Series]) -> String {
    list.iter()
        .map(Series::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the OS's containerd (`None`: its answer named no version)
/// fits a cluster of `kube` with the mappings' `list`; the error says why
/// not, read after "the OS's containerd 1.5.8 does not fit: ".
pub fn os_fits(
    kube: Minor,
    list: Option<&[Series]>,
    os: Option<&ContainerdVersion>,
) -> Result<(), String> {
    match (list, os) {
        (Some(list), Some(v)) if list.contains(&v.series()) => Ok(()),
        (Some(list), Some(v)) => Err(format!(
            "its series {} is not in the runtime mappings' list for Kubernetes {kube} ({})",
            v.series(),
            listed(list)
        )),
        (Some(list), None) => Err(format!(
            "it names no version to compare with the runtime mappings' list for Kubernetes {kube} ({})",
            listed(list)
        )),
        (None, Some(v)) => serves(kube, v.series()),
        (None, None) => Ok(()),
    }
}

/// Which of `offered` to install for a cluster of `kube` (module docs):
/// its index; the error names what is offered and what would do.
pub fn choose_offer(
    kube: Minor,
    list: Option<&[Series]>,
    offered: &[ContainerdVersion],
) -> Result<usize, String> {
    // The newest offer `allowed`; the earlier one on a tie.
    let best = |allowed: &dyn Fn(&ContainerdVersion) -> bool| {
        offered
            .iter()
            .enumerate()
            .filter(|(_, v)| v.pre.is_none() && allowed(v))
            .max_by(|(ia, a), (ib, b)| a.order(b).then(ib.cmp(ia)))
            .map(|(i, _)| i)
    };
    let found = match list {
        Some(list) => list
            .iter()
            .find_map(|series| best(&|v| v.series() == *series)),
        None => best(&|v| serves(kube, v.series()).is_ok()),
    };
    found.ok_or_else(|| {
        let mut names: Vec<&ContainerdVersion> = offered.iter().collect();
        names.sort_by(|a, b| b.order(a));
        let mut names: Vec<String> = names.iter().map(|v| v.to_string()).collect();
        names.dedup();
        let offers = if names.is_empty() {
            "no containerd image at all".to_string()
        } else {
            names.join(", ")
        };
        let wanted = match list {
            Some(list) => format!(
                "the runtime mappings list {} for Kubernetes {kube}",
                listed(list)
            ),
            None => format!(
                "Kubernetes {kube} needs containerd {}",
                if kube >= Minor(1, 26) {
                    "1.6 or newer"
                } else if kube <= Minor(1, 22) {
                    "1.3 to 1.7"
                } else {
                    "1.3 or newer"
                }
            ),
        };
        format!("the search path offers {offers}; {wanted} (releases, not pre-releases)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> ContainerdVersion {
        ContainerdVersion::parse(s).unwrap_or_else(|| panic!("{s}"))
    }

    fn list(s: &[&str]) -> Vec<Series> {
        parse_list(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn versions_as_containerd_debian_and_mirrors_write_them() {
        let d = v("1.6.20~ds1");
        assert_eq!(
            (d.major, d.minor, d.patch, d.pre.as_deref()),
            (1, 6, 20, None)
        );
        assert!(d.same_release(&v("v1.6.20")));
        assert_eq!(v("2.0.0-rc.1").pre.as_deref(), Some("rc.1"));
        assert_eq!(v("2.0.0-rc.1+build~x").pre.as_deref(), Some("rc.1"));
        assert!(!v("2.0.0-rc.1").same_release(&v("2.0.0")));
        assert_eq!(v("2.0.0-rc.1").order(&v("2.0.0")), Ordering::Less);
        assert_eq!(v("1.6.9").order(&v("1.6.10")), Ordering::Less);
        for bad in ["1.6", "1.6.x", "latest", "1.6.20.1", "1.6.20ds", ""] {
            assert!(ContainerdVersion::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(
            from_version_answer(
                "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u1\n"
            )
            .unwrap()
            .text,
            "1.6.20~ds1"
        );
        assert_eq!(
            from_version_answer(
                "containerd github.com/containerd/containerd v1.7.13 7c3aca7a610df76212171d200ca3811ff6096eb8"
            )
            .unwrap()
            .text,
            "1.7.13"
        );
        assert!(from_version_answer("docker version 24.0.9").is_none());
        assert_eq!(Series::parse("1.10"), Some(Series(1, 10)));
        assert!(parse_list(&["1.7".into(), "1.6.20".into()]).is_err());
    }

    #[test]
    fn the_minimum_containerd_per_kubernetes_version() {
        let k = |m| Minor(1, m);
        assert!(serves(k(26), Series(1, 6)).is_ok());
        assert!(serves(k(36), Series(2, 1)).is_ok());
        assert_eq!(
            serves(k(26), Series(1, 5)).unwrap_err(),
            "the kubelet of Kubernetes 1.26 speaks only CRI v1, which containerd serves from 1.6, not 1.5"
        );
        assert!(serves(k(25), Series(1, 5)).is_ok());
        assert!(serves(k(23), Series(2, 0)).is_ok());
        assert!(serves(k(22), Series(1, 7)).is_ok());
        assert!(
            serves(k(22), Series(2, 0))
                .unwrap_err()
                .contains("speaks only CRI v1alpha2, and containerd 2.0 serves only CRI v1")
        );
        assert!(
            serves(k(20), Series(1, 2))
                .unwrap_err()
                .contains("needs containerd 1.5 or newer, not 1.2")
        );
        // 1.3 and 1.4 cannot report SystemdCgroup: refused.
        for old in [3, 4] {
            assert!(
                serves(k(20), Series(1, old))
                    .unwrap_err()
                    .contains("reports the runtime options (SystemdCgroup"),
                "1.{old}"
            );
        }
        assert!(serves(k(20), Series(1, 5)).is_ok());
        for old in [8, 9] {
            assert!(
                serves(k(old), Series(1, 6))
                    .unwrap_err()
                    .contains("speaks CRI v1alpha1"),
                "1.{old}"
            );
        }
    }

    #[test]
    fn containerds_support_matrix_is_advice_above_the_rule() {
        let k = |m| Minor(1, m);
        assert_eq!(
            below_recommended(k(26), &v("1.6.14")).unwrap(),
            "containerd's support matrix (RELEASES.md \"Kubernetes Support\") names 1.6.15+, 1.7.0+, \
             2.0.0+ for Kubernetes 1.26, not 1.6.14"
        );
        assert!(below_recommended(k(26), &v("1.6.15")).is_none());
        assert!(below_recommended(k(32), &v("2.1.4")).is_none());
        assert!(below_recommended(k(35), &v("2.1.4")).is_some());
        assert!(below_recommended(k(35), &v("2.1.5")).is_none());
        assert!(below_recommended(k(35), &v("1.7.27")).is_some());
        assert!(below_recommended(k(36), &v("1.7.30")).is_some());
        assert!(below_recommended(k(36), &v("2.3.1")).is_none());
        // 1.24 and 1.25: 1.6.4+ (RELEASES.md at v1.7.0).
        assert!(below_recommended(k(25), &v("1.5.0")).is_some());
        assert!(below_recommended(k(25), &v("1.6.4")).is_none());
        assert!(below_recommended(k(23), &v("1.5.0")).is_none());
    }

    /// The floors of RELEASES.md for 1.29 to 1.34 (at v2.0.0, v2.1.0 and
    /// v2.3.0), each seen to bite just below.
    #[test]
    fn the_matrix_floors_of_1_29_to_1_34() {
        let k = |m| Minor(1, m);
        for (minor, below, at) in [
            (29, "1.7.10", "1.7.11"),
            (29, "1.6.26", "1.6.27"),
            (30, "1.7.12", "1.7.13"),
            (30, "1.6.27", "1.6.28"),
            (31, "1.7.19", "1.7.20"),
            (31, "1.6.33", "1.6.34"),
            (32, "1.7.23", "1.7.24"),
            (32, "2.0.0", "2.0.1"),
            (33, "2.0.3", "2.0.4"),
            (33, "1.6.35", "1.6.36"),
            (34, "2.1.2", "2.1.3"),
            (34, "2.0.5", "2.0.6"),
            (34, "1.7.27", "1.7.28"),
            (34, "1.6.38", "1.6.39"),
        ] {
            assert!(
                below_recommended(k(minor), &v(below)).is_some(),
                "1.{minor} {below}"
            );
            assert!(
                below_recommended(k(minor), &v(at)).is_none(),
                "1.{minor} {at}"
            );
        }
        // Today's Flatcar stable containerd for 1.32 to 1.34.
        for minor in [32, 33, 34] {
            assert!(below_recommended(k(minor), &v("2.1.4")).is_none());
        }
    }

    #[test]
    fn from_1_29_containerd_must_pin_the_pause_image() {
        let k = |m| Minor(1, m);
        assert!(
            unpinned_pause(k(28), &v("1.6.15")).is_none(),
            "the kubelet still keeps it"
        );
        for unpinned in ["1.6.21", "1.7.2", "1.5.18"] {
            let why = unpinned_pause(k(29), &v(unpinned)).unwrap();
            assert!(why.contains("kubernetes #118544"), "{why}");
            assert!(
                why.contains(&format!("containerd {unpinned} does not pin")),
                "{why}"
            );
        }
        for pinned in ["1.6.22", "1.7.3", "2.0.0", "2.1.4"] {
            assert!(unpinned_pause(k(29), &v(pinned)).is_none(), "{pinned}");
        }
    }

    #[test]
    fn the_oss_containerd_fits_when_its_series_is_listed() {
        let l = list(&["1.7", "1.6"]);
        let k = Minor(1, 26);
        assert!(os_fits(k, Some(&l), Some(&v("1.6.20~ds1"))).is_ok());
        assert!(os_fits(k, Some(&l), Some(&v("1.7.0"))).is_ok());
        // Flatcar LTS 3033's containerd for Kubernetes 1.26.
        assert_eq!(
            os_fits(k, Some(&l), Some(&v("1.5.8"))).unwrap_err(),
            "its series 1.5 is not in the runtime mappings' list for Kubernetes 1.26 (1.7, 1.6)"
        );
        // Listed or not is the rule: a 2.0 the kubelet could use is still not listed.
        assert!(os_fits(k, Some(&l), Some(&v("2.0.0"))).is_err());
        assert!(
            os_fits(k, Some(&l), None)
                .unwrap_err()
                .starts_with("it names no version")
        );
        // No list: anything that can serve the kubelet; unknown is left to
        // the CRI check.
        assert!(os_fits(k, None, Some(&v("2.0.0"))).is_ok());
        assert!(os_fits(k, None, Some(&v("1.5.8"))).is_err());
        assert!(os_fits(Minor(1, 20), None, Some(&v("1.5.8"))).is_ok());
        assert!(os_fits(k, None, None).is_ok());
    }

    fn pick(kube: u64, l: Option<&[&str]>, offered: &[&str]) -> String {
        let l = l.map(list);
        let o: Vec<ContainerdVersion> = offered.iter().map(|s| v(s)).collect();
        match choose_offer(Minor(1, kube), l.as_deref(), &o) {
            Ok(i) => offered[i].to_string(),
            Err(why) => format!("refused: {why}"),
        }
    }

    #[test]
    fn the_first_listed_series_offered_wins_then_its_newest_patch() {
        let offered = ["1.6.20", "1.7.27", "1.6.21", "1.6.9", "2.0.0", "1.5.8"];
        assert_eq!(pick(26, Some(&["1.7", "1.6"]), &offered), "1.7.27");
        assert_eq!(pick(26, Some(&["1.6", "1.7"]), &offered), "1.6.21");
        assert_eq!(pick(26, Some(&["1.8", "1.6"]), &offered), "1.6.21");
        // Pre-releases never; equal versions go to the earlier offer.
        assert_eq!(
            pick(26, Some(&["1.6"]), &["1.6.21-rc.1", "1.6.20"]),
            "1.6.20"
        );
        let o = [v("1.6.20"), v("v1.6.20")];
        assert_eq!(choose_offer(Minor(1, 26), Some(&list(&["1.6"])), &o), Ok(0));
        assert_eq!(
            pick(26, Some(&["1.8", "1.9"]), &offered),
            "refused: the search path offers 2.0.0, 1.7.27, 1.6.21, 1.6.20, 1.6.9, 1.5.8; \
             the runtime mappings list 1.8, 1.9 for Kubernetes 1.26 (releases, not pre-releases)"
        );
        assert!(pick(26, Some(&["1.6"]), &[]).contains("offers no containerd image at all"));
    }

    #[test]
    fn without_a_list_the_newest_the_kubelet_can_use() {
        let offered = ["1.5.8", "1.7.27", "2.0.0", "2.1.0-rc.0"];
        assert_eq!(pick(26, None, &offered), "2.0.0");
        assert_eq!(pick(22, None, &offered), "1.7.27");
        assert_eq!(
            pick(26, None, &["1.5.8"]),
            "refused: the search path offers 1.5.8; Kubernetes 1.26 needs containerd 1.6 or newer \
             (releases, not pre-releases)"
        );
    }
}
